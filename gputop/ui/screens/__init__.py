"""Secondary screens, one module each, imported when first shown (detail pulls in plotext)."""
