"""bench/pages.py: the page-cache recycling step that bench/run.py and bench/cluster.py
take before each produce run writes the bytes it is asked to and leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.pages import recycle_free_pages


def test_recycle_writes_the_bytes_and_deletes_them(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[int] = []
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        written.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting_write)
    seconds = recycle_free_pages(tmp_path, 5 << 20)
    monkeypatch.undo()
    assert sum(written) == 5 << 20
    assert seconds > 0
    assert list(tmp_path.iterdir()) == []
