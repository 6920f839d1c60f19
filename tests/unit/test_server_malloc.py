"""broker/server.tune_malloc: glibc's malloc thresholds fixed at start-up."""

from __future__ import annotations

import platform

import pytest

from odradek.broker import server

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_tune_malloc_sets_the_thresholds_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in server._MALLOC_ENV:
        monkeypatch.delenv(name, raising=False)
    assert server.tune_malloc()


def test_tune_malloc_leaves_thresholds_the_environment_sets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", str(128 * 1024))
    assert not server.tune_malloc()
