"""Coordinator writes wait for the ISR (coordinator/replicated.py): Kafka's error
mapping, the min.insync.replicas check, and no await when the leader is alone."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.coordinator import errors as E
from odradek.coordinator import replicated as R


@dataclass
class FakeLog:
    log_end_offset: int
    high_watermark: int
    min_isr: int = 1

    @property
    def config(self) -> Any:
        return SimpleNamespace(min_insync_replicas=self.min_isr)


@dataclass
class FakePart:
    log: FakeLog
    isr: tuple[int, ...] = (1,)
    leader: int = 1
    leader_epoch: int = 5


@dataclass
class FakeReplication:
    answer: int = E.NONE
    calls: list[tuple[int, float]] = field(default_factory=list)
    on_wait: Any = None

    async def wait_for_high_watermark(self, part: Any, required: int, deadline: float) -> int:
        self.calls.append((required, deadline))
        if self.on_wait is not None:
            self.on_wait(part)
        return self.answer


def _broker(replication: Any) -> Any:
    return SimpleNamespace(node_id=1, replication=replication)


def _run_without_awaiting(coro: Any) -> int:
    """The coroutine's result, failing if it had to await anything."""
    try:
        coro.send(None)
    except StopIteration as done:
        return int(done.value)
    coro.close()
    raise AssertionError("the coroutine awaited")


def test_offset_commit_keeps_a_timeout_and_maps_replica_errors_as_kafkas_store_offsets() -> None:
    table = R.OFFSET_COMMIT_ERRORS
    assert R.mapped(table, E.NONE) == E.NONE
    assert R.mapped(table, R.REQUEST_TIMED_OUT) == R.REQUEST_TIMED_OUT
    assert R.mapped(table, R.NOT_ENOUGH_REPLICAS) == E.COORDINATOR_NOT_AVAILABLE
    assert R.mapped(table, R.NOT_ENOUGH_REPLICAS_AFTER_APPEND) == E.COORDINATOR_NOT_AVAILABLE
    assert R.mapped(table, E.UNKNOWN_TOPIC_OR_PARTITION) == E.COORDINATOR_NOT_AVAILABLE
    assert R.mapped(table, R.NOT_LEADER_OR_FOLLOWER) == E.NOT_COORDINATOR
    assert R.mapped(table, R.KAFKA_STORAGE_ERROR) == E.NOT_COORDINATOR
    assert R.mapped(table, R.MESSAGE_TOO_LARGE) == E.INVALID_COMMIT_OFFSET_SIZE
    assert R.mapped(table, R.RECORD_LIST_TOO_LARGE) == E.INVALID_COMMIT_OFFSET_SIZE
    assert R.mapped(table, R.INVALID_FETCH_SIZE) == E.INVALID_COMMIT_OFFSET_SIZE


@pytest.mark.parametrize(
    "table", [R.GROUP_ERRORS, R.TXN_ERRORS], ids=["group-metadata", "transaction-state"]
)
def test_group_and_transaction_writes_answer_not_available_or_not_coordinator(
    table: dict[int, int],
) -> None:
    for retriable in (
        R.REQUEST_TIMED_OUT,
        R.NOT_ENOUGH_REPLICAS,
        R.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.UNKNOWN_TOPIC_OR_PARTITION,
    ):
        assert R.mapped(table, retriable) == E.COORDINATOR_NOT_AVAILABLE
    assert R.mapped(table, R.NOT_LEADER_OR_FOLLOWER) == E.NOT_COORDINATOR
    assert R.mapped(table, R.KAFKA_STORAGE_ERROR) == E.NOT_COORDINATOR
    for too_large in (R.MESSAGE_TOO_LARGE, R.RECORD_LIST_TOO_LARGE):
        assert R.mapped(table, too_large) == E.UNKNOWN_SERVER_ERROR
    assert R.mapped(table, E.NONE) == E.NONE
    # Kafka's transaction table has no INVALID_FETCH_SIZE row; the group's has.
    expected = E.UNKNOWN_SERVER_ERROR if table is R.GROUP_ERRORS else R.INVALID_FETCH_SIZE
    assert R.mapped(table, R.INVALID_FETCH_SIZE) == expected


def test_a_write_is_refused_before_it_starts_when_the_isr_is_below_min_insync_replicas() -> None:
    part = FakePart(FakeLog(10, 10, min_isr=2), isr=(1,))
    assert R.min_isr_error(part) == R.NOT_ENOUGH_REPLICAS
    part.isr = (1, 2)
    assert R.min_isr_error(part) == E.NONE
    assert R.min_isr_error(None) == E.UNKNOWN_TOPIC_OR_PARTITION


def test_the_leader_alone_in_the_isr_answers_without_awaiting() -> None:
    replication = FakeReplication()
    part = FakePart(FakeLog(log_end_offset=7, high_watermark=7))
    code = _run_without_awaiting(R.wait_replicated(_broker(replication), part, 5000, write=True))
    assert code == E.NONE
    assert replication.calls == []


def test_a_write_waits_for_the_high_watermark_to_reach_the_log_end_offset() -> None:
    replication = FakeReplication()
    part = FakePart(FakeLog(log_end_offset=12, high_watermark=9), isr=(1, 2, 3))
    code = asyncio.run(R.wait_replicated(_broker(replication), part, 5000, write=True))
    assert code == E.NONE
    assert [required for required, _ in replication.calls] == [12]


@pytest.mark.parametrize("answer", [R.REQUEST_TIMED_OUT, R.NOT_LEADER_OR_FOLLOWER])
def test_a_failed_wait_is_the_append_error(answer: int) -> None:
    replication = FakeReplication(answer=answer)
    part = FakePart(FakeLog(12, 9), isr=(1, 2))
    assert asyncio.run(R.wait_replicated(_broker(replication), part, 5000, write=True)) == answer


def test_an_isr_below_min_insync_replicas_after_the_append_fails_a_write_not_a_read() -> None:
    part = FakePart(FakeLog(12, 12, min_isr=2), isr=(1,))
    write = R.wait_replicated(_broker(FakeReplication()), part, 5000, write=True)
    assert _run_without_awaiting(write) == R.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    read = R.wait_replicated(_broker(FakeReplication()), part, 5000, write=False)
    assert _run_without_awaiting(read) == E.NONE
    slow = FakeReplication(answer=R.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    part.log.high_watermark = 10
    assert asyncio.run(R.wait_replicated(_broker(slow), part, 5000, write=False)) == E.NONE


def test_a_partition_no_longer_led_here_is_not_leader() -> None:
    part = FakePart(FakeLog(12, 12), leader=2)
    code = _run_without_awaiting(
        R.wait_replicated(_broker(FakeReplication()), part, 5000, write=False)
    )
    assert code == R.NOT_LEADER_OR_FOLLOWER


def test_leadership_regained_under_a_new_epoch_during_the_wait_is_not_leader() -> None:
    def bump(part: Any) -> None:
        part.leader_epoch += 1

    part = FakePart(FakeLog(12, 9), isr=(1, 2))
    replication = FakeReplication(on_wait=bump)
    code = asyncio.run(R.wait_replicated(_broker(replication), part, 5000, write=True))
    assert code == R.NOT_LEADER_OR_FOLLOWER
