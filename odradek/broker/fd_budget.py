"""File descriptors as a budget (issue 15.3).

Every partition a broker hosts holds descriptors open (its active segment's
``.log``, ``.index`` and ``.timeindex``, and one per older segment's ``.log``);
every client connection holds one; the metadata log, checkpoints and
flushes need a few more now and then. With too many partitions for the
open-files limit, any of those opens fails with EMFILE and the broker is up
but serves nothing (the metadata log cannot even be flushed).

* At start-up `raise_open_files_limit` raises the soft RLIMIT_NOFILE to the
  hard one (as Kafka's start scripts expect the operator to) and logs both.
* `FdBudget.refusal` is asked before CreateTopics and CreatePartitions: a
  creation that would leave fewer than ``odradek.open.files.reserve``
  descriptors free (the ones open now, read from /proc/self/fd, plus
  FDS_PER_PARTITION for each new replica on this broker) is refused with
  POLICY_VIOLATION and a message naming the limit, the count and how many
  partitions still fit.
* Closed segments' ``.log`` files are opened on use and kept in an LRU
  (storage/open_files.py) of at most ``odradek.log.segment.open.files.max``
  (-1: a quarter of the limit left after the reserve); ``configure_segment_files``
  sets that bound at start-up. The budget counts the files the LRU holds now
  as used (as before it existed); if active segments and a full LRU meet the
  limit later, the operation that meets EMFILE fails and the LRU closes its
  idle files (storage/log_manager.py), so the next one succeeds.
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

# Descriptors a new partition holds: its active segment's .log, .index, .timeindex.
FDS_PER_PARTITION = 3


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
    """Set the bound of the LRU of closed segments' open files; returns it (0: none)."""
    bound = configured
    if configured < 0:
        bound = 0 if soft_limit == resource.RLIM_INFINITY else derived_max_open(soft_limit,
                                                                                reserve)
    SEGMENT_FILES.configure(bound)
    log.info("closed segments' files kept open: at most %s (odradek.log.segment.open.files.max"
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
        needed = new_replicas * FDS_PER_PARTITION
        room = soft - self.reserve - used
        if needed <= room:
            return None
        fits = max(0, room // FDS_PER_PARTITION)
        return (f"Creating {new_replicas} partition replica(s) on this broker would need about "
                f"{needed} more open files; the open-files limit is {soft}, {used} are open "
                f"and odradek.open.files.reserve={self.reserve} are kept free, so at most "
                f"{fits} more fit. Raise the limit (ulimit -n / LimitNOFILE) or create fewer "
                f"partitions.")
