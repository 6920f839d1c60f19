"""The import contracts of pyproject.toml hold, and no import circle is left anywhere.

`lint-imports` checks the contracts in [tool.importlinter] (layers cli > broker >
coordinator > replication > metadata > storage > protocol | raft, spark apart, no
circle among the siblings of any package). scripts/import_cycles.py counts circles
between modules, imports hidden in functions or under TYPE_CHECKING included.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lint_imports_keeps_every_active_contract() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys; from importlinter.cli import lint_imports_command; "
                "sys.exit(lint_imports_command())"
            ),
            "--no-cache",
            "--no-logo",
        ],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_no_import_circle_anywhere() -> None:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "scripts/import_cycles.py")
    assert spec is not None and spec.loader is not None
    import_cycles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(import_cycles)
    graph = import_cycles.build(exclude_type_checking=False, module_level_only=False, root=ROOT)
    circles = import_cycles.strongly_connected(graph)
    assert circles == [], circles
