"""Consumer groups: the list, one group's members, assignments, committed offsets and
lag (cli/groups.py's calls, which `odradek groups describe` uses too), the total lag
seen at each visit (the chart on the group page), and resetting an inactive group's
offsets."""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.cli import groups as cli_groups

from . import chart
from .client import FAILURES, Clients, ConsoleError, text

RESETS = ("earliest", "latest", "offset", "timestamp")


@dataclass
class GroupRow:
    group_id: str
    state: str
    type: str


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass
class OffsetRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    owner: str | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)


@dataclass
class GroupDetail:
    group_id: str
    state: str
    coordinator: str
    assignor: str
    members: list[Member]
    offsets: list[OffsetRow]
    lag_history: list[tuple[float, float]] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.offsets)

    @property
    def inactive(self) -> bool:
        return self.state in ("Empty", "Dead")


_lag = chart.History()  # total lag of each group at each load of its page


def groups(clients: Clients) -> list[GroupRow]:
    try:
        result = clients.admin.list_consumer_groups(request_timeout=clients.timeout_s).result()
    except FAILURES as e:
        raise ConsoleError(f"cannot list the groups: {text(e)}") from None
    if result.errors and not result.valid:  # no broker answered
        raise ConsoleError("cannot list the groups: "
                           + "; ".join(text(e) for e in result.errors))
    rows = [GroupRow(g.group_id, cli_groups._state_name(g.state),
                     getattr(getattr(g, "type", None), "name", "-").lower())
            for g in result.valid or []]
    return sorted(rows, key=lambda r: r.group_id)


def group(clients: Clients, group_id: str) -> GroupDetail:
    admin, timeout = clients.admin, clients.timeout_s
    try:
        desc = cli_groups._describe(admin, group_id, timeout)
        committed = cli_groups._committed(admin, group_id, timeout)
    except FAILURES as e:
        raise ConsoleError(f"cannot describe group {group_id}: {text(e)}") from None
    state = cli_groups._state_name(desc.state)
    members, owners = [], {}
    for m in desc.members:
        tps = sorted((tp.topic, tp.partition)
                     for tp in (m.assignment.topic_partitions if m.assignment else []))
        members.append(Member(m.member_id, m.client_id, m.host, tps))
        owners.update({tp: m.client_id or m.member_id for tp in tps})
    tps = sorted(set(committed) | set(owners))
    try:
        ends = cli_groups._log_end(admin, tps, timeout)
    except FAILURES as e:
        raise ConsoleError(f"cannot read the log end offsets: {text(e)}") from None
    rows = [OffsetRow(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p)))
            for t, p in tps]
    coordinator = desc.coordinator
    detail = GroupDetail(group_id, state,
                         f"{coordinator.host}:{coordinator.port} ({coordinator.id})"
                         if coordinator is not None else "-",
                         desc.partition_assignor or "-", members, rows)
    detail.lag_history = _lag.add(group_id, detail.total_lag)
    return detail


def new_offsets(clients: Clients, detail: GroupDetail, to: str, value: str
                ) -> dict[tuple[str, int], int]:
    """Where a reset would put each of the group's partitions, clamped to the log as
    Kafka does."""
    from confluent_kafka.admin import OffsetSpec

    from . import messages

    tps = [(r.topic, r.partition) for r in detail.offsets]
    admin, timeout = clients.admin, clients.timeout_s
    lo = cli_groups._offsets(admin, tps, OffsetSpec.earliest(), timeout)
    hi = cli_groups._offsets(admin, tps, OffsetSpec.latest(), timeout)
    if to == "earliest":
        wanted = lo
    elif to == "latest":
        wanted = hi
    elif to == "offset":
        if not value.strip().lstrip("-").isdigit():
            raise ValueError(f"reset to which offset? {value!r} is not a whole number")
        wanted = {tp: int(value) for tp in tps}
    elif to == "timestamp":
        spec = OffsetSpec.for_timestamp(messages.parse_timestamp(value))
        found = cli_groups._offsets(admin, tps, spec, timeout)
        wanted = {tp: hi[tp] if found[tp] < 0 else found[tp] for tp in tps}
    else:
        raise ValueError(f"reset to what? {to!r}")
    return {tp: min(max(wanted[tp], lo[tp]), hi[tp]) for tp in tps}


def reset(clients: Clients, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    detail = group(clients, group_id)
    if not detail.inactive:
        raise ConsoleError(f"the offsets of group {group_id} can only be reset while it is "
                           f"inactive; it is {detail.state}")
    request = ConsumerGroupTopicPartitions(
        group_id, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
    try:
        clients.admin.alter_consumer_group_offsets(
            [request], request_timeout=clients.timeout_s)[group_id].result()
    except FAILURES as e:
        raise ConsoleError(f"cannot reset the offsets of {group_id}: {text(e)}") from None
