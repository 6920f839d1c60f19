"""A small Kafka wire client for broker-to-broker and broker-to-controller calls.

One `KafkaChannel` is one TCP connection to one node, used for one request at
a time (a lock orders them): requests are built from dicts with kio's
classes (`protocol/entities.py`), responses come back as kio objects. Every
call has a timeout; a failed or timed-out call closes the connection and the
next call reconnects. With an `ssl_context` the connection is TLS (the server
name sent and, if the context checks host names, verified is `host`).

To a SASL listener a channel authenticates right after it connects
(SaslHandshake v1, then SaslAuthenticate v2 with PLAIN or SCRAM-SHA-256/512);
a failure is a ChannelError naming the node and the broker's message. When
the broker gives the session a lifetime (KIP-368), the channel reconnects,
and so authenticates again, before the lifetime is over.
"""

from __future__ import annotations

import asyncio
import io
import ssl
import struct
import time
from collections.abc import Generator
from typing import Any, Protocol

from kio.serial import entity_writer

from . import api, entities
from .frame_protocol import FrameProtocol
from .framing import skip_tagged_fields
from .guard import decode_message

CLIENT_ID = b"odradek-broker"
# A response larger than this closes the connection (a bound on memory).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
# A SASL session is renewed (by reconnecting) this long before its lifetime ends,
# or at 90% of it when that is shorter.
REAUTH_MARGIN_S = 5.0


class ChannelError(Exception):
    pass


class SaslLogin(Protocol):
    """How a channel logs in (security/sasl.SaslClientConfig): the mechanism,
    the user for messages, and the exchange as a generator that yields the
    client's tokens and is sent each answer of the server (raising ValueError
    when an answer does not verify)."""

    @property
    def mechanism(self) -> str: ...
    @property
    def username(self) -> str: ...
    def exchange(self) -> Generator[bytes, bytes, None]: ...


class KafkaChannel:
    def __init__(self, host: str, port: int, client_id: bytes = CLIENT_ID,
                 ssl_context: ssl.SSLContext | None = None,
                 sasl: SaslLogin | None = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._reauth_at: float | None = None  # time.monotonic() to renew the SASL session
        self._transport: asyncio.Transport | None = None
        self._protocol: FrameProtocol | None = None
        self._lock = asyncio.Lock()
        self._correlation_id = 0

    def __repr__(self) -> str:
        return f"KafkaChannel({self.host}:{self.port})"

    async def _connect(self, timeout_s: float) -> None:
        if self._transport is not None and not self._transport.is_closing():
            if self._reauth_at is None or time.monotonic() < self._reauth_at:
                return
            self.close()  # the SASL session is about to expire: a new one
        try:
            tls: dict[str, Any] = {} if self.ssl_context is None else {
                "ssl": self.ssl_context, "server_hostname": self.host,
                "ssl_handshake_timeout": timeout_s}
            loop = asyncio.get_running_loop()
            transport, protocol = await asyncio.wait_for(loop.create_connection(
                lambda: FrameProtocol(MAX_RESPONSE_BYTES), self.host, self.port, **tls),
                timeout_s)
            self._transport, self._protocol = transport, protocol
        except (TimeoutError, OSError) as e:  # ssl.SSLError is an OSError
            raise ChannelError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        if self.sasl is not None:
            await self._authenticate(self.sasl, timeout_s)

    async def _authenticate(self, sasl: SaslLogin, timeout_s: float) -> None:
        """SaslHandshake v1 and SaslAuthenticate v2 on the new connection."""
        where = f"{self.host}:{self.port}"
        hs = await self._call(api.ApiKey.SASL_HANDSHAKE, 1, {"mechanism": sasl.mechanism},
                              timeout_s)
        if hs.error_code != 0:
            self.close()
            raise ChannelError(f"SASL handshake with {where} failed: error "
                               f"{int(hs.error_code)}; it offers {', '.join(hs.mechanisms)}")
        exchange = sasl.exchange()
        token: bytes | None = next(exchange)
        lifetime_ms = 0
        while token is not None:
            resp = await self._call(api.ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token},
                                    timeout_s)
            if resp.error_code != 0:
                self.close()
                raise ChannelError(f"SASL {sasl.mechanism} authentication to {where} as "
                                   f"{sasl.username} failed: {resp.error_message}")
            lifetime_ms = int(resp.session_lifetime.total_seconds() * 1000)
            try:
                token = exchange.send(bytes(resp.auth_bytes))
            except StopIteration:
                token = None
            except ValueError as e:  # the server's answer does not verify
                self.close()
                raise ChannelError(f"SASL {sasl.mechanism} with {where}: {e}") from e
        self._reauth_at = None
        if lifetime_ms > 0:
            life_s = lifetime_ms / 1000
            self._reauth_at = time.monotonic() + min(life_s * 0.9, life_s - REAUTH_MARGIN_S)

    async def _call(self, api_key: int, version: int, data: dict[str, Any],
                    timeout_s: float) -> Any:
        """One request on the open connection, the lock already held."""
        frame = self._request_frame(api_key, version, data)
        response = await self._send_receive(frame[0], timeout_s)
        return self._decode_response(api_key, version, frame[1], response)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._transport = None
        self._protocol = None

    async def close_when_idle(self) -> None:
        """Close once the request in flight, if any, has its answer (or fails):
        for a channel being replaced whose last request must not be cut off."""
        async with self._lock:
            self.close()

    def _next_correlation_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        return self._correlation_id

    async def _round_trip(self, frame_without_size: bytes,
                          timeout_s: float) -> bytes | bytearray:
        async with self._lock:
            try:
                await self._connect(timeout_s)
                return await self._send_receive(frame_without_size, timeout_s)
            except (TimeoutError, OSError) as e:  # FrameError, a lost connection: OSError
                self.close()
                raise ChannelError(f"{self.host}:{self.port}: {type(e).__name__} {e}") from e
            except BaseException:
                self.close()
                raise

    async def _send_receive(self, frame_without_size: bytes,
                            timeout_s: float) -> bytes | bytearray:
        # locals: close() from another task may drop the attributes meanwhile
        transport, protocol = self._transport, self._protocol
        if transport is None or protocol is None:
            raise ChannelError(f"{self.host}:{self.port}: closed")
        transport.write(struct.pack(">i", len(frame_without_size)) + frame_without_size)
        # one timer for the whole exchange (wait_for made a task for each step)
        async with asyncio.timeout(timeout_s):
            await protocol.drain()
            return await protocol.next_frame()

    def _request_frame(self, api_key: int, version: int,
                       data: dict[str, Any]) -> tuple[bytes, int]:
        """(the request without its size prefix, its correlation id)"""
        request_cls = api.request_class(api_key, version)
        body = io.BytesIO()
        entity_writer(request_cls)(body, entities.build(request_cls, data))
        return self._frame_of(api_key, version, body.getvalue())

    def _frame_of(self, api_key: int, version: int, body: bytes) -> tuple[bytes, int]:
        corr = self._next_correlation_id()
        header = struct.pack(">hhih", api_key, version, corr, len(self.client_id)) + self.client_id
        if api.request_header_version(api_key, version) >= 2:
            header += b"\x00"
        return header + body, corr

    def _decode_response(self, api_key: int, version: int, corr: int,
                         frame: bytes | bytearray) -> Any:
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != corr:
            self.close()
            raise ChannelError(f"correlation id {got} answers {corr}")
        pos = 4 + (1 if api.response_header_version(api_key, version) >= 1 else 0)
        # kio reads read-only buffers: a large frame is a bytearray (frame_protocol.py)
        view = frame if type(frame) is bytes else memoryview(frame).toreadonly()
        return decode_message(api.response_class(api_key, version), view, pos)

    async def request(
        self, api_key: int, version: int, data: dict[str, Any], timeout_s: float = 10.0
    ) -> Any:
        """Send one request and return the decoded kio response."""
        frame, corr = self._request_frame(api_key, version, data)
        return self._decode_response(api_key, version, corr,
                                     await self._round_trip(frame, timeout_s))

    async def request_encoded(
        self, api_key: int, version: int, body: bytes, timeout_s: float = 10.0
    ) -> tuple[bytes | bytearray, int]:
        """A request whose body a hot path encoded itself, answered with the
        response frame and where its body starts, for that path's own decoder
        (the replica fetcher: `fetch_codec.encode_replica_fetch` and
        `decode_replica_fetch`)."""
        frame, corr = self._frame_of(api_key, version, body)
        response = await self._round_trip(frame, timeout_s)
        if len(response) < 4 or struct.unpack_from(">i", response, 0)[0] != corr:
            self.close()
            raise ChannelError(f"{self.host}:{self.port}: the answer is not to request {corr}")
        pos = 4
        if api.response_header_version(api_key, version) >= 1:
            pos = skip_tagged_fields(memoryview(response), pos)
        return response, pos


STOP_WAIT_S = 2.0


async def stop_tasks(tasks: list[asyncio.Task[None] | None], timeout_s: float = STOP_WAIT_S) -> None:
    """Cancel background tasks and wait for them, at most `timeout_s`."""
    live = [t for t in tasks if t is not None and not t.done()]
    for t in live:
        t.cancel()
    if live:
        await asyncio.wait(live, timeout=timeout_s)
