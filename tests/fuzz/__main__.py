"""`python -m tests.fuzz` (what `scripts/fuzz` runs): record, fuzz or replay."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from pathlib import Path

from tests.fuzz.corpus import CORPUS_PATH, read_frames
from tests.fuzz.runner import (
    CONNECTIONS,
    DEFAULT_RSS_BOUND_MB,
    FuzzFailure,
    replay,
    run,
    start_broker,
)

DESCRIPTION = """\
Fuzz a live odradek broker with mutated Kafka requests (issue 12).

Request frames recorded from real clients (tests/fuzz/corpus/requests.bin) are
mutated -- bit flips, overwrites, truncation, insertion, duplicated ranges,
lengths and counts set to -1, 0, 2**28, 2**31-1, -2**31 and +-1, record batches
damaged behind a recomputed CRC -- and sent to a fresh broker over many
connections. The broker must answer each or close the connection, keep serving
a normal client, stay within an RSS bound, stop on SIGTERM and leave segments
that pass `odradek dump-log --verify`. A failure prints the seed and the
offending frames in hex, and writes them to a file for --replay.
"""

EPILOG = """\
examples:
  scripts/fuzz                          # 20000 frames, a random seed (printed)
  scripts/fuzz --frames 1000000 --seed 7
  scripts/fuzz --replay /tmp/odradek-fuzz-death-seed7-123.bin
  scripts/fuzz --record                 # re-record the corpus with real clients
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/fuzz", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=20000, help="mutated frames to send")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one)")
    p.add_argument("--record", action="store_true",
                   help=f"record the corpus from real clients into {CORPUS_PATH}")
    p.add_argument("--replay", metavar="FILE", type=Path,
                   help="send each frame of FILE (corpus format) on its own connection")
    p.add_argument("--corpus", type=Path, default=CORPUS_PATH, help="corpus file to mutate")
    p.add_argument("--connections", type=int, default=CONNECTIONS)
    p.add_argument("--rss-bound-mb", type=int, default=DEFAULT_RSS_BOUND_MB,
                   help="RSS allowed above the broker's baseline")
    p.add_argument("--seconds", type=float, default=None,
                   help="stop sending after this long (then the end checks run)")
    p.add_argument("--keep", action="store_true", help="keep the broker's data dir and log")
    args = p.parse_args(argv)
    if args.record:
        from tests.fuzz.record import record

        record(args.corpus)
        return 0
    if args.replay:
        broker = start_broker(Path(tempfile.mkdtemp(prefix="odradek-fuzz-replay-")))
        try:
            asyncio.run(replay(broker, read_frames(args.replay), verbose=True))
            print(f"replay: the broker survived; log {broker.log_path}", file=sys.stderr)
            return 0
        except FuzzFailure as e:
            print(e, file=sys.stderr)
            return 1
        finally:
            broker.close()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"fuzz: seed {seed}, {args.frames} frames", file=sys.stderr)
    try:
        report = run(args.frames, seed, args.corpus, progress=True,
                     rss_bound_mb=args.rss_bound_mb, connections=args.connections,
                     keep=args.keep, max_seconds=args.seconds)
    except FuzzFailure as e:
        print(e, file=sys.stderr)
        return 1
    print(report.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
