"""The CLI's progress line (cli/progress.py): drawn only for a watching person, erased
at the end, and used by dump-log over several files."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.cli import progress
from odradek.protocol.records import Record, build_batch


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_shows_a_bar_count_and_percent() -> None:
    bar = progress.Progress("dump-log", 24, "files", enabled=True, stream=_Terminal())
    assert bar.line(12, "x.log") == "dump-log [##########----------] 12/24 files  50%  x.log"
    assert bar.line(0) == "dump-log [--------------------]  0/24 files   0%"
    assert progress.Progress("consume", None, "messages", enabled=True).line(7) == \
        "consume 7 messages"


def test_updates_are_throttled_and_close_erases_the_line() -> None:
    term = _Terminal()
    bar = progress.Progress("consume", 100, "messages", enabled=True, stream=term)
    for i in range(50):
        bar.update(i)
    drawn = term.getvalue().count("\r")
    assert 1 <= drawn < 50  # at most ten a second
    bar.update(99, force=True)
    bar.close()
    assert term.getvalue().endswith("\r")
    last = term.getvalue().rstrip("\r").rsplit("\r", 1)[-1]
    assert last.strip() == ""  # the line was blanked


def test_disabled_draws_nothing() -> None:
    term = _Terminal()
    bar = progress.Progress("x", 3, "files", enabled=False, stream=term)
    bar.update(1, force=True)
    bar.close()
    assert term.getvalue() == ""


def test_when_it_is_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    pipe = io.StringIO()
    assert not progress.wanted(True, stream=pipe, out=pipe)  # stderr not a terminal
    assert progress.wanted(False, stream=_Terminal(), out=pipe)  # output redirected
    assert not progress.wanted(False, stream=_Terminal(), out=_Terminal())  # would interleave
    assert progress.wanted(True, stream=_Terminal(), out=_Terminal())  # prints at the end only
    monkeypatch.setenv(progress.ENV, "never")
    assert not progress.wanted(True, stream=_Terminal(), out=pipe)
    monkeypatch.setenv(progress.ENV, "always")
    assert progress.wanted(False, stream=pipe, out=pipe)


def test_dump_log_verify_over_several_files_shows_progress(tmp_path: Path) -> None:
    paths = []
    for base in (0, 10, 20):
        path = tmp_path / f"{base:020d}.log"
        path.write_bytes(build_batch([Record(-1, 1_700_000_000_000, b"k", b"v")] * 10,
                                     base_offset=base))
        paths.append(str(path))
    env = {**os.environ, progress.ENV: "always"}
    r = subprocess.run([sys.executable, "-m", "odradek", "dump-log", "--verify", "--files",
                        ",".join(paths)], capture_output=True, text=True, timeout=60,
                       env=env, check=False)
    assert r.returncode == 0, r.stderr
    assert "Verified 3 file(s): no problems found" in r.stdout
    assert "dump-log [" in r.stderr and "/3 files" in r.stderr
    quiet = subprocess.run([sys.executable, "-m", "odradek", "dump-log", "--verify", "--files",
                            ",".join(paths)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, progress.ENV: "auto"}, check=False)
    assert quiet.returncode == 0 and quiet.stderr == ""  # no terminal: no line
