"""What one client can hold of a live broker: connections, idle time, request bytes.

Real broker processes, raw sockets. Connection limits are checked from two
source addresses (127.0.0.1 and 127.0.0.2, both loopback) so that
`max.connections.per.ip.overrides` has something to tell apart.
"""

from __future__ import annotations

import struct
import threading
import time
import urllib.request

import psutil
import pytest

from tests.integration.broker_proc import free_port
from tests.integration.clients import (
    Out,
    Wire,
    api_versions_v0,
    assert_broker_serves,
    ck_produce,
    create_topic,
    produce_request_v9,
    record_batch,
    wait_until,
)
from tests.integration.test_fetch_sessions import fetch_request_v12

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(180)]

MiB = 1 << 20
PRODUCE = 0
FETCH = 1


def _start(broker_factory, internal_port: int | None = None, **overrides: object):
    port = free_port()
    proc = broker_factory(overrides={"odradek.metrics.port": port, **overrides}, start=False)
    if internal_port is not None:  # a second listener, for inter-broker traffic
        proc.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{proc.port},"
                                       f"INTERNAL://127.0.0.1:{internal_port}")
    proc.start()
    proc.metrics_port = port
    # The harness's readiness probe is a connection too: wait until it is gone.
    wait_until(lambda: _metric(proc, "odradek_connections") == 0, timeout=10,
               desc="no open connections")
    return proc


def _metrics(proc) -> dict[str, float]:
    url = f"http://127.0.0.1:{proc.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _metric(proc, name: str) -> float:
    return _metrics(proc).get(name, 0.0)


def _served(w: Wire) -> bool:
    """The connection answers ApiVersions (False: the broker closed it)."""
    try:
        w.send_request(18, 0, 7, b"", header_version=1)
        frame = w.read_frame()
    except OSError:
        return False
    return frame is not None and struct.unpack_from(">ih", frame) == (7, 0)


def _open(proc, n: int, source_ip: str) -> list[Wire]:
    return [Wire(proc.bootstrap, source_ip=source_ip) for _ in range(n)]


def test_connections_over_the_per_ip_limit_are_closed_and_an_override_raises_it(
        broker_factory):
    proc = _start(broker_factory, **{"max.connections.per.ip": 3,
                                     "max.connections.per.ip.overrides": "127.0.0.2:5"})
    local = _open(proc, 3, "127.0.0.1")
    other = _open(proc, 5, "127.0.0.2")
    assert all(_served(w) for w in local + other)
    extra_local, extra_other = Wire(proc.bootstrap), Wire(proc.bootstrap, source_ip="127.0.0.2")
    assert extra_local.closed_by_peer(5) and extra_other.closed_by_peer(5)
    assert all(_served(w) for w in local + other)  # the admitted ones are untouched
    local.pop().close()  # a slot comes free once the broker sees the close
    wait_until(lambda: _metric(proc, "odradek_connections") == 7, timeout=10)
    again = Wire(proc.bootstrap)
    assert _served(again)
    m = _metrics(proc)
    key = 'odradek_connections_rejected_total{listener="PLAINTEXT",reason="%s"}'
    assert m[key % "max_connections_per_ip"] == 2
    assert "Rejected connection from 127.0.0.1, address already has the configured " \
           "maximum of 3 connections." in proc.log_tail(200_000)
    for w in [*local, *other, extra_local, extra_other, again]:
        w.close()


def test_max_connections_limits_the_broker_and_a_listener_limit_one_listener(broker_factory):
    internal_port = free_port()
    proc = _start(broker_factory, internal_port, **{
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
                                          "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": 3,
        "listener.name.plaintext.max.connections": 10,
        "listener.name.internal.max.connections": 2,
    })
    clients = _open(proc, 2, "127.0.0.1") + _open(proc, 1, "127.0.0.2")
    assert all(_served(w) for w in clients)
    refused = Wire(proc.bootstrap, source_ip="127.0.0.2")
    assert refused.closed_by_peer(5)
    # The inter-broker listener is exempt from max.connections: it is served, and
    # the least recently active client connections are closed to make room.
    for w in clients[1:]:
        time.sleep(0.01)
        assert _served(w)
    internal = [Wire(f"127.0.0.1:{internal_port}") for _ in range(2)]
    assert all(_served(w) for w in internal)
    assert clients[0].closed_by_peer(5) and clients[1].closed_by_peer(5)
    assert _served(clients[2])
    # ... but not from its own listener limit.
    assert Wire(f"127.0.0.1:{internal_port}").closed_by_peer(5)
    m = _metrics(proc)
    assert m['odradek_connections_rejected_total{listener="PLAINTEXT",'
             'reason="max_connections"}'] == 1
    assert m['odradek_connections_rejected_total{listener="INTERNAL",'
             'reason="listener_max_connections"}'] == 1
    assert m['odradek_connections_closed_total{listener="PLAINTEXT",'
             'reason="max_connections"}'] == 2
    for w in clients + internal:
        w.close()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(broker_factory):
    proc = _start(broker_factory, **{"connections.max.idle.ms": 1500})
    idle, busy = Wire(proc.bootstrap), Wire(proc.bootstrap)
    assert _served(idle) and _served(busy)
    started = time.monotonic()
    while time.monotonic() - started < 3.5:
        assert _served(busy)
        time.sleep(0.4)
    assert idle.closed_by_peer(0.1)
    assert _served(busy)
    assert _metric(proc, 'odradek_connections_closed_total{listener="PLAINTEXT",'
                         'reason="idle"}') == 1
    # An idle close comes between connections.max.idle.ms and one sweep later.
    late = Wire(proc.bootstrap)
    assert _served(late)
    opened = time.monotonic()
    assert late.closed_by_peer(5)
    assert 1.4 < time.monotonic() - opened < 2.5
    busy.close()


class RssSampler:
    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.baseline = self.proc.memory_info().rss
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.002)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak - self.baseline


def _flood(proc, connections: int, requests: int, record_bytes: int) -> int:
    """`connections` clients each pipeline `requests` Produce requests of about
    `record_bytes` to a topic that does not exist, reading no answer until all
    are sent; every answer must then come, in order. Returns the broker's peak
    RSS growth."""
    batch = record_batch([(None, b"x" * record_bytes)], int(time.time() * 1000))
    body = produce_request_v9("no-such-topic", 0, batch, acks=1)
    errors: list[BaseException] = []
    start = threading.Barrier(connections + 1)

    def client() -> None:
        try:
            with Wire(proc.bootstrap, timeout=120) as w:
                start.wait()
                for corr in range(requests):
                    w.send_request(PRODUCE, 9, corr, body, header_version=2)
                for corr in range(requests):
                    frame = w.read_frame()
                    assert frame is not None and struct.unpack_from(">i", frame)[0] == corr
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(connections)]
    for t in threads:
        t.start()
    rss = RssSampler(proc.pid)
    start.wait()
    for t in threads:
        t.join(150)
    growth = rss.stop()
    assert not errors, errors[:3]
    return growth


def test_queued_max_request_bytes_bounds_memory_under_a_flood_of_large_requests(
        broker_factory, record_property):
    limits = {"socket.request.max.bytes": MiB}
    bounded = _start(broker_factory, **limits, **{"queued.max.request.bytes": 4 * MiB})
    _flood(bounded, 4, 2, 1000)  # warm up: imports, caches, allocator arenas
    bounded_growth = _flood(bounded, 64, 8, 1_000_000)
    assert _metric(bounded, "odradek_queued_request_bytes") == 0
    assert_broker_serves(bounded.bootstrap)
    bounded.stop()
    unbounded = _start(broker_factory, **limits, **{"odradek.queued.max.request.bytes": -1})
    _flood(unbounded, 4, 2, 1000)
    unbounded_growth = _flood(unbounded, 64, 8, 1_000_000)
    unbounded.stop()
    record_property("rss_growth_bounded_mib", bounded_growth / MiB)
    record_property("rss_growth_unbounded_mib", unbounded_growth / MiB)
    print(f"peak RSS growth under 64 x 8 x 1 MB produce: queued.max.request.bytes=4 MiB "
          f"{bounded_growth / MiB:.1f} MiB, unbounded {unbounded_growth / MiB:.1f} MiB")
    # 4 MiB pool + one 256 KiB read per connection + the request being decoded.
    assert bounded_growth < 40 * MiB
    assert bounded_growth < unbounded_growth


def test_a_client_that_never_reads_responses_holds_little_and_is_closed_when_idle(
        broker_factory, topic_name, record_property):
    proc = _start(broker_factory, **{"connections.max.idle.ms": 3000})
    create_topic(proc.bootstrap, topic_name, 1)
    ck_produce(proc.bootstrap, topic_name,
               [Out(value=bytes([i]) * 200_000, partition=0) for i in range(10)])
    body = fetch_request_v12(topic_name, [(0, 0)], partition_max_bytes=MiB)
    rss = RssSampler(proc.pid)
    sink = Wire(proc.bootstrap, timeout=30)
    sent = 0
    sink.sock.settimeout(2)
    try:
        for corr in range(2000):  # 2000 answers of ~1 MiB if the broker buffered them
            sink.send_request(FETCH, 12, corr, body, header_version=2)
            sent += 1
    except TimeoutError:
        pass  # the broker stopped reading us: that is the point
    time.sleep(1.0)
    assert_broker_serves(proc.bootstrap)  # others are served meanwhile
    growth = rss.stop()
    record_property("rss_growth_slow_reader_mib", growth / MiB)
    print(f"a client that never reads: {sent} fetches sent, broker RSS +{growth / MiB:.1f} MiB")
    assert growth < 32 * MiB
    # Nothing read or written for connections.max.idle.ms: closed, unread answers dropped.
    assert sink.closed_by_peer(10)
    assert _metric(proc, 'odradek_connections_closed_total{listener="PLAINTEXT",'
                         'reason="idle"}') >= 1
    assert api_versions_v0(proc.bootstrap) == (1, 0)
