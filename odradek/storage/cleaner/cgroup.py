"""An idle CPU cgroup for the cleaner's worker processes (Linux, best effort).

Why: a worker runs at nice 19 with the SCHED_IDLE policy (worker.py), but the
kernel ranks a task by its policy only against the tasks of its own
scheduling group. With autogroups (a session per group, the default on
desktop and many server kernels) or any cgroup layout, the broker's group
meets other groups (a client, a probe, another service) at the level above,
and there the broker's group is an ordinary entity however idle the worker
inside it is: a client that wakes on a 2-core machine waits behind a cleaning
time slice until the next tick (up to 4 ms at HZ=250). A cgroup whose
``cpu.idle`` is 1 (Linux 5.15+) is itself an idle entity wherever it meets
other groups, so whatever wakes preempts the cleaning at once.

Where: a child of the broker's own cpu cgroup, named
``odradek-cleaner-<broker pid>``:

- cgroup v1: the hierarchy mounted with the ``cpu`` controller (found in
  /proc/self/mountinfo), the broker's path in it from /proc/self/cgroup
  (``N:cpu,...:/path``); the parent must have ``cpu.idle``;
- cgroup v2: the unified hierarchy (``0::/path``), only when the parent's
  ``cgroup.subtree_control`` already has ``cpu`` (in practice the root group:
  v2 lets no other group with processes enable a controller for children).
  odradek never enables a controller itself: that would change how every
  sibling group is scheduled.

The group is idle against what it meets at its own level: every other group
on the machine when the broker runs in the root cpu cgroup (autogroups, as on
the dev machine), only the broker's siblings when the broker's group is nested.

Each worker writes its own pid into the group's ``cgroup.procs`` when it
starts (a worker is a process, so ``cgroup.procs`` on either version), before
any cleaning. Only workers ever join: the broker's process and its event loop
stay where they are.

Lifetime: the broker creates the group when its cleaner starts and removes it
(rmdir, once its workers have exited) when the cleaner stops. Groups left by a
broker that was killed (its pid no longer alive; its workers die with it) are
removed when the next broker creates its own in the same parent.

Fallback: anything refused (no such controller, read-only cgroupfs, not
permitted, a systemd-managed parent without delegation) gives no group, one
debug log line, and workers keep nice 19 + SCHED_IDLE.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

GROUP_PREFIX = "odradek-cleaner-"
PROC_MOUNTINFO = Path("/proc/self/mountinfo")
PROC_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True, slots=True)
class CpuCgroup:
    """The broker's own cgroup in the hierarchy that has the cpu controller."""

    version: int  # 1 or 2
    path: Path  # a directory of the mounted cgroupfs


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo (octal).
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def _under(mount_root: str, cgroup_path: str) -> str | None:
    """``cgroup_path`` relative to the mount's root, or None when outside it."""
    root = mount_root.rstrip("/")
    if not root:
        return cgroup_path.lstrip("/")
    if cgroup_path == root:
        return ""
    if cgroup_path.startswith(root + "/"):
        return cgroup_path[len(root) + 1 :]
    return None


def find_cpu_cgroup(mountinfo: str, proc_cgroup: str) -> CpuCgroup | None:
    """The broker's cpu cgroup directory, from the text of /proc/self/mountinfo and
    /proc/self/cgroup; None when no hierarchy has the cpu controller (or no line
    places the process in it). A v1 hierarchy with ``cpu`` wins: while cpu is bound
    to v1, the unified hierarchy cannot have it."""
    v1_paths: dict[str, str] = {}  # controller -> path
    v2_path: str | None = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if parts[0] == "0" and controllers == "":
            v2_path = path
        for controller in controllers.split(","):
            v1_paths[controller] = path
    v2_mount: tuple[str, str] | None = None  # (root, mountpoint)
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        tail = line.split(" - ", 1)[1].split()
        if len(tail) < 3:
            continue
        fstype, super_options = tail[0], tail[2].split(",")
        root, mountpoint = _unescape(fields[3]), _unescape(fields[4])
        if fstype == "cgroup" and "cpu" in super_options and "cpu" in v1_paths:
            rel = _under(root, v1_paths["cpu"])
            if rel is not None:
                return CpuCgroup(1, Path(mountpoint) / rel)
        elif fstype == "cgroup2" and v2_mount is None:
            v2_mount = (root, mountpoint)
    if v2_mount is not None and v2_path is not None:
        rel = _under(v2_mount[0], v2_path)
        if rel is not None:
            return CpuCgroup(2, Path(v2_mount[1]) / rel)
    return None


def _offers_cpu_idle(parent: CpuCgroup) -> bool:
    if parent.version == 1:
        return (parent.path / "cpu.idle").is_file()
    try:
        return "cpu" in (parent.path / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


def _write(path: Path, value: str) -> None:
    # As `echo value > path`: cgroupfs files exist already; each write is one value.
    with open(path, "w") as f:
        f.write(value)


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (killed, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill()
    return stat[stat.rindex(")") + 2 :][:1] not in ("Z", "X")


def remove_stale_groups(parent: Path, own_pid: int) -> list[Path]:
    """rmdir the ``odradek-cleaner-<pid>`` groups of brokers no longer alive (empty:
    their workers died with them); returns those removed."""
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        suffix = entry.name[len(GROUP_PREFIX) :]
        if not entry.name.startswith(GROUP_PREFIX) or not suffix.isdigit():
            continue
        pid = int(suffix)
        if pid == own_pid or _pid_alive(pid):
            continue
        try:
            entry.rmdir()
        except OSError:
            continue  # not empty, or not ours to remove
        removed.append(entry)
    return removed


class IdleCgroup:
    """A child cgroup with ``cpu.idle`` = 1 that the cleaner's workers join."""

    def __init__(self, path: Path, version: int) -> None:
        self.path = path
        self.version = version

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def release(self, pid: int) -> bool:
        """Move process ``pid`` out of the group, to its parent (the broker's own group):
        the starvation bound of the cleaner (manager.py). False when refused."""
        try:
            _write(self.path.parent / "cgroup.procs", str(pid))
        except OSError as e:
            log.debug("cannot move %d out of %s: %s", pid, self.path, e)
            return False
        return True

    @classmethod
    def create(cls, parent: CpuCgroup | None, pid: int | None = None) -> IdleCgroup | None:
        """The group for broker ``pid`` under ``parent``; None (and a debug line) when
        there is no cpu cgroup, it has no ``cpu.idle``, or creating is refused."""
        pid = os.getpid() if pid is None else pid
        if parent is None:
            log.debug("no cpu cgroup: cleaner workers use SCHED_IDLE only")
            return None
        if not _offers_cpu_idle(parent):
            log.debug("cgroup %s (v%d) offers no cpu.idle: cleaner workers use SCHED_IDLE "
                      "only", parent.path, parent.version)
            return None
        for stale in remove_stale_groups(parent.path, pid):
            log.info("removed the cleaner cgroup %s of a broker that is gone", stale)
        path = parent.path / f"{GROUP_PREFIX}{pid}"
        try:
            path.mkdir(exist_ok=True)
        except OSError as e:
            log.debug("cannot create cgroup %s (%s): cleaner workers use SCHED_IDLE only",
                      path, e)
            return None
        try:
            _write(path / "cpu.idle", "1")
            if (path / "cpu.idle").read_text().strip() != "1":
                raise OSError(f"{path / 'cpu.idle'} does not read back 1")
        except OSError as e:
            log.debug("cannot make cgroup %s idle (%s): cleaner workers use SCHED_IDLE only",
                      path, e)
            _rmdir(path)
            return None
        return cls(path, parent.version)

    @classmethod
    def create_for_this_process(cls) -> IdleCgroup | None:
        try:
            mountinfo, proc_cgroup = PROC_MOUNTINFO.read_text(), PROC_CGROUP.read_text()
        except OSError as e:
            log.debug("no cgroup information (%s): cleaner workers use SCHED_IDLE only", e)
            return None
        return cls.create(find_cpu_cgroup(mountinfo, proc_cgroup))

    def remove(self) -> bool:
        """rmdir the group; False when it still has processes (or is gone already)."""
        return _rmdir(self.path)


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return False
    except OSError as e:
        log.debug("cannot remove cgroup %s: %s", path, e)
        return False
    return True


def join(procs_file: str) -> str | None:
    """Move the calling process into the group whose ``cgroup.procs`` is
    ``procs_file`` (the whole process, all its threads); the error, or None."""
    try:
        _write(Path(procs_file), str(os.getpid()))
    except OSError as e:
        return str(e)
    return None
