"""The chaos run's cluster and its faults.

A controller and three brokers (tests/integration/cluster_proc.py) where every
way into a broker goes through a `PartitionProxy` of its own: its
`advertised.listeners` (clients and the other brokers) and its way to the
controller (`controller.quorum.voters`). Each broker's log dir is a small
filesystem (tests/integration/small_fs.py: a tmpfs when the run may mount, as
root; its metadata log elsewhere) with a free-space floor
(`log.dir.free.space.min.bytes`), so that "the disk fills" is a file written
beside the log until less than the floor is left, and "the disk is freed" is
that file deleted.

The faults, one at a time, each bounded and undone before the next:

- ``kill9``: a broker killed with SIGKILL, restarted after 1-4 s;
- ``pause``: a broker stopped with SIGSTOP for 3-5 s (longer than
  broker.session.timeout.ms: it is fenced) and continued;
- ``partition``: a broker cut off from everyone, clients and the controller,
  for 3-8 s, then healed;
- ``controller``: the controller killed with SIGKILL, restarted after 1-3 s;
- ``disk``: a broker's log dir filled past its floor for 3-8 s (produce there is
  refused, retriably), then freed.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.broker_proc import HOST, free_port
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.partition_proxy import PartitionProxy
from tests.integration.small_fs import MIB, SmallFilesystem

BROKERS = (1, 2, 3)
FLOOR_BYTES = 8 * MIB
FAULTS = ("kill9", "pause", "partition", "controller", "disk")


@dataclass
class FaultLog:
    """What was done, in order: (seconds since the start, fault, target, seconds held)."""

    started: float = field(default_factory=time.monotonic)
    entries: list[tuple[float, str, str, float]] = field(default_factory=list)

    def add(self, fault: str, target: str, held_s: float) -> None:
        self.entries.append((time.monotonic() - self.started, fault, target, held_s))

    def counts(self) -> dict[str, int]:
        out = {f: 0 for f in FAULTS}
        for _, fault, _, _ in self.entries:
            out[fault] += 1
        return out


class ChaosCluster:
    def __init__(self, base: Path, disk_bytes: int, log: Callable[[str], None] = print) -> None:
        self.base = base
        self.log = log
        self.disks = {b: SmallFilesystem(base / f"disk-{b}", disk_bytes) for b in BROKERS}
        self.to_broker = {b: free_port() for b in BROKERS}
        self.to_controller = {b: free_port() for b in BROKERS}
        overrides: dict[int, dict[str, object]] = {}
        for b in BROKERS:
            overrides[b] = {
                "advertised.listeners": f"PLAINTEXT://{HOST}:{self.to_broker[b]}",
                "controller.quorum.voters": f"100@{HOST}:{self.to_controller[b]}",
                "log.dirs": str(self.disks[b].path / "data"),
                "metadata.log.dir": str(base / f"broker-{b}-meta"),
                "log.dir.free.space.min.bytes": FLOOR_BYTES,
            }
        self.cluster = ClusterProcesses(base, brokers=len(BROKERS), broker_overrides=overrides,
                                        overrides={"transaction.state.log.replication.factor": 3,
                                                   "transaction.state.log.min.isr": 2,
                                                   "offsets.topic.replication.factor": 3,
                                                   "default.replication.factor": 3,
                                                   "min.insync.replicas": 2})
        self.proxies: dict[str, PartitionProxy] = {}
        self.fillers: dict[int, Path] = {}
        self.paused: set[int] = set()

    @property
    def disk_faults(self) -> bool:
        """Disk faults need a real small filesystem (a tmpfs: root)."""
        return all(d.real for d in self.disks.values())

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{self.to_broker[b]}" for b in BROKERS)

    def start(self) -> ChaosCluster:
        for d in self.disks.values():
            d.__enter__()
        self.cluster.controller.start()
        for b in BROKERS:
            self.proxies[f"to-broker-{b}"] = PartitionProxy(
                self.to_broker[b], self.cluster.brokers[b].port)
            self.proxies[f"to-controller-{b}"] = PartitionProxy(
                self.to_controller[b], self.cluster.controller_port)
        for b in BROKERS:
            self.cluster.brokers[b].start()
        self.cluster.wait_for_brokers(set(BROKERS), timeout_s=60)
        return self

    def close(self) -> None:
        for b in list(self.paused):
            self._cont(b)
        self.cluster.close()
        for p in self.proxies.values():
            p.close()
        for d in self.disks.values():
            d.__exit__(None, None, None)

    # -- faults ------------------------------------------------------------------------------

    def inject(self, rng: random.Random, faults: FaultLog) -> None:
        """One fault, held, then undone."""
        choices = [f for f in FAULTS if f != "disk" or self.disk_faults]
        fault = rng.choice(choices)
        b = rng.choice(BROKERS)
        if fault == "kill9":
            held = rng.uniform(1, 4)
            self.cluster.brokers[b].kill9()
            time.sleep(held)
            self.cluster.brokers[b].restart()
            target = f"broker {b}"
        elif fault == "pause":
            held = rng.uniform(3, 5)
            self._stop(b)
            time.sleep(held)
            self._cont(b)
            target = f"broker {b}"
        elif fault == "partition":
            held = rng.uniform(3, 8)
            self.proxies[f"to-broker-{b}"].cut()
            self.proxies[f"to-controller-{b}"].cut()
            time.sleep(held)
            self.proxies[f"to-broker-{b}"].heal()
            self.proxies[f"to-controller-{b}"].heal()
            target = f"broker {b}"
        elif fault == "controller":
            held = rng.uniform(1, 3)
            self.cluster.controller.kill9()
            time.sleep(held)
            self.cluster.controller.restart()
            target = "controller 100"
        else:
            held = rng.uniform(3, 8)
            self._fill(b)
            time.sleep(held)
            self._free(b)
            target = f"broker {b}'s log dir"
        faults.add(fault, target, held)
        self.log(f"[chaos {time.monotonic() - faults.started:7.1f}s] {fault} {target} "
                 f"for {held:.1f} s")

    def _stop(self, b: int) -> None:
        pid = self.cluster.brokers[b].pid
        if pid is not None:
            os.kill(pid, signal.SIGSTOP)
            self.paused.add(b)

    def _cont(self, b: int) -> None:
        pid = self.cluster.brokers[b].pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.paused.discard(b)

    def _fill(self, b: int) -> None:
        """Write a file beside the log until half the floor is left."""
        path = self.disks[b].path / "filler"
        st = os.statvfs(self.disks[b].path)
        free = st.f_bavail * st.f_frsize
        size = max(free - FLOOR_BYTES // 2, 0)
        with open(path, "wb") as f:
            chunk = b"\0" * MIB
            while size > 0:
                try:
                    f.write(chunk[:min(size, MIB)])
                except OSError:
                    break
                size -= MIB
        self.fillers[b] = path

    def _free(self, b: int) -> None:
        path = self.fillers.pop(b, None)
        if path is not None:
            path.unlink(missing_ok=True)

    # -- back in service ---------------------------------------------------------------------

    def heal_all(self) -> None:
        for b in list(self.paused):
            self._cont(b)
        for p in self.proxies.values():
            p.heal()
        for b in list(self.fillers):
            self._free(b)
        if not self.cluster.controller.is_running():
            self.cluster.controller.restart()
        for b in BROKERS:
            if not self.cluster.brokers[b].is_running():
                self.cluster.brokers[b].restart()

    def wait_in_service(self, topics: dict[str, int], timeout_s: float = 120) -> None:
        """Every broker registered and every partition's ISR whole."""
        self.cluster.wait_for_brokers(set(BROKERS), timeout_s=timeout_s)
        for topic, partitions in topics.items():
            for p in range(partitions):
                self.cluster.wait_for_partition(
                    topic, p, lambda v: len(v.isr) == len(BROKERS), "ISR whole",
                    timeout_s=timeout_s)
