"""`odradek server --processes N`: one host, N broker processes, one command.

Theory of operation. A broker is one Python process and so uses about one core. To use
the N cores of a host, the host runs N brokers: each a full member of the cluster with
its own node.id, its own listener ports and its own log dirs, all with the host's
broker.rack (so that rack-aware placement puts the replicas of a partition on different
hosts). Kafka clients bootstrap from any of the ports and learn every broker from
Metadata, as with any cluster. This module is the supervisor that starts them.

It reads the one server.properties (-c plus --override, as `odradek server` does) and
derives the config of child i (0 <= i < N):

  node.id        node.id + i (broker.id too when the file uses that name)
  listeners      every port + i; advertised.listeners likewise (port 0 is refused)
  log.dirs       <each log dir>/node-<node.id>; metadata.log.dir likewise when set
  odradek.metrics.port   port + i when set above 0
  cluster.id     the configured one, else the one in a child's meta.properties, else new:
                 the children must agree, so the supervisor picks it once
  process.roles  `broker` for every child, except in combined mode (process.roles
                 includes controller): child 0 keeps the roles and is a KRaft voter;
                 when the file names no controller listener, child 0 gets
                 CONTROLLER://<host>:<first port + N> and controller.quorum.voters
                 points at it. A controller-only config is refused: it has no work to
                 spread over processes.

Every derived config is validated (BrokerConfig) and every port is checked, among the
children and by binding it on this host, before any child starts; a problem is a usage
error (exit code 2) naming the key or the port. Then the supervisor starts the children
(`python -m odradek server -c FILE --override ...`, each in its own session so a
terminal's Ctrl-C reaches only the supervisor; on Linux each asks for SIGTERM when the
supervisor dies, see broker/server.py), prefixes their log lines with `[node <id>]`,
and watches them:

- a child that exits is restarted after a backoff (RESTART_BACKOFF_INITIAL_S, doubling
  to RESTART_BACKOFF_MAX_S; back to the initial value after RESTART_BACKOFF_RESET_S of
  uptime), each exit and restart logged; a child that exits with code 2 (its config is
  wrong) is not restarted: the supervisor stops the others and exits 1;
- SIGTERM or SIGINT: SIGTERM to the broker-only children (each does a controlled
  shutdown, which needs the controller), then to child 0; a child still running after
  STOP_TIMEOUT_S is killed. Exit code 0.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from odradek.broker.server import SUPERVISOR_PID_ENV
from odradek.config import BrokerConfig, ConfigError, Endpoint, parse_overrides, parse_properties

log = logging.getLogger("odradek.server_processes")

MAX_PROCESSES = 256
METRICS_PORT = "odradek.metrics.port"
RESTART_BACKOFF_INITIAL_S = 1.0
RESTART_BACKOFF_MAX_S = 30.0
RESTART_BACKOFF_RESET_S = 60.0
STOP_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.2
CONFIG_ERROR_EXIT_CODE = 2
DEFAULT_CONTROLLER_LISTENER = "CONTROLLER"


def processes_argument(text: str) -> int:
    """argparse type of --processes: an integer from 1 to MAX_PROCESSES."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if not 1 <= value <= MAX_PROCESSES:
        raise argparse.ArgumentTypeError(
            f"{value} is out of range: the number of broker processes must be "
            f"1..{MAX_PROCESSES} (typically the host's core count, {os.cpu_count()} here)")
    return value


@dataclass(frozen=True)
class ChildPlan:
    """One child's identity and the overrides that make it."""

    index: int
    node_id: int
    roles: str
    overrides: dict[str, str]
    # (host, port, what) for each port it binds; `what` names it in messages
    ports: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    def override_args(self) -> list[str]:
        out: list[str] = []
        for key, value in self.overrides.items():
            out += ["--override", f"{key}={value}"]
        return out


def _endpoints_text(endpoints: Sequence[Endpoint]) -> str:
    def host(h: str) -> str:
        return f"[{h}]" if ":" in h else h
    return ",".join(f"{e.name}://{host(e.host)}:{e.port}" for e in endpoints)


def _shifted(endpoints: Sequence[Endpoint], i: int, key: str) -> list[Endpoint]:
    for e in endpoints:
        if e.port == 0:
            raise ConfigError(key, f"listener {e.name} has port 0; with --processes each "
                              "process needs known ports (the port of process i is the "
                              "configured port + i)", _endpoints_text(endpoints))
    return [e._replace(port=e.port + i) for e in endpoints]


def read_properties(config_path: str | None, overrides: Sequence[str]) -> dict[str, str]:
    """The merged properties, as `odradek server` reads them (file, then overrides)."""
    props: dict[str, str] = {}
    if config_path is not None:
        try:
            props.update(parse_properties(Path(config_path).read_text(encoding="utf-8")))
        except OSError as e:
            raise ConfigError("config", f"cannot read {config_path}: {e.strerror or e}",
                              message=f"Cannot read config file {config_path}: "
                                      f"{e.strerror or e}") from None
    props.update(parse_overrides(overrides))
    return props


def plan_children(props: dict[str, str], n: int) -> list[ChildPlan]:
    """The config of each of `n` children (see the module doc); ConfigError on a problem
    in the base config, in a derived config, or a port used twice."""
    base = BrokerConfig.from_properties(props)
    roles = base.process_roles
    if "broker" not in roles:
        raise ConfigError("process.roles", "--processes needs the broker role: a "
                          "controller-only node has no partition work to spread over "
                          "processes", ",".join(sorted(roles)))
    controller_names = base.controller_listener_names
    client_listeners = [e for e in base.listeners if e.name not in controller_names]
    controller_listeners = [e for e in base.listeners if e.name in controller_names]
    combined = "controller" in roles
    common: dict[str, str] = {"cluster.id": base.cluster_id or _existing_cluster_id(
        base, n) or _new_cluster_id()}
    if combined and n > 1 and not controller_listeners:
        # child 0 must be reachable by the others: give it a controller listener
        name = next(iter(sorted(controller_names)), DEFAULT_CONTROLLER_LISTENER)
        first = client_listeners[0]
        controller_listeners = [Endpoint(name, first.host, first.port + n)]
        common["controller.listener.names"] = ",".join(sorted(controller_names or {name}))
    if combined and n > 1 and not base.quorum_voters:
        c = controller_listeners[0]
        host = c.host or "127.0.0.1"
        common["controller.quorum.voters"] = f"{base.node_id}@{host}:{c.port}"
    plans: list[ChildPlan] = []
    for i in range(n):
        node_id = base.node_id + i
        listeners = _shifted(client_listeners, i, "listeners") if n > 1 else client_listeners
        child_roles = ",".join(sorted(roles)) if i == 0 else "broker"
        if i == 0 and combined:
            listeners = listeners + controller_listeners
        overrides = dict(common)
        overrides["node.id"] = str(node_id)
        if "broker.id" in base.originals:
            overrides["broker.id"] = str(node_id)
        overrides["process.roles"] = child_roles
        overrides["listeners"] = _endpoints_text(listeners)
        if base.get("advertised.listeners") is not None:
            advertised = base._advertised_endpoints()
            overrides["advertised.listeners"] = _endpoints_text(
                _shifted(advertised, i, "advertised.listeners"))
        overrides[base._log_dirs_key] = ",".join(
            str(d / f"node-{node_id}") for d in base.log_dirs)
        if base.get("metadata.log.dir"):
            overrides["metadata.log.dir"] = str(
                Path(str(base.get("metadata.log.dir"))) / f"node-{node_id}")
        ports = [(e.host, e.port, f"listener {e.name} of node {node_id}") for e in listeners]
        metrics_port = base.get(METRICS_PORT)
        if metrics_port > 0 and n > 1:
            overrides[METRICS_PORT] = str(metrics_port + i)
            ports.append((str(base.get("odradek.metrics.host")), metrics_port + i,
                          f"metrics endpoint of node {node_id}"))
        try:
            BrokerConfig.from_properties({**props, **overrides})
        except ConfigError as e:
            raise ConfigError(e.key, e.reason, e.value, message=f"the config derived for "
                              f"process {i} (node.id {node_id}): {e.message}") from None
        plans.append(ChildPlan(i, node_id, child_roles, overrides, ports))
    _check_distinct_ports(plans)
    return plans


def _check_distinct_ports(plans: list[ChildPlan]) -> None:
    seen: dict[int, str] = {}
    for plan in plans:
        for _host, port, what in plan.ports:
            if port in seen:
                reason = (f"port {port} is used twice: by the {seen[port]} and by the "
                          f"{what} (process i listens on the configured port + i; move "
                          f"the other listener's port at least {len(plans)} away)")
                raise ConfigError("listeners", reason, port, message=reason)
            seen[port] = what


def check_ports_free(plans: list[ChildPlan]) -> None:
    """Bind each port once on this host; ConfigError naming the first one in use."""
    for plan in plans:
        for host, port, what in plan.ports:
            try:
                with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                   socket.SOCK_STREAM) as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((host, port))
            except OSError as e:
                reason = ("is in use by another process" if e.errno == errno.EADDRINUSE
                          else f"cannot be bound: {e.strerror or e}")
                raise ConfigError("listeners", f"port {port} ({what}) {reason}",
                                  message=f"port {port} on {host or '*'} ({what}) {reason}"
                                  ) from None


def _existing_cluster_id(base: BrokerConfig, n: int) -> str | None:
    for i in range(n):
        for d in base.log_dirs:
            meta = d / f"node-{base.node_id + i}" / "meta.properties"
            with contextlib.suppress(OSError):
                for line in meta.read_text().splitlines():
                    if line.startswith("cluster.id="):
                        return line.split("=", 1)[1].strip()
    return None


def _new_cluster_id() -> str:
    import base64
    import uuid
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# ----------------------------------------------------------------------------------------
# the supervisor


class _Child:
    def __init__(self, plan: ChildPlan, base_args: list[str]) -> None:
        self.plan = plan
        self.cmd = [sys.executable, "-m", "odradek", "server", *base_args,
                    *plan.override_args()]
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.backoff_s = RESTART_BACKOFF_INITIAL_S
        self.restart_at: float | None = None
        self.restarts = 0

    @property
    def name(self) -> str:
        return f"node {self.plan.node_id}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, SUPERVISOR_PID_ENV: str(os.getpid())})
        self.started_at = time.monotonic()
        self.restart_at = None
        threading.Thread(target=_copy_lines, args=(self.proc.stdout, f"[{self.name}] "),
                         daemon=True, name=f"log-{self.name}").start()
        log.info("started %s (%s, pid %d) on %s", self.name, self.plan.roles,
                 self.proc.pid, ", ".join(f"{h or '*'}:{p}" for h, p, _ in self.plan.ports))


def _copy_lines(stream: IO[bytes] | None, prefix: str) -> None:
    if stream is None:
        return
    out = sys.stderr.buffer
    head = prefix.encode()
    for line in iter(stream.readline, b""):
        with contextlib.suppress(OSError, ValueError):
            out.write(head + line)
            out.flush()
    stream.close()


def supervise(plans: list[ChildPlan], base_args: list[str]) -> int:
    """Run the children until SIGTERM/SIGINT (exit 0) or a child's config error (exit 1)."""
    children = [_Child(plan, base_args) for plan in plans]
    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("%s: stopping %d broker processes", signal.Signals(signum).name,
                 len(children))
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    exit_code = 0
    try:
        for child in children:
            child.start()
        while not stopping.is_set():
            now = time.monotonic()
            for child in children:
                assert child.proc is not None
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        child.restarts += 1
                        child.start()
                    continue
                code = child.proc.poll()
                if code is None:
                    if now - child.started_at >= RESTART_BACKOFF_RESET_S:
                        child.backoff_s = RESTART_BACKOFF_INITIAL_S
                    continue
                if code == CONFIG_ERROR_EXIT_CODE:
                    log.error("%s exited with code %d (a configuration error); not "
                              "restarting it, stopping the others", child.name, code)
                    exit_code = 1
                    stopping.set()
                    break
                log.warning("%s (pid %d) exited with %s after %.1f s; restarting it in "
                            "%.1f s", child.name, child.proc.pid, _describe_exit(code),
                            now - child.started_at, child.backoff_s)
                child.restart_at = now + child.backoff_s
                child.backoff_s = min(child.backoff_s * 2, RESTART_BACKOFF_MAX_S)
            stopping.wait(POLL_INTERVAL_S)
    finally:
        _stop_all(children)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return exit_code


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def _stop_all(children: list[_Child]) -> None:
    """Brokers first, together (their controlled shutdown needs the controller), then
    the controller; each group bounded by STOP_TIMEOUT_S, then killed."""
    groups = [[c for c in children if not c.plan.is_controller],
              [c for c in children if c.plan.is_controller]]
    for group in groups:
        running = [c for c in group if c.proc is not None and c.proc.poll() is None]
        for c in running:
            assert c.proc is not None
            c.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for c in running:
            assert c.proc is not None
            try:
                c.proc.wait(max(deadline - time.monotonic(), 0.1))
                log.info("%s stopped (%s)", c.name, _describe_exit(c.proc.returncode))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0f s; killing it", c.name, STOP_TIMEOUT_S)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait()


def run(config_path: str | None, overrides: Sequence[str], n: int, log_level: str) -> int:
    """`odradek server --processes n`: plan, check, supervise. ConfigError is the caller's
    to report (exit code 2)."""
    props = read_properties(config_path, overrides)
    plans = plan_children(props, n)
    check_ports_free(plans)
    if n > (os.cpu_count() or n):
        log.warning("%d broker processes on %d cores: more processes than cores adds "
                    "replication and memory cost without adding CPU", n, os.cpu_count())
    if not BrokerConfig.from_properties(props).broker_rack:
        log.warning("broker.rack is not set: two replicas of a partition may be placed on "
                    "two processes of this host; set broker.rack to the host's name "
                    "(on every host) so that they land on different hosts")
    base_args = (["-c", config_path] if config_path else []) + [
        arg for o in overrides for arg in ("--override", o)] + ["--log-level", log_level]
    return supervise(plans, base_args)
