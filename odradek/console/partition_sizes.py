"""A topic's partition sizes for its page: local bytes of each partition's leader
replica (DescribeLogDirs v4 to the leaders, naming only this topic), and, for a
tiered topic, its bytes and segments in the remote tier, read as `odradek topics
describe` reads them (cli/remote_sizes.py: the partitions' events in
`__remote_log_metadata`). What the cluster cannot answer is said in `sizes_error`;
the rest of the page still shows."""

from __future__ import annotations

from odradek.cli.remote_sizes import remote_sizes, topic_ids
from odradek.protocol import api

from . import log_dirs
from .client import FAILURES, Clients, ConsoleError, text
from .topics import TopicDetail


def local_sizes(clients: Clients, detail: TopicDetail) -> dict[tuple[int, int], int]:
    """(broker, partition) -> bytes of that replica, for the leaders' replicas."""
    leaders = {p.leader for p in detail.partitions if p.leader >= 0}
    wanted = [{"topic": detail.name, "partitions": [p.id for p in detail.partitions]}]
    out: dict[tuple[int, int], int] = {}
    for node_id, address in clients.brokers(log_dirs.VERSIONS):
        if node_id not in leaders:
            continue
        conn = clients.connect(address, log_dirs.VERSIONS)
        try:
            resp = conn.call(api.ApiKey.DESCRIBE_LOG_DIRS, {"topics": wanted})
        except OSError as e:
            raise ConsoleError(f"DescribeLogDirs v4 on broker {node_id}: {e}") from None
        finally:
            conn.close()
        if resp.error_code.value:
            raise ConsoleError(f"DescribeLogDirs on broker {node_id}: {resp.error_code.name}")
        for d in resp.results:
            for t in d.topics:
                for p in t.partitions:
                    if t.name == detail.name and not p.is_future_key:
                        out[(node_id, p.partition_index)] = p.partition_size
    return out


def fill(clients: Clients, detail: TopicDetail) -> None:
    """Set each partition's local and (for a tiered topic) remote size."""
    errors = []
    try:
        local = local_sizes(clients, detail)
        for p in detail.partitions:
            p.local_bytes = local.get((p.leader, p.id))
    except (ConsoleError, OSError) as e:
        errors.append(f"local sizes: not available from this cluster ({e})")
    if detail.tiered:
        try:
            topic_id = topic_ids(clients.admin, [detail.name], clients.timeout_s)[detail.name]
            remote = remote_sizes(clients.bootstrap,
                                  {topic_id: [p.id for p in detail.partitions]},
                                  clients.timeout_s, clients.config)
            for p in detail.partitions:
                p.remote_bytes, p.remote_segments = remote[(topic_id, p.id)]
        except (*FAILURES, OSError) as e:
            errors.append(f"remote sizes: {text(e)}")
    detail.sizes_error = "; ".join(errors) or None
