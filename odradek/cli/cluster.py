"""`odradek cluster up`: a local cluster for development.

    odradek cluster up --brokers 3 [--controllers 1] [--data-dir DIR] [--base-port 9092]
                       [--combined] [--sasl-ssl [--admin-password PW]]

Starts, on 127.0.0.1, the controllers (`process.roles=controller`, node ids
100, 101, ..., the voters of the metadata quorum, ports base-port + 100, ...;
one by default, three make a quorum that survives the loss of one) and N
brokers (`process.roles=broker`, node ids 1..N, ports base-port ..
base-port + N - 1), each an `odradek server` child process with its own log
dir under DIR and its log in DIR/<node>.log. With `--processes-per-host K` the
brokers run K at a time under one `odradek server --processes K` each (a "host"
named host-1, host-2, ... with that broker.rack, its log in DIR/host-<h>.log), the
layout of docs/multicore.md. With `--combined`, node 1 is
both the controller and a broker (`process.roles=broker,controller`) and no
separate controller runs. The dirs are formatted first (`odradek storage
format`) with one cluster id. Ctrl-C (or SIGTERM) stops every node, brokers
first (a controlled shutdown each), the controller last.

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

from . import cluster_security
from .cluster_security import LISTENER

HOST = "127.0.0.1"
CONTROLLER_ID = 100
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def node_overrides(node_id: int, roles: str, port: int, controller_port: int,
                   voters: str, data_dir: Path, cluster_id: str,
                   secured: bool = False) -> list[str]:
    """The `--override` arguments of one node (with `secured`, the listeners'
    names and protocols; the other security keys are in the `-c` file)."""
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
        "controller.quorum.voters": voters,
        "listener.security.protocol.map": (f"CONTROLLER:SASL_SSL,{LISTENER}:SASL_SSL" if secured
                                           else "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"),
        "log.dirs": str(data_dir),
        "cluster.id": cluster_id,
    }
    if "broker" in roles:
        # clients and followers reach brokers on one listener
        settings["advertised.listeners"] = broker_listener
        settings["inter.broker.listener.name"] = name
    out: list[str] = []
    for key, value in settings.items():
        out += ["--override", f"{key}={value}"]
    return out


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

    base = Path(args.data_dir or tempfile.mkdtemp(prefix="odradek-cluster-"))
    base.mkdir(parents=True, exist_ok=True)
    cluster_id = args.cluster_id or random_uuid()
    controller_port = args.base_port + 100
    if args.controllers < 1 or (args.combined and args.controllers != 1):
        print("error: --controllers must be at least 1 (exactly 1 with --combined)",
              file=sys.stderr)
        return 1
    nodes: list[tuple[str, int, str, int]] = []  # (name, node id, roles, port to wait on)
    controller_ports: dict[int, int] = {}  # node id -> its CONTROLLER port
    if args.combined:
        nodes.append(("node-1", 1, "broker,controller", args.base_port))
        controller_ports[1] = controller_port
        first_broker = 2
    else:
        for i in range(args.controllers):
            name = "controller" if args.controllers == 1 else f"controller-{CONTROLLER_ID + i}"
            nodes.append((name, CONTROLLER_ID + i, "controller", controller_port + i))
            controller_ports[CONTROLLER_ID + i] = controller_port + i
        first_broker = 1
    voters = ",".join(f"{n}@{HOST}:{port}" for n, port in controller_ports.items())
    per_host = args.processes_per_host
    if per_host < 1 or (per_host > 1 and (args.combined or args.brokers % per_host)):
        print("error: --processes-per-host must be at least 1 and divide --brokers "
              "(and does not go with --combined)", file=sys.stderr)
        return 1
    if per_host > 1:
        # one `odradek server --processes K` a "host", brokers i..i+K-1, its own rack
        for h, i in enumerate(range(1, args.brokers + 1, per_host), start=1):
            nodes.append((f"host-{h}", i, "broker", args.base_port + i - 1))
        first_broker = args.brokers + 1
    for i in range(first_broker, args.brokers + 1):
        nodes.append((f"broker-{i}", i, "broker", args.base_port + i - 1))
    security = None
    if args.sasl_ssl:
        problem = _password_problem(args.admin_password)
        if problem:
            print(f"error: --admin-password {problem}", file=sys.stderr)
            return 1
        security = cluster_security.prepare(base, args.admin_password)
        for name, _node_id, roles, _port in nodes:
            if "controller" in roles:
                cluster_security.bootstrap_admin(security, base / name)
    elif args.admin_password is not None:
        print("error: --admin-password goes with --sasl-ssl", file=sys.stderr)
        return 1
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
            config = ["-c", str(security.server_properties)] if security else []
            cmd = [sys.executable, "-m", "odradek", "server", *config, *node_overrides(
                node_id, roles, port, controller_ports.get(node_id, controller_port), voters,
                data_dir, cluster_id, secured=security is not None)]
            if name.startswith("host-"):
                cmd += ["--processes", str(per_host), "--override", f"broker.rack={name}"]
            log_file = open(base / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
            proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            log_file.close()
            procs.append((name, proc))
            if name.startswith("host-"):
                for k in range(per_host):
                    _wait_open(port + k, proc, f"{name} node {node_id + k}")
                print(f"{name}: nodes {node_id}-{node_id + per_host - 1} (broker, rack "
                      f"{name}) on {HOST}:{port}-{port + per_host - 1}, one supervisor, "
                      f"log {base / name}.log")
                continue
            _wait_open(port, proc, name)
            print(f"{name}: node {node_id} ({roles}) on {HOST}:{port}, log {base / name}.log")
        brokers = [f"{HOST}:{port + k}" for name, _, roles, port in nodes if "broker" in roles
                   for k in range(per_host if name.startswith("host-") else 1)]
        print(f"cluster {cluster_id} up; bootstrap servers: {','.join(brokers)}")
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
    up.add_argument("--base-port", type=int, default=9092, help="first broker port")
    up.add_argument("--cluster-id", help="cluster id (default: a new one)")
    up.add_argument("--processes-per-host", type=int, default=1, metavar="K",
                    help="run the brokers K at a time under one 'odradek server --processes "
                         "K' each, as hosts with their own broker.rack (host-1, ...); K "
                         "divides --brokers (default 1: one process a broker)")
    up.add_argument("--combined", action="store_true",
                    help="node 1 is controller and broker; no separate controller")
    up.add_argument("--sasl-ssl", action="store_true",
                    help="SASL_SSL everywhere: generated certificates, ACLs, a SCRAM user "
                         "admin; prints the --command-config file")
    up.add_argument("--admin-password", help="with --sasl-ssl: the admin's password on the "
                    "first run (default: random, in DIR/security/admin.properties)")
    parser.set_defaults(handler=run_up)
    return parser
