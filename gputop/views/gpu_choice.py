"""What the GPU prompt (``g``) takes: a list of GPUs to show, ``10`` or ``0,2-3``, for
nodes with more than ten GPUs (the digit keys reach 0-9) and for several GPUs at once;
``parts.gpu_ranges`` writes such a list."""

from __future__ import annotations

from collections.abc import Collection

from gputop.argtypes import MAX_GPU_INDEX_DIGITS
from gputop.views.parts import gpu_ranges

#: What the prompt accepts, said in it and in its refusals.
EXAMPLES = "10, 0,2-3 or all"
#: The longest text the prompt takes (a list of every GPU of a large node fits).
MAX_CHOICE_LENGTH = 200
#: Words that choose every GPU again (as the a key does).
ALL_WORDS = frozenset({"", "all", "*", "a"})


def parse_gpu_choice(text: str, known: Collection[int]) -> frozenset[int] | None:
    """``text`` -> the GPU indices it names (None: every GPU); ValueError saying why
    when it is not a list of indices and ranges of GPUs in ``known``."""
    spec = text.strip().lower()
    if spec in ALL_WORDS:
        return None
    if len(spec) > MAX_CHOICE_LENGTH:
        raise ValueError(f"too long: at most {MAX_CHOICE_LENGTH} characters")
    chosen: set[int] = set()
    for token in spec.split(","):
        token = token.strip()
        first, dash, last = token.partition("-")
        ends = [first.strip(), last.strip()] if dash else [first.strip()]
        if not all(e.isascii() and e.isdigit() and len(e) <= MAX_GPU_INDEX_DIGITS for e in ends):
            raise ValueError(f"not a GPU index or range (e.g. {EXAMPLES}): {token!r}"[:120])
        lo, hi = int(ends[0]), int(ends[-1])
        if lo > hi:
            raise ValueError(f"a range goes up: {lo}-{hi}")
        chosen.update(range(lo, hi + 1))
    missing = sorted(chosen - set(known))
    if missing:
        have = gpu_ranges(known, empty="none")
        raise ValueError(f"no GPU {gpu_ranges(missing)} here (GPUs {have})")
    return frozenset(chosen)
