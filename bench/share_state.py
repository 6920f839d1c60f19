"""The share coordinator's core alone (KIP-932, coordinator/share_coordinator.py):
bytes written to `__share_group_state` and CPU per WriteShareGroupState.

    python bench/share_state.py                  # a 2,000-offset window, acks anywhere
    python bench/share_state.py --spread 200     # acks among the first 200 offsets

One share partition with a window of `--window` offsets (all delivered once).
Each write acknowledges one random available offset among the first
`--spread` of the window (the start offset moves past acknowledged ones and the
window refills), and sends the whole window as runs, as odradek's
share-partition leader does (coordinator/share_partition.py state_batches).
Prints the record bytes (key and value) per write and the CPU time of
`ShareCoordinator.write` per write, the building of the request left out.
No broker: in process, deterministic (seeded).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.coordinator.share_coordinator import ShareCoordinator

ACKNOWLEDGED = 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=int, default=2000)
    ap.add_argument("--spread", type=int, default=2000)
    ap.add_argument("--writes", type=int, default=3000)
    args = ap.parse_args()
    rng = random.Random(1)
    core = ShareCoordinator(1)
    core.load(0, [])
    key = ("g", uuid.UUID(int=7), 0)
    state = {o: (1, 0) for o in range(args.window)}  # offset: (delivery count, state)
    start, end = 0, args.window
    nbytes, cpu_s = 0, 0.0
    for _ in range(args.writes):
        offset = rng.choice([o for o in range(start, min(start + args.spread, end))
                             if state[o][1] == 0])
        state[offset] = (1, ACKNOWLEDGED)
        while state[start][1] == ACKNOWLEDGED:
            del state[start]
            start += 1
            state[end] = (1, 0)
            end += 1
        runs: list[tuple[int, int, int, int]] = []
        for o in range(start, end):
            count, st = state[o]
            if runs and runs[-1][1] == o - 1 and runs[-1][2:] == (count, st):
                runs[-1] = (runs[-1][0], o, count, st)
            else:
                runs.append((o, o, count, st))
        out: list[tuple[int, bytes, bytes | None]] = []
        t0 = time.process_time()
        assert core.write(key, 0, 1, start, runs, 0, out) == 0
        cpu_s += time.process_time() - t0
        nbytes += sum(len(k) + len(v or b"") for _, k, v in out)
    print(f"window {args.window}, spread {args.spread}: {args.writes} writes, "
          f"{nbytes / args.writes:,.0f} record bytes/write, "
          f"{cpu_s / args.writes * 1e6:,.0f} us CPU in ShareCoordinator.write per write")


if __name__ == "__main__":
    main()
