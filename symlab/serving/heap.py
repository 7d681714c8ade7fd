"""The web server's heap: a large block goes back to the system when it is freed.

glibc serves a block below its mmap threshold from an arena's heap, where it stays in the process once freed
(the heap shrinks only from its top), and it raises that threshold to the size of any mapped block freed, up to
32 MB. So after the first upload's 16 MB is freed, the next ones come from a heap, and the server's memory keeps
what a class of uploads once took (a page's script runs in a thread of its own, each with its arena). A fixed
threshold keeps every block of :data:`LARGE_BYTES` or more in a mapping of its own, unmapped when freed.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h); setting it turns off the threshold's growth
LARGE_BYTES = 4 * 2**20  # a few page runs' arrays are this large; uploads and analyses' results are larger


def return_large_blocks() -> bool:
    """Make this process map every block of :data:`LARGE_BYTES` or more on its own; False where the C library is
    not glibc (nothing changes)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGE_BYTES))
    except (OSError, AttributeError):
        return False
