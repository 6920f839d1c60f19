"""Page-cache state before a bench run (see `recycle_free_pages`)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def recycle_free_pages(scratch: Path, nbytes: int) -> float:
    """Write and delete `nbytes` of file data in `scratch`; return the seconds it took.

    On this VM a page the guest has not used lately costs far more to fill on its
    first write: the host backs it again (the guest's balloon driver reports free
    memory to the host, `/sys/module/page_reporting`). `pwrite` of 1 MiB took
    210 us right after another run had freed its pages and 500-770 us after a
    pause; `dd` into /dev/shm filled never-used memory at 2.6 s per GB, about
    10 us per 4 KiB page, which is 2.5 us of system time per 1 KiB record
    (docs/benchmarks.md, "Free pages" and "The sixth look"). A bench run writes
    hundreds of MB of new page cache, so without this step a figure measures the
    pages' history more than the broker. Writing the same amount just before
    the run hands the broker recently used pages, as a broker in steady state
    reuses the pages of the segments it evicted."""
    t = time.monotonic()
    path = scratch / "recycle.tmp"
    chunk = b"\0" * (1 << 20)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        for _ in range(max(1, nbytes >> 20)):
            os.write(fd, chunk)
    finally:
        os.close(fd)
        os.unlink(path)
    return time.monotonic() - t
