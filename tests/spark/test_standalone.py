"""examples/spark_balances.py on a Spark standalone cluster, not only local[*].

A master and two workers (one core each) are started on 127.0.0.1 with
pyspark's own daemon script (`sbin/spark-daemon.sh`, what `start-master.sh` and
`start-worker.sh` call; the pip package ships only that one), everything they
write under the test's tmp_path. The example runs as its own driver process
(`--master spark://...`; a second SparkSession cannot share this process with
conftest's), two rounds against the shared broker, with one-core executors and
the scheduler held until both have registered, so each worker gets an executor.

Checked: the example's own check passed; the balances read back here (a
read_committed consumer, no Spark) add up as in test_example.py, and every
account's balance was written exactly once per micro-batch; the master ran one
application, finished, and each worker's work directory holds an executor of it
that ran tasks. The cluster is stopped with the stop script, then any process of
it still alive is killed, whatever the outcome.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.broker_proc import HOST, REPO_ROOT, BrokerProcess, free_port, tail
from tests.spark.conftest import skip_without_spark
from tests.spark.helpers import EXAMPLE_PATH, committed_records, load_example, wait_for

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
APP_NAME = "odradek-spark-balances"  # examples/spark_balances.py's appName
WORKERS = 2
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
DAEMON_MEMORY = "512m"
CLUSTER_UP_TIMEOUT_S = 90
DRIVER_TIMEOUT_S = 180  # under scripts/test's 300 s per test, with the cluster start
STOP_TIMEOUT_S = 20
ACCOUNTS = 6


class StandaloneCluster:
    """A Spark standalone master and `workers` one-core workers on 127.0.0.1."""

    def __init__(self, base: Path, workers: int) -> None:
        import pyspark

        self.spark_home = Path(pyspark.__file__).parent
        self.daemon_script = self.spark_home / "sbin" / "spark-daemon.sh"
        self.base = base
        self.port = free_port()
        self.webui_port = free_port()
        self.work_dirs = [base / f"worker-{i}" for i in range(1, workers + 1)]
        self.log_dir = base / "logs"
        self.pid_dir = base / "pids"
        self._scripts: list[subprocess.Popen[bytes]] = []  # spark-daemon.sh runs not yet settled
        conf_dir = base / "conf"  # empty: no spark-defaults.conf or log4j from elsewhere
        conf_dir.mkdir(parents=True, exist_ok=True)
        # The user's SPARK_* must not leak in (SPARK_MASTER set makes the script rsync).
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
        self.env.update(
            {
                "SPARK_HOME": str(self.spark_home),
                "SPARK_CONF_DIR": str(conf_dir),
                "SPARK_LOG_DIR": str(self.log_dir),
                "SPARK_PID_DIR": str(self.pid_dir),
                "SPARK_LOCAL_DIRS": str(base / "local"),  # executors' scratch space
                "SPARK_IDENT_STRING": "odradek-test",
                "SPARK_LOCAL_IP": HOST,
                "SPARK_MASTER_HOST": HOST,
                "SPARK_WORKER_CORES": "1",
                "SPARK_WORKER_MEMORY": WORKER_MEMORY,
                "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                # The REST submission server would bind the fixed port 6066.
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
                "PYSPARK_PYTHON": sys.executable,
            }
        )

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        """Runs pyspark's sbin/spark-daemon.sh; its exit is collected by `_settle`
        (a start returns only after `sleep 2`, time the daemon uses to boot)."""
        self._scripts.append(
            subprocess.Popen(
                ["bash", str(self.daemon_script), action, cls, str(instance), *args],
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )

    def _settle(self) -> None:
        """Waits for every script run so far; a failed one fails the test."""
        scripts, self._scripts = self._scripts, []
        for p in scripts:
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 0, out.decode(errors="replace")

    def pids(self) -> list[int]:
        """The daemons' pids, from the pid files spark-daemon.sh writes."""
        out = []
        for f in self.pid_dir.glob("*.pid"):
            try:
                out.append(int(f.read_text().strip()))
            except (OSError, ValueError):
                continue
        return out

    def state(self) -> dict[str, Any]:
        """The master's status page as JSON (workers, applications)."""
        with urllib.request.urlopen(f"http://{HOST}:{self.webui_port}/json/", timeout=5) as r:
            return dict(json.load(r))

    def _alive_workers(self) -> int:
        try:
            s = self.state()
        except (urllib.error.URLError, OSError, ValueError):
            return -1  # the master's web UI is not up yet
        return sum(1 for w in s["workers"] if w["state"] == "ALIVE")

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{tail(f)}" for f in sorted(self.log_dir.glob("*.out")))

    def _wait(self, cond: Callable[[], bool], what: str) -> None:
        try:
            wait_for(cond, CLUSTER_UP_TIMEOUT_S, what)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.logs()}") from None

    def start(self) -> None:
        master_args = [
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
        ]
        self._daemon("start", MASTER_CLASS, 1, *master_args)
        # A worker that finds no master retries only after 5-15 s: start them once it is up.
        self._wait(lambda: self._alive_workers() >= 0, "the Spark master's web UI")
        for i, work in enumerate(self.work_dirs, start=1):
            worker_args = ["--host", HOST, "--webui-port", "0", "--work-dir", str(work), self.url]
            self._daemon("start", WORKER_CLASS, i, *worker_args)
        n = len(self.work_dirs)
        self._wait(lambda: self._alive_workers() == n, f"{n} workers to register")
        self._settle()

    def stop(self) -> None:
        """The stop script for each daemon, then SIGKILL for whatever of the
        cluster (daemons and the executors they started) outlives the wait."""
        with contextlib.suppress(AssertionError):
            self._settle()  # a start script still running would write its pid file late
        procs = []
        for pid in self.pids():
            with contextlib.suppress(psutil.NoSuchProcess):
                p = psutil.Process(pid)
                procs += [p, *p.children(recursive=True)]
        for i in range(1, len(self.work_dirs) + 1):
            self._daemon("stop", WORKER_CLASS, i)
        self._daemon("stop", MASTER_CLASS, 1)
        with contextlib.suppress(AssertionError):
            self._settle()
        _, alive = psutil.wait_procs(procs, timeout=STOP_TIMEOUT_S)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(alive, timeout=5)


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    skip_without_spark()
    assert shutil.which("ps") is not None, "spark-daemon.sh needs ps (Debian: procps)"
    cluster = StandaloneCluster(tmp_path / "spark-cluster", WORKERS)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def _example_driver(
    cluster: StandaloneCluster, bootstrap: str, prefix: str, checkpoint: Path, log_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """examples/spark_balances.py as a driver process on `cluster`, killed with
    its process group (the Python driver and its JVM) if still running at exit."""
    cmd = [
        sys.executable,
        str(EXAMPLE_PATH),
        "--master",
        cluster.url,
        # One-core executors, two of them, and no task before both registered:
        # each worker runs one, and the first stage's two tasks go one to each.
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        f"spark.cores.max={WORKERS}",
        "--conf",
        f"spark.executor.memory={EXECUTOR_MEMORY}",
        "--conf",
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf",
        "spark.scheduler.maxRegisteredResourcesWaitingTime=60s",
        "--bootstrap",
        bootstrap,
        "--prefix",
        prefix,
        "--accounts",
        str(ACCOUNTS),
        "--transfers",
        "150",
        "--rounds",
        "2",
        "--checkpoint",
        str(checkpoint),
    ]
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(log_path.parent / "driver-local"),
        "PYSPARK_PYTHON": sys.executable,
    }
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_example_runs_exactly_once_on_a_standalone_cluster_of_two_workers(
    spark_broker: BrokerProcess,
    standalone_cluster: StandaloneCluster,
    topic_name: str,
    tmp_path: Path,
) -> None:
    cluster = standalone_cluster
    bootstrap = spark_broker.bootstrap
    prefix = f"{topic_name}-"
    log_path = tmp_path / "driver.log"
    started = time.monotonic()
    with (
        _example_driver(cluster, bootstrap, prefix, tmp_path / "checkpoint", log_path) as driver,
        contextlib.suppress(subprocess.TimeoutExpired),
    ):
        driver.wait(DRIVER_TIMEOUT_S)
    took_s = time.monotonic() - started
    out = log_path.read_text(errors="replace")
    assert driver.returncode == 0 and "check passed" in out, (
        f"driver exit {driver.returncode} after {took_s:.0f} s:\n{out[-6000:]}"
    )

    # The example checked itself with Spark; here the output is read again with
    # a plain read_committed consumer and held to what test_example.py asserts.
    deposit = load_example().DEPOSIT
    transfers, balances = f"{prefix}transfers", f"{prefix}balances"
    want: Counter[str] = Counter()
    deposits = 0
    for _, _, value in committed_records(bootstrap, transfers, partitions=2):
        t = json.loads(value or b"")
        want[t["account"]] += t["amount"]
        deposits += t["amount"] if t["kind"] == "deposit" else 0
    last: dict[str, int] = {}
    written: Counter[str] = Counter()
    for _, key, value in committed_records(bootstrap, balances):
        account = (key or b"").decode()
        last[account] = int(value or b"")
        written[account] += 1
    assert last == dict(want), "each balance is the sum of its account's transfers"
    assert sum(last.values()) == deposits == ACCOUNTS * deposit
    assert any(v != deposit for v in last.values()) and min(last.values()) >= 0, last
    batches = len(list((tmp_path / "checkpoint" / balances / "commits").glob("[0-9]*")))
    assert batches >= 2, "two rounds from one checkpoint: at least a batch each"
    # Output mode complete: each batch writes every account once, and no more.
    assert written == {f"acct-{i}": batches for i in range(ACCOUNTS)}

    # It ran on the cluster: one finished application, an executor of it on
    # each worker, and each executor ran tasks. (The master moves the
    # application to completed when the driver's unregistration reaches it.)
    wait_for(lambda: bool(cluster.state()["completedapps"]), 30, "the application to complete")
    apps = cluster.state()["completedapps"]
    assert [(a["name"], a["state"], a["cores"]) for a in apps] == [
        (APP_NAME, "FINISHED", WORKERS)
    ], apps
    app_id = apps[0]["id"]
    for work in cluster.work_dirs:
        executors = list((work / app_id).glob("*/stderr"))
        assert len(executors) == 1, f"{work}: {executors}"
        assert "Running task" in executors[0].read_text(errors="replace"), executors[0]
