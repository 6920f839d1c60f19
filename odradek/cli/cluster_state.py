"""What `odradek cluster up` leaves in its data dir, for `cluster status` and `down`.

`up` writes DIR/cluster.json once every node listens: the `up` process's pid,
the cluster id and, per node, its name, node id, roles, port, rack, pid and log
file. `status` reads it and asks each node: is its process alive, does its port
accept connections. `down` sends SIGTERM to the `up` process (it stops the
brokers first, each with a controlled shutdown, then the controllers) and waits
for it; nodes left behind by an `up` that was killed get SIGTERM themselves.
A pid is only signalled while its command line is still that node's (pids are
reused).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
HOST = "127.0.0.1"


@dataclass
class NodeState:
    name: str
    node_id: int
    roles: str
    port: int
    pid: int
    log: str
    rack: str | None = None


@dataclass
class ClusterState:
    cluster_id: str
    up_pid: int
    data_dir: str
    nodes: list[NodeState]

    def write(self) -> Path:
        path = Path(self.data_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)
        return path


class StateError(Exception):
    """No usable cluster.json in the data dir."""


def read_state(data_dir: Path) -> ClusterState:
    path = data_dir / STATE_FILE
    try:
        raw: dict[str, Any] = json.loads(path.read_text())
        return ClusterState(
            cluster_id=str(raw["cluster_id"]), up_pid=int(raw["up_pid"]),
            data_dir=str(raw["data_dir"]),
            nodes=[NodeState(**n) for n in raw["nodes"]])
    except FileNotFoundError:
        raise StateError(f"{path} does not exist: no `odradek cluster up --data-dir "
                         f"{data_dir}` has run there") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StateError(f"{path} is not a cluster state file: {e}") from None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def up_alive(state: ClusterState) -> bool:
    cmd = _cmdline(state.up_pid)
    return "cluster" in cmd and " up" in cmd and "odradek" in cmd


def node_alive(state: ClusterState, node: NodeState) -> bool:
    """The node's process runs (and is still that node: its command line names its
    node id and log dir)."""
    cmd = _cmdline(node.pid)
    return "odradek" in cmd and f"node.id={node.node_id}" in cmd and state.data_dir in cmd


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def status_rows(state: ClusterState) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for n in state.nodes:
        alive = node_alive(state, n)
        listening = alive and port_accepts(n.port)
        rows.append([n.name, n.node_id, n.roles, f"{HOST}:{n.port}", n.rack,
                     n.pid if alive else None,
                     "up" if listening else ("starting" if alive else "down"), n.log])
    return rows


STATUS_HEADER = ("NAME", "NODE-ID", "ROLES", "ADDRESS", "RACK", "PID", "STATE", "LOG")


def stop(state: ClusterState, timeout_s: float) -> list[str]:
    """SIGTERM the `up` process (or, when it is gone, each node still running);
    wait up to `timeout_s`; the names of nodes still running after that."""
    if up_alive(state):
        os.kill(state.up_pid, signal.SIGTERM)
    else:
        for n in state.nodes:
            if node_alive(state, n):
                os.kill(n.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not up_alive(state) and not any(node_alive(state, n) for n in state.nodes):
            return []
        time.sleep(0.2)
    return [n.name for n in state.nodes if node_alive(state, n)]
