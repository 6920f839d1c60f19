"""A TCP proxy that can cut a link, for network-partition tests.

`PartitionProxy(listen_port, target_port)` forwards bytes both ways between
each accepted connection and the target on 127.0.0.1. `cut()` closes every
open connection and makes new ones close at once (a peer sees connection
reset / refused-like failures, as behind a partition); `heal()` forwards
again. Threads, one pair per connection; every socket has a timeout;
`close()` ends them all.
"""

from __future__ import annotations

import socket
import threading

from tests.integration.broker_proc import HOST

SOCKET_TIMEOUT_S = 60.0
CHUNK_BYTES = 65536


class PartitionProxy:
    def __init__(self, listen_port: int, target_port: int) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((HOST, listen_port))
        self._server.listen(64)
        self._server.settimeout(0.5)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            socks = list(self._open)
            self._open.clear()
        for s in socks:
            _close(s)

    def heal(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._server)
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                cut = self._cut
            if cut:
                _close(client)
                continue
            try:
                upstream = socket.create_connection((HOST, self.target_port), timeout=5)
            except OSError:
                _close(client)
                continue
            for s in (client, upstream):
                s.settimeout(SOCKET_TIMEOUT_S)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(CHUNK_BYTES)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
