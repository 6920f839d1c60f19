"""docs/design.md stays true to the tree: every module of `odradek/` is named in it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_is_named_in_the_design_doc() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    missing = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "odradek").rglob("*.py"))
        if p.name != "__init__.py" and p.name not in design
    ]
    assert not missing, f"modules docs/design.md does not name: {missing}"
