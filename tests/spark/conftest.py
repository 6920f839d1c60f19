"""Fixtures for the PySpark data source tests.

One SparkSession for the whole run (`local[2]`, 2 shuffle partitions, no UI,
bound to 127.0.0.1, Python workers on the interpreter running pytest) and one
odradek broker for all Spark tests: starting either costs seconds, and the
machine has 2 cores. Each test uses its own topics (`topic_name`).

The tests are skipped when pyspark (the `spark` extra) or a Java runtime is
missing; CI installs both (.ci/run), so there they run.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.broker_proc import BrokerProcess, odradek_server_available

SPARK_TIMEOUT_S = 120


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.integration)


def skip_without_spark() -> None:
    """Skip the calling test unless pyspark, pyarrow and a Java runtime are there."""
    pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[spark]')")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (Spark needs Java 17)")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    skip_without_spark()
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import odradek.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    if not odradek_server_available():
        pytest.skip("odradek server not available")
    base = tmp_path_factory.mktemp("spark-broker")
    proc = BrokerProcess(
        "odradek",
        data_dir=base / "data",
        log_path=base / "broker.log",
        overrides={"num.partitions": 1, "auto.create.topics.enable": "false"},
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-.")[:60] or "topic"
    return f"{stem}-{uuid.uuid4().hex[:8]}"
