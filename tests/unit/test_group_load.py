"""Loading a large `__consumer_offsets` partition in an in-process broker: the load
runs in slices on the event loop, and meanwhile the partition's groups answer
COORDINATOR_LOAD_IN_PROGRESS while FindCoordinator still names this broker."""

from __future__ import annotations

import asyncio
import io
import struct

from kio.serial import entity_reader, entity_writer

from odradek.broker.broker import Broker
from odradek.config import BrokerConfig
from odradek.coordinator import errors as E
from odradek.coordinator.core import OffsetCommit, Out
from odradek.protocol import api, entities

GROUP = "big-group"
COMMITS = 40_000  # offset records in the partition: ~1 s of replay, many slices
WAIT_S = 120.0


def _request(key: int, version: int, corr: int, body: dict) -> bytes:
    cls = api.request_class(key, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, body))
    header = struct.pack(">hhih", key, version, corr, 4) + b"test"
    if api.request_header_version(key, version) >= 2:
        header += b"\x00"
    return header + buf.getvalue()


async def _call(broker: Broker, key: int, version: int, body: dict):
    frame = await broker.handle_frame(_request(key, version, 7, body), None)
    offset = 8 + (1 if api.response_header_version(key, version) >= 1 else 0)
    resp, _ = entity_reader(api.response_class(key, version))(frame, offset)
    return resp


async def _offset_fetch(broker: Broker):
    body = {"groups": [{"group_id": GROUP, "topics": None}], "require_stable": False}
    return (await _call(broker, api.ApiKey.OFFSET_FETCH, 8, body)).groups[0]


async def _until(condition, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def _scenario(data_dir) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data_dir),
            "offsets.topic.num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "log.cleaner.enable": "false",
        }
    )
    broker = Broker(config)
    await broker.start()
    service = broker.group_coordinator
    assert await service.ensure_offsets_topic() == E.NONE
    await _until(lambda: 0 in service.core.loaded, "the empty partition to load")
    for start in range(0, COMMITS, 1000):
        out = Out()
        commits = [
            OffsetCommit(f"t{i % 97}", i, i * 10, -1, None) for i in range(start, start + 1000)
        ]
        service.core.commit_offsets(GROUP, "", None, -1, commits, 9, 0, out)
        assert service.apply(out)
    await broker.stop()

    broker = Broker(config)
    turns = 0
    stop_ticking = asyncio.Event()

    async def ticker() -> None:
        nonlocal turns
        while not stop_ticking.is_set():
            if 0 in broker.group_coordinator.core.loading:
                turns += 1
            await asyncio.sleep(0)

    tick_task = asyncio.get_running_loop().create_task(ticker())
    try:
        await broker.start()
        core = broker.group_coordinator.core
        assert 0 in core.loading, "the load must still run after start() returned"
        during = await _offset_fetch(broker)
        assert during.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        found = await _call(
            broker, api.ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]}
        )
        assert found.coordinators[0].error_code == E.NONE
        assert found.coordinators[0].node_id == broker.node_id
        await _until(lambda: 0 in core.loaded, "the load to finish")
        stop_ticking.set()
        after = await _offset_fetch(broker)
        assert after.error_code == E.NONE
        got = {
            (t.name, p.partition_index): p.committed_offset
            for t in after.topics
            for p in t.partitions
        }
        assert len(got) == COMMITS
        assert all(got[(f"t{i % 97}", i)] == i * 10 for i in range(COMMITS))
        # The event loop ran other work many times while the partition loaded.
        assert turns >= 10, turns
    finally:
        stop_ticking.set()
        await tick_task
        await broker.stop()


def test_large_partition_loads_in_slices_and_answers_load_in_progress_meanwhile(tmp_path):
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_scenario(tmp_path / "data"))
    finally:
        loop.close()
