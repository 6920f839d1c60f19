"""Client quotas in the metadata: entities, keys, and what AlterClientQuotas and
DescribeClientQuotas do to and read from the image (Kafka's
ClientQuotaControlManager and ClientQuotasImage).

An entity is a set of (type, name) parts — types `user`, `client-id` (together
or alone) or `ip` (alone) — where a name of None is the type's `<default>`.
Each change is a ClientQuotaRecord (entity, key, value; `remove` deletes the
key). Enforcement lives with the broker (broker/quotas.py).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import records as R

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
CLIENT_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
               CONTROLLER_MUTATION_RATE)
IP_KEYS = (CONNECTION_CREATION_RATE,)
# Kafka declares these LONG (whole numbers); the others DOUBLE.
WHOLE_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONNECTION_CREATION_RATE})

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

NONE = 0
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35

# An entity: its parts sorted by type; a name of None means "<default>".
Entity = tuple[tuple[str, str | None], ...]
Quotas = Mapping[Entity, Mapping[str, float]]


def entity(**parts: str | None) -> Entity:
    """entity(user="alice", client_id=None) -> (("client-id", None), ("user", "alice"))."""
    return tuple(sorted((k.replace("_", "-"), v) for k, v in parts.items()))


def entity_of(parts: Sequence[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(parts))


def describe_entity(ent: Entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in ent)


class QuotaError(ValueError):
    """What Kafka refuses, with its error code (INVALID_REQUEST unless said)."""

    def __init__(self, message: str, error_code: int = INVALID_REQUEST) -> None:
        super().__init__(message)
        self.error_code = error_code


def check_entity(ent: Entity) -> None:
    types = [t for t, _ in ent]
    if not types:
        raise QuotaError("Invalid empty client quota entity")
    if len(set(types)) != len(types):
        raise QuotaError(f"Duplicate entity type in {describe_entity(ent)}")
    for t, name in ent:
        if t not in ENTITY_TYPES:
            raise QuotaError(f"Unsupported entity type {t}", UNSUPPORTED_VERSION)
        if t == IP:
            if len(types) > 1:
                raise QuotaError("Invalid quota entity combination: an ip entity "
                                 "cannot be combined with user or client-id")
            if name is not None:
                try:
                    ipaddress.ip_address(name)
                except ValueError:
                    raise QuotaError(f"{name} is not a valid IP address") from None


def check_value(ent: Entity, key: str, value: float) -> None:
    allowed = IP_KEYS if any(t == IP for t, _ in ent) else CLIENT_KEYS
    if key not in allowed:
        raise QuotaError(f"Invalid configuration key {key} for "
                         f"{'/'.join(t for t, _ in ent)} entities")
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(f"Invalid value {value} for {key}: must be positive")
    if key in WHOLE_KEYS and value != int(value):
        raise QuotaError(f"Invalid value {value} for {key}: must be a whole number")
    if key == REQUEST_PERCENTAGE and value > 100 * 1000:
        raise QuotaError(f"Invalid value {value} for {key}")


@dataclass(frozen=True, slots=True)
class Op:
    key: str
    value: float
    remove: bool


@dataclass(frozen=True, slots=True)
class AlterResult:
    entity: Entity
    error_code: int = NONE
    error_message: str | None = None


def alter(quotas: Quotas, entries: Sequence[tuple[Entity, Sequence[Op]]],
          validate_only: bool) -> tuple[list[AlterResult], list[R.MetadataRecord]]:
    """AlterClientQuotas: each entry is all-or-nothing; the records to commit."""
    results: list[AlterResult] = []
    records: list[R.MetadataRecord] = []
    for ent, ops in entries:
        try:
            check_entity(ent)
            keys = [op.key for op in ops]
            if len(set(keys)) != len(keys):
                raise QuotaError(f"Duplicate quota key in the alteration of "
                                 f"{describe_entity(ent)}")
            for op in ops:
                if not op.remove:
                    check_value(ent, op.key, op.value)
                elif op.key not in CLIENT_KEYS + IP_KEYS:
                    raise QuotaError(f"Invalid configuration key {op.key}")
        except QuotaError as e:
            results.append(AlterResult(ent, e.error_code, str(e)))
            continue
        results.append(AlterResult(ent))
        if validate_only:
            continue
        current = quotas.get(ent, {})
        for op in ops:
            if op.remove:
                if op.key in current:
                    records.append(R.client_quota_record(ent, op.key, None))
            elif current.get(op.key) != op.value:
                records.append(R.client_quota_record(ent, op.key, op.value))
    return results, records


def describe(quotas: Quotas, components: Sequence[tuple[str, int, str | None]],
             strict: bool) -> list[tuple[Entity, Mapping[str, float]]]:
    """DescribeClientQuotas: the entities the filter matches (ClientQuotasImage)."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for etype, match_type, match in components:
        if not etype:
            raise QuotaError("Invalid empty entity type.")
        if etype in exact or etype in typed:
            raise QuotaError(f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in ENTITY_TYPES:
            raise QuotaError(f"Unsupported entity type {etype}", UNSUPPORTED_VERSION)
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError("Request specified MATCH_TYPE_EXACT, but set match "
                                 "string to null.")
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError("Request specified MATCH_TYPE_DEFAULT, but also "
                                 "specified a match string.")
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaError("Request specified MATCH_TYPE_SPECIFIED, but also "
                                 "specified a match string.")
            typed.add(etype)
        else:
            raise QuotaError(f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and {USER, CLIENT_ID} & (set(exact) | typed):
        raise QuotaError("Invalid entity filter component combination. IP filter "
                         "component should not be used with user or clientId filter "
                         "component.")
    out = []
    for ent, values in quotas.items():
        parts = dict(ent)
        if strict and len(parts) != len(exact) + len(typed):
            continue
        if any(t not in parts or parts[t] != name for t, name in exact.items()):
            continue
        if any(t not in parts for t in typed):
            continue
        out.append((ent, values))
    out.sort(key=lambda e: [(t, n or "") for t, n in e[0]])
    return out


def applied(quotas: dict[Entity, Mapping[str, float]], rec: R.MetadataRecord) -> None:
    """Replay one ClientQuotaRecord onto a mutable copy of the image's quotas."""
    ent = entity_of([(e["entity_type"], e["entity_name"]) for e in rec["entity"]])
    values = dict(quotas.get(ent, {}))
    if rec.get("remove"):
        values.pop(rec["key"], None)
    else:
        values[rec["key"]] = float(rec["value"])
    if values:
        quotas[ent] = values
    else:
        quotas.pop(ent, None)


def records_of(quotas: Quotas) -> list[R.MetadataRecord]:
    return [R.client_quota_record(ent, key, value)
            for ent, values in sorted(quotas.items(), key=lambda e: [(t, n or "") for t, n in e[0]])
            for key, value in sorted(values.items())]
