"""Bootstrap records: metadata a new cluster starts with (Kafka's bootstrap.checkpoint).

`odradek storage format --add-scram ...` writes `bootstrap-records.json` into
the metadata log dir: one metadata record a line, the JSON the metadata log
holds (today UserScramCredentialRecords: salted credentials, no password).
The first controller to become active with an empty metadata log commits
them (broker/controller_service.py), so every node of the cluster has them;
a metadata log that already holds records ignores the file, as Kafka does.
"""

from __future__ import annotations

from pathlib import Path

from . import records as R

BOOTSTRAP_RECORDS = "bootstrap-records.json"
MAX_BOOTSTRAP_BYTES = 16 * 1024 * 1024


def write_bootstrap_records(metadata_dir: Path, records: list[R.MetadataRecord]) -> Path:
    metadata_dir.mkdir(parents=True, exist_ok=True)
    target = metadata_dir / BOOTSTRAP_RECORDS
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(b"".join(R.encode(r) + b"\n" for r in records))
    tmp.replace(target)
    return target


def read_bootstrap_records(metadata_dir: Path) -> list[R.MetadataRecord]:
    """The records of the dir's bootstrap file; [] when there is none. Raises
    ValueError naming the file and line of a record that does not decode."""
    path = metadata_dir / BOOTSTRAP_RECORDS
    if not path.exists():
        return []
    if path.stat().st_size > MAX_BOOTSTRAP_BYTES:
        raise ValueError(f"{path} is larger than {MAX_BOOTSTRAP_BYTES} bytes")
    out = []
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if line.strip():
            try:
                out.append(R.decode(line))
            except ValueError as e:
                raise ValueError(f"{path} line {number}: {e}") from None
    return out
