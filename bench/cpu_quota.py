"""A CPU budget per process, so that broker processes on one small box do not share cores.

Issue 18 asks for RF=3's throughput against RF=1's "on a machine where the brokers
do not share cores". This box has two cores and the RF=3 cluster three brokers, so
`bench/cluster.py --broker-cores X` gives each broker process (and RF=1's single
node, and the cluster's controller) its own cgroup with a CFS quota of X cores:
each process can use X of a core whatever the others do, as if it had a core of
its own X times as fast. The producer runs outside the quotas. The run is valid
while the quotas fit beside the client: 3·X plus the client's cores must stay
under the box's cores, or the quotas are a ceiling the brokers cannot reach
(`fits` in the JSON says whether they did).

The CFS period is 10 ms (the kernel's default is 100 ms): a process that uses up
its quota stalls until the period ends, and a 100 ms period would put stalls of
tens of ms into every acks=all round trip. Each cgroup's `cpu.stat` tells how often
its process was held back (`throttled_periods`): a broker that was never throttled
was not bounded by its quota.

cgroup v1 (`/sys/fs/cgroup/cpu`, `cpu.cfs_quota_us`) and v2 (`cpu.max`) are both
handled; root (or a delegated cgroup) is needed. `available()` says whether this
machine allows it.
"""

from __future__ import annotations

import os
from pathlib import Path

PERIOD_US = 10_000
V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")


def _root() -> tuple[Path, int] | None:
    """The cgroup directory new groups go under, and the cgroup version."""
    if (V1_ROOT / "cpu.cfs_quota_us").exists():
        return V1_ROOT, 1
    # v2: a child group gets the cpu controller only if the root hands it down
    subtree = V2_ROOT / "cgroup.subtree_control"
    if subtree.exists() and "cpu" in subtree.read_text().split():
        return V2_ROOT, 2
    return None


def available() -> str | None:
    """None if quotas can be set here, else why not (tried: a group is made,
    given a quota and removed)."""
    root = _root()
    if root is None:
        return ("no cgroup cpu controller on this machine (v1 /sys/fs/cgroup/cpu, or v2 "
                "with cpu in /sys/fs/cgroup/cgroup.subtree_control)")
    try:
        CpuQuota("probe", 1.0).close()
    except OSError as e:
        return f"cannot make a cgroup under {root[0]} ({e}); run as root"
    return None


class CpuQuota:
    """A cgroup holding processes to `cores` of CPU. `add(pid)` moves a process
    (all its threads, and the children it starts later) in; `close()` moves them
    back out and removes the group."""

    def __init__(self, name: str, cores: float) -> None:
        if not cores > 0:  # also NaN
            raise ValueError(f"a CPU quota must be above 0 cores, not {cores}")
        root = _root()
        if root is None:
            raise RuntimeError(available() or "no cgroup cpu controller")
        self.parent, self.version = root
        self.cores = cores
        self.path = self.parent / f"odradek-bench-{name}-{os.getpid()}"
        self.path.mkdir(exist_ok=True)
        quota = max(1000, round(cores * PERIOD_US))
        if self.version == 1:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def stat(self) -> dict[str, int]:
        """The kernel's counters: periods, throttled periods, throttled time (us)."""
        raw = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines()
                   if len(line.split()) == 2)
        if self.version == 1:
            return {"periods": int(raw.get("nr_periods", 0)),
                    "throttled_periods": int(raw.get("nr_throttled", 0)),
                    "throttled_us": int(raw.get("throttled_time", 0)) // 1000}
        return {"periods": int(raw.get("nr_periods", 0)),
                "throttled_periods": int(raw.get("nr_throttled", 0)),
                "throttled_us": int(raw.get("throttled_usec", 0))}

    def close(self) -> None:
        if not self.path.exists():
            return
        try:
            pids = (self.path / "cgroup.procs").read_text().split()
        except OSError:
            pids = []
        for pid in pids:
            try:
                (self.parent / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # it exited meanwhile
        try:
            self.path.rmdir()
        except OSError:
            pass  # a process still inside; the kernel frees the group when it exits
