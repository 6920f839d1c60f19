"""docs/security.md's API table is the one apis.py renders (scripts/api_acl_table.py)."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.api_acl_table import markdown, replace_in
from odradek.broker.apis import API_TABLE

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_the_docs_table_is_the_api_tables():
    doc = DOC.read_text()
    assert doc == replace_in(doc), "docs/security.md is stale: run scripts/api_acl_table.py"


def test_every_api_has_a_row():
    table = markdown()
    for spec in API_TABLE.values():
        assert f"| {spec.name} ({spec.key}) |" in table
