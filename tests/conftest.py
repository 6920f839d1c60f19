"""Suite-wide hooks: where the suite's time goes, per file.

The CI budget for the whole suite is well under 45 minutes, so every run ends with the
files that took longest (setup + call + teardown summed per file). With
`ODRADEK_TEST_DURATIONS=PATH` every test's time is also appended to PATH as JSON lines,
for comparing runs.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

_per_file: dict[str, float] = defaultdict(float)
_per_test: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report) -> None:  # type: ignore[no-untyped-def]
    _per_file[report.nodeid.split("::", 1)[0]] += report.duration
    _per_test[report.nodeid] += report.duration


def pytest_sessionfinish(session, exitstatus) -> None:  # type: ignore[no-untyped-def]
    path = os.environ.get("ODRADEK_TEST_DURATIONS")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.writelines(
            json.dumps({"test": nodeid, "s": round(seconds, 3)}) + "\n"
            for nodeid, seconds in _per_test.items()
        )


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not _per_file:
        return
    total = sum(_per_file.values())
    terminalreporter.write_sep("=", f"slowest files ({total / 60:.1f} min of tests in all)")
    for name, seconds in sorted(_per_file.items(), key=lambda kv: -kv[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f}s  {100 * seconds / total:5.1f}%  {name}")
