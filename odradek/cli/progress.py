"""A progress line for long CLI work (dump-log over many files, consuming a count,
waiting for a reassignment), drawn on stderr only when a person is watching.

It is shown when stderr is a terminal and the command's own output does not go to
the same terminal (it is redirected, or the command prints only at the end), so
that the line never interleaves with records or tables. `ODRADEK_PROGRESS=always`
or `never` overrides that (scripts, tests). The line is redrawn at most ten times a
second and erased when the work ends:

    dump-log [##########----------]  12/24 files  50%  00000000000000036864.log
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

ENV = "ODRADEK_PROGRESS"
WIDTH = 20
INTERVAL_S = 0.1


def wanted(quiet_output: bool, stream: TextIO | None = None, out: TextIO | None = None) -> bool:
    """Whether to draw: ODRADEK_PROGRESS, else a terminal on stderr that the
    command's output (`out`, stdout) does not share unless the output is quiet."""
    setting = os.environ.get(ENV, "auto").strip().lower()
    if setting in ("always", "1", "yes"):
        return True
    if setting in ("never", "0", "no"):
        return False
    stream = stream or sys.stderr
    out = out or sys.stdout
    if not _isatty(stream):
        return False
    return quiet_output or not _isatty(out)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """`update(done, detail)` as the work moves; `close()` at the end (erases the line)."""

    def __init__(self, label: str, total: int | None, unit: str, *, enabled: bool,
                 stream: TextIO | None = None) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._last = 0.0
        self._width = 0

    def update(self, done: int, detail: str = "", *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < INTERVAL_S:
            return
        self._last = now
        self._draw(self.line(done, detail))

    def line(self, done: int, detail: str = "") -> str:
        if self.total:
            filled = min(WIDTH, WIDTH * done // self.total)
            bar = "#" * filled + "-" * (WIDTH - filled)
            width = len(str(self.total))
            text = (f"{self.label} [{bar}] {done:>{width}}/{self.total} {self.unit} "
                    f"{100 * done // self.total:>3}%")
        else:
            text = f"{self.label} {done} {self.unit}"
        return f"{text}  {detail}".rstrip()

    def _draw(self, text: str) -> None:
        pad = max(0, self._width - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
