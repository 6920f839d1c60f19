"""`odradek cluster up --sasl-ssl`: a controller and two brokers with SASL_SSL on
every listener, certificates made with `cryptography`, a SCRAM-SHA-512 `admin`; the
command prints the client properties file, and `odradek topics --command-config`
with that file creates (RF 2: replication over SASL_SSL), lists and describes
topics. A wrong password in a copy of the file fails with the broker's reason. Ctrl-C
(SIGTERM) stops it with exit 0; a second `cluster up` on the same dir reuses the
certificates and secrets, and the admin still logs in.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.broker_proc import REPO_ROOT, free_port, port_accepts

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(300)]

UP_TIMEOUT_S = 90


def free_base_port() -> int:
    """A port p with p + 1 (the second broker) and p + 100 (the controller) free too."""
    for _ in range(50):
        p = free_port()
        if p + 100 < 65536 and not port_accepts(p + 1) and not port_accepts(p + 100):
            return p
    raise RuntimeError("no free base port")


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH")
                                        else "")
    return e


class ClusterUp:
    def __init__(self, data_dir: Path, base_port: int) -> None:
        self.bootstrap = f"127.0.0.1:{base_port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "cluster", "up", "--sasl-ssl", "--brokers", "2",
             "--data-dir", str(data_dir), "--base-port", str(base_port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(),
            cwd=str(REPO_ROOT), start_new_session=True)
        assert self.proc.stdout is not None
        self.output = ""
        deadline = time.monotonic() + UP_TIMEOUT_S
        while "Ctrl-C stops it" not in self.output and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output += line
        assert "Ctrl-C stops it" in self.output, self.output
        m = re.search(r"client properties \(--command-config, user admin, SCRAM-SHA-512\): "
                      r"(\S+)", self.output)
        assert m, self.output
        self.properties = Path(m.group(1))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()

    def topics(self, *args: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "odradek", "topics", "--bootstrap-server", self.bootstrap,
             "--command-config", str(config or self.properties), *args],
            capture_output=True, text=True, timeout=90, env=env(), cwd=str(REPO_ROOT),
            check=False)


def ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_cluster_up_sasl_ssl_and_topics_with_its_properties(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    base = free_base_port()
    up = ClusterUp(data, base)
    name = f"up-{uuid.uuid4().hex[:8]}"
    try:
        props = up.properties.read_text()
        assert "security.protocol=SASL_SSL" in props and "SCRAM-SHA-512" in props
        assert up.properties.stat().st_mode & 0o077 == 0  # the password is in it
        assert (data / "security" / "server.properties").stat().st_mode & 0o077 == 0
        ok(up.topics("create", name, "--partitions", "2", "--replication-factor", "2"))
        assert name in ok(up.topics("list")).split()
        described = ok(up.topics("describe", name))
        assert f"Topic: {name}\tPartitionCount: 2\tReplicationFactor: 2" in described
        assert described.count("Isr: ") == 2 and all(
            len(line.split("Isr: ")[1].split()[0].split(",")) == 2
            for line in described.splitlines() if "Isr: " in line), described
        wrong = tmp_path / "wrong.properties"
        wrong.write_text(re.sub(r'password="[^"]*"', 'password="not-it"', props))
        refused = up.topics("list", config=wrong)
        assert refused.returncode == 1, refused
        assert "Authentication failed" in refused.stderr + refused.stdout
        for node in ("controller", "broker-1", "broker-2"):
            log = (data / f"{node}.log").read_text(errors="replace")
            assert "Traceback" not in log
            secret = re.search(r'password="([^"]*)"', props)
            assert secret and secret.group(1) not in log
    finally:
        assert up.stop() == 0, up.output
    for port in (base, base + 1, base + 100):
        assert not port_accepts(port)

    again = ClusterUp(data, base)  # same dir: same certificates and admin password
    try:
        assert again.properties.read_text() == props
        assert name in ok(again.topics("list")).split()
    finally:
        assert again.stop() == 0, again.output
