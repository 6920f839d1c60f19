"""A fault-injecting TCP proxy between Kafka clients and one broker (tests only).

It forwards Kafka frames both ways and remembers which API each correlation
id belongs to, so it can act on the *response* to a request of a given API
after the broker has processed the request:

- ``drop_every`` > 0: every n-th response of ``api_key`` is not forwarded and
  the client connection is closed instead (the client sees the request fail
  and retries it; the broker has already applied it);
- ``delay_s``: each response of ``api_key`` is held that long before it goes on.

At most ``max_drops`` responses are dropped, so a test always ends. With
``record_requests`` it also keeps every request frame clients send, size
prefix included, in ``requests`` (the fuzzer's recorder, tests/fuzz/record.py). The
broker must advertise the proxy's address (``advertised.listeners``) so the
clients come back through it after bootstrap. Threads, one pair per
connection; every socket has a timeout and ``close()`` ends them all.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

from tests.integration.broker_proc import HOST

SOCKET_TIMEOUT_S = 60.0
MAX_FRAME_BYTES = 100 * 1024 * 1024


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > MAX_FRAME_BYTES:
        return None
    body = _read_exact(sock, size)
    return None if body is None else head + body


class FaultProxy:
    def __init__(self, listen_port: int, target_port: int, api_key: int = 0,
                 drop_every: int = 0, max_drops: int = 5, delay_s: float = 0.0,
                 record_requests: bool = False) -> None:
        self.target_port = target_port
        self.api_key = api_key
        self.drop_every = drop_every
        self.max_drops = max_drops
        self.delay_s = delay_s
        self.drops = 0
        self.responses_seen = 0
        self.record_requests = record_requests
        self.requests: list[bytes] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((HOST, listen_port))
        self._server.listen(64)
        self._server.settimeout(0.5)
        self.port = listen_port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection((HOST, self.target_port), timeout=10)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(SOCKET_TIMEOUT_S)
            with self._lock:
                self._sockets += [client, upstream]
            pending: dict[int, int] = {}
            threading.Thread(target=self._requests, args=(client, upstream, pending),
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(client, upstream, pending),
                             daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket,
                  pending: dict[int, int]) -> None:
        try:
            while True:
                frame = _read_frame(client)
                if frame is None:
                    break
                api_key, _version, correlation = struct.unpack_from(">hhi", frame, 4)
                pending[correlation] = api_key
                if self.record_requests:
                    with self._lock:
                        self.requests.append(frame)
                upstream.sendall(frame)
        except OSError:
            pass
        self._close_pair(client, upstream)

    def _responses(self, client: socket.socket, upstream: socket.socket,
                   pending: dict[int, int]) -> None:
        try:
            while True:
                frame = _read_frame(upstream)
                if frame is None:
                    break
                (correlation,) = struct.unpack_from(">i", frame, 4)
                if pending.pop(correlation, None) == self.api_key:
                    with self._lock:
                        self.responses_seen += 1
                        drop = (self.drop_every > 0 and self.drops < self.max_drops
                                and self.responses_seen % self.drop_every == 0)
                        if drop:
                            self.drops += 1
                    if drop:
                        break  # the broker applied it; the client never hears so
                    if self.delay_s:
                        time.sleep(self.delay_s)
                client.sendall(frame)
        except OSError:
            pass
        self._close_pair(client, upstream)

    @staticmethod
    def _close_pair(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._closed = True
        self._server.close()
        with self._lock:
            for s in self._sockets:
                try:
                    s.close()
                except OSError:
                    pass
