"""Group commit: fsyncs of partition logs, coalesced and run off the event loop.

Theory of operation
-------------------
With ``flush.messages=1`` Kafka fsyncs inside every append. Done inline on an
event loop, that caps a partition at the disk's sync rate and stalls every
other connection while it waits. Here the produce path appends (page cache
only), asks ``request_flush(log)`` for a future and awaits it before
answering, so durability is the same ("acknowledged means fsynced" when the
policy asks for it) but many appends share one fsync:

* per log there is at most one fsync *in flight* and at most one *next* round;
* a request while nothing is in flight starts a round at once; it captures the
  log end offset and duplicated file descriptors of every segment past the
  recovery point (``LocalLog.prepare_flush``) and fsyncs them on a worker
  thread;
* a request while a round is in flight joins the next round (one future shared
  by every waiter); when the in-flight round ends, the next one starts and
  captures the log end offset *then*, which covers every append made before
  the waiters asked;
* when a round ends the log's recovery point moves to the captured offset
  (``complete_flush``) and its waiters are released; an fsync error takes the
  log's dir offline (``on_io_error``) and fails the waiters with
  KafkaStorageError.

Bounds: ``FLUSHER_THREADS`` worker threads; at most two rounds (so two
futures) per log; the duplicated descriptors of a round are closed by it.
All methods run on the event loop thread; only ``fsync_and_close`` runs on a
worker.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from odradek.storage.local_log import KafkaStorageError, LocalLog, fsync_and_close

log = logging.getLogger(__name__)

FLUSHER_THREADS = 4


def _retrieve(fut: asyncio.Future[None]) -> None:
    # Nobody may await a background flush (a roll's); mark errors as seen.
    if not fut.cancelled():
        fut.exception()


class Flusher:
    def __init__(self, loop: asyncio.AbstractEventLoop, threads: int = FLUSHER_THREADS) -> None:
        self._loop = loop
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="flusher")
        self._in_flight: dict[int, asyncio.Future[None]] = {}
        self._next: dict[int, asyncio.Future[None]] = {}
        self.rounds = 0  # fsync rounds run (for tests and metrics)
        self._closed = False

    def request_flush(self, plog: LocalLog) -> asyncio.Future[None]:
        """A future that completes once ``plog`` is fsynced up to its current log
        end offset (or fails with KafkaStorageError)."""
        key = id(plog)
        if key in self._next:
            return self._next[key]
        fut: asyncio.Future[None] = self._loop.create_future()
        fut.add_done_callback(_retrieve)
        if key in self._in_flight:
            self._next[key] = fut
        else:
            self._start(plog, fut)
        return fut

    async def flush(self, plog: LocalLog) -> None:
        await self.request_flush(plog)

    def _start(self, plog: LocalLog, fut: asyncio.Future[None]) -> None:
        key = id(plog)
        if plog.recovery_point >= plog.log_end_offset:
            fut.set_result(None)
            self._promote(plog)
            return
        if self._closed:
            fut.set_exception(KafkaStorageError("the flusher is shut down"))
            return
        try:
            target, fds = plog.prepare_flush()
        except OSError as e:
            fut.set_exception(e if isinstance(e, KafkaStorageError) else KafkaStorageError(str(e)))
            self._promote(plog)
            return
        self._in_flight[key] = fut
        self.rounds += 1
        work = self._loop.run_in_executor(self._executor, fsync_and_close, fds)
        work.add_done_callback(lambda done: self._finished(plog, target, done))

    def _finished(self, plog: LocalLog, target: int, done: asyncio.Future[None]) -> None:
        fut = self._in_flight.pop(id(plog))
        error = done.exception()
        if error is None:
            plog.complete_flush(target)
            if not fut.done():
                fut.set_result(None)
        else:
            storage_error = (
                plog._storage_error(error) if isinstance(error, OSError) else error
            )
            if not fut.done():
                fut.set_exception(storage_error)
        self._promote(plog)

    def _promote(self, plog: LocalLog) -> None:
        nxt = self._next.pop(id(plog), None)
        if nxt is not None:
            self._start(plog, nxt)

    def shutdown(self) -> None:
        """Wait for running fsyncs and stop the worker threads."""
        self._closed = True
        self._executor.shutdown(wait=True)
