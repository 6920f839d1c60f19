"""The asyncio shell of the transaction coordinator (core: transaction.py).

Like the group coordinator's shell it owns no transaction logic: it creates
`__transaction_state` on first need (compacted, through the controller),
loads the partitions this broker leads by replaying their logs, appends the
records the core returns, and runs marker jobs: COMMIT/ABORT control batches
appended to every partition of the transaction (txn_markers.py), then the
Complete record. Jobs run inline, before the request that caused them is
answered, so EndTxn returns once the outcome is visible on every partition.

Every write waits until the ISR has it (coordinator/replicated.py, with
`request.timeout.ms`, as Kafka's TransactionStateManager appends with
acks=-1): a job's markers are written only once its Prepare record is
replicated, its Complete record only once every marker is, and an answer only
once the id's partition is replicated up to its log end. A write refused or
not replicated in time is answered with Kafka's error (COORDINATOR_NOT_AVAILABLE
mostly); its jobs stay in Prepare* and the timer runs them again.

A timer aborts transactions older than their timeout every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`, removes
transactional ids idle for `transactional.id.expiration.ms` every
`transaction.remove.expired.transaction.cleanup.interval.ms`, and expires
idempotent producer state idle for `producer.id.expiration.ms` every
`producer.id.expiration.check.interval.ms`.

Test-only fault injection: with the environment variable
``ODRADEK_TEST_CRASH_AFTER_PREPARE=1`` the broker process kills itself with
SIGKILL right after a PrepareCommit record is appended and before any marker
is written (tests/integration/test_txn_recovery.py restarts it and checks the
commit completes).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

from ..clock import steady_ms, wall_ms
from ..metadata.image import MetadataImage
from ..protocol import records as batches
from . import errors as E
from .host import CoordinatorHost
from .internal_topic import ensure_internal_topic
from .log_replay import log_batches
from .replicated import TXN_ERRORS, mapped, min_isr_error, wait_replicated
from .transaction import (
    CONCURRENT_TRANSACTIONS,
    MAX_EPOCH,
    TRANSACTION_STATE_TOPIC,
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnOut,
)
from .transaction_log import CorruptTxnRecord, TxnLogValue, decode_key, decode_value
from .txn_markers import RemoteMarkers, advance_high_watermark, write_markers
from .txn_verification import TxnVerifier

log = logging.getLogger(__name__)

CRASH_AFTER_PREPARE_ENV = "ODRADEK_TEST_CRASH_AFTER_PREPARE"
TICK_MS = 100
MAX_INIT_ATTEMPTS = 3  # InitProducerId: fence-and-abort, then bump


def txn_config(broker: CoordinatorHost) -> TxnConfig:
    c = broker.config
    return TxnConfig(
        num_partitions=c.get("transaction.state.log.num.partitions"),
        max_timeout_ms=c.get("transaction.max.timeout.ms"),
        transactional_id_expiration_ms=c.get("transactional.id.expiration.ms"),
    )


class TransactionCoordinatorService:
    def __init__(self, broker: CoordinatorHost, clock_ms: Callable[[], int] | None = None) -> None:
        self.broker = broker
        self.core = TransactionCoordinator(txn_config(broker))
        self.clock_ms = clock_ms or steady_ms
        self._task: asyncio.Task[None] | None = None
        self._create_lock = asyncio.Lock()
        c = broker.config
        self.abort_interval_ms: int = c.get(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms")
        self.expire_interval_ms: int = c.get(
            "transaction.remove.expired.transaction.cleanup.interval.ms")
        self.producer_expiration_ms: int = c.get("producer.id.expiration.ms")
        self.producer_check_ms: int = c.get("producer.id.expiration.check.interval.ms")
        self.write_timeout_ms: int = c.get("request.timeout.ms")
        self.crash_after_prepare = os.environ.get(CRASH_AFTER_PREPARE_ENV) == "1"
        self.remote = RemoteMarkers(broker)
        # KIP-890 for partitions led here
        self.verifier = TxnVerifier(broker, self.core, self.add_partitions)
        self._running: set[str] = set()  # transactional ids whose markers are being written
        self._tasks: set[asyncio.Task[int]] = set()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self.on_metadata(MetadataImage(), self.broker.image, [])
        self.broker.quorum.listeners.append(self.on_metadata)
        self._task = asyncio.get_running_loop().create_task(self._timer())

    async def stop(self) -> None:
        self.remote.close()
        self.verifier.close()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _timer(self) -> None:
        last_abort = last_expire = last_producers = self.clock_ms()
        while True:
            await asyncio.sleep(TICK_MS / 1000)
            try:
                now = self.clock_ms()
                out = TxnOut()
                if now - last_abort >= self.abort_interval_ms:
                    last_abort = now
                    # Jobs whose markers could not all be written are retried.
                    out.jobs.extend(self.core.unfinished_jobs())
                    aborted = self.core.abort_timed_out(now, self._new_producer_id, out)
                    for tid in aborted:
                        log.info("aborting transaction of %r: older than its timeout", tid)
                if now - last_expire >= self.expire_interval_ms:
                    last_expire = now
                    self.core.expire_transactional_ids(now, out)
                await self.apply(out)
                if now - last_producers >= self.producer_check_ms:
                    last_producers = now
                    # Against the producers' last record timestamps: the wall clock.
                    self._expire_producers(wall_ms())
            except Exception:  # the timer must survive a bug in one tick
                log.exception("transaction coordinator tick failed")

    def _expire_producers(self, now: int) -> None:
        for part in list(self.broker.replica_manager.partitions.values()):
            part.log.producer_state.expire(now, self.producer_expiration_ms)

    def _new_producer_id(self) -> int:
        return self.broker.next_producer_id()

    # -- metadata and loading ------------------------------------------------------------------
    def on_metadata(self, old: MetadataImage, new: MetadataImage, records: Any) -> None:
        topic = new.topics_by_name.get(TRANSACTION_STATE_TOPIC)
        led = set()
        if topic is not None:
            led = {p for p, part in topic.partitions.items() if part.leader == self.broker.node_id}
        for p in sorted(self.core.loaded - led):
            self.core.unload(p)
        out = TxnOut()
        for p in sorted(led - self.core.loaded):
            self._load(p, out)
        if out.records or out.jobs:
            # Loading found transactions between the two phases: finish them.
            task = asyncio.get_running_loop().create_task(self.apply(out))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _load(self, partition: int, out: TxnOut) -> None:
        part = self.broker.replica_manager.get(TRANSACTION_STATE_TOPIC, partition)
        if part is None:
            return
        plog = part.log
        end = plog.log_end_offset

        def replay() -> Any:
            for header, records in log_batches(plog, plog.log_start_offset, end):
                if header.is_control:
                    continue
                for r in records:
                    if r.key is None:
                        continue
                    try:
                        tid = decode_key(r.key)
                        if tid is None:
                            continue
                        value: TxnLogValue | None = (
                            None if r.value is None else decode_value(r.value))
                    except (CorruptTxnRecord, UnicodeDecodeError) as e:
                        log.warning("%s-%d: skipping a record: %s",
                                    TRANSACTION_STATE_TOPIC, partition, e)
                        continue
                    yield tid, value

        count = self.core.load(partition, replay(), out)
        if count:
            log.info("loaded %s-%d: %d records, %d transactions to complete",
                     TRANSACTION_STATE_TOPIC, partition, count, len(out.jobs))

    async def ensure_topic(self) -> int:
        c = self.broker.config
        return await ensure_internal_topic(
            self.broker, self._create_lock, TRANSACTION_STATE_TOPIC,
            c.get("transaction.state.log.num.partitions"),
            c.get("transaction.state.log.replication.factor"),
            lambda rf: {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(min(rf, c.get("transaction.state.log.min.isr"))),
                "segment.bytes": str(c.get("transaction.state.log.segment.bytes")),
            },
        )

    # -- durability (coordinator/replicated.py) ------------------------------------------------
    def _partition(self, p: int) -> Any:
        return self.broker.replica_manager.get(TRANSACTION_STATE_TOPIC, p)

    def write_refused(self, transactional_id: str) -> int:
        """COORDINATOR_NOT_AVAILABLE when the id's partition, coordinated here, has
        fewer in-sync replicas than its min.insync.replicas; asked before the core
        changes anything. NONE otherwise (the core answers its own errors)."""
        if self.core.coordinator_error(transactional_id) != E.NONE:
            return E.NONE
        part = self._partition(self.core.partition_for(transactional_id))
        return mapped(TXN_ERRORS, min_isr_error(part))

    async def _replicated(self, partitions: set[int], *, write: bool = True) -> int:
        """NONE once the ISR has each partition up to its log end offset as it is
        now, else the append error."""
        for p in sorted(partitions):
            code = await wait_replicated(
                self.broker, self._partition(p), self.write_timeout_ms, write=write)
            if code != E.NONE:
                log.warning("%s-%d: not replicated: error %d", TRANSACTION_STATE_TOPIC, p, code)
                return code
        return E.NONE

    # -- effects ------------------------------------------------------------------------------
    async def apply(self, out: TxnOut, transactional_id: str | None = None) -> int:
        """Append the records and wait for the ISR, then run the marker jobs (each
        ends with its Complete record); an answer to `transactional_id` also waits
        until the ISR has the id's partition up to its log end. NONE, or the
        error to answer (Kafka's TransactionStateManager mapping)."""
        ok, written = self._write(out.records)
        out.records = []
        jobs, out.jobs = out.jobs, []
        code = await self._replicated(written) if ok else E.COORDINATOR_NOT_AVAILABLE
        if code != E.NONE:
            return mapped(TXN_ERRORS, code)  # jobs stay in Prepare*: the timer retries
        for job in jobs:
            if self.crash_after_prepare and job.commit:
                log.warning("%s=1: killing the broker after PrepareCommit of %r",
                            CRASH_AFTER_PREPARE_ENV, job.transactional_id)
                os.kill(os.getpid(), signal.SIGKILL)
            if job.transactional_id in self._running:
                continue  # already being written (a retry found it in Prepare*)
            self._running.add(job.transactional_id)
            try:
                ok = await self._run_job(job) and ok
            finally:
                self._running.discard(job.transactional_id)
        if not ok:
            return E.COORDINATOR_NOT_AVAILABLE
        tid = transactional_id
        if tid is not None and self.core.coordinator_error(tid) == E.NONE:
            code = await self._replicated({self.core.partition_for(tid)})
        return mapped(TXN_ERRORS, code)

    async def _run_job(self, job: MarkerJob) -> bool:
        """Markers on the partitions this broker leads are appended here; the
        others go to their leaders in one WriteTxnMarkers request per broker."""
        # No marker before the ISR has the Prepare record (a job retried by the
        # timer, or found at load, may follow a write that was not replicated).
        if await self._replicated(
                {self.core.partition_for(job.transactional_id)}, write=False) != E.NONE:
            return False
        coordinator_epoch = self._coordinator_epoch(job.transactional_id)
        remote: dict[int, list[tuple[str, int]]] = {}
        local: list[tuple[str, int]] = []
        for topic, partition in job.partitions:
            leader = self.remote.leader_of(topic, partition)
            if leader is not None and leader != self.broker.node_id:
                remote.setdefault(leader, []).append((topic, partition))
            else:
                local.append((topic, partition))
        codes = await write_markers(self.broker, local, job.producer_id, job.producer_epoch,
                                    job.commit, coordinator_epoch, self.write_timeout_ms)
        failed = [(t, p, c) for (t, p), c in codes.items()
                  if c not in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION)]
        if remote:
            sent = await asyncio.gather(*(
                self.remote.send(node, parts, job.producer_id, job.producer_epoch,
                                 job.commit, coordinator_epoch)
                for node, parts in remote.items()))
            for codes in sent:
                failed += [(t, p, c) for (t, p), c in codes.items()
                           if c not in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION)]
        if failed:
            # Kafka retries until the markers are written; the job stays in
            # Prepare* and is retried at the next load. Log loudly.
            log.error("transaction %r: markers not written to %s", job.transactional_id, failed)
            return False
        out = TxnOut()
        self.core.complete(job, self.clock_ms(), out)
        ok, written = self._write(out.records)
        return ok and await self._replicated(written) == E.NONE

    def _coordinator_epoch(self, transactional_id: str) -> int:
        part = self.broker.replica_manager.get(
            TRANSACTION_STATE_TOPIC, self.core.partition_for(transactional_id))
        return part.leader_epoch if part is not None else 0

    def _write(self, records: list[tuple[int, bytes, bytes | None]]) -> tuple[bool, set[int]]:
        """Append the records, one batch per partition: (all appended, partitions appended)."""
        written: set[int] = set()
        if not records:
            return True, written
        rm = self.broker.replica_manager
        now = self.clock_ms()
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for p, key, value in records:
            by_partition.setdefault(p, []).append((key, value))
        ok = True
        for p, entries in by_partition.items():
            part = rm.get(TRANSACTION_STATE_TOPIC, p)
            if part is None:
                log.error("%s-%d is not hosted here; %d records dropped",
                          TRANSACTION_STATE_TOPIC, p, len(entries))
                ok = False
                continue
            batch = bytearray(batches.build_batch(
                [batches.Record(offset=-1, timestamp=now, key=k, value=v) for k, v in entries]))
            headers = list(batches.iter_batch_headers(batch))
            try:
                part.log.append_as_leader(batch, headers, part.leader_epoch)
            except OSError as e:
                log.error("append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, p, e)
                ok = False
                continue
            advance_high_watermark(self.broker, part)
            written.add(p)
        return ok, written

    # -- requests (called by broker/handlers/txn.py) ----------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> tuple[int, int, int]:
        code = await self.ensure_topic()
        if code != E.NONE:
            return code, -1, -1
        ensure_ids = getattr(self.broker, "ensure_producer_ids", None)
        if ensure_ids is not None:  # a broker-only node takes id blocks from the controller
            try:
                await ensure_ids()
            except Exception:  # noqa: BLE001 - no block yet: the client retries
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
        result = (E.COORDINATOR_NOT_AVAILABLE, -1, -1)
        for _ in range(MAX_INIT_ATTEMPTS):
            refused = self.write_refused(transactional_id)
            if refused != E.NONE:
                return refused, -1, -1
            out = TxnOut()
            async with self.broker.metadata_lock:
                result = self.core.init_producer_id(
                    transactional_id, timeout_ms, producer_id, producer_epoch,
                    self.clock_ms(), self._new_producer_id, out)
            fenced = bool(out.jobs)
            code = await self.apply(out, transactional_id)
            if code != E.NONE:
                return code, -1, -1
            if result[0] != CONCURRENT_TRANSACTIONS or not fenced:
                break
            # The open transaction was fenced and aborted: now bump the epoch.
            producer_id = producer_epoch = -1
        return result

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: list[tuple[str, int]]) -> int:
        """Add partitions to the producer's transaction (opening one if none is),
        answered once the record is replicated: AddPartitionsToTxn, and the
        implicit adds of transactions v2."""
        code = self.write_refused(transactional_id)
        if code != E.NONE:
            return code
        out = TxnOut()
        code = self.core.add_partitions(transactional_id, producer_id, epoch, partitions,
                                        self.clock_ms(), out)
        if code == E.NONE:
            code = await self.apply(out, transactional_id)
        return code

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, bump: bool) -> tuple[int, int, int]:
        """EndTxn: (error, producer id, epoch) once the markers are written. With
        ``bump`` (transactions v2) the epoch the answer names is the bumped one,
        or a new producer id with epoch 0 when the old epoch was exhausted."""
        code = self.write_refused(transactional_id)
        if code != E.NONE:
            return code, -1, -1
        ensure_ids = getattr(self.broker, "ensure_producer_ids", None)
        if bump and ensure_ids is not None and producer_epoch >= MAX_EPOCH - 2:
            try:  # the epoch may overflow: a broker-only node needs an id block
                await ensure_ids()
            except Exception:  # noqa: BLE001 - no block yet: the client retries
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
        out = TxnOut()
        code = self.core.end_txn(transactional_id, producer_id, producer_epoch, commit,
                                 self.clock_ms(), out, bump=bump,
                                 new_producer_id=self._new_producer_id)
        if code == E.NONE:
            code = await self.apply(out, transactional_id)
        txn = self.core.txns.get(transactional_id)
        if code != E.NONE or txn is None:
            return code, -1, -1
        return code, txn.producer_id, txn.producer_epoch

    def verify_partition(self, transactional_id: str, producer_id: int, epoch: int,
                         topic: str, partition: int) -> int:
        return self.core.verify_partition(transactional_id, producer_id, epoch,
                                          (topic, partition))
