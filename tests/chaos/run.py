"""A chaos run: a 3-node cluster under load while faults come one after another.

    python -m tests.chaos.run --minutes 30 [--seed N] [--dir DIR]    (scripts/chaos)

tests/chaos/cluster.py starts the cluster and makes the faults (kill -9 of a
broker or of the controller, SIGSTOP, a network partition, a log dir filled
past its free-space floor); tests/chaos/workloads.py runs the clients (an
idempotent producer, a compacted topic's keyed producer, a transactional
producer that commits and aborts, a consumer group committing, a watcher of
the committed offsets). When the time is up every fault is undone, the
clients finish, and `check` asserts:

- every acknowledged record of ``chaos`` is read back at its offset, exactly
  once and in order per partition (the numbers increase);
- under read_committed, every committed transaction of ``chaos-txn`` is seen
  whole and once, no aborted one is seen, one of unknown outcome is whole or
  absent; read_uncommitted shows the aborted ones were written (the check can
  fail);
- the compacted topic holds, for each key, the last acknowledged value as its
  last record, and nothing that was never sent;
- the group's committed offsets never went backwards (each commit and each
  reading of the watcher), and the last reading is at least the last commit;
- every broker is registered and every partition's ISR is whole again.

The CI variant is tests/integration/test_chaos.py (ODRADEK_CHAOS_S seconds of
faults, 60 by default).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.chaos import workloads as W
from tests.chaos.cluster import ChaosCluster, FaultLog


@dataclass
class Report:
    seconds: float
    faults: dict[str, int]
    acked: int
    txn_committed: int
    txn_aborted: int
    txn_unknown: int
    keyed_acked: int
    commits: int
    readings: int
    client_deaths: list[str]

    def line(self) -> str:
        f = ", ".join(f"{k} {v}" for k, v in self.faults.items())
        return (f"chaos run: {self.seconds:.0f} s of faults ({f}); {self.acked} records "
                f"acknowledged and read back; transactions {self.txn_committed} committed, "
                f"{self.txn_aborted} aborted, {self.txn_unknown} unknown; "
                f"{self.keyed_acked} keyed records compacted right; {self.commits} group "
                f"commits and {self.readings} offset readings never went backwards; "
                f"{len(self.client_deaths)} client process(es) died on their own and were "
                f"replaced" + "".join(f"\n  {d}" for d in self.client_deaths))


def _increasing(seq: list[dict[int, int]], what: str) -> None:
    best: dict[int, int] = {}
    for i, offsets in enumerate(seq):
        for p, o in offsets.items():
            assert o >= best.get(p, -1), (
                f"{what} went backwards: partition {p} at {o} after {best[p]} (#{i})")
            best[p] = o


def check(cluster: ChaosCluster, numbered: W.NumberedProducer, keyed: W.KeyedProducer,
          txn: W.TxnProducer, group: W.GroupConsumer, watcher: W.OffsetWatcher) -> None:
    boot = cluster.bootstrap
    for client in (numbered, keyed, txn, group, watcher):
        assert client.crashed is None, f"{client.name} crashed: {client.crashed}"
    assert numbered.acked_count() > 0 and keyed.acked > 0 and txn.committed, (
        "a workload made no progress")
    # the numbered stream
    assert not numbered.failed, numbered.failed[:5]
    assert numbered.unflushed == 0, f"{numbered.unflushed} records never acknowledged"
    read = W.read_topic(boot, W.NUMBERED, W.NUMBERED_PARTITIONS, committed_only=False)
    for p in range(W.NUMBERED_PARTITIONS):
        values = [int(v) for _, _, v in read[p]]
        assert len(values) == len(set(values)), f"{W.NUMBERED}-{p}: a record twice"
        assert values == sorted(values), f"{W.NUMBERED}-{p}: out of order"
        at = {o: int(v) for o, _, v in read[p]}
        for offset, value in numbered.acked[p]:
            assert at.get(offset) == value, (
                f"{W.NUMBERED}-{p}: acknowledged {value} at {offset}, read {at.get(offset)}")
    # transactions
    committed = W.read_topic(boot, W.TXN, W.TXN_PARTITIONS, committed_only=True)
    seen: dict[int, list[int]] = {}
    for recs in committed.values():
        for _, _, v in recs:
            t, i = (int(x) for x in v.split(b":"))
            seen.setdefault(t, []).append(i)
    for t in txn.committed:
        assert sorted(seen.get(t, [])) == list(range(W.TXN_SIZE)), (
            f"committed transaction {t}: read {sorted(seen.get(t, []))}")
    for t in txn.aborted:
        assert t not in seen, f"aborted transaction {t} visible to read_committed"
    for t in txn.unknown:
        assert sorted(seen.get(t, [])) in ([], list(range(W.TXN_SIZE))), (
            f"transaction {t} of unknown outcome partly visible: {sorted(seen[t])}")
    assert set(seen) <= txn.committed | txn.unknown, (
        f"transactions never committed are visible: {sorted(set(seen) - txn.committed)[:5]}")
    if txn.aborted:
        raw = W.read_topic(boot, W.TXN, W.TXN_PARTITIONS, committed_only=False)
        written = {int(v.split(b":")[0]) for recs in raw.values() for _, _, v in recs}
        assert written & txn.aborted, "no aborted transaction was written: the check is blind"
    # the compacted topic
    assert not keyed.failed, keyed.failed[:5]
    assert keyed.unflushed == 0
    compacted = W.read_topic(boot, W.COMPACTED, 1, committed_only=False)[0]
    last: dict[bytes, int] = {}
    for _, k, v in compacted:
        n = int(v.split(b".")[0])
        assert n in keyed.sent_values, f"{W.COMPACTED}: value {n} was never sent"
        last[k] = n
    for k, n in keyed.last.items():
        assert last.get(k, -1) >= n, f"{W.COMPACTED}: key {k!r} ends at {last.get(k)}, acked {n}"
    # committed offsets
    _increasing(group.commits, "the group's successful commits")
    final = watcher.read()
    _increasing(watcher.readings + ([final] if final else []), "the group's committed offsets")
    if group.commits and final:
        for p, o in group.commits[-1].items():
            assert final.get(p, -1) >= o, f"committed offset of partition {p} lost: {final}"


def run(base: Path, seconds: float, seed: int, log: Any = print) -> Report:
    rng = random.Random(seed)
    cluster = ChaosCluster(base, disk_bytes=max(64, int(seconds / 60 * 40) + 64) * 1024 * 1024,
                           log=log).start()
    clients: list[Any] = []
    try:
        c = cluster.cluster
        c.create_topic(W.NUMBERED, W.NUMBERED_PARTITIONS, 3, {"min.insync.replicas": "2"})
        c.create_topic(W.TXN, W.TXN_PARTITIONS, 3, {"min.insync.replicas": "2"})
        c.create_topic(W.COMPACTED, 1, 3, {
            "min.insync.replicas": "2", "cleanup.policy": "compact", "segment.bytes": "65536",
            "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
            "delete.retention.ms": "1000"})
        boot = cluster.bootstrap
        logs = base / "clients"
        logs.mkdir(exist_ok=True)
        numbered = W.NumberedProducer(boot, 0.002, logs)
        keyed = W.KeyedProducer(boot, 0.005, logs)
        txn = W.TxnProducer(boot, 0.05, seed, logs)
        group = W.GroupConsumer(boot, logs)
        watcher = W.OffsetWatcher(boot, logs)
        clients = [numbered, keyed, txn, group, watcher]
        for t in clients:
            t.start()
        faults = FaultLog()
        log(f"chaos: seed {seed}, {seconds:.0f} s of faults, disk faults "
            f"{'on' if cluster.disk_faults else 'off (no tmpfs: not root)'}, dir {base}")
        time.sleep(3)
        while time.monotonic() - faults.started < seconds:
            cluster.inject(rng, faults)
            time.sleep(rng.uniform(2, 5))
        elapsed = time.monotonic() - faults.started
        cluster.heal_all()
        for t in clients:
            t.finish()
        for t in clients:
            t.join(400)
            assert not t.is_alive(), f"{t.name} did not finish"
        cluster.wait_in_service({W.NUMBERED: W.NUMBERED_PARTITIONS, W.TXN: W.TXN_PARTITIONS,
                                 W.COMPACTED: 1})
        check(cluster, numbered, keyed, txn, group, watcher)
        report = Report(elapsed, faults.counts(), numbered.acked_count(), len(txn.committed),
                        len(txn.aborted), len(txn.unknown), keyed.acked, len(group.commits),
                        len(watcher.readings), [d for t in clients for d in t.deaths])
        log(report.line())
        return report
    finally:
        for t in clients:
            t.kill()
        cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/chaos", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0,
                        help="minutes of faults (default %(default)s)")
    parser.add_argument("--seed", type=int, default=None,
                        help="the faults' random seed (default: a new one, printed)")
    parser.add_argument("--dir", help="where the nodes' data and logs go (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-chaos-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"chaos: seed {seed} (rerun with --seed {seed}); data and logs in {base}", flush=True)
    try:
        run(base, args.minutes * 60, seed, log=lambda s: print(s, flush=True))
    except AssertionError as e:
        print(f"chaos: FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
