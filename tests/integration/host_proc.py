"""`odradek server --processes N` as a child process, for tests and benchmarks.

Theory of operation
-------------------
`HostProcesses` starts one supervisor (cli/server_processes.py) on 127.0.0.1 with N
consecutive free ports (`free_ports`) for the brokers and the next one for the controller
(combined mode: process 0 is also the KRaft controller), its output appended to a log
file. `children()` finds the broker processes through psutil (the supervisor's children,
each with its node.id on its command line). Rules as in broker_proc.py: every wait is
bounded, `close()` kills whatever still runs, and an atexit hook does it too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import psutil

from tests.integration.broker_proc import HOST, REPO_ROOT, port_accepts

_live: set[HostProcesses] = set()


def free_ports(n: int, attempts: int = 200) -> int:
    """The first of `n` consecutive ports on 127.0.0.1 that nothing listens on now,
    picked below the kernel's ephemeral range (see broker_proc.free_port)."""
    rng = random.Random()
    for _ in range(attempts):
        first = rng.randrange(10000, 30000 - n)
        socks: list[socket.socket] = []
        try:
            for port in range(first, first + n):
                s = socket.socket()
                socks.append(s)
                s.bind((HOST, port))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports")


class HostProcesses:
    def __init__(self, data_dir: Path, processes: int,
                 overrides: dict[str, object] | None = None) -> None:
        self.data_dir = data_dir
        self.n = processes
        self.base_port = free_ports(processes + 1)  # the brokers', then the controller's
        self.overrides = {"listeners": f"PLAINTEXT://{HOST}:{self.base_port}",
                          "log.dirs": str(data_dir), **(overrides or {})}
        self.log_path = data_dir.parent / f"{data_dir.name}-supervisor.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def ports(self) -> list[int]:
        return [self.base_port + i for i in range(self.n)]

    def bootstrap(self, i: int = 0) -> str:
        return f"{HOST}:{self.ports[i]}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "odradek", "server", "--processes", str(self.n)]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, ready_timeout_s: float = 45.0) -> HostProcesses:
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + path if path else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         env=env, cwd=REPO_ROOT, start_new_session=True)
        _live.add(self)
        deadline = time.monotonic() + ready_timeout_s
        while not all(port_accepts(p) for p in self.ports):
            if self.proc.poll() is not None:
                raise RuntimeError(f"supervisor exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"brokers not listening after {ready_timeout_s} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)
        return self

    def children(self) -> dict[int, psutil.Process]:
        """node.id -> its broker process (the supervisor's live children)."""
        assert self.proc is not None
        out: dict[int, psutil.Process] = {}
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.proc.pid).children():
                with contextlib.suppress(psutil.Error):
                    for arg in child.cmdline():
                        if arg.startswith("node.id="):
                            out[int(arg.split("=", 1)[1])] = child
        return out

    def pids(self) -> list[int]:
        """The supervisor and its whole process tree (brokers, cleaner workers)."""
        assert self.proc is not None
        try:
            root = psutil.Process(self.proc.pid)
            return [root.pid, *(c.pid for c in root.children(recursive=True))]
        except psutil.Error:
            return []

    def stop(self, timeout_s: float = 60.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout_s)
        _live.discard(self)
        return code

    def close(self) -> None:
        if self.proc is None:
            return
        kids = []
        with contextlib.suppress(psutil.Error):
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for kid in kids:
            with contextlib.suppress(psutil.Error):
                kid.kill()
        _live.discard(self)

    def log_tail(self, max_bytes: int = 8192) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-max_bytes:].decode(errors="replace")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@atexit.register
def _kill_leftovers() -> None:
    for host in list(_live):
        with contextlib.suppress(Exception):
            host.close()
