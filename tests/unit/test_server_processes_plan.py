"""How `odradek server --processes N` derives each process's config from one file."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from odradek.cli.server_processes import (
    check_ports_free,
    plan_children,
    processes_argument,
)
from odradek.config import ConfigError


def test_combined_config_gives_process_0_the_controller_and_the_others_broker_only(
        tmp_path: Path) -> None:
    props = {"listeners": "PLAINTEXT://127.0.0.1:19092", "log.dirs": str(tmp_path),
             "node.id": "5", "broker.rack": "host-a"}
    plans = plan_children(props, 3)
    assert [p.node_id for p in plans] == [5, 6, 7]
    assert [p.roles for p in plans] == ["broker,controller", "broker", "broker"]
    assert plans[0].overrides["listeners"] == (
        "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19095")
    assert plans[2].overrides["listeners"] == "PLAINTEXT://127.0.0.1:19094"
    assert {p.overrides["controller.quorum.voters"] for p in plans} == {"5@127.0.0.1:19095"}
    assert plans[1].overrides["log.dirs"] == str(tmp_path / "node-6")
    assert len({p.overrides["cluster.id"] for p in plans}) == 1
    assert "broker.rack" not in plans[1].overrides  # inherited from the file, shared


def test_advertised_listeners_move_with_the_listeners(tmp_path: Path) -> None:
    props = {"process.roles": "broker", "node.id": "1",
             "controller.quorum.voters": "100@127.0.0.1:19300",
             "controller.listener.names": "CONTROLLER",
             "listeners": "PLAINTEXT://0.0.0.0:19092",
             "advertised.listeners": "PLAINTEXT://host-a.example:29092",
             "log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"}
    plans = plan_children(props, 2)
    assert plans[1].overrides["advertised.listeners"] == "PLAINTEXT://host-a.example:29093"
    assert plans[1].overrides["log.dirs"] == f"{tmp_path / 'a' / 'node-2'},{tmp_path / 'b' / 'node-2'}"
    assert [p.roles for p in plans] == ["broker", "broker"]


def test_a_port_used_by_two_processes_is_refused_with_both_named(tmp_path: Path) -> None:
    props = {"listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
             "controller.listener.names": "CONTROLLER",
             "controller.quorum.voters": "1@127.0.0.1:19093", "log.dirs": str(tmp_path)}
    with pytest.raises(ConfigError, match="port 19093 is used twice"):
        plan_children(props, 2)


def test_a_port_in_use_on_the_host_is_refused(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        plans = plan_children({"listeners": f"PLAINTEXT://127.0.0.1:{port - 1}",
                               "log.dirs": str(tmp_path)}, 2)
        # port - 1 (node 0's) may be taken by another process too: either is refused
        with pytest.raises(ConfigError, match=f"port ({port}|{port - 1}) .* is in use"):
            check_ports_free(plans)


def test_controller_only_and_port_zero_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs the broker role"):
        plan_children({"process.roles": "controller", "log.dirs": str(tmp_path),
                       "listeners": "CONTROLLER://127.0.0.1:19093",
                       "controller.listener.names": "CONTROLLER"}, 2)
    with pytest.raises(ConfigError, match="port 0"):
        plan_children({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}, 2)


@pytest.mark.parametrize("text", ["0", "-1", "x", "1.5", "100000"])
def test_processes_must_be_a_sensible_integer(text: str) -> None:
    import argparse
    with pytest.raises(argparse.ArgumentTypeError):
        processes_argument(text)


def test_the_metrics_port_moves_with_the_process_and_is_checked(tmp_path: Path) -> None:
    props = {"listeners": "PLAINTEXT://127.0.0.1:19092", "log.dirs": str(tmp_path),
             "odradek.metrics.port": "19200"}
    plans = plan_children(props, 2)
    assert [p.overrides["odradek.metrics.port"] for p in plans] == ["19200", "19201"]
    with pytest.raises(ConfigError, match="port 19093 is used twice"):
        plan_children({**props, "odradek.metrics.port": "19093"}, 2)
