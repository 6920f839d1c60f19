"""A cheap produce load: pre-encoded Produce requests, pipelined, from one process.

    python bench/rawload.py --bootstrap 127.0.0.1:9092 --topic t --seconds 10
    python bench/rawload.py --bootstrap 127.0.0.1:9092 --topic t --records 1000000 \\
        --size 1024 --batch 100 --connections 2 --in-flight 4

Why: a librdkafka producer spends about 2 µs of its own CPU per 1 KiB record, as much
as the broker, so on a small machine the client, not the broker, sets the pace. Here the
records are encoded once: one v2 record batch of --batch records of --size bytes (no
producer id, so no idempotence and no sequence numbers: the broker takes the same batch
bytes again and again, as it would from a producer that retries), wrapped once per
partition in a Produce v7 request (acks --acks, no transactional id). Sending one costs a
12-byte prefix (length, api key, version, correlation id) and a writev of the prefix and
the shared body; the client's CPU per record is a small fraction of the broker's.

Topology: the topic's partition leaders come from one Metadata call (confluent-kafka's
AdminClient). Each of --connections connections per leader sends its broker's partitions
in turn, one partition per request (so a request carries the same records whatever the
number of brokers), with at most --in-flight requests outstanding. Every response is read
and every partition's error code checked; a non-zero code counts as an error (its
records are not counted as written) and the first one is reported.

It stops after --seconds or once --records records are acknowledged, whichever first,
and reports the records and bytes acknowledged per second and its own CPU (user+system,
getrusage). `raw_producer_proc` is the same for bench/host.py (a spawn process with the
go/out protocol of bench/run.py's producer_proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import selectors
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from odradek.protocol.records import write_varint
from odradek.spark.batch_encode import now_ms, record_batch

PRODUCE_KEY, PRODUCE_VERSION = 0, 7
CLIENT_ID = b"rawload"
_PREFIX = struct.Struct(">ihhi")  # length, api key, api version, correlation id
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_PARTITION_V7 = struct.Struct(">ihqqq")  # index, error, base offset, append time, start


def _rusage_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def encode_batch(size: int, count: int) -> bytes:
    """One v2 record batch of `count` records with `size`-byte random values, no key."""
    value = os.urandom(size)
    blob = bytearray()
    for i in range(count):
        body = bytearray(b"\x00")  # attributes
        write_varint(body, 0)  # timestamp delta
        write_varint(body, i)  # offset delta
        write_varint(body, -1)  # null key
        write_varint(body, size)
        body += value
        write_varint(body, 0)  # no headers
        write_varint(blob, len(body))
        blob += body
    return record_batch(bytes(blob), count, timestamp_ms=now_ms())


def produce_body(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int) -> bytes:
    """A Produce v7 request after the correlation id: client id, transactional id (null),
    acks, timeout, one topic with one partition and its records."""
    name = topic.encode()
    return b"".join([
        _I16.pack(len(CLIENT_ID)), CLIENT_ID, _I16.pack(-1), _I16.pack(acks),
        _I32.pack(timeout_ms), _I32.pack(1), _I16.pack(len(name)), name, _I32.pack(1),
        _I32.pack(partition), _I32.pack(len(batch)), batch])


def produce_errors(resp: memoryview) -> list[int]:
    """The partition error codes of a Produce v7 response body (after the correlation id)."""
    pos, codes = 4, []
    for _ in range(_I32.unpack_from(resp, 0)[0]):
        pos += 2 + _I16.unpack_from(resp, pos)[0]
        n = _I32.unpack_from(resp, pos)[0]
        pos += 4
        for _ in range(n):
            codes.append(_PARTITION_V7.unpack_from(resp, pos)[1])
            pos += _PARTITION_V7.size
    return codes


def leaders(bootstrap: str, topic: str) -> dict[tuple[str, int], list[int]]:
    """(host, port) of each leader of `topic` -> the partitions it leads."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    t = md.topics[topic]
    if t.error is not None:
        raise RuntimeError(f"{topic}: {t.error}")
    out: dict[tuple[str, int], list[int]] = {}
    for p in sorted(t.partitions.values(), key=lambda p: p.id):
        b = md.brokers[p.leader]
        out.setdefault((b.host, b.port), []).append(p.id)
    return out


class Stats:
    def __init__(self) -> None:
        self.acked = 0  # records
        self.requests = 0
        self.errors = 0
        self.first_error: str | None = None
        self.sent = 0  # records sent (acked or not)
        self.lock = threading.Lock()  # the fetch threads


async def _connection(addr: tuple[str, int], bodies: list[bytes], per_request: int,
                      in_flight: int, stats: Stats, budget: list[int], stop_at: float) -> None:
    reader, writer = await asyncio.open_connection(*addr)
    slots = asyncio.Semaphore(in_flight)
    outstanding: dict[int, None] = {}
    done_sending = asyncio.Event()

    async def read_loop() -> None:
        try:
            await read_responses()
        except (OSError, asyncio.IncompleteReadError, RuntimeError) as e:
            stats.errors += 1
            stats.first_error = stats.first_error or f"connection {addr}: {e!r}"
            for _ in range(in_flight):  # unblock the sender, which then stops
                slots.release()

    async def read_responses() -> None:
        while outstanding or not done_sending.is_set():
            head = await reader.readexactly(4)
            resp = memoryview(await reader.readexactly(_I32.unpack(head)[0]))
            corr = _I32.unpack_from(resp, 0)[0]
            if corr not in outstanding:
                raise RuntimeError(f"unexpected correlation id {corr}")
            del outstanding[corr]
            codes = produce_errors(resp[4:])
            bad = [c for c in codes if c != 0]
            stats.requests += 1
            if bad:
                stats.errors += 1
                if stats.first_error is None:
                    stats.first_error = f"error code {bad[0]}"
            else:
                stats.acked += per_request
            slots.release()

    reader_task = asyncio.create_task(read_loop())
    corr = 0
    try:
        while time.time() < stop_at and budget[0] > 0:
            await slots.acquire()
            if reader_task.done() or budget[0] <= 0:
                break
            budget[0] -= per_request
            body = bodies[corr % len(bodies)]
            outstanding[corr] = None
            writer.writelines([_PREFIX.pack(len(body) + 8, PRODUCE_KEY, PRODUCE_VERSION, corr),
                               body])
            stats.sent += per_request
            corr += 1
            if writer.transport.get_write_buffer_size() > 4 << 20:
                await writer.drain()
        done_sending.set()
        if not outstanding:
            reader_task.cancel()
        await asyncio.wait_for(reader_task, max(1.0, stop_at + 30 - time.time()))
    except asyncio.CancelledError:
        pass
    finally:
        writer.close()


async def run_load(bootstrap: str, topic: str, *, size: int, batch: int, acks: int,
                   connections: int, in_flight: int, seconds: float,
                   records: int | None, go: Any = None) -> dict[str, Any]:
    placement = leaders(bootstrap, topic)
    one_batch = encode_batch(size, batch)
    stats = Stats()
    budget = [records if records is not None else 1 << 62]
    if go is not None:
        await asyncio.get_running_loop().run_in_executor(None, go.wait, 60)
    cpu0, t0 = _rusage_s(), time.time()
    stop_at = t0 + seconds
    tasks = []
    for addr, parts in placement.items():
        bodies = [produce_body(topic, p, one_batch, acks, 30000) for p in parts]
        for c in range(connections):
            mine = bodies[c % len(bodies):] + bodies[:c % len(bodies)]
            tasks.append(asyncio.create_task(_connection(
                addr, mine, batch, in_flight, stats, budget, stop_at)))
    await asyncio.gather(*tasks)
    t1, cpu1 = time.time(), _rusage_s()
    wall = t1 - t0
    return {"role": "producer", "start": t0, "end": t1, "wall_s": round(wall, 3),
            "cpu_s": cpu1 - cpu0, "sent": stats.acked, "records_sent": stats.sent,
            "requests": stats.requests, "errors": stats.errors,
            "first_error": stats.first_error, "unacked": stats.sent - stats.acked,
            "timed_out": records is not None and stats.acked < records,
            "records_per_s": round(stats.acked / wall),
            "mb_per_s": round(stats.acked * size / wall / 1e6, 1),
            "client_cpu_cores": round((cpu1 - cpu0) / wall, 3),
            "client_cpu_us_per_record": round((cpu1 - cpu0) / max(1, stats.acked) * 1e6, 3),
            "brokers": len(placement), "connections": len(tasks),
            "batch_bytes": len(one_batch)}


# -- the consume side ---------------------------------------------------------------------

FETCH_KEY, FETCH_VERSION = 1, 4
_FETCH_PARTITION = struct.Struct(">iqi")  # index, fetch offset, partition max bytes
_FETCH_ANSWER = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (after these 12 bytes)
_LAST_DELTA_AT, _COUNT_AT = 23, 57


def fetch_body(topic: str, partition: int, offset: int, max_bytes: int) -> bytes:
    """A Fetch v4 request after the correlation id: a consumer's (replica -1), 500 ms
    wait, min 1 byte, read_uncommitted, one partition."""
    name = topic.encode()
    return b"".join([
        _I16.pack(len(CLIENT_ID)), CLIENT_ID, struct.pack(">iiiib", -1, 500, 1, max_bytes, 0),
        _I32.pack(1), _I16.pack(len(name)), name, _I32.pack(1),
        _FETCH_PARTITION.pack(partition, offset, max_bytes)])


def fetch_answer(resp: memoryview) -> tuple[int, int, int, int]:
    """(error code, high watermark, records, next offset or -1) of a one-partition Fetch v4
    response body (after the correlation id). Whole batches only: a batch cut at the end
    of the answer is read again from its base offset by the next fetch."""
    pos = 4 + 4  # throttle, topic count
    pos += 2 + _I16.unpack_from(resp, pos)[0] + 4  # topic name, partition count
    _index, error, hw, _lso = _FETCH_ANSWER.unpack_from(resp, pos)
    pos += _FETCH_ANSWER.size
    aborted = _I32.unpack_from(resp, pos)[0]
    pos += 4 + max(0, aborted) * 16
    size = _I32.unpack_from(resp, pos)[0]
    pos += 4
    end, records, next_offset = pos + max(0, size), 0, -1
    while pos + 12 <= end:
        base, length = _BATCH_HEAD.unpack_from(resp, pos)
        if pos + 12 + length > end:
            break
        records += _I32.unpack_from(resp, pos + _COUNT_AT)[0]
        next_offset = base + _I32.unpack_from(resp, pos + _LAST_DELTA_AT)[0] + 1
        pos += 12 + length
    return error, hw, records, next_offset


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("connection closed")
        got += n


def _fetch_connection(addr: tuple[str, int], topic: str, partition: int, max_bytes: int,
                      stats: Stats, stop_at: float) -> None:
    """Read `partition` from offset 0 up to the high watermark of the first answer.
    A blocking socket in a thread, each answer received into one reused buffer
    (recv_into, which releases the GIL): one copy, the kernel's, per byte received."""
    buf = bytearray(max_bytes + (1 << 16))
    head = bytearray(4)
    offset, end, corr = 0, -1, 0
    with socket.create_connection(addr) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while time.time() < stop_at and (end < 0 or offset < end):
            body = fetch_body(topic, partition, offset, max_bytes)
            sock.sendall(_PREFIX.pack(len(body) + 8, FETCH_KEY, FETCH_VERSION, corr) + body)
            _recv_exactly(sock, memoryview(head))
            size = _I32.unpack(head)[0]
            if size > len(buf):
                buf = bytearray(size)
            resp = memoryview(buf)[:size]
            _recv_exactly(sock, resp)
            if _I32.unpack_from(resp, 0)[0] != corr:
                raise RuntimeError("unexpected correlation id")
            corr += 1
            error, hw, records, next_offset = fetch_answer(resp[4:])
            with stats.lock:
                stats.requests += 1
                if error:
                    stats.errors += 1
                    stats.first_error = stats.first_error or f"fetch error code {error}"
                    return
                if next_offset > offset:
                    stats.acked += records
            end = hw if end < 0 else end
            offset = max(offset, next_offset)


async def run_fetch(bootstrap: str, topic: str, *, max_bytes: int, seconds: float,
                    size: int, go: Any = None) -> dict[str, Any]:
    """One connection (and thread) per partition, each reading its partition from 0 to
    its high watermark, one Fetch in flight at a time."""
    placement = leaders(bootstrap, topic)
    stats = Stats()
    loop = asyncio.get_running_loop()
    if go is not None:
        await loop.run_in_executor(None, go.wait, 60)
    cpu0, t0 = _rusage_s(), time.time()
    threads = [threading.Thread(target=_fetch_connection,
                                args=(addr, topic, p, max_bytes, stats, t0 + seconds))
               for addr, parts in placement.items() for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        await loop.run_in_executor(None, t.join)
    t1, cpu1 = time.time(), _rusage_s()
    wall = t1 - t0
    return {"role": "consumer", "start": t0, "end": t1, "wall_s": round(wall, 3),
            "cpu_s": cpu1 - cpu0, "received": stats.acked, "requests": stats.requests,
            "errors": stats.errors, "first_error": stats.first_error,
            "records_per_s": round(stats.acked / wall),
            "mb_per_s": round(stats.acked * size / wall / 1e6, 1),
            "client_cpu_us_per_record": round((cpu1 - cpu0) / max(1, stats.acked) * 1e6, 3)}


def _read_frame(sock: socket.socket, buf: bytearray) -> memoryview:
    head = bytearray(4)
    _recv_exactly(sock, memoryview(head))
    size = _I32.unpack(head)[0]
    if size > len(buf):
        raise RuntimeError(f"answer of {size} bytes")
    view = memoryview(buf)[:size]
    _recv_exactly(sock, view)
    return view


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    """n, p50, p99, p99.9 and max of latency samples in ms."""
    xs = sorted(samples_ms)
    if not xs:
        return {}

    def at(q: float) -> float:
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)

    return {"n": len(xs), "p50_ms": at(0.5), "p99_ms": at(0.99), "p99.9_ms": at(0.999),
            "max_ms": round(xs[-1], 3)}


def run_probe(bootstrap: str, topic: str, *, count: int, size: int, acks: int,
              park_ms: float, parked: bool = True) -> dict[str, Any]:
    """What the broker adds to a record's trip, without a client library: a Fetch is
    parked at the log end of partition 0 (sent `park_ms` before the record), then one
    pre-encoded record is produced on another connection; the clock runs from the
    produce's send to its acknowledgement (produce) and to the parked Fetch's answer
    carrying the record (e2e). One record at a time, `count` times. With parked=False
    the broker is idle for `park_ms` before the produce and the Fetch goes after the
    produce's answer: the same idle gap without a parked Fetch to wake."""
    addr, parts = next((a, p) for a, p in leaders(bootstrap, topic).items() if 0 in p)
    del parts
    body = produce_body(topic, 0, encode_batch(size, 1), acks, 30000)
    buf = bytearray(2 << 20)
    produce_ms: list[float] = []
    e2e_ms: list[float] = []
    with socket.create_connection(addr) as prod, socket.create_connection(addr) as cons:
        sel = selectors.DefaultSelector()
        for sock in (prod, cons):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sel.register(sock, selectors.EVENT_READ)
        # the log end offset: fetch from 0 until an answer comes back empty
        offset = 0
        for corr in range(1 << 30):
            fb = fetch_body(topic, 0, offset, 1 << 20).replace(
                struct.pack(">iii", -1, 500, 1), struct.pack(">iii", -1, 0, 1), 1)
            cons.sendall(_PREFIX.pack(len(fb) + 8, FETCH_KEY, FETCH_VERSION, corr) + fb)
            _err, hw, _n, nxt = fetch_answer(_read_frame(cons, buf)[4:])
            if nxt < 0 or nxt >= hw:
                offset = max(offset, nxt, hw)
                break
            offset = nxt
        corr = 1 << 20
        for _ in range(count):
            fb = fetch_body(topic, 0, offset, 1 << 20)
            fetch = _PREFIX.pack(len(fb) + 8, FETCH_KEY, FETCH_VERSION, corr) + fb
            if parked:
                cons.sendall(fetch)
            time.sleep(park_ms / 1000)
            t0 = time.perf_counter()
            prod.sendall(_PREFIX.pack(len(body) + 8, PRODUCE_KEY, PRODUCE_VERSION, corr) + body)
            if not parked:  # the produce's answer first, then a fetch that finds the record
                codes = produce_errors(_read_frame(prod, buf)[4:])
                t_ack = time.perf_counter()
                cons.sendall(fetch)
                answer = fetch_answer(_read_frame(cons, buf)[4:])
                t_fetch = time.perf_counter()
            else:  # both answers, each timed when it arrives, whichever comes first
                waiting = {prod, cons}
                while waiting:
                    for key, _ in sel.select():
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        frame = _read_frame(sock, buf)[4:]
                        now = time.perf_counter()
                        waiting.discard(sock)
                        if sock is prod:
                            codes, t_ack = produce_errors(frame), now
                        else:
                            answer, t_fetch = fetch_answer(frame), now
            error, _hw, n, nxt = answer
            if error or n < 1:
                raise RuntimeError(f"fetch answer: error {error}, {n} records")
            offset = nxt
            if any(codes):
                raise RuntimeError(f"produce error codes {codes}")
            corr += 1
            e2e_ms.append((t_fetch - t0) * 1000)
            produce_ms.append((t_ack - t0) * 1000)
    return {"count": count, "size": size, "acks": acks, "park_ms": park_ms, "parked": parked,
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "produce": percentiles(produce_ms), "e2e": percentiles(e2e_ms)}


def raw_consumer_proc(bootstrap: str, topic: str, size: int, max_bytes: int,
                      deadline: float, go: Any, out: Any) -> None:
    """bench/host.py's entry: read the whole topic once."""
    out.put(_event_loop().run_until_complete(run_fetch(
        bootstrap, topic, max_bytes=max_bytes, seconds=max(1.0, deadline - time.time()),
        size=size, go=go)))


def _event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()


def raw_producer_proc(bootstrap: str, topic: str, count: int, size: int, acks: str,
                      deadline: float, go: Any, out: Any, batch: int, connections: int,
                      in_flight: int) -> None:
    """bench/host.py's entry: `count` records, until `deadline` at most."""
    loop = _event_loop()
    res = loop.run_until_complete(run_load(
        bootstrap, topic, size=size, batch=batch, acks=-1 if acks == "all" else int(acks),
        connections=connections, in_flight=in_flight,
        seconds=max(1.0, deadline - time.time()), records=count, go=go))
    out.put(res)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--size", type=int, default=1024, help="bytes per record value")
    ap.add_argument("--batch", type=int, default=100, help="records per batch (request)")
    ap.add_argument("--acks", type=int, default=1)
    ap.add_argument("--connections", type=int, default=2, help="per partition leader")
    ap.add_argument("--in-flight", type=int, default=4, help="requests per connection")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--fetch", action="store_true",
                    help="read the topic from offset 0 to its high watermark instead")
    ap.add_argument("--fetch-bytes", type=int, default=1 << 20,
                    help="--fetch: max bytes per Fetch answer")
    ap.add_argument("--probe", type=int, default=0, metavar="N",
                    help="latency probe instead: N records one at a time into partition 0, "
                         "each read by a Fetch parked before it (--size bytes, --acks)")
    ap.add_argument("--park-ms", type=float, default=2.0,
                    help="--probe: how long before the record its Fetch is sent")
    args = ap.parse_args()
    if args.probe:
        print(json.dumps(run_probe(args.bootstrap, args.topic, count=args.probe,
                                   size=args.size, acks=args.acks, park_ms=args.park_ms)))
        return 0
    if args.fetch:
        res = _event_loop().run_until_complete(run_fetch(
            args.bootstrap, args.topic, max_bytes=args.fetch_bytes, seconds=args.seconds,
            size=args.size))
        print(json.dumps(res))
        return 1 if res["errors"] else 0
    res = _event_loop().run_until_complete(run_load(
        args.bootstrap, args.topic, size=args.size, batch=args.batch, acks=args.acks,
        connections=args.connections, in_flight=args.in_flight, seconds=args.seconds,
        records=args.records))
    print(json.dumps(res))
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
