"""glibc's malloc, set for the dashboard (issue 32 §5: resident memory near the stack's).

glibc gives a thread that allocates while another holds the main arena an arena of its
own, and memory freed in one arena serves only that arena's threads. The dashboard
samples on a thread of its own and Textual reads keys on another, so the freed blocks
would be spread over several arenas, each keeping its own. One arena
for the whole process: threads that allocate at the same moment wait on its lock, which a
dashboard's few threads, each allocating little once started, do seldom.

Only where the C library is glibc (other libcs have no such arenas, and their ``mallopt``
takes other numbers); never fatal: a failure leaves malloc as it was.
"""

from __future__ import annotations

import os

#: glibc's ``M_ARENA_MAX`` (malloc.h): the most arenas malloc makes.
M_ARENA_MAX = -8


def glibc() -> bool:
    """Whether the C library is glibc (what it says of itself, as Python's ``platform``
    reads it)."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return False
    return isinstance(version, str) and version.startswith("glibc ")


def one_arena() -> bool:
    """One malloc arena for every thread started after this call; whether it was set."""
    if not glibc():
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1))
    except (OSError, AttributeError, TypeError, ValueError):
        return False
