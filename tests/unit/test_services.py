"""Handlers and the layers below the broker see small Protocols, never the Broker.

mypy checks statically that the Broker plays every role (the block at the end
of broker/broker.py); this checks at run time that a started Broker has every
name each role asks for, and that the import graph keeps `broker.py` out of
reach of everything but the server entry point and the CLI.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grimp
import pytest

from odradek.broker import services
from odradek.broker.broker import Broker
from odradek.broker.controller_service import ControllerHost
from odradek.broker.lifecycle import LifecycleHost
from odradek.broker.metrics import MetricsHost
from odradek.broker.network import ConnectionHost
from odradek.broker.pipeline import PipelineHost
from odradek.broker.replica_fetcher import FetcherHost
from odradek.config import BrokerConfig
from odradek.coordinator.host import CoordinatorHost
from odradek.replication.leader_replication import ReplicationHost

ROLES: tuple[type[Any], ...] = (*services.FAMILIES, CoordinatorHost, ReplicationHost,
                                LifecycleHost, ConnectionHost, PipelineHost, ControllerHost,
                                MetricsHost, FetcherHost)


def _members(proto: type[Any]) -> set[str]:
    names: set[str] = set()
    for klass in proto.__mro__:
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")}
        names |= set(getattr(klass, "__annotations__", {}))
    return names


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    config = BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path_factory.mktemp("services"))})
    loop = asyncio.new_event_loop()
    b = Broker(config)
    loop.run_until_complete(b.start())
    yield b
    loop.run_until_complete(b.stop())
    loop.close()


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.__name__)
def test_the_broker_has_every_name_each_role_asks_for(broker: Broker, role: type[Any]):
    members = _members(role)
    assert members, f"{role.__name__} names nothing"
    missing = sorted(n for n in members if not hasattr(broker, n))
    assert missing == []


def test_each_handler_family_sees_less_than_the_broker(broker: Broker):
    everything = {n for n in dir(broker) if not n.startswith("_")}
    for family in services.FAMILIES:
        assert len(_members(family)) < len(everything) // 2, family.__name__


@pytest.fixture(scope="module")
def graph() -> Any:
    return grimp.build_graph("odradek")  # TYPE_CHECKING imports count too


def test_only_the_server_and_the_cli_import_the_broker_class(graph: Any):
    importers = graph.find_modules_that_directly_import("odradek.broker.broker")
    assert {m for m in importers if not m.startswith("odradek.cli")} == {
        "odradek.broker.server"}


def test_no_handler_and_nothing_below_the_broker_reaches_broker_py(graph: Any):
    below = [m for m in graph.modules if m.startswith((
        "odradek.broker.handlers", "odradek.coordinator", "odradek.replication",
        "odradek.metadata", "odradek.storage", "odradek.protocol", "odradek.raft",
        "odradek.security"))]
    for module in below:
        assert not graph.chain_exists(module, "odradek.broker.broker"), module


def test_the_broker_package_has_no_import_circle(graph: Any):
    modules = sorted(m for m in graph.modules if m.startswith("odradek.broker"))
    for module in modules:
        for other in graph.find_modules_directly_imported_by(module):
            if other.startswith("odradek.broker") and other != module:
                assert not graph.chain_exists(other, module), f"{module} <-> {other}"
