"""The invariants of the replication simulator (replication.py), checked as
the events that could break them happen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.simulation.scheduling import SimulationFailure

if TYPE_CHECKING:
    from tests.simulation.replication_nodes import SimBroker



class Checker:
    def __init__(self) -> None:
        self.leaders: dict[tuple[int, int], int] = {}  # (partition, leader epoch) -> broker
        self.exposed: dict[int, dict[int, tuple[int, int]]] = {}  # p -> offset -> (epoch, value)
        self.acked: dict[int, list[tuple[int, tuple[int, ...]]]] = {}  # p -> (base, values)

    def on_leader_start(self, broker: SimBroker, p: int, epoch: int) -> None:
        other = self.leaders.setdefault((p, epoch), broker.node_id)
        if other != broker.node_id:
            raise SimulationFailure(
                f"partition {p}: brokers {other} and {broker.node_id} both lead epoch {epoch}")
        self._holds_exposed(broker, p, self.exposed.get(p, {}).items(), "starts to lead")

    def _holds_exposed(self, broker: SimBroker, p: int, entries: Any, when: str) -> None:
        log = broker.disk.logs[p]
        for offset, entry in entries:
            mine = log.entry(offset)
            if mine != entry:
                raise SimulationFailure(
                    f"partition {p}: broker {broker.node_id} {when} without exposed record "
                    f"{offset}={entry} (has {mine})")

    def on_exposed(self, broker: SimBroker, p: int, epoch: int, old_hw: int, new_hw: int,
                   brokers: dict[int, SimBroker]) -> None:
        log = broker.disk.logs[p]
        seen = self.exposed.setdefault(p, {})
        fresh = []
        for offset in range(old_hw, new_hw):
            entry = log.entry(offset)
            assert entry is not None
            before = seen.get(offset)
            if before is None:
                seen[offset] = entry
            elif before != entry:
                raise SimulationFailure(
                    f"partition {p}: broker {broker.node_id} (epoch {epoch}) exposes {entry} at "
                    f"{offset}, where {before} was exposed before")
            fresh.append((offset, entry))
        for other in brokers.values():
            view = other.views.get(p) if other.alive else None
            if view is not None and view.leader == other.node_id and view.leader_epoch > epoch:
                self._holds_exposed(other, p, fresh, f"leads epoch {view.leader_epoch}")

    def on_truncated(self, broker: SimBroker, p: int, removed: list[tuple[int, int, int]]) -> None:
        seen = self.exposed.get(p, {})
        for offset, epoch, value in removed:
            if seen.get(offset) == (epoch, value):
                raise SimulationFailure(
                    f"partition {p}: broker {broker.node_id} truncated exposed record "
                    f"{offset}={(epoch, value)}")

    def on_ack(self, p: int, base: int, values: tuple[int, ...]) -> None:
        seen = self.exposed.get(p, {})
        for i, value in enumerate(values):
            entry = seen.get(base + i)
            if entry is None or entry[1] != value:
                raise SimulationFailure(
                    f"partition {p}: batch {values} acknowledged at {base}, but {base + i} "
                    f"exposes {entry}")
        acked = self.acked.setdefault(p, [])
        if acked and acked[-1][0] >= base:
            raise SimulationFailure(
                f"partition {p}: batch {values} acknowledged at {base} after {acked[-1]}")
        acked.append((base, values))

    def check_broker(self, broker: SimBroker) -> None:
        for p, log in broker.disk.logs.items():
            if log.high_watermark > log.log_end_offset:
                raise SimulationFailure(
                    f"broker {broker.node_id} partition {p}: high watermark "
                    f"{log.high_watermark} past log end {log.log_end_offset}")
            last = broker.last_hw.get(p, 0)
            if log.high_watermark < last:
                raise SimulationFailure(
                    f"broker {broker.node_id} partition {p}: high watermark went back "
                    f"{last} -> {log.high_watermark}")
            broker.last_hw[p] = log.high_watermark
