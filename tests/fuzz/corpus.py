"""The fuzzer's seed corpus: request frames recorded from real clients.

File format (``tests/fuzz/corpus/requests.bin``, and every repro file the
runner writes): request frames one after another exactly as they went over
the wire, each a 4-byte big-endian size and that many bytes (request header,
then body). So ``cat``-ing a repro into a socket replays it, and ``--replay``
reads corpus and repro files alike.

The recorder (record.py) talks to a broker whose topics, groups and
transactional ids are the names below; the runner creates the same topics
before it starts, so mutated frames reach real partitions and groups rather
than stopping at UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

CORPUS_PATH = Path(__file__).resolve().parent / "corpus" / "requests.bin"

TOPIC = "fuzz-plain"
TOPIC_PARTITIONS = 3
COMPACT_TOPIC = "fuzz-compact"
# (name, partitions, topic configs) the runner creates before fuzzing.
RUNNER_TOPICS: tuple[tuple[str, int, dict[str, str]], ...] = (
    (TOPIC, TOPIC_PARTITIONS, {}),
    (COMPACT_TOPIC, 1, {"cleanup.policy": "compact"}),
)

# The broker the corpus is recorded from and fuzzed against: groups form at
# once, internal topics are small, segments roll often enough to be verified.
FUZZ_NODE_ID = 1  # odradek's default node.id, named so the runner can tell it apart
BROKER_OVERRIDES: dict[str, object] = {
    "node.id": FUZZ_NODE_ID,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "group.max.session.timeout.ms": 30000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 6000,
    "transaction.state.log.num.partitions": 2,
    "offsets.topic.num.partitions": 2,
    "log.segment.bytes": 1024 * 1024,
}

_SIZE = struct.Struct(">i")


def write_frames(path: Path, frames: Iterable[bytes]) -> int:
    """Write size-prefixed frames (each already carries its prefix); return the count."""
    n = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for frame in frames:
            f.write(frame)
            n += 1
    return n


def split_frames(data: bytes) -> list[bytes]:
    """Size-prefixed frames out of a byte string (a trailing partial frame is kept as is)."""
    frames = []
    pos = 0
    while pos + 4 <= len(data):
        (size,) = _SIZE.unpack_from(data, pos)
        end = pos + 4 + max(size, 0)
        frames.append(data[pos:end])
        pos = end
    if pos < len(data):
        frames.append(data[pos:])
    return frames


def read_frames(path: Path = CORPUS_PATH) -> list[bytes]:
    return split_frames(path.read_bytes())


def frame_api(frame: bytes) -> tuple[int, int]:
    """(api_key, api_version) of a size-prefixed request frame."""
    key, version = struct.unpack_from(">hh", frame, 4)
    return key, version
