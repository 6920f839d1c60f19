"""`odradek cluster up|status|down`: a local cluster for development.

    odradek cluster up --brokers 3 [--controllers 1] [--data-dir DIR] [--base-port 9092]
                       [--controller-port P] [--first-broker-id 1] [--first-controller-id 100]
                       [--racks r1,r2,...] [--processes-per-host K] [--override KEY=VALUE ...]
                       [--node-override ID:KEY=VALUE ...] [--combined]
                       [--sasl-ssl [--admin-password PW]] [--dynamic-quorum]
    odradek cluster status --data-dir DIR [-o json]
    odradek cluster down --data-dir DIR [--timeout S]
    odradek cluster unregister --id N [-b HOST:PORT]   (kafka-cluster.sh unregister)

`up` starts, on 127.0.0.1, the controllers (`process.roles=controller`, node ids
100, 101, ... or from --first-controller-id, the voters of the metadata quorum,
ports --controller-port, +1, ...: base-port + 100 unless given; one by default,
three make a quorum that survives the loss of one) and N brokers
(`process.roles=broker`, node ids 1..N or from --first-broker-id, ports
base-port .. base-port + N - 1), each an `odradek server` child process with its
own log dir under DIR and its log in DIR/<node>.log. `--racks a,b,c` gives the
brokers `broker.rack` in turn (rack-aware replica placement); `--override` passes
a server setting to every node, `--node-override 2:log.retention.ms=1000` to one
(both after the generated ones). With `--processes-per-host K` the brokers run K at
a time under one `odradek server --processes K` each (a "host" named host-1,
host-2, ... with that broker.rack unless --racks names them, its log in
DIR/host-<h>.log), the layout of docs/multicore.md. With `--combined`, the first broker is also the
controller (`process.roles=broker,controller`) and no separate controller runs.
The dirs are formatted first (`odradek storage format`) with one cluster id. Every
port is checked free before anything starts. Ctrl-C (or SIGTERM, or `cluster down`)
stops every node, brokers first (a controlled shutdown each), the controllers last.

With `--dynamic-quorum` the metadata quorum is KIP-853's dynamic one, as Kafka's
quick start makes it: the first controller is formatted `--standalone` (the only
voter), the others `--no-initial-controllers`; every node finds the quorum
through `controller.quorum.bootstrap.servers`, and once the brokers are up each
other controller is added with `odradek metadata-quorum add-controller` when it
has caught up as an observer. Each controller's settings are then in
DIR/<name>.properties, the file `add-controller` and `remove-controller` take.
A second `up` on the same dir formats nothing and adds nobody already a voter.

`up` writes DIR/cluster.json (cli/cluster_state.py); `status` reads it and shows
each node's process and port, exit 0 when every node is up, 1 otherwise; `down`
stops the cluster `up` started there and waits for it.

With `--sasl-ssl` every listener is SASL_SSL (the client one is named SASL_SSL):
certificates made with `cryptography`, PLAIN between the nodes, SCRAM for clients,
ACLs on (StandardAuthorizer), and a SCRAM-SHA-512 user `admin` (a super user; a
random password unless `--admin-password`). It prints the client properties file
to give `--command-config` (DIR/security/admin.properties);
cli/cluster_security.py has the details.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import cluster_security, cluster_unregister
from .cluster_security import LISTENER
from .cluster_state import (
    STATUS_HEADER,
    ClusterState,
    NodeState,
    StateError,
    read_state,
    status_rows,
)
from .output import add_format_argument, is_json, print_json, print_table

HOST = "127.0.0.1"
CONTROLLER_ID = 100
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def node_overrides(node_id: int, roles: str, port: int, controller_port: int,
                   voters: str, data_dir: Path, cluster_id: str,
                   secured: bool = False, rack: str | None = None,
                   extra: list[tuple[str, str]] | None = None,
                   dynamic: bool = False) -> list[str]:
    """The `--override` arguments of one node (with `secured`, the listeners'
    names and protocols; the other security keys are in the `-c` file); `extra`
    (the user's overrides) come last and win. With `dynamic`, `voters` are the
    controllers' endpoints for `controller.quorum.bootstrap.servers` (KIP-853)."""
    name = LISTENER if secured else "PLAINTEXT"
    broker_listener = f"{name}://{HOST}:{port}"
    controller_listener = f"CONTROLLER://{HOST}:{controller_port}"
    listeners = {
        "controller": controller_listener,
        "broker": broker_listener,
        "broker,controller": f"{broker_listener},{controller_listener}",
    }[roles]
    settings = {
        "process.roles": roles,
        "node.id": str(node_id),
        "listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        ("controller.quorum.bootstrap.servers" if dynamic
         else "controller.quorum.voters"): voters,
        "listener.security.protocol.map": (f"CONTROLLER:SASL_SSL,{LISTENER}:SASL_SSL" if secured
                                           else "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"),
        "log.dirs": str(data_dir),
        "cluster.id": cluster_id,
    }
    if "broker" in roles:
        # clients and followers reach brokers on one listener
        settings["advertised.listeners"] = broker_listener
        settings["inter.broker.listener.name"] = name
        if rack:
            settings["broker.rack"] = rack
    out: list[str] = []
    for key, value in [*settings.items(), *(extra or [])]:
        out += ["--override", f"{key}={value}"]
    return out


class UsageError(Exception):
    """A bad combination of `cluster up` flags (exit 2)."""


def _setting(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or key != key.strip():
        raise UsageError(f"{flag} {text!r}: expected KEY=VALUE")
    return key, value


def _node_setting(text: str) -> tuple[int, str, str]:
    node, sep, rest = text.partition(":")
    if not sep or not node.strip().isdigit():
        raise UsageError(f"--node-override {text!r}: expected NODE_ID:KEY=VALUE")
    key, value = _setting(rest, "--node-override")
    return int(node), key, value


Node = tuple[str, int, str, int]  # (name, node id, roles, port to wait on)


def plan(args: argparse.Namespace) -> tuple[list[Node], dict[int, int], dict[int, str]]:
    """The nodes `up` starts, the CONTROLLER port of each voter and the rack of
    each broker; UsageError on flags that cannot make a cluster."""
    if args.brokers < 1:
        raise UsageError("--brokers must be at least 1")
    if args.controllers < 1 or (args.combined and args.controllers != 1):
        raise UsageError("--controllers must be at least 1 (exactly 1 with --combined)")
    if getattr(args, "dynamic_quorum", False) and args.combined:
        raise UsageError("--dynamic-quorum needs separate controllers (not --combined)")
    if args.first_broker_id < 0 or args.first_controller_id < 0:
        raise UsageError("node ids must not be negative")
    controller_port = (args.controller_port if args.controller_port is not None
                       else args.base_port + 100)
    nodes: list[Node] = []
    controller_ports: dict[int, int] = {}
    broker_ids = [args.first_broker_id + i for i in range(args.brokers)]
    if args.combined:
        first = broker_ids[0]
        nodes.append((f"node-{first}", first, "broker,controller", args.base_port))
        controller_ports[first] = controller_port
        brokers = list(enumerate(broker_ids))[1:]
    else:
        for i in range(args.controllers):
            node_id = args.first_controller_id + i
            name = "controller" if args.controllers == 1 else f"controller-{node_id}"
            nodes.append((name, node_id, "controller", controller_port + i))
            controller_ports[node_id] = controller_port + i
        brokers = list(enumerate(broker_ids))
    per_host = args.processes_per_host
    if per_host < 1 or (per_host > 1 and (args.combined or args.brokers % per_host)):
        raise UsageError("--processes-per-host must be at least 1 and divide --brokers "
                         "(and does not go with --combined)")
    if per_host > 1:
        # one `odradek server --processes K` a "host": brokers i..i+K-1
        for h, (i, node_id) in enumerate(brokers[::per_host], start=1):
            nodes.append((f"host-{h}", node_id, "broker", args.base_port + i))
    else:
        for i, node_id in brokers:
            nodes.append((f"broker-{node_id}", node_id, "broker", args.base_port + i))
    ids = [n[1] for n in nodes]
    if len(set(ids)) != len(ids):
        raise UsageError(f"node ids clash: brokers {broker_ids[0]}..{broker_ids[-1]}, "
                         f"controllers from {args.first_controller_id} "
                         "(--first-broker-id / --first-controller-id)")
    ports = [args.base_port + i for i in range(args.brokers)] + list(controller_ports.values())
    if any(p < 1 or p > 65535 for p in ports):
        raise UsageError(f"ports {min(ports)}..{max(ports)} leave 1..65535 "
                         "(--base-port / --controller-port)")
    if len(set(ports)) != len(ports):
        raise UsageError(f"the broker ports ({args.base_port}..) and the controller "
                         f"ports ({controller_port}..) overlap: choose --controller-port")
    racks = [r.strip() for r in args.racks.split(",")] if args.racks else []
    if args.racks is not None and (not racks or any(not r for r in racks)):
        raise UsageError(f"--racks {args.racks!r}: expected a comma-separated list of names")
    broker_nodes = [n for n in nodes if "broker" in n[2]]
    rack_of = {n[1]: racks[i % len(racks)] for i, n in enumerate(broker_nodes)} if racks else {}
    if per_host > 1 and not racks:
        rack_of = {n[1]: n[0] for n in broker_nodes}
    return nodes, controller_ports, rack_of


def _password_problem(password: str | None) -> str | None:
    if password is None:
        return None
    if not password or any(c in password for c in '"\\,[]=') or password != password.strip():
        return 'must be non-empty, without spaces at its ends and without " \\ , [ ] ='
    return None


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_open(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if _port_open(port):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {HOST}:{port} in {READY_TIMEOUT_S:.0f} s")


def run_up(args: argparse.Namespace) -> int:
    from .storage import random_uuid

    try:
        nodes, controller_ports, rack_of = plan(args)
        common = [_setting(o, "--override") for o in args.override]
        per_node: dict[int, list[tuple[str, str]]] = {}
        for text in args.node_override:
            node_id, key, value = _node_setting(text)
            if node_id not in {n[1] for n in nodes}:
                raise UsageError(f"--node-override {text!r}: no node {node_id} in this "
                                 f"cluster ({', '.join(str(n[1]) for n in nodes)})")
            per_node.setdefault(node_id, []).append((key, value))
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    per_host = args.processes_per_host
    busy = sorted({args.base_port + i for i in range(args.brokers)}
                  | set(controller_ports.values()))
    busy = [p for p in busy if _port_open(p)]
    if busy:
        print(f"error: port(s) {', '.join(map(str, busy))} on {HOST} already in use: "
              "choose --base-port / --controller-port", file=sys.stderr)
        return 1
    base = Path(args.data_dir or tempfile.mkdtemp(prefix="odradek-cluster-"))
    base.mkdir(parents=True, exist_ok=True)
    cluster_id = args.cluster_id or random_uuid()
    dynamic = bool(getattr(args, "dynamic_quorum", False))
    voters = (",".join(f"{HOST}:{port}" for port in controller_ports.values()) if dynamic
              else ",".join(f"{n}@{HOST}:{port}" for n, port in controller_ports.items()))
    controller_port = min(controller_ports.values())
    security = None
    if args.sasl_ssl:
        problem = _password_problem(args.admin_password)
        if problem:
            print(f"error: --admin-password {problem}", file=sys.stderr)
            return 1
        security = cluster_security.prepare(base, args.admin_password)
    elif args.admin_password is not None:
        print("error: --admin-password goes with --sasl-ssl", file=sys.stderr)
        return 1

    def overrides_of(node_id: int, roles: str, port: int) -> list[str]:
        return node_overrides(
            node_id, roles, port, controller_ports.get(node_id, controller_port), voters,
            base / name_of[node_id], cluster_id, secured=security is not None,
            rack=rack_of.get(node_id), extra=common + per_node.get(node_id, []),
            dynamic=dynamic)

    name_of = {node_id: name for name, node_id, _, _ in nodes}
    properties: dict[int, Path] = {}
    if dynamic:
        first_controller = min(controller_ports)
        for name, node_id, roles, port in nodes:
            if "controller" not in roles:
                continue
            properties[node_id] = _write_node_properties(
                base / f"{name}.properties", security, overrides_of(node_id, roles, port))
            problem = _format_dynamic(properties[node_id], base / name, cluster_id,
                                      node_id == first_controller)
            if problem:
                print(f"error: {name}: {problem}", file=sys.stderr)
                return 1
    if security is not None:
        for name, _node_id, roles, _port in nodes:
            if "controller" in roles:
                cluster_security.bootstrap_admin(security, base / name)
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for name, node_id, roles, port in nodes:
            data_dir = base / name
            if node_id in properties:  # the settings are in its file (dynamic quorum)
                args_of: list[str] = ["-c", str(properties[node_id])]
            else:
                config = ["-c", str(security.server_properties)] if security else []
                args_of = [*config, *overrides_of(node_id, roles, port)]
            assert data_dir == base / name_of[node_id]
            cmd = [sys.executable, "-m", "odradek", "server", *args_of]
            if name.startswith("host-"):
                cmd += ["--processes", str(per_host)]
            log_file = open(base / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
            proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            log_file.close()
            procs.append((name, proc))
            if name.startswith("host-"):
                for k in range(per_host):
                    _wait_open(port + k, proc, f"{name} node {node_id + k}")
                print(f"{name}: nodes {node_id}-{node_id + per_host - 1} (broker, rack "
                      f"{rack_of[node_id]}) on {HOST}:{port}-{port + per_host - 1}, one "
                      f"supervisor, log {base / name}.log")
                continue
            _wait_open(port, proc, name)
            rack = f", rack {rack_of[node_id]}" if node_id in rack_of else ""
            print(f"{name}: node {node_id} ({roles}) on {HOST}:{port}{rack}, "
                  f"log {base / name}.log")
        brokers = [f"{HOST}:{port + k}" for name, _, roles, port in nodes if "broker" in roles
                   for k in range(per_host if name.startswith("host-") else 1)]
        state = ClusterState(cluster_id, os.getpid(), str(base), [
            NodeState(name, node_id, roles, port, proc.pid, str(base / f"{name}.log"),
                      rack_of.get(node_id))
            for (name, node_id, roles, port), (_, proc) in zip(nodes, procs)])
        state.write()
        for node_id, path in properties.items():
            if node_id != first_controller:
                _add_voter(brokers[0], path, security, name_of[node_id])
        print(f"cluster {cluster_id} up; bootstrap servers: {','.join(brokers)}")
        print(f"data dir {base}: `odradek cluster status --data-dir {base}`, "
              f"`odradek cluster down --data-dir {base}`")
        if security is not None:
            print(f"SASL_SSL: client properties (--command-config, user admin, "
                  f"SCRAM-SHA-512): {security.admin_properties}")
            print(f"  e.g. odradek topics --bootstrap-server {brokers[0]} "
                  f"--command-config {security.admin_properties} list")
        print("Ctrl-C stops it")
        sys.stdout.flush()
        while not stop:
            for name, proc in procs:
                if proc.poll() is not None:
                    print(f"{name} exited with {proc.returncode}; stopping the cluster")
                    stop = True
            time.sleep(0.5)
        return 0
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        # brokers first, together (controlled shutdown needs the controller),
        # then the controller
        brokers_procs = [p for name, p in procs if not name.startswith("controller")]
        controller_procs = [p for name, p in procs if name.startswith("controller")]
        for group in (brokers_procs, controller_procs):
            for proc in group:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            for proc in group:
                try:
                    proc.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def _write_node_properties(path: Path, security: Any, overrides: list[str]) -> Path:
    """A controller's settings as a properties file: the security keys (if any),
    then its generated and user settings (`--override K=V` pairs), last wins."""
    lines = []
    if security is not None:
        lines.append(security.server_properties.read_text())
    lines += [f"{kv}\n" for flag, kv in zip(overrides[::2], overrides[1::2])
              if flag == "--override"]
    path.write_text("".join(lines))
    return path


def _format_dynamic(properties: Path, data_dir: Path, cluster_id: str,
                    standalone: bool) -> str | None:
    """`odradek storage format` of a controller for a dynamic quorum; the error
    text, or None (an already formatted dir is left as it is)."""
    if (data_dir / "meta.properties").exists():
        return None
    done = subprocess.run(
        [sys.executable, "-m", "odradek", "storage", "format", "-t", cluster_id,
         "-c", str(properties), "--standalone" if standalone else "--no-initial-controllers"],
        capture_output=True, text=True, timeout=READY_TIMEOUT_S, check=False)
    if done.returncode != 0:
        return f"storage format failed: {(done.stderr or done.stdout).strip()}"
    return None


def _add_voter(bootstrap: str, properties: Path, security: Any, name: str) -> None:
    """Make a controller a voter with `metadata-quorum add-controller`, retried
    while it is still catching up (REQUEST_TIMED_OUT); a voter already is fine."""
    command = [sys.executable, "-m", "odradek", "metadata-quorum", "--bootstrap-server",
               bootstrap]
    if security is not None:
        command += ["--command-config", str(security.admin_properties)]
    command += ["add-controller", "--controller-config", str(properties)]
    deadline = time.monotonic() + READY_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=READY_TIMEOUT_S, check=False)
        last = (done.stderr or done.stdout).strip()
        if done.returncode == 0 or "duplicate_voter" in last.lower():
            print(f"{name}: a voter of the metadata quorum")
            return
        time.sleep(0.5)
    raise RuntimeError(f"{name} could not be added as a voter in "
                       f"{READY_TIMEOUT_S:.0f} s: {last}")


def run_status(args: argparse.Namespace) -> int:
    try:
        state = read_state(Path(args.data_dir))
    except StateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = status_rows(state)
    all_up = all(r[6] == "up" for r in rows)
    if is_json(args):
        print_json({"cluster_id": state.cluster_id, "data_dir": state.data_dir,
                    "all_up": all_up, "nodes": [dict(zip(
                        ("name", "node_id", "roles", "address", "rack", "pid", "state", "log"),
                        r)) for r in rows]})
    else:
        print(f"cluster {state.cluster_id} in {state.data_dir}")
        print_table(args, rows, STATUS_HEADER)
    return 0 if all_up else 1


def run_down(args: argparse.Namespace) -> int:
    from .cluster_state import stop

    try:
        state = read_state(Path(args.data_dir))
    except StateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    left = stop(state, args.timeout)
    if left:
        print(f"error: still running after {args.timeout:.0f} s: {', '.join(left)}",
              file=sys.stderr)
        return 1
    print(f"cluster {state.cluster_id} in {state.data_dir} stopped")
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not in 1..65535")
    return port


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cluster", help="run a local cluster for development", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cluster_command", required=True, metavar="<action>")
    up = sub.add_parser("up", help="start a controller and N brokers on 127.0.0.1")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--controllers", type=int, default=1,
                    help="number of controllers, the voters of the metadata quorum (default 1)")
    up.add_argument("--data-dir", help="parent dir of the nodes' log dirs (default: a temp dir)")
    up.add_argument("--base-port", type=_port, default=9092,
                    help="first broker port; the others follow (default %(default)s)")
    up.add_argument("--controller-port", type=_port, metavar="PORT",
                    help="first controller (CONTROLLER listener) port; the others follow "
                         "(default: base port + 100)")
    up.add_argument("--first-broker-id", type=int, default=1, metavar="ID",
                    help="node id of the first broker; the others follow (default 1)")
    up.add_argument("--first-controller-id", type=int, default=CONTROLLER_ID, metavar="ID",
                    help=f"node id of the first controller (default {CONTROLLER_ID})")
    up.add_argument("--racks", metavar="R1,R2,...",
                    help="broker.rack of the brokers, in turn (rack-aware replica placement)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a server setting for every node (repeatable; after the generated "
                         "ones)")
    up.add_argument("--node-override", action="append", default=[],
                    metavar="ID:KEY=VALUE", help="a server setting for one node (repeatable)")
    up.add_argument("--cluster-id", help="cluster id (default: a new one)")
    up.add_argument("--processes-per-host", type=int, default=1, metavar="K",
                    help="run the brokers K at a time under one 'odradek server --processes "
                         "K' each, as hosts with their own broker.rack (host-1, ...); K "
                         "divides --brokers (default 1: one process a broker)")
    up.add_argument("--combined", action="store_true",
                    help="the first broker is also the controller; no separate controller")
    up.add_argument("--sasl-ssl", action="store_true",
                    help="SASL_SSL everywhere: generated certificates, ACLs, a SCRAM user "
                         "admin; prints the --command-config file")
    up.add_argument("--dynamic-quorum", action="store_true",
                    help="a KIP-853 dynamic quorum: the first controller formatted "
                         "--standalone, the others added as voters once caught up")
    up.add_argument("--admin-password", help="with --sasl-ssl: the admin's password on the "
                    "first run (default: random, in DIR/security/admin.properties)")
    up.set_defaults(handler=run_up)
    status = sub.add_parser("status", help="show each node of a cluster `up` started: "
                            "process, port, state (exit 1 unless all are up)")
    status.add_argument("--data-dir", required=True, help="the dir given to `cluster up`")
    add_format_argument(status)
    status.set_defaults(handler=run_status)
    down = sub.add_parser("down", help="stop the cluster `up` started in a data dir "
                          "(brokers first, each with a controlled shutdown)")
    down.add_argument("--data-dir", required=True, help="the dir given to `cluster up`")
    down.add_argument("--timeout", type=float, default=60.0, metavar="S",
                      help="seconds to wait for every node to stop (default %(default)s)")
    down.set_defaults(handler=run_down)
    cluster_unregister.add_parser(sub)
    return parser
