"""A small filesystem a test can fill up and then grow, for real disk-full faults.

As root (and where mount works: a container may forbid it), `SmallFilesystem`
mounts a tmpfs of `size_bytes` at `path`: writes past it fail with ENOSPC,
exactly what a full disk gives, and `grow()` remounts it bigger (the operator's
repair). Elsewhere it cannot make a filesystem, so it bounds the broker's files
instead: `wrapper()` is a `prlimit --fsize` command to run the broker under,
which makes a write past `size_bytes` in one file fail (EFBIG; Python ignores
SIGXFSZ), and `grow()` lifts it for the next start. `real` says which one;
ODRADEK_TEST_NO_MOUNT=1 takes the fallback even as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Self

MIB = 1024 * 1024
FALLBACK_MIN_FSIZE = 11 * MIB


def _can_mount(probe: Path) -> bool:
    if os.environ.get("ODRADEK_TEST_NO_MOUNT") == "1":  # try the fallback as root too
        return False
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe.mkdir(parents=True, exist_ok=True)
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
                        check=False, capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", str(probe)], check=False, capture_output=True)
    probe.rmdir()
    return ok


class SmallFilesystem:
    def __init__(self, path: Path, size_bytes: int) -> None:
        self.path = path
        self.size_bytes = size_bytes
        self.real = _can_mount(path.with_name(path.name + ".probe"))
        self.mounted = False

    def __enter__(self) -> Self:
        self.path.mkdir(parents=True, exist_ok=True)
        if self.real:
            subprocess.check_call(["mount", "-t", "tmpfs", "-o", f"size={self.size_bytes}",
                                   "tmpfs", str(self.path)])
            self.mounted = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)
            self.mounted = False

    def wrapper(self) -> list[str]:
        """The command to run the broker under (none on a real small filesystem)."""
        if self.real or self.size_bytes <= 0:
            return []
        return ["prlimit", f"--fsize={self.fsize()}"]

    def fsize(self) -> int:
        # above the 10 MB an index file is preallocated to (segment.index.bytes)
        return max(self.size_bytes, FALLBACK_MIN_FSIZE)

    @property
    def segment_bytes(self) -> int:
        """The log.segment.bytes a test sets: small on a real filesystem; in the
        fallback larger than one file may grow, so that a segment hits the bound."""
        return MIB if self.real else self.fsize() + 4 * MIB

    def grow(self, size_bytes: int) -> None:
        """The operator's repair: more space (the next start sees it)."""
        self.size_bytes = size_bytes
        if self.real:
            subprocess.check_call(["mount", "-o", f"remount,size={size_bytes}", str(self.path)])
