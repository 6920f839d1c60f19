"""A node binds its listeners before anything registers them (Kafka's order).

`Broker.start` binds every listener first and serves them only at the end of
startup: a taken port stops startup before a registration names it, and a
listener on port 0 registers the port it bound. The cluster case (a broker
whose port an outgoing connection took) is in tests/integration/test_cluster.py.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from odradek.broker.broker import Broker, ListenerBindError
from odradek.config import BrokerConfig

HOST = "127.0.0.1"


def _config(data_dir: Path, listeners: str) -> BrokerConfig:
    return BrokerConfig.from_properties({
        "listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "log.cleaner.enable": "false",
    })


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def test_a_single_node_on_port_0_registers_the_port_it_bound(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker = Broker(_config(tmp_path, f"PLAINTEXT://{HOST}:0"))
        await broker.start()
        try:
            port = broker.bound_ports["PLAINTEXT"]
            assert port != 0
            registered = broker.image.brokers[broker.node_id].endpoints
            assert [(e.listener, e.host, e.port) for e in registered] == [
                ("PLAINTEXT", HOST, port)]
            _, writer = await asyncio.open_connection(HOST, port)  # served
            writer.close()
        finally:
            await broker.stop()

    asyncio.run(scenario())


def test_a_taken_port_stops_start_before_the_node_registers_and_frees_the_other_ports(
    tmp_path: Path,
) -> None:
    free = _unused_port()
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        taken_port = int(taken.getsockname()[1])

        async def scenario() -> None:
            broker = Broker(_config(
                tmp_path, f"PLAINTEXT://{HOST}:{free},OTHER://{HOST}:{taken_port}"))
            with pytest.raises(ListenerBindError) as failed:
                await broker.start()
            assert f"cannot bind listener OTHER to {HOST}:{taken_port}" in str(failed.value)
            assert "Address already in use" in str(failed.value)
            assert broker.image.brokers == {}
            broker.quorum.close()

        asyncio.run(scenario())
    # nothing registered: the metadata log holds no batch
    metadata = tmp_path / "__cluster_metadata-0"
    assert not metadata.exists() or all(
        f.stat().st_size == 0 for f in metadata.glob("*.log"))
    # the listener bound before the failure was closed again
    with socket.socket() as again:
        again.bind((HOST, free))
