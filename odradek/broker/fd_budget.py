"""File descriptors as a budget (issue 15.3).

Every partition a broker hosts used to hold descriptors open (its active
segment's ``.log``, ``.index`` and ``.timeindex``): 50,000 partitions needed
150,000. Now no index holds one (storage/index.py) and every segment's
``.log``, the active one's included, is in the bounded LRU of open files
(storage/open_files.py), so with that LRU bounded a partition holds no
descriptor of its own: the logs' share is the LRU's bound, whatever the
partition count. Every client connection holds one; the metadata log, checkpoints and
flushes need a few more now and then. With too many partitions for the
open-files limit, any of those opens fails with EMFILE and the broker is up
but serves nothing (the metadata log cannot even be flushed).

* At start-up `raise_open_files_limit` raises the soft RLIMIT_NOFILE to the
  hard one (as Kafka's start scripts expect the operator to) and logs both.
* `FdBudget.refusal` is asked before CreateTopics and CreatePartitions: a
  creation that would leave fewer than ``odradek.open.files.reserve``
  descriptors free is refused with POLICY_VIOLATION and a message naming the
  limit, the count and how many partitions still fit. What it counts: the
  descriptors open now (/proc/self/fd, the LRU's included), what the LRU may
  still open up to its bound, CREATE_FDS held for a moment while a log is made,
  and, only when the LRU is unbounded (``odradek.log.segment.open.files.max=0``),
  FDS_PER_PARTITION_UNBOUNDED per new replica on this broker (its ``.log``
  stays open). With the LRU bounded a creation is refused only when even the
  LRU's bound no longer fits.
* ``configure_segment_files`` sets the LRU's bound at start-up (-1: half the
  limit left after the reserve). If the limit is met anyway, the operation
  that meets EMFILE fails and the LRU closes its idle files
  (storage/log_manager.py), so the next one succeeds.
* When EMFILE is hit anyway (e.g. a burst of connections), the request that
  met it fails with an error code; nothing is taken offline (storage's
  LogManager: a process limit is not a failed disk) and the broker serves
  again once descriptors are released.
"""

from __future__ import annotations

import logging
import os
import resource

from ..storage.open_files import SEGMENT_FILES, derived_max_open

log = logging.getLogger(__name__)

# Descriptors a new partition holds for good when the LRU of segment files is
# unbounded: its active segment's .log (indexes hold none).
FDS_PER_PARTITION_UNBOUNDED = 1
# Descriptors open at once while a new log is made (.log, an index, the dir).
CREATE_FDS = 3


def raise_open_files_limit() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit; returns (soft, hard) now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-files limit from %d to %d: %s", soft, hard, e)
            return soft, hard
    log.info("open-files limit: soft %d (was %d), hard %d", hard if soft != hard else soft,
             soft, hard)
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def configure_segment_files(configured: int, soft_limit: int, reserve: int) -> int:
    """Set the bound of the LRU of segments' open files; returns it (0: none)."""
    bound = configured
    if configured < 0:
        bound = 0 if soft_limit == resource.RLIM_INFINITY else derived_max_open(soft_limit,
                                                                                reserve)
    SEGMENT_FILES.configure(bound)
    log.info("segments' .log files kept open: at most %s (odradek.log.segment.open.files.max"
             "=%d)", bound or "unbounded", configured)
    return bound


def open_descriptors() -> int | None:
    """Descriptors this process has open (None where /proc is not there)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own
    except OSError:
        return None


class FdBudget:
    def __init__(self, reserve: int) -> None:
        self.reserve = max(0, reserve)

    def refusal(self, new_replicas: int) -> str | None:
        """Why creating ``new_replicas`` replicas here is refused, or None."""
        if new_replicas <= 0:
            return None
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return None
        used = open_descriptors()
        if used is None:
            return None
        bound = SEGMENT_FILES.max_open
        lru_room = max(0, bound - SEGMENT_FILES.open_count) if bound > 0 else 0
        per_partition = 0 if bound > 0 else FDS_PER_PARTITION_UNBOUNDED
        needed = new_replicas * per_partition + CREATE_FDS
        room = soft - self.reserve - used - lru_room
        if needed <= room:
            return None
        if per_partition == 0:
            return (f"Creating partitions needs {CREATE_FDS} open files for a moment; the "
                    f"open-files limit is {soft}, {used} are open, up to {lru_room} more may be "
                    f"opened by the segment files' LRU (odradek.log.segment.open.files.max="
                    f"{bound}) and odradek.open.files.reserve={self.reserve} are kept free, so "
                    f"0 more fit. Raise the limit (ulimit -n / LimitNOFILE), lower the LRU's "
                    f"bound, or close connections.")
        fits = max(0, (room - CREATE_FDS) // per_partition)
        return (f"Creating {new_replicas} partition replica(s) on this broker would need about "
                f"{needed} more open files; the open-files limit is {soft}, {used} are open "
                f"and odradek.open.files.reserve={self.reserve} are kept free, so at most "
                f"{fits} more fit (odradek.log.segment.open.files.max=0 keeps every active "
                f"segment's .log open; -1 bounds them). Raise the limit (ulimit -n / "
                f"LimitNOFILE) or create fewer partitions.")
