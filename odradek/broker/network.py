"""The network layer: Kafka framing over asyncio, one request at a time per connection.

Each connection reads size-prefixed frames; requests of one connection are
handled strictly in order and their responses written in that order (Kafka's
rule; clients pipeline requests and match responses by order and correlation
id). A bounded queue of received frames lets a client pipeline without
letting it buffer unbounded memory: past `MAX_QUEUED_FRAMES` the connection
stops reading until the queue drains.

A frame whose size prefix is negative or above `socket.request.max.bytes`, or
a request the broker cannot parse, closes that connection only.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
from typing import Any, Protocol

from ..protocol.framing import FrameDecoder, FrameTooLarge
from ..security.resources import ANONYMOUS, Principal
from .metrics import BrokerMetrics
from .pipeline import CLOSE

log = logging.getLogger(__name__)

MAX_QUEUED_FRAMES = 64


class ConnectionHost(Protocol):
    """What a connection needs of its node (the Broker)."""

    connections: set[KafkaConnection]
    metrics: BrokerMetrics
    socket_request_max_bytes: int

    async def handle_frame(self, frame: bytes, conn: KafkaConnection | None) -> Any: ...


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker: ConnectionHost, listener: str) -> None:
        self.broker = broker
        self.listener = listener
        # Who this connection is: PLAINTEXT connections are User:ANONYMOUS from
        # the start; a SASL connection authenticates first (before_auth APIs only).
        self.principal: Principal = ANONYMOUS
        self.authenticated = True
        self.muted_until = 0.0  # loop time until which quotas mute this connection
        self.decoder = FrameDecoder(broker.socket_request_max_bytes)
        self.queue: collections.deque[bytes] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._wakeup: asyncio.Future[None] | None = None
        self._can_write: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    # -- asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        self.broker.metrics.bytes_in.inc(len(data))
        try:
            frames = self.decoder.feed(data)
        except FrameTooLarge as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            self.close()
            return
        if frames:
            self.queue.extend(frames)
            if len(self.queue) >= MAX_QUEUED_FRAMES and not self._reading_paused:
                assert self.transport is not None
                self.transport.pause_reading()
                self._reading_paused = True
            w = self._wakeup
            if w is not None and not w.done():
                w.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.broker.connections.discard(self)
        for fut in (self._wakeup, self._can_write):
            if fut is not None and not fut.done():
                fut.set_result(None)

    def pause_writing(self) -> None:
        if self._can_write is None or self._can_write.done():
            self._can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)

    # -- the request loop -------------------------------------------------------

    def throttle(self, ms: int) -> None:
        """Read no further request for `ms` (a client quota's throttle time)."""
        until = asyncio.get_running_loop().time() + ms / 1000.0
        self.muted_until = max(self.muted_until, until)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.transport is not None:
                self.transport.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        handle = self.broker.handle_frame
        try:
            while not self._closed:
                if not self.queue:
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                if self.muted_until > loop.time():
                    # a quota's throttle (KIP-219): the answer went out at once,
                    # the next request waits out the throttle time
                    await asyncio.sleep(self.muted_until - loop.time())
                    continue
                frame = self.queue.popleft()
                if self._reading_paused and len(self.queue) < MAX_QUEUED_FRAMES // 2:
                    self._reading_paused = False
                    assert self.transport is not None
                    self.transport.resume_reading()
                response = await handle(frame, self)
                if response is None:
                    continue
                if response is CLOSE:
                    self.close()
                    return
                if self._closed:
                    return
                assert self.transport is not None
                if type(response) is list:
                    self.transport.writelines(response)
                    self.broker.metrics.bytes_out.inc(sum(map(len, response)))
                else:
                    self.transport.write(response)  # type: ignore[arg-type]
                    self.broker.metrics.bytes_out.inc(len(response))  # type: ignore[arg-type]
                if self._can_write is not None and not self._can_write.done():
                    await self._can_write
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not take the broker down: drop this connection
            log.exception("connection %s failed", self.peer)
            self.close()
