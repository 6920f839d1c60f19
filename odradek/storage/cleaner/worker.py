"""The cleaner's worker processes: where ``clean_log`` runs.

Why processes: cleaning decodes every record of the logs it reads, in
Python. In a thread of the broker that work would hold the GIL in 5 ms slices
against the event loop and multiply produce and fetch latency; in a process
of its own it shares nothing with the broker but the files. The broker keeps
one worker process per ``log.cleaner.threads`` (each cleaner loop has its
own, so a cleaning's offset map stays in its process between the calls that
clean its groups one by one), started with ``spawn`` (no inherited sockets,
locks or threads).

Workers run at the lowest CPU priority (``WORKER_NICENESS`` and, on Linux, the
SCHED_IDLE policy and, where the broker could create one, a cgroup whose
``cpu.idle`` is 1: storage/cleaner/cgroup.py says why the policy alone is not
enough), so cleaning takes what the broker's request handling and the rest of
the machine leave. A worker never outlives the broker: it asks the kernel for
SIGKILL when its parent dies (``PR_SET_PDEATHSIG``, Linux) and also checks its
parent and the broker's stop event between batches, so it cannot write
``.cleaned`` files into a log dir a restarted broker already loaded.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any

from odradek.storage.cleaner import cgroup
from odradek.storage.cleaner.cleaner import LogCleaning
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.task import CleanedGroup, CleanResult, CleanTask

PR_SET_PDEATHSIG = 1
# Cleaning is background work: on a busy machine the broker's own process
# (requests) gets the CPU first.
WORKER_NICENESS = 19
_parent_pid: int | None = None
_stop_event: Any = None
# The offset map is allocated once per worker (like Kafka's per cleaner thread)
# and cleared between cleanings.
_offset_map: OffsetMap | None = None
# The cleaning the broker is driving group by group (one at a time per worker:
# each cleaner thread has a worker process of its own).
_cleaning: LogCleaning | None = None
# Where this worker's CPU priority comes from, for the broker's log (ready()).
_placement = "nice 19, SCHED_IDLE"
_idle_procs: str | None = None  # the idle cgroup joined at start, rejoined after a lift


def init_worker(parent_pid: int, stop_event: Any, cgroup_procs: str | None = None) -> None:
    """Set up a new worker process: lowest priority, joined to the idle cgroup whose
    ``cgroup.procs`` is ``cgroup_procs`` (if any), dies with the broker."""
    global _parent_pid, _stop_event, _placement, _idle_procs
    _parent_pid = parent_pid
    _stop_event = stop_event
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.nice(WORKER_NICENESS)
    except OSError:
        pass
    try:
        # SCHED_IDLE (Linux): runs only when a CPU would otherwise idle, so a
        # request that wakes the broker never waits for a cleaner time slice
        # to end (niceness alone leaves a wake-up waiting up to a few ms). It
        # ranks the worker within its scheduling group only; the idle cgroup
        # below does the same against every other group on the machine.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        _placement = "nice 19"
    if cgroup_procs is not None:
        error = cgroup.join(cgroup_procs)
        if error is None:
            _placement += f", idle cgroup {os.path.dirname(cgroup_procs)}"
            _idle_procs = cgroup_procs
        else:  # the group was made for us, so this is unexpected: say so in ready()
            _placement += f" (joining {cgroup_procs} failed: {error})"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: rely on should_stop()
        pass
    if os.getppid() != parent_pid:
        os._exit(0)


def should_stop() -> bool:
    if _parent_pid is not None and os.getppid() != _parent_pid:
        os._exit(0)  # the broker is gone: write nothing more
    return _stop_event is not None and _stop_event.is_set()


def idle_again() -> None:
    """Back to idle priority at each call, after the broker lifted this worker out of
    it for one starved call (manager.py's starvation bound)."""
    try:
        if os.sched_getscheduler(0) != os.SCHED_IDLE:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            if _idle_procs is not None:
                cgroup.join(_idle_procs)
    except (OSError, AttributeError):
        pass


def _map_for(task: CleanTask) -> OffsetMap:
    global _offset_map
    if _offset_map is None or not _offset_map.fits(task.map_memory_bytes, task.map_load_factor):
        _offset_map = None  # free the old one first
        _offset_map = OffsetMap(task.map_memory_bytes, task.map_load_factor)
    return _offset_map


def begin(task: CleanTask) -> int:
    """Start cleaning ``task``'s log (offset map built); returns the group count.
    A cleaning left unfinished by the broker is dropped."""
    global _cleaning
    idle_again()
    _cleaning = None
    _cleaning = LogCleaning(task, should_stop, _map_for(task))
    return len(_cleaning.groups)


def clean_group(i: int) -> CleanedGroup:
    assert _cleaning is not None, "no cleaning begun"
    idle_again()
    return _cleaning.clean_group(i)


def finish() -> CleanResult:
    global _cleaning
    assert _cleaning is not None, "no cleaning begun"
    cleaning, _cleaning = _cleaning, None
    return cleaning.finish()


def ready() -> tuple[int, str]:
    """Makes the pool start its process ahead of the first cleaning; returns its pid
    and where its CPU priority comes from (for the broker's log)."""
    return os.getpid(), _placement
