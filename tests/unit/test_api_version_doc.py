"""docs/api_versions.md's table is the one the code renders (scripts/api_version_table.py)."""

from __future__ import annotations

from pathlib import Path

from odradek.protocol import api
from odradek.protocol.api_version_table import kafka_versions, markdown, replace_in

DOC = Path(__file__).resolve().parents[2] / "docs" / "api_versions.md"


def test_the_doc_is_current() -> None:
    doc = DOC.read_text()
    assert doc == replace_in(doc), "docs/api_versions.md is stale: run scripts/api_version_table.py"


def test_every_served_api_is_a_kafka_api_within_kafkas_versions() -> None:
    kafka = kafka_versions()
    for key, (lo, hi) in {**api.SUPPORTED_VERSIONS, **api.CONTROLLER_VERSIONS}.items():
        _name, k_lo, k_hi = kafka[key]
        assert k_lo <= lo <= hi <= k_hi, api.api_name(key)


def test_an_api_below_kafkas_newest_version_says_why() -> None:
    for line in markdown().splitlines()[2:]:
        _, name, served, kafka, note, _ = (c.strip() for c in line.split("|"))
        newest = kafka.split("-")[-1]
        if served.split("-")[-1] != newest:
            assert note, f"{name}: served {served} of Kafka's {kafka} without a note"
