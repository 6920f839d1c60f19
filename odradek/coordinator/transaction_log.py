"""The records of `__transaction_state`, in Kafka's TransactionLogKey/Value formats.

Big-endian, non-flexible (version 0), STRING = int16 length + UTF-8,
ARRAY = int32 count (-1 = null) + items:

    TransactionLogKey   key version 0:   transactionalId STRING
    TransactionLogValue value version 0: producerId INT64, producerEpoch INT16,
                                         transactionTimeoutMs INT32,
                                         transactionStatus INT8,
                                         transactionPartitions nullable ARRAY of
                                           (topic STRING, partitionIds ARRAY of INT32),
                                         transactionLastUpdateTimestampMs INT64,
                                         transactionStartTimestampMs INT64

Value version 1 (flexible, KIP-915) has compact strings/arrays (unsigned
varint length + 1) and a tagged-field section after each struct; the value's
own tags are 0 PreviousProducerId INT64, 1 NextProducerId INT64, 2
ClientTransactionVersion INT16 (KIP-890 part 2). odradek writes version 1
only for a transaction that has one of them set (transactions v2), version 0
otherwise, and reads both. A null value is a tombstone (the transactional id
expired).

TransactionStatus: 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return {
            0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
            4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence",
        }[int(self)]


STATE_BY_NAME = {s.kafka_name: s for s in TxnState}


class CorruptTxnRecord(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1  # the id the producer gets when this transaction completes
    client_version: int = 0  # ClientTransactionVersion: 2 for transactions v2


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _str(out: bytearray, value: str) -> None:
    data = value.encode()
    out += _I16.pack(len(data))
    out += data


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(KEY_VERSION))
    _str(out, transactional_id)
    return bytes(out)


def _tags(v: TxnLogValue) -> list[tuple[int, bytes]]:
    tags = []
    if v.previous_producer_id != -1:
        tags.append((0, _I64.pack(v.previous_producer_id)))
    if v.next_producer_id != -1:
        tags.append((1, _I64.pack(v.next_producer_id)))
    if v.client_version != 0:
        tags.append((2, _I16.pack(v.client_version)))
    return tags


def encode_value(v: TxnLogValue) -> bytes:
    tags = _tags(v)
    flexible = bool(tags)
    out = bytearray(_I16.pack(1 if flexible else VALUE_VERSION))
    out += _I64.pack(v.producer_id)
    out += _I16.pack(v.producer_epoch)
    out += _I32.pack(v.timeout_ms)
    out += _I8.pack(int(v.state))
    null = v.state == TxnState.EMPTY and not v.partitions
    if flexible:
        _uvarint(out, 0 if null else len(v.partitions) + 1)
    else:
        out += _I32.pack(-1 if null else len(v.partitions))
    for topic, parts in () if null else v.partitions:
        data = topic.encode()
        if flexible:
            _uvarint(out, len(data) + 1)
            out += data
            _uvarint(out, len(parts) + 1)
        else:
            _str(out, topic)
            out += _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)
        if flexible:
            out.append(0)  # no tagged fields in a partition entry
    out += _I64.pack(v.last_update_ms)
    out += _I64.pack(v.start_ms)
    if flexible:
        _uvarint(out, len(tags))
        for tag, data in tags:
            _uvarint(out, tag)
            _uvarint(out, len(data))
            out += data
    return bytes(out)


class _Reader:
    def __init__(self, buf: bytes, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise CorruptTxnRecord("record is truncated")
        (value,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(value)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise CorruptTxnRecord("bad varint")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def length(self) -> int:
        return self.uvarint() - 1 if self.flexible else self._take(_I32)

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self._take(_I16)
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptTxnRecord("bad string")
        value = self.buf[self.pos : self.pos + n].decode()
        self.pos += n
        return value

    def skip_tags(self) -> None:
        self.tags()

    def tags(self) -> dict[int, bytes]:
        """The tagged fields of a struct (flexible versions), by tag."""
        found: dict[int, bytes] = {}
        if not self.flexible:
            return found
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if self.pos + size > len(self.buf):
                raise CorruptTxnRecord("bad tagged field")
            found[tag] = self.buf[self.pos : self.pos + size]
            self.pos += size
        return found

    def i8(self) -> int:
        return self._take(_I8)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)


def decode_key(key: bytes) -> str | None:
    """The transactional id, or None for a key version this log does not hold."""
    r = _Reader(key)
    version = r.i16()
    if version != 0:
        return None
    return r.string()


def decode_value(value: bytes) -> TxnLogValue:
    r = _Reader(value)
    version = r.i16()
    if version not in (0, 1):
        raise CorruptTxnRecord(f"TransactionLogValue version {version}")
    r.flexible = version >= 1
    pid = r.i64()
    epoch = r.i16()
    timeout = r.i32()
    try:
        state = TxnState(r.i8())
    except ValueError as e:
        raise CorruptTxnRecord(str(e)) from None
    count = r.length()
    partitions = []
    if count > len(value):
        raise CorruptTxnRecord("bad partition count")
    for _ in range(max(count, 0)):
        topic = r.string()
        n = r.length()
        if n < 0 or n > len(value):
            raise CorruptTxnRecord("bad partition id count")
        partitions.append((topic, tuple(r.i32() for _ in range(n))))
        r.skip_tags()
    last_update = r.i64()
    start = r.i64()
    tags = r.tags() if r.pos < len(value) else {}
    try:
        previous = _I64.unpack(tags[0])[0] if 0 in tags else -1
        following = _I64.unpack(tags[1])[0] if 1 in tags else -1
        client_version = _I16.unpack(tags[2])[0] if 2 in tags else 0
    except struct.error:
        raise CorruptTxnRecord("bad tagged field") from None
    return TxnLogValue(pid, epoch, timeout, state, tuple(partitions), last_update, start,
                       previous, following, client_version)
