"""Each broker's log directories for the cluster page: DescribeLogDirs v4 over the CLI's
`Connection` (confluent-kafka has no call for it), asked of every broker: the
directory, its error, how many partitions it holds and their size, and its total and
usable bytes (-1 where the broker does not say)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.cli import transactions as cli_txn
from odradek.protocol import api

from .client import Clients

VERSIONS = {**cli_txn.VERSIONS, api.ApiKey.DESCRIBE_LOG_DIRS: 4}


@dataclass
class LogDir:
    broker: int
    path: str
    error: str | None
    partitions: int
    size_bytes: int
    total_bytes: int
    usable_bytes: int


def log_dirs(clients: Clients) -> list[LogDir]:
    out: list[LogDir] = []
    for node_id, _address, resp in clients.ask_each_broker(
            VERSIONS, api.ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, "DescribeLogDirs v4"):
        for d in resp.results:
            parts = [p for t in d.topics for p in t.partitions]
            out.append(LogDir(node_id, d.log_dir, d.error_code.name if d.error_code.value
                              else None, len(parts), sum(p.partition_size for p in parts),
                              d.total_bytes, d.usable_bytes))
    return sorted(out, key=lambda d: (d.broker, d.path))


def human(n: int) -> str:
    """Bytes as a person reads them: 1.5 GiB."""
    if n < 0:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
