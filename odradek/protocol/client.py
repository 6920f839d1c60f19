"""A small Kafka wire client for broker-to-broker and broker-to-controller calls.

One `KafkaChannel` is one TCP connection to one node, used for one request at
a time (a lock orders them): requests are built from dicts with kio's
classes (`protocol/entities.py`), responses come back as kio objects. Every
call has a timeout; a failed or timed-out call closes the connection and the
next call reconnects. With an `ssl_context` the connection is TLS (the server
name sent and, if the context checks host names, verified is `host`).
"""

from __future__ import annotations

import asyncio
import io
import ssl
import struct
from typing import Any

from kio.serial import entity_writer

from . import api, entities
from .guard import decode_message

CLIENT_ID = b"odradek-broker"
# A response larger than this closes the connection (a bound on memory).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class ChannelError(Exception):
    pass


class KafkaChannel:
    def __init__(self, host: str, port: int, client_id: bytes = CLIENT_ID,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.ssl_context = ssl_context
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._correlation_id = 0

    def __repr__(self) -> str:
        return f"KafkaChannel({self.host}:{self.port})"

    async def _connect(self, timeout_s: float) -> None:
        if self._writer is not None and not self._writer.is_closing():
            return
        try:
            tls: dict[str, Any] = {} if self.ssl_context is None else {
                "ssl": self.ssl_context, "server_hostname": self.host,
                "ssl_handshake_timeout": timeout_s}
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20, **tls), timeout_s
            )
        except (TimeoutError, OSError) as e:  # ssl.SSLError is an OSError
            raise ChannelError(f"cannot connect to {self.host}:{self.port}: {e}") from e

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self._reader = None

    def _next_correlation_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        return self._correlation_id

    async def _round_trip(self, frame_without_size: bytes, timeout_s: float) -> bytes:
        async with self._lock:
            try:
                await self._connect(timeout_s)
                # locals: close() from another task may drop the attributes meanwhile
                reader, writer = self._reader, self._writer
                if reader is None or writer is None:
                    raise ChannelError(f"{self.host}:{self.port}: closed")
                writer.write(struct.pack(">i", len(frame_without_size)) + frame_without_size)
                await asyncio.wait_for(writer.drain(), timeout_s)
                size_bytes = await asyncio.wait_for(reader.readexactly(4), timeout_s)
                (size,) = struct.unpack(">i", size_bytes)
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    raise ChannelError(f"bad response size {size}")
                return await asyncio.wait_for(reader.readexactly(size), timeout_s)
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
                self.close()
                raise ChannelError(f"{self.host}:{self.port}: {type(e).__name__} {e}") from e
            except BaseException:
                self.close()
                raise

    async def request(
        self, api_key: int, version: int, data: dict[str, Any], timeout_s: float = 10.0
    ) -> Any:
        """Send one request and return the decoded kio response."""
        request_cls = api.request_class(api_key, version)
        body = io.BytesIO()
        entity_writer(request_cls)(body, entities.build(request_cls, data))
        corr = self._next_correlation_id()
        header = struct.pack(">hhih", api_key, version, corr, len(self.client_id)) + self.client_id
        if api.request_header_version(api_key, version) >= 2:
            header += b"\x00"
        frame = await self._round_trip(header + body.getvalue(), timeout_s)
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != corr:
            self.close()
            raise ChannelError(f"correlation id {got} answers {corr}")
        pos = 4 + (1 if api.response_header_version(api_key, version) >= 1 else 0)
        response = decode_message(api.response_class(api_key, version), frame, pos)
        return response


STOP_WAIT_S = 2.0


async def stop_tasks(tasks: list[asyncio.Task[None] | None], timeout_s: float = STOP_WAIT_S) -> None:
    """Cancel background tasks and wait for them, at most `timeout_s`."""
    live = [t for t in tasks if t is not None and not t.done()]
    for t in live:
        t.cancel()
    if live:
        await asyncio.wait(live, timeout=timeout_s)
