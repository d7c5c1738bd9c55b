"""glibc malloc settings for a broker process.

A produce request frame is received into its own buffer of up to ~1 MiB (protocol/framing.py). glibc
serves blocks that large with a fresh mmap and unmaps them on free, so every frame paid for page
faults on zero-filled pages: 246 us of CPU per 1 MiB frame in the event loop, against 61 us when
the heap keeps such blocks (bench_broker, 1 KiB records to 6 partitions). ``odradek serve`` raises
the mmap threshold (and the trim threshold with it, so freed blocks are reused rather than handed
back at once). An embedded broker leaves its host process's allocator alone.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("odradek.malloc")

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's own upper bound for its dynamic threshold
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD


def keep_large_blocks_in_heap() -> bool:
    """True when the process's allocator is glibc and took the settings; anything else is left as is."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    log.debug("malloc: large blocks kept in the heap: %s", ok)
    return ok
