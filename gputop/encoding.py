"""Output in an encoding other than UTF-8: what it lacks becomes an ASCII look-alike
(bars, sparklines, box drawing) or ``?``, never a UnicodeEncodeError."""

from __future__ import annotations

import codecs
import functools
import sys
import unicodedata


def has_terminal() -> bool:
    """Whether stdin, stdout and stderr are all a terminal (``gputop > file``: text)."""
    streams = (sys.stdin, sys.stdout, sys.stderr)
    try:
        return all(s is not None and s.isatty() for s in streams)
    except (AttributeError, ValueError, OSError):
        return False


@functools.cache
def _ascii_table() -> dict[int, str]:
    """Built on the first character a non-UTF terminal lacks: the names it reads page in
    Unicode's name database, which a UTF-8 terminal never needs."""
    table: dict[int, str] = {}
    for code in range(0x2500, 0x2580):  # box drawing
        name = unicodedata.name(chr(code), "")
        across, down = "HORIZONTAL" in name, "VERTICAL" in name
        table[code] = "-" if across and not down else "|" if down and not across else "+"
    blocks = "▁▂▃▄▅▆▇█░▒▓▔▕▏▎▍▌▐▀"  # sparkline heights 1/8 to 8/8 first
    table.update({ord(c): a for c, a in zip(blocks, "__..-==#.:#-||||||-", strict=True)})
    words = "…=... ·=. °= ▲=^ ▼=v →=-> ←=<- ×=x —=- –=- µ=u"  # character=look-alike
    table.update({ord(c): alike for c, _, alike in (w.partition("=") for w in words.split())})
    for code in range(0x2580, 0x25A0):  # other block elements
        table.setdefault(code, "#")
    return table


_UTF = frozenset({"utf8", "utf16", "utf32", "utf8sig"})


def is_utf_encoding(encoding: str | None) -> bool:
    return bool(encoding) and str(encoding).lower().replace("-", "").replace("_", "") in _UTF


def _look_alike(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    table = _ascii_table()
    return "".join(table.get(ord(c), "?") for c in bad), exc.end


#: The codec error handler of :func:`for_encoding`: ``text.encode(enc, ASCII_LOOK_ALIKE)``.
ASCII_LOOK_ALIKE = "gputop-ascii-look-alike"
codecs.register_error(ASCII_LOOK_ALIKE, _look_alike)


def encode_for(text: str, encoding: str | None) -> bytes:
    """``text`` in ``encoding`` (UTF-8 when None or unknown), with look-alikes."""
    try:
        return text.encode(encoding or "utf-8", ASCII_LOOK_ALIKE)
    except LookupError:
        return text.encode("utf-8", ASCII_LOOK_ALIKE)


def for_encoding(text: str, encoding: str | None) -> str:
    """``text`` as it can be shown in ``encoding``, with look-alikes."""
    if is_utf_encoding(encoding) or text.isascii():
        return text
    try:
        return text.encode(encoding or "ascii", ASCII_LOOK_ALIKE).decode(encoding or "ascii")
    except LookupError:
        return text.encode("ascii", ASCII_LOOK_ALIKE).decode("ascii")
