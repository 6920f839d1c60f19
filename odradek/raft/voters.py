"""KIP-853's voter set in the log: control records and the history they make.

Theory of operation
-------------------
With ``kraft.version`` 1 the voters are not configuration but entries of the
metadata log, as in Kafka's ``KRaftControlRecordStateMachine``:

* a **KRaftVersionRecord** (control type 5) says which kraft.version the log
  is at; a **VotersRecord** (control type 6) lists every voter with its
  directory id and endpoints. ``odradek storage format --standalone`` or
  ``--initial-controllers`` writes both into the bootstrap snapshot
  ``00000000000000000000-0000000000.checkpoint``; the leader appends a new
  VotersRecord for each AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter.
* A voter set takes effect when it is **appended**, not when it commits
  (KIP-853, as in the Raft thesis' single-server changes): the latest
  VotersRecord in the log (committed or not) is the set this node uses. A
  truncation that removes the record brings back the set before it.
* The leader allows **one change at a time**: a new VotersRecord only once the
  previous one is committed (the caller checks `pending`).

`VoterHistory` is that: a base set (the configured static voters, or the set
in the snapshot the log starts from) and the (offset, set) pairs of the
VotersRecords after it. A log with no VotersRecord anywhere is at kraft.version
0: the static ``controller.quorum.voters`` set applies, and it cannot change.

Wire format (Kafka's, record version 0, flexible): control key = version
int16 (0), type int16; KRaftVersionRecord value = version int16 (0),
kraft_version int16, tagged fields; VotersRecord value = version int16 (0),
voters compact array of (voter_id int32, directory_id uuid, endpoints compact
array of (name compact string, host compact string, port uint16, tags),
kraft_version_feature (min int16, max int16, tags), tags), tags.
"""

from __future__ import annotations

import base64
import struct
from bisect import bisect_right
from collections.abc import Iterable

from .config import InvalidVoters, VoterAddress, VoterSet

LEADER_CHANGE = 2  # Kafka's ControlRecordType values
KRAFT_VERSION = 5
KRAFT_VOTERS = 6
CONTROL_KEY = struct.Struct(">hh")
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
MAX_VOTERS = 64  # a bound on a decoded record (Kafka's quorums are a handful)
MAX_ENDPOINTS = 16
MAX_NAME = 255


def control_entry(kind: int, value: bytes) -> bytes:
    """A control entry as the Raft core appends it: its key, then its value."""
    return CONTROL_KEY.pack(0, kind) + value


def split_control_entry(data: bytes) -> tuple[int, bytes]:
    if len(data) < CONTROL_KEY.size:
        return -1, b""
    return CONTROL_KEY.unpack_from(data)[1], data[CONTROL_KEY.size :]


# -- Kafka Uuid ------------------------------------------------------------------------
def uuid_bytes(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise InvalidVoters(f"not a Kafka Uuid: {text!r}")
    return raw


def uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# -- encoding ---------------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


def encode_kraft_version(version: int) -> bytes:
    return struct.pack(">hh", 0, version) + b"\x00"


def encode_voters(voters: VoterSet) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    out += _uvarint(len(voters.ids) + 1)
    for node_id in sorted(voters.ids):
        out += struct.pack(">i", node_id)
        out += uuid_bytes(voters.directory_ids.get(node_id, ZERO_UUID))
        address = voters.addresses.get(node_id)
        if address is None:
            out += _uvarint(1)
        else:
            out += _uvarint(2)
            out += _compact_string(address.listener)
            out += _compact_string(address.host)
            out += struct.pack(">H", address.port) + b"\x00"
        out += struct.pack(">hh", 0, 1) + b"\x00"  # kraft.version supported: 0..1
        out += b"\x00"
    out += b"\x00"
    return bytes(out)


# -- decoding (bounded: hostile bytes raise InvalidVoters) -----------------------------
class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise InvalidVoters("truncated voters record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> int:
        s = struct.Struct(fmt)
        return int(s.unpack(self.take(s.size))[0])

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            b = self.take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 28:
                raise InvalidVoters("varint too long")

    def count(self, bound: int) -> int:
        n = self.uvarint() - 1
        if not 0 <= n <= bound:
            raise InvalidVoters(f"count {n} out of bounds")
        return n

    def string(self) -> str:
        return self.take(self.count(MAX_NAME)).decode("utf-8", "replace")


def _skip_tags(r: _Reader) -> None:
    tags = r.uvarint()
    if tags > 64:
        raise InvalidVoters("too many tagged fields")
    for _ in range(tags):
        r.uvarint()
        r.take(r.uvarint())


def decode_kraft_version(value: bytes) -> int:
    r = _Reader(value)
    r.unpack(">h")
    return r.unpack(">h")


def decode_voters(value: bytes) -> VoterSet:
    r = _Reader(value)
    r.unpack(">h")
    addresses: dict[int, VoterAddress] = {}
    directories: dict[int, str] = {}
    for _ in range(r.count(MAX_VOTERS)):
        node_id = r.unpack(">i")
        directories[node_id] = uuid_text(r.take(16))
        for i in range(r.count(MAX_ENDPOINTS)):
            name, host = r.string(), r.string()
            port = r.unpack(">H")
            _skip_tags(r)
            if i == 0:
                addresses[node_id] = VoterAddress(node_id, host, port, name)
        r.unpack(">h")
        r.unpack(">h")
        _skip_tags(r)
        _skip_tags(r)
    _skip_tags(r)
    return VoterSet(frozenset(directories), addresses, directories)


class VoterHistory:
    """The voter set at every offset: a base set and the VotersRecords after it."""

    def __init__(self, base: VoterSet, kraft_version: int = 0) -> None:
        self.base = base
        self.kraft_version = kraft_version
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []

    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self.base

    @property
    def last_offset(self) -> int:
        """The offset of the newest VotersRecord; -1 if none is in the log."""
        return self._offsets[-1] if self._offsets else -1

    def at(self, offset: int) -> VoterSet:
        """The set in force after the entry at `offset`."""
        i = bisect_right(self._offsets, offset) - 1
        return self._sets[i] if i >= 0 else self.base

    def add(self, offset: int, voters: VoterSet) -> None:
        assert not self._offsets or offset > self._offsets[-1], (offset, self._offsets)
        self._offsets.append(offset)
        self._sets.append(voters)
        self.kraft_version = max(self.kraft_version, 1)

    def add_entries(self, entries: Iterable[tuple[int, int, bytes]]) -> None:
        """Control entries (offset, type, value) read from the log, in order."""
        for offset, kind, value in entries:
            if kind == KRAFT_VERSION:
                self.kraft_version = max(self.kraft_version, decode_kraft_version(value))
            elif kind == KRAFT_VOTERS:
                self.add(offset, decode_voters(value))

    def truncate(self, end_offset: int) -> None:
        """The log lost every entry from `end_offset` on."""
        while self._offsets and self._offsets[-1] >= end_offset:
            self._offsets.pop()
            self._sets.pop()

    def reset(self, base: VoterSet, kraft_version: int) -> None:
        """The log now starts at a snapshot whose voter set is `base`."""
        self.base = base
        self.kraft_version = kraft_version
        self._offsets, self._sets = [], []


def base_of_snapshot(
    entries: Iterable[tuple[int, bytes]], fallback: VoterSet
) -> tuple[VoterSet, int]:
    """The (voters, kraft.version) a snapshot's control records carry."""
    voters, version = fallback, 0
    for kind, value in entries:
        if kind == KRAFT_VERSION:
            version = max(version, decode_kraft_version(value))
        elif kind == KRAFT_VOTERS:
            voters, version = decode_voters(value), max(version, 1)
    return voters, version
