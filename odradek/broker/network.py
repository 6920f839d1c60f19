"""The network layer: Kafka framing over asyncio, requests of a connection in order.

Each connection reads size-prefixed frames; requests of one connection are
handled strictly in order and their responses written in that order (Kafka's
rule; clients pipeline requests and match responses by order and correlation
id). One exception to "handled one at a time": a handler that has done its
ordered part and only waits (an acks=all produce waiting for the ISR) answers
with a `Later`, and the connection handles its next requests meanwhile; the
answers still go out in order, at most MAX_LATER_ANSWERS waiting, their bytes
held in the request pool until written. Kafka mutes a connection until each
answer is sent, so one client's acks=all requests each wait a whole round of
the followers; here they share rounds. A bounded queue of received frames lets a client pipeline without
letting it buffer unbounded memory: past `MAX_QUEUED_FRAMES` frames or
`MAX_QUEUED_BYTES` bytes the connection stops reading until the queue drains.
A peer that does not read its responses stops being read too: once the
transport's write buffer passes its high-water mark, nothing more is read or
handled until it drains, so a connection holds at most one response beyond it.

Reading stops for any of several reasons at once (`pause_reading_for`): the
queue, the write buffer, the broker's `queued.max.request.bytes` pool; it
resumes when none is left. Connection quotas, idle expiry and the pool are
connection_limits.py's; this module asks it and obeys.

A frame whose size prefix is negative or above `socket.request.max.bytes`, or
a request the broker cannot parse, closes that connection only.

On a TLS listener (SSL, SASL_SSL) received bytes go through the connection's
TlsSession (security/tls.py, sans I/O) before framing, and once the handshake
is done `transport` is a TlsTransport that encrypts what is written (fetch
responses' file bytes included). A handshake that fails, or is not done within
TLS_HANDSHAKE_TIMEOUT_S, is logged with the peer and the reason and closes
that connection only. A client certificate gives the connection its principal.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..protocol.framing import FrameDecoder, FrameTooLarge
from ..security.resources import ANONYMOUS, Principal
from ..security.sasl import SaslServerConfig, SaslSession
from ..security.tls import (
    TLS_HANDSHAKE_TIMEOUT_S,
    ListenerTls,
    NoMatchingRule,
    TlsHandshakeTimeout,
    TlsSession,
    TlsTransport,
    handshake_failure,
)
from ..storage.file_slice import FileSlice
from .connection_limits import ConnectionLimits, peer_address
from .context import Later
from .metrics import BrokerMetrics
from .pipeline import CLOSE, CloseAfter

log = logging.getLogger(__name__)

_CONNECTION_IDS = itertools.count()

MAX_QUEUED_FRAMES = 64
MAX_QUEUED_BYTES = 1 << 20  # whole requests queued; one larger request is still read
MAX_LATER_ANSWERS = 64  # requests handled whose answers wait (acks=all produce)


class ConnectionHost(Protocol):
    """What a connection needs of its node (the Broker)."""

    connections: set[KafkaConnection]
    metrics: BrokerMetrics
    socket_request_max_bytes: int
    connection_limits: ConnectionLimits
    tls: ListenerTls

    @property
    def sasl_listeners(self) -> Mapping[str, SaslServerConfig]:
        """The SASL listeners' settings, by listener name."""

    async def handle_frame(self, frame: bytes, conn: KafkaConnection | None) -> Any: ...

    def connection_closed(self, conn: KafkaConnection) -> None:
        """What the node ties to a connection ends with it (share sessions)."""


class KafkaConnection(asyncio.Protocol):
    answers_later = True  # a handler may answer with a Later (context.py)

    def __init__(self, broker: ConnectionHost, listener: str) -> None:
        self.broker = broker
        self.listener = listener
        self.connection_id = next(_CONNECTION_IDS)  # for what ends with the connection
        # Who this connection is: PLAINTEXT connections are User:ANONYMOUS from
        # the start; a SASL connection authenticates first (before_auth APIs only);
        # a TLS client certificate names it (User:<its DN, mapped by
        # ssl.principal.mapping.rules>) once the handshake is done.
        self.principal: Principal = ANONYMOUS
        self.muted_until = 0.0  # loop time until which quotas mute this connection
        self._tls: TlsSession | None = None
        self._tls_deadline: asyncio.TimerHandle | None = None
        self.authenticated = listener not in broker.sasl_listeners
        self.sasl: SaslSession | None = None  # made when the peer is known
        self.decoder = FrameDecoder(broker.socket_request_max_bytes)
        self.queue: collections.deque[bytes] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self._sock_fd = -1  # the socket's descriptor, for sendfile (_write_with_files)
        self.peer = "?"
        self.peer_address = "?"
        self.last_active_s = time.monotonic()
        self._handling = False  # a request of this connection is being handled
        # requests handled whose answers come later, oldest first, with their sizes
        self._later: collections.deque[tuple[Later, int]] = collections.deque()
        self._later_waiter: asyncio.Future[None] | None = None
        self._later_limit = 0
        self.limits = broker.connection_limits
        self._request_bytes = self.limits.account(self)
        # a follower fetches on it: out of the queued request pool (replicating)
        self.replication = self._request_bytes.exempt
        self._queued_bytes = 0
        self._pauses: set[str] = set()
        self._admitted = False
        self._wakeup: asyncio.Future[None] | None = None
        self._can_write: asyncio.Future[None] | None = None
        self._after_write: list[Callable[[], None]] = []  # see hold_until_written
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    # -- asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._sock_fd = sock.fileno()
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.peer_address = peer_address(peer)
        if not self.limits.admit(self):
            self._closed = True
            transport.close()
            return
        self._admitted = True
        sasl = self.broker.sasl_listeners.get(self.listener)
        if sasl is not None:
            self.sasl = SaslSession(sasl, self.peer, self._authenticated_as)
        self.broker.connections.add(self)
        loop = asyncio.get_running_loop()
        context = self.broker.tls.server_context(self.listener)
        if context is not None:
            self._tls = TlsSession(context)
            self._tls_deadline = loop.call_later(
                TLS_HANDSHAKE_TIMEOUT_S, self._tls_failed, TlsHandshakeTimeout())
        delay_s, refuse = self.limits.creation_throttle(self)  # KIP-612
        if refuse:  # closed after the throttle time, never served
            self.pause_reading_for("connection_creation_rate")
            loop.call_later(delay_s, self.abort)
        elif delay_s:  # served after the throttle time (Kafka's acceptor waits)
            loop.call_later(delay_s, self._start_serving)
        else:
            self._start_serving()

    def _start_serving(self) -> None:
        if not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._serve())

    def _authenticated_as(self, principal: Principal) -> None:
        """The SASL session's first successful exchange: who this connection is."""
        self.principal = principal
        self.authenticated = True

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        self.broker.metrics.bytes_in.inc(len(data))
        self.last_active_s = time.monotonic()
        if self._tls is not None:
            data = self._tls_receive(data)
            if not data:
                return
        decoder = self.decoder
        try:
            frames = decoder.feed(data)
        except FrameTooLarge as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            self.close()
            return
        self._request_bytes.read(frames, decoder.next_frame_bytes, decoder.buffered_bytes)
        if frames:
            self.queue.extend(frames)
            self._queued_bytes += sum(map(len, frames))
            if len(self.queue) >= MAX_QUEUED_FRAMES or self._queued_bytes >= MAX_QUEUED_BYTES:
                self.pause_reading_for("queue")
            w = self._wakeup
            if w is not None and not w.done():
                w.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tls_deadline is not None:
            self._tls_deadline.cancel()
        self._closed = True
        if self._admitted:
            self._admitted = False
            self.limits.release(self)
            self._request_bytes.close()
        self.broker.connections.discard(self)
        try:
            self.broker.connection_closed(self)
        except Exception:  # a bug there must not keep the connection open
            log.exception("connection %s: cleaning up after it failed", self.peer)
        self._release_written()
        for answer, _size in self._later:  # nobody will read them
            answer.task.cancel()
        for fut in (self._wakeup, self._can_write, self._later_waiter):
            if fut is not None and not fut.done():
                fut.set_result(None)

    def replicating(self) -> None:
        """A follower fetches on this connection (pipeline.py): it leaves the
        queued request pool, as Kafka's control plane has none."""
        self.replication = True
        self._request_bytes.exempt_from_pool()

    def hold_until_written(self, release: Callable[[], None]) -> None:
        """Call `release` once the answer being made is written and the write
        buffer is under its high-water mark again, or when the connection goes."""
        if self._closed:
            release()
        else:
            self._after_write.append(release)

    def _release_written(self) -> None:
        releases, self._after_write = self._after_write, []
        for release in releases:
            release()

    def pause_writing(self) -> None:
        if self._can_write is None or self._can_write.done():
            self._can_write = asyncio.get_running_loop().create_future()
        self.pause_reading_for("write")

    def resume_writing(self) -> None:
        self.last_active_s = time.monotonic()
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)
        self.resume_reading_for("write")

    def pause_reading_for(self, reason: str) -> None:
        if self._closed or reason in self._pauses:
            return
        if not self._pauses:
            assert self.transport is not None
            self.transport.pause_reading()
        self._pauses.add(reason)

    def resume_reading_for(self, reason: str) -> None:
        if reason not in self._pauses:
            return
        self._pauses.discard(reason)
        if not self._pauses and not self._closed:
            assert self.transport is not None
            self.transport.resume_reading()

    # -- TLS ------------------------------------------------------------------------

    def _tls_receive(self, data: bytes) -> bytes:
        """The application bytes in `data` (decrypted); b"" while the handshake runs,
        or when it failed (the connection is then closing)."""
        tls = self._tls
        assert tls is not None and self.transport is not None
        handshaking = not tls.handshake_done
        try:
            plain = tls.receive(data)
        except ssl.SSLError as e:
            self._tls_failed(e, during_handshake=handshaking)
            return b""
        out = tls.outgoing()
        if out:
            raw = self.transport.raw if isinstance(self.transport, TlsTransport) else self.transport
            raw.write(out)
        if handshaking and tls.handshake_done and not self._tls_established(tls):
            return b""
        if tls.peer_closed:
            self.close()
        return plain

    def _tls_established(self, tls: TlsSession) -> bool:
        assert self.transport is not None
        if self._tls_deadline is not None:
            self._tls_deadline.cancel()
        der = tls.peer_certificate()
        if der:
            try:
                name = self.broker.tls.principal_name(self.listener, der)
            except (NoMatchingRule, ValueError) as e:  # ValueError: an unparsable cert
                log.warning("TLS client %s on listener %s refused: %s", self.peer,
                            self.listener, e)
                self.close()
                return False
            self.principal = Principal("User", name)
        self.transport = TlsTransport(self.transport, tls)  # type: ignore[assignment]
        log.info("TLS connection from %s on listener %s: %s, principal %s", self.peer,
                 self.listener, tls.description(), self.principal)
        return True

    def _tls_failed(self, e: Exception, during_handshake: bool = True) -> None:
        if self._closed:
            return
        what = "TLS handshake with" if during_handshake else "TLS connection from"
        log.warning("%s %s on listener %s failed: %s", what, self.peer, self.listener,
                    handshake_failure(e))
        assert self._tls is not None and self.transport is not None
        raw = self.transport.raw if isinstance(self.transport, TlsTransport) else self.transport
        alert = self._tls.outgoing()  # tell the peer why, when OpenSSL has an alert
        if alert and not raw.is_closing():
            raw.write(alert)
        self._closed = True
        raw.close()

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

    def abort(self) -> None:
        """Close without flushing what the peer has not read (a peer that reads
        nothing would otherwise keep a closing connection forever)."""
        self._closed = True
        if self.transport is not None:
            self.transport.abort()

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
                if self._can_write is not None and not self._can_write.done():
                    await self._can_write  # later answers filled the write buffer
                    continue
                frame = self.queue.popleft()
                size = 4 + len(frame)
                self._queued_bytes -= len(frame)
                if (len(self.queue) < MAX_QUEUED_FRAMES // 2
                        and self._queued_bytes < MAX_QUEUED_BYTES // 2):
                    self.resume_reading_for("queue")
                self._handling = True
                try:
                    response = await handle(frame, self)
                except BaseException:
                    if not self._closed:
                        self._request_bytes.answered(size)
                    raise
                finally:
                    self._handling = False
                    # A connection that waits for its next request must not keep
                    # its last one alive (nor its last answer, below).
                    del frame
                if type(response) is Later:
                    # Its answer comes when it is ready, after every answer before
                    # it (_later_done); its bytes stay in the request pool until then.
                    self._later.append((response, size))
                    response.task.add_done_callback(self._later_done)
                    if len(self._later) >= MAX_LATER_ANSWERS:
                        await self._later_below(MAX_LATER_ANSWERS)
                    continue
                if not self._closed:
                    self._request_bytes.answered(size)
                if self._later:  # answers go out in the requests' order
                    await self._later_below(1)
                if not self._write_answer(response):
                    return
                del response
                if self._can_write is not None and not self._can_write.done():
                    await self._can_write
                self._release_written()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not take the broker down: drop this connection
            log.exception("connection %s failed", self.peer)
            self.close()

    def _write_answer(self, response: Any) -> bool:
        """Write one answer; False once the connection is closed (or closing)."""
        if response is None:  # acks=0
            return not self._closed
        if response is CLOSE:
            self.close()
            return False
        if type(response) is CloseAfter:  # an error answer, then close (SASL)
            if self.transport is not None and not self._closed:
                self.transport.write(response.response)
            self.close()
            return False
        if self._closed:
            return False
        assert self.transport is not None
        self.last_active_s = time.monotonic()
        if type(response) is list:
            self.broker.metrics.bytes_out.inc(sum(map(len, response)))
            if any(type(part) is FileSlice for part in response):
                return self._write_with_files(response)
            self.transport.writelines(response)
        else:
            self.transport.write(response)
            self.broker.metrics.bytes_out.inc(len(response))
        return True

    def _write_with_files(self, parts: list[Any]) -> bool:
        """An answer holding ranges of segment files (a follower's Fetch). While
        nothing waits in the write buffer, bytes go straight to the socket and
        ranges with sendfile(2); from the first part the socket does not take
        whole, the rest goes to the transport in order, ranges read into bytes.
        A TLS connection reads every range (the bytes must be encrypted)."""
        assert self.transport is not None
        fd = self._sock_fd
        if (self._tls is not None or self.transport.is_closing()
                or self.transport.get_write_buffer_size()):
            fd = -1
        rest: list[Any] = []
        sendfile_bytes = 0
        try:
            for part in parts:
                if fd < 0:
                    rest.append(part.read() if type(part) is FileSlice else part)
                    continue
                if type(part) is FileSlice:
                    sent = part.send_to(fd)
                    sendfile_bytes += sent
                    if sent == part.size:
                        continue
                    rest.append(part.read(sent))
                else:
                    sent = _send_some(fd, part)
                    if sent == len(part):
                        continue
                    rest.append(part[sent:])
                fd = -1  # the socket is full: the transport takes the rest
        except OSError as e:
            # part of the answer may be on the wire already: the stream is broken
            log.warning("closing %s: an answer could not be written: %s", self.peer, e)
            self.abort()
            return False
        finally:
            for part in parts:
                if type(part) is FileSlice:
                    part.close()
        if sendfile_bytes:
            self.broker.metrics.bytes_sendfile.inc(sendfile_bytes)
        if rest:
            self.transport.writelines(rest)
        return True

    # -- answers that come later (context.Later) --------------------------------

    @property
    def busy(self) -> bool:
        """A request of this connection is being handled or waits for its answer
        (such a connection is never idle: connection_limits.py)."""
        return self._handling or bool(self._later)

    def _later_done(self, _task: asyncio.Future[Any]) -> None:
        """Write the answers that are ready, in order, up to the first that is not."""
        later = self._later
        while later and later[0][0].task.done():
            answer, size = later.popleft()
            if not self._closed:
                self._request_bytes.answered(size)
            task = answer.task
            if task.cancelled():
                response: Any = CLOSE
            elif task.exception() is not None:
                log.error("connection %s: a later answer failed", self.peer,
                          exc_info=task.exception())
                response = CLOSE
            else:
                response = task.result()
            self._write_answer(response)
        waiter = self._later_waiter
        if waiter is not None and not waiter.done() and len(later) < self._later_limit:
            waiter.set_result(None)

    async def _later_below(self, limit: int) -> None:
        """Wait until fewer than `limit` answers are waiting to be written."""
        while len(self._later) >= limit and not self._closed:
            self._later_limit = limit
            self._later_waiter = asyncio.get_running_loop().create_future()
            await self._later_waiter
            self._later_waiter = None


def _send_some(fd: int, data: bytes) -> int:
    """Write what the non-blocking socket `fd` takes now; how many bytes."""
    while True:
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except InterruptedError:
            continue
