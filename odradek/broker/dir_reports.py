"""What a node tells the controller about its log dirs (KIP-858), retried until told.

Two background loops, each woken by an event:

* replica placements: the replica manager places a new replica in a log dir and
  sets `assignments_due`; the loop sends the pending placements (AssignReplicasToDirs,
  at most MAX_ASSIGNMENTS_PER_REQUEST at a time) through the broker lifecycle, or
  straight to the node's own controller on a combined node, and drops each one the
  controller has recorded. A failed send is tried again after
  ASSIGNMENT_RETRY_BACKOFF_S.
* failed log dirs: the log manager calls `on_dir_offline` (from any thread) when a
  dir goes offline; a broker-only node heartbeats at once (every heartbeat names
  its offline dirs), a combined node records them on its own controller, retrying
  after DIR_FAILURE_RETRY_BACKOFF_S until that took.

The Broker wires this and is its DirectoryReportHost.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Protocol

from ..protocol.client import ChannelError, stop_tasks
from ..replication.replica_manager import ReplicaManager
from ..storage.log import kafka_uuid_string
from ..storage.log_manager import LogManager
from .controller_service import ControllerService
from .lifecycle import BrokerLifecycle

log = logging.getLogger(__name__)

# Replica placements (AssignReplicasToDirs, KIP-858) sent in one request at most,
# and the wait before a failed send is tried again.
MAX_ASSIGNMENTS_PER_REQUEST = 1000
ASSIGNMENT_RETRY_BACKOFF_S = 0.5
# The wait before a combined node tries again to record its failed log dirs.
DIR_FAILURE_RETRY_BACKOFF_S = 0.5


class DirectoryReportHost(Protocol):
    """What the reports read of their node (the Broker)."""

    node_id: int
    is_broker: bool
    replica_manager: ReplicaManager
    log_manager: LogManager
    lifecycle: BrokerLifecycle | None
    controller_service: ControllerService | None


class DirectoryReports:
    def __init__(self, host: DirectoryReportHost) -> None:
        self.host = host
        self._assignments_due = asyncio.Event()
        self._dirs_failed = asyncio.Event()  # a log dir went offline while we run
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks = [loop.create_task(self._send_assignments()),
                       loop.create_task(self._report_dir_failures())]

    async def stop(self) -> None:
        await stop_tasks(list(self._tasks))

    def assignments_due(self) -> None:
        self._assignments_due.set()

    def on_dir_offline(self, dir: Path) -> None:
        if self._loop is None:
            return
        try:  # the log manager may call from a worker thread
            self._loop.call_soon_threadsafe(self._dirs_failed.set)
        except RuntimeError:
            pass  # the loop is closed: we are stopping anyway

    async def _send_assignments(self) -> None:
        """Tell the controller where new replicas were placed (KIP-858's
        AssignReplicasToDirs; the controller's own code on a controller node),
        retrying until it has them."""
        pending = self.host.replica_manager.pending_assignments
        while True:
            await self._assignments_due.wait()
            self._assignments_due.clear()
            batch = list(pending.items())[:MAX_ASSIGNMENTS_PER_REQUEST]
            if not batch:
                continue
            assignments = [(tid, p, d) for (tid, p), d in batch]
            try:
                if self.host.lifecycle is not None:
                    await self.host.lifecycle.assign_replicas_to_dirs(assignments)
                else:
                    assert self.host.controller_service is not None
                    await self.host.controller_service.assign_replicas_to_dirs(
                        self.host.node_id, None, assignments)
            except asyncio.CancelledError:
                raise
            except ChannelError as e:
                log.info("replica placements not yet recorded by the controller: %s", e)
                failed = True
            except OSError as e:  # e.g. out of file descriptors: one line, tried again
                log.error("replica placements not recorded (tried again): %s", e)
                failed = True
            except Exception:  # a bug in one round must not stop the placements
                log.exception("sending replica placements failed")
                failed = True
            else:
                failed = False
            if failed:
                await asyncio.sleep(ASSIGNMENT_RETRY_BACKOFF_S)
                self._assignments_due.set()
                continue
            for key, directory in batch:
                if pending.get(key) == directory:
                    del pending[key]
            if pending:
                self._assignments_due.set()

    async def _report_dir_failures(self) -> None:
        """A log dir went offline while we run: the controller moves leadership
        and ISR membership off our replicas there (KIP-858). A broker-only node
        heartbeats at once (every heartbeat names the offline dirs); a combined
        node decides it on its own controller, retrying until that took it."""
        while True:
            await self._dirs_failed.wait()
            self._dirs_failed.clear()
            if self.host.lifecycle is not None:
                self.host.lifecycle.heartbeat_now()
                continue
            if self.host.controller_service is None or not self.host.is_broker:
                continue
            offline = tuple(
                kafka_uuid_string(d) for d in self.host.log_manager.offline_directory_ids())
            try:
                await self.host.controller_service.log_dirs_offline(self.host.node_id, offline)
            except asyncio.CancelledError:
                raise
            except Exception:  # e.g. the metadata log could not be written: try again
                log.exception("recording the failed log dirs %s failed", ", ".join(offline))
                await asyncio.sleep(DIR_FAILURE_RETRY_BACKOFF_S)
                self._dirs_failed.set()
