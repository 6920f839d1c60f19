"""The cluster page: brokers (racks, roles, fenced or not), the metadata quorum's
controllers (leader, epoch, each voter's and observer's lag) and every broker's log
directories. Each part that the cluster cannot answer (a peer broker without
DescribeQuorum, DescribeCluster v2 or DescribeLogDirs v4) says so in a line; the rest
still shows."""

from __future__ import annotations

from . import log_dirs, quorum, topics
from .client import ConsoleError
from .pages_topics import failed
from .server import Console, Request, Response

NOT_AVAILABLE = "not available from this cluster"


def cluster_page(console: Console, req: Request) -> Response:
    clients = console.clients
    try:
        info = topics.cluster(clients)
    except (ConsoleError, OSError) as e:
        return failed(console, "Cluster", str(e))
    q, quorum_error = None, None
    try:
        q = quorum.describe_quorum(clients)
    except (ConsoleError, OSError) as e:
        quorum_error = f"{NOT_AVAILABLE} ({e})"
    fenced_error = None
    try:
        registered = quorum.registered_brokers(clients)
    except (ConsoleError, OSError) as e:
        registered, fenced_error = {}, f"fenced or not: {NOT_AVAILABLE} ({e})"
    known = {b.id: b for b in info.brokers}
    for node_id, (fenced, host, port, rack) in registered.items():
        if node_id not in known:  # a fenced broker: only DescribeCluster v2 lists it
            known[node_id] = topics.Broker(node_id, host, port, rack)
        known[node_id].fenced = fenced
    for b in known.values():
        b.controller = q is not None and b.id in q.voters
    info.brokers = sorted(known.values(), key=lambda b: b.id)
    dirs: list[log_dirs.LogDir] = []
    dirs_error = None
    try:
        dirs = log_dirs.log_dirs(clients)
    except (ConsoleError, OSError) as e:  # the brokers' list still shows
        dirs_error = f"{NOT_AVAILABLE} ({e})"
    return console.render("cluster.html", title="Cluster", info=info, quorum=q,
                          quorum_error=quorum_error, fenced_error=fenced_error, dirs=dirs,
                          dirs_error=dirs_error, human=log_dirs.human)


def register(console: Console) -> None:
    console.route("GET", "/", cluster_page)
