"""Send mutated frames to a live broker and check it survives them.

Theory of operation
-------------------
`run` starts one odradek broker (tests/integration/broker_proc.py), creates
the corpus's topics and replays the corpus once unmutated, so groups,
producers and partitions exist. Then ``CONNECTIONS`` workers share the frame
indexes 0..frames-1; frame i is ``Mutator.mutate(frame_rng(seed, i))``, so
any frame can be rebuilt from (seed, i) alone. A worker sends its frame and,
right behind it, an ApiVersions v0 probe with ``PROBE_CORRELATION``:
responses come in request order, so the probe's answer means the frame was
answered (or, for acks=0 Produce, taken); end of stream means the broker
closed the connection, and the worker reconnects. A frame whose size prefix
was mutated too is sent alone and the write side shut: the broker must close
the connection. Neither within ``HANG_TIMEOUT_S`` is a hang, except for the
APIs that may legitimately park a request (``LONG_POLL_APIS``: a Fetch whose
max wait became 2**31 ms waits as long in Kafka too), which are only counted.
An UnregisterBroker naming the fuzzed broker's own node id is not sent (counted
as ``self_unregisters``): it is a valid operator request that takes the broker
out of the cluster, and, as in Kafka (whose broker never registers again after
it), the broker then no longer leads its partitions, which the final produce
would read as a failure the frame did not cause by being malformed.

After every ``BATCH_FRAMES`` frames: the broker process must be alive,
answer ApiVersions and Metadata on a fresh connection, and its RSS stay
below baseline + ``rss_bound_mb``. At the end: a real produce and consume
with confluent-kafka, a SIGTERM that must stop the broker in time, and
``odradek dump-log --verify --deep-iteration`` over every segment it wrote.
Any failure names the seed and the offending frames (hex, and a repro file
in the corpus format, replayable with ``scripts/fuzz --replay FILE``).

Also reported, not failed: frames that decode cleanly here (kio and the
guard) yet made the broker close the connection, by API -- usually a
handler that raised; the broker log's tracebacks are counted the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import psutil

from odradek.protocol import api, entities
from odradek.protocol.framing import parse_request_header
from odradek.protocol.guard import decode_message
from tests.fuzz.corpus import (
    BROKER_OVERRIDES,
    CORPUS_PATH,
    FUZZ_NODE_ID,
    RUNNER_TOPICS,
    read_frames,
    write_frames,
)
from tests.fuzz.mutate import Mutant, Mutator, frame_rng
from tests.integration.broker_proc import HOST, BrokerProcess

CONNECTIONS = 8
BATCH_FRAMES = 2000
HANG_TIMEOUT_S = 10.0
SLOW_TIMEOUT_S = 180.0
CONNECT_TIMEOUT_S = 10.0
DEFAULT_RSS_BOUND_MB = 400
PROBE_CORRELATION = 0x0DDBA11
# APIs that may take longer than HANG_TIMEOUT_S without the broker being stuck: long
# polls (a Fetch whose max wait became 2**31 ms waits as long in Kafka too), and
# creations of up to 10,000 partitions (files made off the event loop, answered when
# done or at the request's timeout_ms, which a mutation may make huge). A timeout of
# one of these is counted as parked, after checking the broker is alive; the health
# check every BATCH_FRAMES frames proves its event loop still answers.
LONG_POLL_APIS = frozenset({api.ApiKey.FETCH, api.ApiKey.JOIN_GROUP, api.ApiKey.SYNC_GROUP,
                            api.ApiKey.CREATE_TOPICS, api.ApiKey.CREATE_PARTITIONS})
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
SUSPECT_SAMPLES_PER_API = 5

_I32 = struct.Struct(">i")
# ApiVersions v0 with request header v1, client id "fuzz-probe".
_PROBE_BODY = struct.pack(">hhih", 18, 0, PROBE_CORRELATION, 10) + b"fuzz-probe"
PROBE = _I32.pack(len(_PROBE_BODY)) + _PROBE_BODY


class FuzzFailure(AssertionError):
    pass


@dataclass
class Stats:
    frames: int = 0
    answered: int = 0
    closed: int = 0
    parked: int = 0
    slow: int = 0
    connections: int = 0
    self_unregisters: int = 0
    peak_rss_bytes: int = 0
    baseline_rss_bytes: int = 0
    suspects: dict[int, list[bytes]] = field(default_factory=dict)
    suspect_counts: Counter[int] = field(default_factory=Counter)


def _unregisters_self(m: Mutant) -> bool:
    """A well-formed UnregisterBroker naming the fuzzed broker (see the module doc)."""
    if m.api_key != api.ApiKey.UNREGISTER_BROKER or _decodes_cleanly(m.wire) is None:
        return False
    body = m.wire[4:]
    header = parse_request_header(body)
    req = decode_message(api.request_class(header.api_key, header.api_version), body,
                         header.body_offset)
    return bool(req.broker_id == FUZZ_NODE_ID)


def _decodes_cleanly(wire: bytes) -> int | None:
    """The api key when this frame is a well-formed request odradek speaks."""
    body = wire[4:]
    if _I32.unpack_from(wire, 0)[0] != len(body):
        return None
    try:
        header = parse_request_header(body)
        if not api.is_supported(header.api_key, header.api_version):
            return None
        req = decode_message(api.request_class(header.api_key, header.api_version), body,
                             header.body_offset)
    except Exception:  # noqa: BLE001 - whatever kio raises, it is not well-formed
        return None
    if entities.find_illegal_null(req) is not None:
        return None
    return header.api_key


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
        (size,) = _I32.unpack(head)
        if size < 0 or size > MAX_RESPONSE_BYTES:
            raise FuzzFailure(f"response frame of {size} bytes")
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(asyncio.open_connection(HOST, port), CONNECT_TIMEOUT_S)


def _close(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None:
        with contextlib.suppress(Exception):
            writer.transport.abort()


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   m: Mutant, on_slow: Callable[[], Awaitable[None]] | None = None) -> str:
    """Send one frame (and the probe): 'answered' (connection still usable),
    'closed', 'slow' (answered or closed after HANG_TIMEOUT_S, while `on_slow`, the
    health check, found the broker serving others), or 'timeout'."""
    if m.size_consistent:
        writer.write(m.wire + PROBE)
    else:
        writer.write(m.wire)
        writer.write_eof()
    try:
        await writer.drain()
    except ConnectionError:
        return "closed"

    async def until_probe_or_eof() -> str:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return "closed"
            if (m.size_consistent and len(frame) >= 4
                    and _I32.unpack_from(frame, 0)[0] == PROBE_CORRELATION):
                return "answered"

    task = asyncio.ensure_future(until_probe_or_eof())
    done, _ = await asyncio.wait({task}, timeout=HANG_TIMEOUT_S)
    if done:
        return task.result()
    if on_slow is not None:
        # A request may wait its turn behind a long one (a CreatePartitions of
        # thousands of partitions holds the controller's metadata lock while this
        # node makes the logs): slow, not hung, if the broker serves others meanwhile
        # and this one is answered within SLOW_TIMEOUT_S.
        await on_slow()
        done, _ = await asyncio.wait({task}, timeout=SLOW_TIMEOUT_S - HANG_TIMEOUT_S)
        if done:
            return "slow"
    task.cancel()
    return "timeout"


class Runner:
    def __init__(self, broker: BrokerProcess, mutator: Mutator, seed: int,
                 rss_bound_mb: int = DEFAULT_RSS_BOUND_MB, out_dir: Path | None = None,
                 connections: int = CONNECTIONS) -> None:
        self.broker = broker
        self.mutator = mutator
        self.seed = seed
        self.rss_bound_bytes = rss_bound_mb * 1024 * 1024
        self.out_dir = out_dir or Path(tempfile.gettempdir())
        self.connections = connections
        self.stats = Stats()
        self.in_flight: dict[int, tuple[int, Mutant]] = {}
        self._next = 0
        self._end = 0
        assert broker.pid is not None
        self.process = psutil.Process(broker.pid)

    # -- failures ----------------------------------------------------------------
    def fail(self, kind: str, suspects: list[tuple[int, Mutant]], detail: str = "") -> NoReturn:
        path = self.out_dir / f"odradek-fuzz-{kind}-seed{self.seed}-{os.getpid()}.bin"
        write_frames(path, [m.wire for _, m in suspects])
        lines = [f"FUZZ FAILURE: {kind} (seed {self.seed}) {detail}".rstrip()]
        for index, m in suspects:
            lines.append(f"  frame {index} ({api.api_name(m.api_key)}, ops {m.ops}): "
                         f"{m.wire.hex()}")
        lines.append(f"  replay: scripts/fuzz --replay {path}")
        lines.append(f"  broker log: {self.broker.log_path}")
        raise FuzzFailure("\n".join(lines))

    def alive_or_fail(self) -> None:
        if not self.broker.is_running():
            self.fail("death", sorted(self.in_flight.values(), key=lambda s: s[0]),
                      f"broker exited with {self.broker.proc.returncode if self.broker.proc else '?'}")

    async def _worker(self, wid: int) -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        try:
            while self._next < self._end:
                index = self._next
                self._next += 1
                m = self.mutator.mutate(frame_rng(self.seed, index))
                if _unregisters_self(m):
                    self.stats.self_unregisters += 1
                    continue
                if writer is None:
                    reader, writer = await _connect(self.broker.port)
                    self.stats.connections += 1
                assert reader is not None
                self.in_flight[wid] = (index, m)
                outcome = await exchange(reader, writer, m, self.health)
                self.stats.frames += 1
                if outcome == "slow":
                    self.stats.slow += 1
                    _close(writer)
                    reader = writer = None
                    continue
                if outcome == "answered" and m.size_consistent:
                    self.stats.answered += 1
                    continue
                _close(writer)
                reader = writer = None
                if outcome == "timeout":
                    self.alive_or_fail()
                    if m.api_key in LONG_POLL_APIS:
                        self.stats.parked += 1
                        continue
                    self.fail("hang", [(index, m)],
                              f"no answer and no close within {HANG_TIMEOUT_S:.0f}s")
                self.stats.closed += 1
                if not self.broker.is_running():
                    self.alive_or_fail()
                key = _decodes_cleanly(m.wire)
                if key is not None:
                    self.stats.suspect_counts[key] += 1
                    samples = self.stats.suspects.setdefault(key, [])
                    if len(samples) < SUSPECT_SAMPLES_PER_API:
                        samples.append(m.wire)
        except (ConnectionError, OSError, TimeoutError) as e:
            self.alive_or_fail()
            raise FuzzFailure(f"worker {wid}: cannot reach a live broker: {e!r}") from e
        finally:
            self.in_flight.pop(wid, None)
            _close(writer)

    # -- health -------------------------------------------------------------------
    async def health(self) -> None:
        """ApiVersions and Metadata answered on a fresh connection; RSS in bound."""
        self.alive_or_fail()
        try:
            reader, writer = await _connect(self.broker.port)
        except (OSError, TimeoutError) as e:
            self.fail("unreachable", sorted(self.in_flight.values()), repr(e))
        try:
            metadata = struct.pack(">hhih", 3, 1, 7, 6) + b"health" + _I32.pack(-1)
            writer.write(PROBE + _I32.pack(len(metadata)) + metadata)
            got = []
            for _ in range(2):
                frame = await asyncio.wait_for(_read_frame(reader), HANG_TIMEOUT_S)
                if frame is None:
                    self.fail("unhealthy", [], "fresh connection closed by the broker")
                got.append(_I32.unpack_from(frame, 0)[0])
            if got != [PROBE_CORRELATION, 7]:
                self.fail("unhealthy", [], f"correlation ids {got}")
        except TimeoutError:
            self.fail("unhealthy", [], "a fresh connection got no ApiVersions/Metadata answer")
        finally:
            _close(writer)
        rss = self.rss()
        if rss > self.stats.baseline_rss_bytes + self.rss_bound_bytes:
            self.fail("bloat", [], f"RSS {rss >> 20} MB, baseline "
                      f"{self.stats.baseline_rss_bytes >> 20} MB")

    def rss(self) -> int:
        try:
            rss = int(self.process.memory_info().rss)
        except psutil.NoSuchProcess:
            self.alive_or_fail()
            raise
        self.stats.peak_rss_bytes = max(self.stats.peak_rss_bytes, rss)
        return rss

    async def fuzz(self, frames: int, progress: bool = False,
                   max_seconds: float | None = None) -> None:
        self.stats.baseline_rss_bytes = self.rss()
        started = time.monotonic()
        while self._next < frames and (
                max_seconds is None or time.monotonic() - started < max_seconds):
            self._end = min(frames, self._next + BATCH_FRAMES)
            await asyncio.gather(*(self._worker(w) for w in range(self.connections)))
            await self.health()
            if progress:
                elapsed = time.monotonic() - started
                print(f"fuzz: {self._end} frames, {self._end / elapsed:.0f}/s, "
                      f"RSS {self.stats.peak_rss_bytes >> 20} MB peak", file=sys.stderr)


# -- the broker around a run -------------------------------------------------------


def start_broker(base: Path) -> BrokerProcess:
    broker = BrokerProcess(overrides=BROKER_OVERRIDES, data_dir=base / "data",
                           log_path=base / "broker.log")
    broker.start()
    from tests.integration.clients import create_topic

    for name, partitions, config in RUNNER_TOPICS:
        create_topic(broker.bootstrap, name, partitions, config)
    return broker


async def replay(broker: BrokerProcess, frames: list[bytes], verbose: bool = False) -> None:
    """Each frame on its own connection, in order; the broker must stay alive."""
    for i, wire in enumerate(frames):
        reader, writer = await _connect(broker.port)
        try:
            consistent = len(wire) >= 4 and _I32.unpack_from(wire, 0)[0] == len(wire) - 4
            m = Mutant(wire, consistent, -1, ["replay"])
            outcome = await exchange(reader, writer, m)
        finally:
            _close(writer)
        if verbose:
            print(f"replay: frame {i} ({len(wire)} bytes): {outcome}", file=sys.stderr)
        if not broker.is_running():
            raise FuzzFailure(f"replay: the broker died on frame {i}: {wire.hex()}")
        if outcome == "timeout" and m.api_key not in LONG_POLL_APIS:
            raise FuzzFailure(f"replay: frame {i} hangs: {wire.hex()}")


def real_client_round_trip(bootstrap: str) -> None:
    from tests.integration.clients import Out, ck_consume, ck_produce, create_topic

    topic = f"fuzz-after-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    values = [Out(value=b"after-fuzz-%d" % i) for i in range(10)]
    ck_produce(bootstrap, topic, values, acks="all")
    got = ck_consume(bootstrap, topic, len(values))
    if [r.value for r in got] != [o.value for o in values]:
        raise FuzzFailure(f"real client round trip read {got!r}")


VERIFY_BATCH = 200  # partitions per dump-log call (a fuzz run creates thousands)


def verify_logs(data_dir: Path) -> None:
    """dump-log --verify --deep-iteration over every segment, 200 partitions a call."""
    parts = [sorted(str(f) for f in p.glob("*.log"))
             for p in sorted(p for p in data_dir.iterdir() if p.is_dir())]
    parts = [logs for logs in parts if logs]
    for i in range(0, len(parts), VERIFY_BATCH):
        logs = [f for files in parts[i:i + VERIFY_BATCH] for f in files]
        res = subprocess.run(
            [sys.executable, "-m", "odradek", "dump-log", "--verify", "--deep-iteration",
             "--files", ",".join(logs)],
            capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        if res.returncode != 0:
            raise FuzzFailure(f"dump-log --verify (partitions {i}..{i + VERIFY_BATCH - 1}): "
                              f"exit {res.returncode}\n"
                              f"{res.stdout[-3000:]}{res.stderr[-3000:]}")


@dataclass
class Report:
    seed: int
    frames: int
    seconds: float
    stats: Stats
    log_exceptions: Counter[str]

    def text(self) -> str:
        s = self.stats
        lines = [(
            f"fuzz: seed {self.seed}: {s.frames} frames in {self.seconds:.1f}s "
            f"({s.frames / max(self.seconds, 1e-9):.0f} frames/s); answered {s.answered}, "
            f"closed {s.closed}, parked {s.parked}, slow {s.slow}, connections {s.connections}, "
            f"own UnregisterBroker not sent {s.self_unregisters}; 0 deaths; "
            f"RSS baseline {s.baseline_rss_bytes >> 20} MB, peak {s.peak_rss_bytes >> 20} MB; "
            f"broker log tracebacks {sum(self.log_exceptions.values())}"),
        ]
        lines += [f"  {n} x {line}" for line, n in self.log_exceptions.most_common(10)]
        if s.suspect_counts:
            lines.append("  well-formed frames the broker closed on: " + ", ".join(
                f"{api.api_name(k)} {n}" for k, n in s.suspect_counts.most_common()))
        return "\n".join(lines)


def log_exceptions(log_path: Path) -> Counter[str]:
    """The exception line closing each traceback in the broker log, counted."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return Counter()
    found: Counter[str] = Counter()
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            tail = (ln for ln in lines[i + 1:] if ln and not ln[0].isspace())
            found[next(tail, "?")[:200]] += 1
    return found


def run(frames: int, seed: int, corpus: Path = CORPUS_PATH, *, progress: bool = False,
        rss_bound_mb: int = DEFAULT_RSS_BOUND_MB, connections: int = CONNECTIONS,
        keep: bool = False, max_seconds: float | None = None) -> Report:
    """One fuzz run against a fresh broker; raises FuzzFailure on any failure."""
    base = Path(tempfile.mkdtemp(prefix="odradek-fuzz-"))
    mutator = Mutator(read_frames(corpus))
    broker = start_broker(base)
    ok = False
    try:
        asyncio.run(replay(broker, read_frames(corpus)))
        runner = Runner(broker, mutator, seed, rss_bound_mb, base, connections)
        started = time.monotonic()
        asyncio.run(runner.fuzz(frames, progress, max_seconds))
        seconds = time.monotonic() - started
        real_client_round_trip(broker.bootstrap)
        runner.rss()
        try:
            code = broker.stop()
        except TimeoutError as e:
            raise FuzzFailure(f"shutdown hang after fuzzing (seed {seed}): {e}") from e
        if code not in (0, -15):
            raise FuzzFailure(f"broker exited {code} on SIGTERM:\n{broker.log_tail()}")
        verify_logs(broker.data_dir)
        report = Report(seed, runner.stats.frames, seconds, runner.stats, log_exceptions(broker.log_path))
        if runner.stats.suspects and (keep or report.log_exceptions):
            path = base / "closed-on-well-formed.bin"
            write_frames(path, [f for fs in runner.stats.suspects.values() for f in fs])
            print(f"fuzz: samples of well-formed frames the broker closed on: {path}",
                  file=sys.stderr)
        ok = True
        keep = keep or bool(report.log_exceptions)
        return report
    finally:
        broker.close()
        if ok and not keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"fuzz: broker data and log kept in {base}", file=sys.stderr)
