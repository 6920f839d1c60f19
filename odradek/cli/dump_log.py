"""`odradek dump-log`: print and check segment files, like Kafka's DumpLogSegments.

Theory of operation
-------------------
Works on files alone (no broker): ``--files a.log,b.index,c.timeindex``; a file
given as a URL (a remote tier's object, any fsspec URL, options with
``--remote-option K=V``) is copied to a temporary directory first.

* ``.log``: one line per record batch, in Kafka's wording (``baseOffset``,
  ``lastOffset``, ``count``, ``baseSequence``, ``lastSequence``, ``producerId``,
  ``producerEpoch``, ``partitionLeaderEpoch``, ``isTransactional``,
  ``isControl``, ``position``, ``CreateTime``/``LogAppendTime``, ``size``,
  ``magic``, ``compresscodec``, ``crc``, ``isvalid``). With
  ``--deep-iteration`` (implied by ``--print-data-log``) one ``| offset: ...``
  line per record follows its batch; ``--print-data-log`` adds key, payload
  and headers; control records print their marker (``endTxnMarker: COMMIT
  coordinatorEpoch: 3``).
* ``.index`` / ``.timeindex``: one line per entry, then a check against the
  ``.log`` next to it: an offset-index entry must point at the batch whose
  last offset it names; a time-index entry must name the last offset of a
  batch whose max timestamp it holds, with timestamps increasing. The zero
  filled, preallocated tail of an active segment's index is not an entry.
* ``--verify`` checks everything (``--verify-index-only``: the indexes only)
  and prints only problems: bad CRCs, batches that are not magic 2, offsets
  that do not increase or lie below the file's base offset, a partial batch
  at the end, records that do not decode (with ``--deep-iteration``), index
  mismatches. Exit status 1 if any, else 0; 2 for usage errors or unreadable
  files.

Reads are bounded: a file is read in ``CHUNK_BYTES`` pieces, and
``--max-bytes`` limits how much of each ``.log`` is examined (Kafka's option).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Compression,
    InvalidRecords,
    TimestampType,
    batch_crc_ok,
    decode_batch_records,
    parse_batch_header,
    parse_control_record,
)

CHUNK_BYTES = 8 * 1024 * 1024
INT32_MAX = 2**31 - 1
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")

DESCRIPTION = """\
Print the record batches of .log segment files and the entries of .index and
.timeindex files, and check them against each other (Kafka's DumpLogSegments).

examples:
  odradek dump-log --files data/orders-0/00000000000000000000.log
  odradek dump-log --files data/orders-0/00000000000000000000.log --print-data-log
  odradek dump-log --verify --files "$(ls data/orders-0/*.log | paste -sd,)"
"""


@dataclass
class Problems:
    lines: list[str] = field(default_factory=list)

    def add(self, path: Path, message: str) -> None:
        self.lines.append(f"{path}: {message}")


@dataclass(frozen=True)
class Batch:
    position: int
    header: BatchHeader
    crc_ok: bool


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dump-log", help="print and verify segment files (.log, .index, .timeindex)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", required=True, metavar="FILE[,FILE...]",
                        help="comma-separated .log, .index and .timeindex files")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="decode every record, not just batch headers")
    parser.add_argument("--print-data-log", "--print-data", dest="print_data",
                        action="store_true",
                        help="print record keys, values and headers (implies "
                             "--deep-iteration)")
    parser.add_argument("--verify", action="store_true",
                        help="print only problems; exit 1 if there is any")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="check the indexes against their logs, print only problems")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check that index files are well formed")
    parser.add_argument("--remote-option", action="append", default=[], metavar="K=V",
                        help="for files given as URLs (a remote tier's s3://..., file://...: "
                             "any fsspec URL): an option of the fsspec filesystem, e.g. "
                             "endpoint_url=http://host:8333, key=..., secret=...")
    parser.add_argument("--max-bytes", type=int, default=2**31 - 1,
                        help="examine at most this many bytes of each .log")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    names = [p.strip() for p in args.files.split(",") if p.strip()]
    if not names:
        print("odradek: error: --files names no file", file=sys.stderr)
        return 2
    if any("://" in n for n in names):
        with tempfile.TemporaryDirectory(prefix="odradek-dump-") as tmp:
            try:
                local = _fetch_remote(names, args.remote_option, Path(tmp))
            except (OSError, ValueError) as e:
                print(f"odradek: error: cannot read the remote files: {e}", file=sys.stderr)
                return 2
            return _dump(args, [Path(p) for p in local])
    return _dump(args, [Path(n) for n in names])


def _fetch_remote(names: list[str], options: list[str], tmp: Path) -> list[str]:
    """Copy URLs into `tmp` under local segment names (a remote tier's
    `<baseOffset>-<segmentId>.<suffix>` becomes `<baseOffset>.<suffix>`)."""
    import fsspec

    opts = dict(o.split("=", 1) for o in options)
    out = []
    for name in names:
        if "://" not in name:
            out.append(name)
            continue
        fs, path = fsspec.core.url_to_fs(name, **opts)
        base = path.rsplit("/", 1)[-1]
        stem, _, suffix = base.partition(".")
        target = tmp / f"{stem.split('-', 1)[0]}.{suffix}"
        target.write_bytes(fs.cat_file(path))
        out.append(str(target))
    return out


def _dump(args: argparse.Namespace, paths: list[Path]) -> int:
    out = sys.stdout
    deep = args.deep_iteration or args.print_data
    quiet = args.verify or args.verify_index_only
    problems = Problems()
    for path in paths:
        try:
            if path.suffix == ".log":
                if args.verify_index_only or args.index_sanity_check:
                    continue
                dump_log_file(path, out, problems, deep=deep, print_data=args.print_data,
                              quiet=quiet, max_bytes=args.max_bytes)
            elif path.suffix == ".index":
                dump_offset_index(path, out, problems, quiet=quiet,
                                  sanity_only=args.index_sanity_check)
            elif path.suffix == ".timeindex":
                dump_time_index(path, out, problems, quiet=quiet,
                                sanity_only=args.index_sanity_check)
            else:
                print(f"Ignoring unknown file {path}", file=sys.stderr)
        except OSError as e:
            print(f"odradek: error: cannot read {path}: {e.strerror or e}", file=sys.stderr)
            return 2
    for line in problems.lines:
        print(line, file=out)
    if quiet and not problems.lines:
        print(f"Verified {len(paths)} file(s): no problems found", file=out)
    return 1 if problems.lines else 0


# -- .log ---------------------------------------------------------------------------------


def base_offset_of(path: Path) -> int | None:
    stem = path.name.split(".")[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def iter_batches(path: Path, problems: Problems, max_bytes: int = 2**31 - 1) -> Iterator[Batch]:
    """Every whole batch of ``path`` with its CRC checked; a torn or garbage
    tail is reported as a problem and ends the walk."""
    size = min(os.path.getsize(path), max_bytes)
    with open(path, "rb") as f:
        position = 0
        while size - position >= BATCH_OVERHEAD:
            f.seek(position)
            head = f.read(BATCH_OVERHEAD)
            header = parse_batch_header(head)
            if header.batch_length < MIN_BATCH_LENGTH or position + header.size > size:
                if position + header.size > size and size < os.path.getsize(path):
                    return  # stopped by --max-bytes, not a problem
                problems.add(path, f"partial or malformed batch at position {position} "
                                   f"({size - position} bytes left, batch claims {header.size})")
                return
            f.seek(position)
            data = f.read(header.size)
            yield Batch(position, header, batch_crc_ok(data, parse_batch_header(data)))
            position += header.size
        if 0 < size - position < BATCH_OVERHEAD:
            problems.add(path, f"partial batch header at position {position} "
                               f"({size - position} bytes)")


def _read_batch(path: Path, batch: Batch) -> bytes:
    with open(path, "rb") as f:
        f.seek(batch.position)
        return f.read(batch.header.size)


def dump_log_file(path: Path, out: TextIO, problems: Problems, *, deep: bool,
                  print_data: bool, quiet: bool, max_bytes: int) -> None:
    base = base_offset_of(path)
    if not quiet:
        print(f"Dumping {path}", file=out)
        print(f"Log starting offset: {base if base is not None else 'unknown'}", file=out)
    next_offset = base if base is not None else -1
    for batch in iter_batches(path, problems, max_bytes):
        h = batch.header
        if h.magic != MAGIC_V2:
            problems.add(path, f"batch at position {batch.position} has magic {h.magic}")
        if not batch.crc_ok:
            problems.add(path, f"batch at position {batch.position} (offsets "
                               f"{h.base_offset}..{h.last_offset}) fails its CRC")
        if h.base_offset < next_offset:
            problems.add(path, f"batch at position {batch.position} starts at offset "
                               f"{h.base_offset}, below {next_offset}")
        if base is not None and h.last_offset - base > INT32_MAX:
            problems.add(path, f"offset {h.last_offset} does not fit segment {base}")
        next_offset = h.next_offset
        if not quiet:
            print(format_batch(batch), file=out)
        if deep:
            try:
                records = decode_batch_records(_read_batch(path, batch),
                                               parse_batch_header(_read_batch(path, batch)))
            except InvalidRecords as e:
                problems.add(path, f"records of the batch at position {batch.position} do "
                                   f"not decode: {e.message}")
                continue
            if len(records) != h.records_count:
                problems.add(path, f"batch at position {batch.position} says "
                                   f"{h.records_count} records, holds {len(records)}")
            if not quiet:
                for record in records:
                    print(format_record(h, record, print_data), file=out)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def format_batch(batch: Batch) -> str:
    h = batch.header
    last_sequence = (
        -1 if h.base_sequence < 0 else (h.base_sequence + h.last_offset_delta) % (INT32_MAX + 1)
    )
    time_kind = (
        "LogAppendTime" if h.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"
    )
    codec = Compression(h.compression).name.lower() if h.compression <= 4 else str(h.compression)
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
        f"position: {batch.position} {time_kind}: {h.max_timestamp} "
        f"baseTimestamp: {h.base_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: {codec} crc: {h.crc} isvalid: {_bool(batch.crc_ok)}"
    )


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def format_record(h: BatchHeader, record: Any, print_data: bool) -> str:
    time_kind = (
        "LogAppendTime" if h.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"
    )
    sequence = (
        -1 if h.base_sequence < 0
        else (h.base_sequence + record.offset - h.base_offset) % (INT32_MAX + 1)
    )
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    header_keys = ",".join(k for k, _ in record.headers)
    line = (
        f"| offset: {record.offset} {time_kind}: {record.timestamp} keySize: {key_size} "
        f"valueSize: {value_size} sequence: {sequence} headerKeys: [{header_keys}]"
    )
    if h.is_control:
        try:
            marker, coordinator_epoch = parse_control_record(record)
            line += f" endTxnMarker: {marker.name} coordinatorEpoch: {coordinator_epoch}"
        except InvalidRecords as e:
            line += f" controlRecord: malformed ({e.message})"
    elif print_data:
        headers = ",".join(f"{k}={_text(v)}" for k, v in record.headers)
        line += f" key: {_text(record.key)} payload: {_text(record.value)}"
        if headers:
            line += f" headers: [{headers}]"
    return line


# -- indexes -----------------------------------------------------------------------------


def _read_entries(path: Path, entry: struct.Struct) -> tuple[list[tuple[int, int]], int]:
    """Entries of an index file without its zero-filled preallocated tail, and the
    number of trailing bytes that do not make a whole entry."""
    data = path.read_bytes()
    usable = len(data) - len(data) % entry.size
    entries = [e for e in entry.iter_unpack(data[:usable])]
    # (0, 0) is never a real entry: no entry points at position 0 (the first
    # batch never follows index.interval.bytes of data) and timestamps are > 0.
    while entries and entries[-1] == (0, 0):
        entries.pop()
    return entries, len(data) - usable


def _log_of(path: Path) -> Path:
    return path.with_suffix(".log")


def _batch_at(log_path: Path, position: int) -> BatchHeader | None:
    try:
        with open(log_path, "rb") as f:
            f.seek(position)
            head = f.read(BATCH_OVERHEAD)
    except FileNotFoundError:
        return None
    if len(head) < BATCH_OVERHEAD:
        return None
    return parse_batch_header(head)


def dump_offset_index(path: Path, out: TextIO, problems: Problems, *, quiet: bool,
                      sanity_only: bool = False) -> None:
    base = base_offset_of(path) or 0
    entries, extra = _read_entries(path, _OFFSET_ENTRY)
    if not quiet:
        print(f"Dumping {path}", file=out)
    if extra:
        problems.add(path, f"size is not a multiple of 8 ({extra} extra bytes)")
    log_path = _log_of(path)
    have_log = log_path.exists()
    previous = (-1, -1)
    for relative, position in entries:
        offset = base + relative
        if not quiet:
            print(f"offset: {offset} position: {position}", file=out)
        if relative <= previous[0] or position <= previous[1]:
            problems.add(path, f"entry (offset {offset}, position {position}) does not "
                               f"follow (offset {base + previous[0]}, position {previous[1]})")
        previous = (relative, position)
        if sanity_only or not have_log:
            continue
        header = _batch_at(log_path, position)
        if header is None:
            problems.add(path, f"Index offset: {offset}, position {position} is past the end "
                               f"of {log_path.name}")
        elif header.last_offset != offset:
            problems.add(path, f"Mismatch: Index offset: {offset}, log offset: "
                               f"{header.last_offset} (at position {position})")
    if not have_log and not sanity_only:
        problems.add(path, f"no {log_path.name} to check it against")


def dump_time_index(path: Path, out: TextIO, problems: Problems, *, quiet: bool,
                    sanity_only: bool = False) -> None:
    base = base_offset_of(path) or 0
    entries, extra = _read_entries(path, _TIME_ENTRY)
    if not quiet:
        print(f"Dumping {path}", file=out)
    if extra:
        problems.add(path, f"size is not a multiple of 12 ({extra} extra bytes)")
    log_path = _log_of(path)
    last_offsets: dict[int, int] = {}
    if log_path.exists() and not sanity_only:
        scratch = Problems()
        for batch in iter_batches(log_path, scratch):
            last_offsets[batch.header.last_offset] = batch.header.max_timestamp
    previous_timestamp = -1
    for timestamp, relative in entries:
        offset = base + relative
        if not quiet:
            print(f"timestamp: {timestamp} offset: {offset}", file=out)
        if timestamp <= previous_timestamp:
            problems.add(path, f"Found out of order timestamp {timestamp} after "
                               f"{previous_timestamp} (offset {offset})")
        previous_timestamp = timestamp
        if sanity_only or not log_path.exists():
            continue
        if offset not in last_offsets:
            problems.add(path, f"Indexed offset: {offset} is not the last offset of a "
                               f"batch in {log_path.name}")
        elif last_offsets[offset] != timestamp:
            problems.add(path, f"Found timestamp mismatch: Index timestamp: {timestamp}, "
                               f"log timestamp: {last_offsets[offset]} (offset {offset})")
