"""State batches of a share partition (KIP-932): how the share coordinator
combines them, and what a write changed.

A state batch is (first offset, last offset, delivery count, delivery state),
state 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED. A share partition's stored
batches are kept canonical: sorted, not overlapping, and two batches that touch
(one's last offset + 1 is the other's first) never have the same count and
state (they would be one batch).

`combine(old, new, start)` has the semantics of Kafka's share coordinator
(StateBatchUtil.combineStateBatches / PersisterStateBatchCombiner): the batches
wholly below the start offset are dropped and the one that straddles it is cut
(no pruning when the start offset is -1); then, at every offset, of the batches
that cover it the one with the highest (delivery count, delivery state) wins --
a record's state only moves forward (a delivery raises the count; ACKNOWLEDGED
and ARCHIVED are terminal), so a late or repeated write cannot take it back;
the result is canonical.

`changed(old, new)` is what a ShareUpdate record carries: the runs of `new`
at the offsets where `old` holds something else. Since `combine` takes the
highest per offset, laying them over `old` gives `new` again:
combine(old, changed(old, new), start) == new, for new = combine(old, x, start).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

Batch = tuple[int, int, int, int]  # (first offset, last offset, delivery count, state)


def prune(batches: Iterable[Batch], start_offset: int) -> list[Batch]:
    """The batches at or above `start_offset` (a straddling one cut); all of them
    when the start offset is -1 (not known)."""
    if start_offset < 0:
        return [b for b in batches if b[0] <= b[1]]
    out = []
    for first, last, count, state in batches:
        if last < start_offset or last < first:
            continue
        out.append((max(first, start_offset), last, count, state))
    return out


def combine(old: Iterable[Batch], new: Iterable[Batch], start_offset: int) -> tuple[Batch, ...]:
    """Kafka's combineStateBatches: pruned below `start_offset`, the highest
    (delivery count, state) at each offset, canonical."""
    items = sorted(prune(old, start_offset) + prune(new, start_offset))
    if not items:
        return ()
    if len(items) == 1:
        return (items[0],)
    points = sorted({b[0] for b in items} | {b[1] + 1 for b in items})
    active: list[tuple[int, int, int]] = []  # (-count, -state, last offset): a max-heap
    out: list[Batch] = []
    i = 0
    for k in range(len(points) - 1):
        at = points[k]
        while i < len(items) and items[i][0] == at:
            _, last, count, state = items[i]
            heapq.heappush(active, (-count, -state, last))
            i += 1
        while active and active[0][2] < at:
            heapq.heappop(active)
        if not active:
            continue  # a gap between batches
        count, state = -active[0][0], -active[0][1]
        upto = points[k + 1] - 1  # every batch ends just before some point: the top covers it
        if out and out[-1][1] == at - 1 and out[-1][2] == count and out[-1][3] == state:
            out[-1] = (out[-1][0], upto, count, state)
        else:
            out.append((at, upto, count, state))
    return tuple(out)


def changed(old: Iterable[Batch], new: Iterable[Batch]) -> tuple[Batch, ...]:
    """The runs of `new` (canonical) at the offsets where `old` (canonical) holds
    a different (count, state) or nothing."""
    olds = list(old)
    out: list[Batch] = []
    j = 0
    for first, last, count, state in new:
        at = first
        while j < len(olds) and olds[j][1] < first:
            j += 1
        k = j
        while at <= last:
            if k < len(olds) and olds[k][0] <= last:
                of, ol, oc, os_ = olds[k]
                if of > at:
                    out.append((at, of - 1, count, state))
                    at = of
                    continue
                upto = min(ol, last)
                if (oc, os_) != (count, state):
                    out.append((at, upto, count, state))
                at = upto + 1
                k += 1
            else:
                out.append((at, last, count, state))
                break
    merged: list[Batch] = []
    for b in out:  # pieces of one run of `new` cut by old batches: joined again
        if merged and merged[-1][1] == b[0] - 1 and merged[-1][2:] == b[2:]:
            merged[-1] = (merged[-1][0], b[1], b[2], b[3])
        else:
            merged.append(b)
    return tuple(merged)
