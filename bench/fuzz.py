"""The fuzzer's speed: mutated frames per second against a live broker (issue 12).

    python bench/fuzz.py                     # 20,000 frames, seed 12
    python bench/fuzz.py --frames 200000 --seed 7
    python bench/fuzz.py --quick             # 5,000 frames

One run of tests/fuzz/runner.py (what `scripts/fuzz` runs): a fresh odradek
broker, the recorded corpus replayed once, then mutated frames over 8
connections, each followed by an ApiVersions probe; health, RSS and, at the
end, a real client round trip, SIGTERM and `dump-log --verify`. Reports
frames/s (sending only, the end checks excluded), frames answered and closed,
the broker's RSS at the start and at its peak. A failure (death, hang, bloat)
exits 1 with the runner's report. JSON goes to bench/results/fuzz-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.fuzz.runner import FuzzFailure, run

DEFAULT_FRAMES = 20_000
QUICK_FRAMES = 5_000
DEFAULT_SEED = 12


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=DEFAULT_FRAMES)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--quick", action="store_true", help=f"{QUICK_FRAMES} frames")
    args = p.parse_args(argv)
    frames = QUICK_FRAMES if args.quick else args.frames
    try:
        report = run(frames, args.seed)
    except FuzzFailure as e:
        print(e, file=sys.stderr)
        return 1
    s = report.stats
    result = {
        "bench": "fuzz", "seed": args.seed, "frames": s.frames,
        "seconds": round(report.seconds, 1),
        "frames_per_s": round(s.frames / max(report.seconds, 1e-9), 1),
        "answered": s.answered, "closed": s.closed, "parked": s.parked,
        "deaths": 0, "rss_baseline_mb": s.baseline_rss_bytes >> 20,
        "rss_peak_mb": s.peak_rss_bytes >> 20,
    }
    print(report.text())
    print(json.dumps(result))
    out = REPO_ROOT / "bench" / "results" / f"fuzz-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
