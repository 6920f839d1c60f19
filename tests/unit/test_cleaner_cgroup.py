"""The cleaner workers' idle cpu cgroup: where it goes, and falling back when it cannot.

A temp dir stands in for the cgroupfs: it does not create a group's files on
mkdir, so a test creates what the kernel would (the parent's ``cpu.idle`` or
``cgroup.subtree_control``) and the helper's writes create the rest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.storage.cleaner.cgroup import (
    GROUP_PREFIX,
    CpuCgroup,
    IdleCgroup,
    find_cpu_cgroup,
    join,
    remove_stale_groups,
)

# This dev machine's layout: v1 controllers plus a cgroup2 hierarchy without cpu.
HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = "4:memory:/process_api/d854\n2:cpuacct:/\n1:cpu:/\n0::/\n"

V2_MOUNTINFO = """\
25 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
28 25 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
"""
V2_CGROUP = "0::/system.slice/odradek.service\n"


def test_a_v1_cpu_hierarchy_is_chosen_with_the_brokers_path_in_it() -> None:
    found = find_cpu_cgroup(HYBRID_MOUNTINFO, HYBRID_CGROUP)
    assert found == CpuCgroup(1, Path("/sys/fs/cgroup/cpu"))
    nested = "1:cpu,cpuacct:/kubepods/pod1\n0::/\n"
    combined = HYBRID_MOUNTINFO.replace("rw,cpu\n", "rw,cpu,cpuacct\n")
    assert find_cpu_cgroup(combined, nested) == CpuCgroup(
        1, Path("/sys/fs/cgroup/cpu/kubepods/pod1"))


def test_the_unified_hierarchy_is_chosen_when_no_v1_hierarchy_has_cpu() -> None:
    assert find_cpu_cgroup(V2_MOUNTINFO, V2_CGROUP) == CpuCgroup(
        2, Path("/sys/fs/cgroup/system.slice/odradek.service"))


def test_a_mount_of_a_subtree_maps_the_path_under_its_root() -> None:
    # A container that bind-mounts its own group as its cgroupfs root.
    mountinfo = "28 25 0:25 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    assert find_cpu_cgroup(mountinfo, "0::/docker/abc\n") == CpuCgroup(
        2, Path("/sys/fs/cgroup"))
    assert find_cpu_cgroup(mountinfo, "0::/docker/abc/x\n") == CpuCgroup(
        2, Path("/sys/fs/cgroup/x"))
    assert find_cpu_cgroup(mountinfo, "0::/elsewhere\n") is None


def test_no_cgroup_information_means_no_group() -> None:
    assert find_cpu_cgroup("", "") is None
    assert find_cpu_cgroup(V2_MOUNTINFO, "") is None
    assert IdleCgroup.create(None) is None


def test_a_v1_group_is_created_idle_and_removed(tmp_path: Path) -> None:
    (tmp_path / "cpu.idle").write_text("0\n")
    group = IdleCgroup.create(CpuCgroup(1, tmp_path), pid=os.getpid())
    assert group is not None
    assert group.path == tmp_path / f"{GROUP_PREFIX}{os.getpid()}"
    assert (group.path / "cpu.idle").read_text() == "1"
    assert group.procs_file == group.path / "cgroup.procs"
    (group.path / "cpu.idle").unlink()  # what the kernel does at rmdir
    assert group.remove()
    assert not group.path.exists()


def test_a_v2_group_needs_cpu_in_the_parents_subtree_control(tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    assert IdleCgroup.create(CpuCgroup(2, tmp_path), pid=123) is None
    assert list(tmp_path.iterdir()) == [tmp_path / "cgroup.subtree_control"]
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    group = IdleCgroup.create(CpuCgroup(2, tmp_path), pid=123)
    assert group is not None and (group.path / "cpu.idle").read_text() == "1"


def test_a_v1_parent_without_cpu_idle_gives_no_group(tmp_path: Path) -> None:
    # Kernels before 5.15 have no cpu.idle.
    assert IdleCgroup.create(CpuCgroup(1, tmp_path), pid=123) is None
    assert list(tmp_path.iterdir()) == []


def test_a_refused_mkdir_falls_back_without_error(tmp_path: Path) -> None:
    (tmp_path / "cpu.idle").write_text("0\n")
    (tmp_path / f"{GROUP_PREFIX}123").write_text("")  # mkdir fails: EEXIST, not a dir
    assert IdleCgroup.create(CpuCgroup(1, tmp_path), pid=123) is None
    assert IdleCgroup.create(CpuCgroup(1, tmp_path / "gone"), pid=123) is None


def test_a_group_that_cannot_be_made_idle_is_removed_again(tmp_path: Path) -> None:
    (tmp_path / "cpu.idle").write_text("0\n")
    group = tmp_path / f"{GROUP_PREFIX}123"
    group.mkdir()
    (group / "cpu.idle").mkdir()  # the write fails (EISDIR)
    assert IdleCgroup.create(CpuCgroup(1, tmp_path), pid=123) is None
    (group / "cpu.idle").rmdir()
    assert IdleCgroup.create(CpuCgroup(1, tmp_path / "x"), pid=123) is None
    assert not (tmp_path / "x").exists()


def test_a_group_that_cannot_be_created_falls_back(tmp_path: Path) -> None:
    # mkdir refused (here: a file holds the name; as root a read-only parent
    # would not refuse, so this is the refusal the tests can make anywhere)
    (tmp_path / "cpu.idle").write_text("0\n")
    (tmp_path / f"{GROUP_PREFIX}123").write_text("")
    assert IdleCgroup.create(CpuCgroup(1, tmp_path), pid=123) is None
    assert (tmp_path / f"{GROUP_PREFIX}123").is_file()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_groups_of_brokers_that_are_gone_are_removed_and_others_kept(
        tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    for name in (f"{GROUP_PREFIX}{dead_pid}", f"{GROUP_PREFIX}{os.getppid()}",
                 f"{GROUP_PREFIX}{os.getpid()}", "other-group", f"{GROUP_PREFIX}x"):
        (tmp_path / name).mkdir()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; not reaped yet
    deadline = time.monotonic() + 10
    while Path(f"/proc/{zombie.pid}/stat").read_text().split(") ")[1][0] != "Z":
        assert time.monotonic() < deadline, "the child never became a zombie"
        time.sleep(0.01)
    (tmp_path / f"{GROUP_PREFIX}{zombie.pid}").mkdir()
    busy = tmp_path / f"{GROUP_PREFIX}999999999"  # not a pid; has a process in it
    busy.mkdir()
    (busy / "cgroup.procs").write_text("4242\n")
    assert sorted(remove_stale_groups(tmp_path, os.getpid())) == sorted([
        tmp_path / f"{GROUP_PREFIX}{dead_pid}", tmp_path / f"{GROUP_PREFIX}{zombie.pid}"])
    zombie.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        f"{GROUP_PREFIX}{os.getppid()}", f"{GROUP_PREFIX}{os.getpid()}", "other-group",
        f"{GROUP_PREFIX}x", busy.name])


def test_joining_writes_the_pid_or_returns_the_error(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    assert join(str(procs)) is None
    assert procs.read_text() == str(os.getpid())
    assert join(str(tmp_path / "missing" / "cgroup.procs")) is not None
