"""Finalized feature levels (KIP-584, KIP-778): what the cluster has switched on.

A feature is a name and a level; the controller finalizes a level for the
whole cluster with UpdateFeatures (API 57) by committing a FeatureLevelRecord
to the metadata log, so the level survives restarts and reaches every broker
through its metadata image (`MetadataImage.features`). ApiVersions v3+ lists
the features this node supports and the finalized levels
(handlers/api_versions.py); `odradek features` is kafka-features.sh.

odradek knows two features:

* ``transaction.version`` (KIP-890 part 2): 0 and 1 are the transactions of
  KIP-98 (with KIP-890 part 1's verification); 2 is transactions v2: the
  coordinator bumps the producer epoch at the end of every transaction
  (EndTxn v5), and Produce v12 / TxnOffsetCommit v5 add their partition to
  the transaction implicitly (coordinator/transaction.py). A new cluster
  starts at 0 (Kafka 4.0 starts new clusters at 2).

* ``eligible.leader.replicas.version`` (KIP-966): at 1 the controller keeps
  each partition's eligible leader replicas (metadata/elr.py), and the
  cluster-wide ``min.insync.replicas`` is a dynamic cluster config (the
  upgrade writes it, with the controller's own value, when none is set, and
  drops per-broker overrides: `elr_safety_records`). A new cluster starts at
  1, as Kafka 4.1's: the first active controller of an empty metadata log
  commits the level with the cluster-wide ``min.insync.replicas``
  (`new_cluster_records`), unless `storage format --feature
  eligible.leader.replicas.version=0` chose otherwise.

`metadata.version` is not a feature here: odradek's metadata records are its
own (metadata/records.py) and have no versions to finalize.

Rules, as Kafka's controller (FeatureControlManager): an update names a known
feature and a level within its supported range; lowering a level needs
upgrade type SAFE_DOWNGRADE or UNSAFE_DOWNGRADE (v0: allow_downgrade);
raising needs UPGRADE; level 0 removes the feature. A request with one bad
update changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from . import records as R

TRANSACTION_VERSION = "transaction.version"
TV2 = 2  # transactions v2 (KIP-890 part 2)
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
ELR_V1 = 1  # KIP-966 eligible leader replicas
# the levels a new cluster starts at when `storage format` names none
NEW_CLUSTER_LEVELS: Mapping[str, int] = {ELIGIBLE_LEADER_REPLICAS_VERSION: ELR_V1}

# name -> (min, max) level this node supports
SUPPORTED: Mapping[str, tuple[int, int]] = {TRANSACTION_VERSION: (0, 2),
                                            ELIGIBLE_LEADER_REPLICAS_VERSION: (0, 1)}

UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3
UPGRADE_TYPES = {"upgrade": UPGRADE, "safe-downgrade": SAFE_DOWNGRADE,
                 "unsafe-downgrade": UNSAFE_DOWNGRADE}

NONE = 0
INVALID_REQUEST = 42
INVALID_UPDATE_VERSION = 95
MAX_UPDATES = 100  # per request; no cluster has that many features


@dataclass(frozen=True, slots=True)
class Update:
    feature: str
    level: int
    upgrade_type: int = UPGRADE


@dataclass(frozen=True, slots=True)
class Result:
    feature: str
    error_code: int = NONE
    error_message: str | None = None


def _check(update: Update, current: int) -> str | None:
    span = SUPPORTED.get(update.feature)
    if span is None:
        return f"The controller does not support the given {update.feature} feature."
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"Unknown upgrade type {update.upgrade_type}."
    lo, hi = span
    if update.level < 0 or update.level > hi or (0 < update.level < lo):
        return (f"Invalid update version {update.level} for feature {update.feature}. "
                f"The controller supports versions {lo}-{hi}.")
    if update.level < current and update.upgrade_type == UPGRADE:
        return (f"Invalid update version {update.level} for feature {update.feature}. "
                "Can't downgrade the version of this feature without setting the upgrade "
                "type to either safe or unsafe downgrade.")
    if update.level > current and update.upgrade_type != UPGRADE:
        return (f"Invalid update version {update.level} for feature {update.feature}. "
                "Can't upgrade to a higher version with a downgrade type.")
    return None


def update(features: Mapping[str, int], updates: Sequence[Update],
           safety: Callable[[], list[R.MetadataRecord]] = list,
           ) -> tuple[list[Result], list[R.MetadataRecord]]:
    """One result per update and the records to commit: none when any update
    is refused (all or nothing, as Kafka's controller). `safety` gives the
    records that switching eligible leader replicas on needs first
    (`elr_safety_records`)."""
    if len(updates) > MAX_UPDATES:
        return [Result(u.feature, INVALID_REQUEST, "too many feature updates")
                for u in updates], []
    names = [u.feature for u in updates]
    results = []
    for u in updates:
        if names.count(u.feature) > 1:
            results.append(Result(u.feature, INVALID_REQUEST,
                                  f"Feature {u.feature} appears more than once in the request."))
            continue
        why = _check(u, features.get(u.feature, 0))
        results.append(Result(u.feature, INVALID_UPDATE_VERSION if why else NONE, why))
    if any(r.error_code for r in results):
        return results, []
    records = [R.feature_level_record(u.feature, u.level) for u in updates
               if u.level != features.get(u.feature, 0)]
    if any(u.feature == ELIGIBLE_LEADER_REPLICAS_VERSION and u.level >= ELR_V1
           and features.get(u.feature, 0) < ELR_V1 for u in updates):
        records = safety() + records
    return results, records


def elr_safety_records(configs: Mapping[tuple[int, str], Mapping[str, str]],
                       static_min_insync_replicas: int) -> list[R.MetadataRecord]:
    """What Kafka's controller commits when eligible leader replicas are
    switched on: `min.insync.replicas` becomes one cluster-wide dynamic value
    (the controller's own when none is set) and no broker overrides it."""
    key = "min.insync.replicas"
    out = []
    if key not in configs.get((R.RESOURCE_BROKER, ""), {}):
        out.append(R.config_record(R.RESOURCE_BROKER, "", key, str(static_min_insync_replicas)))
    for (resource_type, name), entries in sorted(configs.items()):
        if resource_type == R.RESOURCE_BROKER and name != "" and key in entries:
            out.append(R.config_record(R.RESOURCE_BROKER, name, key, None))
    return out


def new_cluster_records(bootstrap: Sequence[R.MetadataRecord],
                        static_min_insync_replicas: int) -> list[R.MetadataRecord]:
    """What the first active controller commits to an empty metadata log: the
    bootstrap records of `storage format`, then, when eligible leader replicas
    end up on, ELR's safety records (after the bootstrap's configs, which they
    correct), then a FeatureLevelRecord for each feature of `NEW_CLUSTER_LEVELS`
    the bootstrap does not set."""
    named = {r["name"]: int(r["feature_level"]) for r in bootstrap
             if r.get("type") == R.FEATURE_LEVEL}
    added = [R.feature_level_record(name, level) for name, level in NEW_CLUSTER_LEVELS.items()
             if name not in named and level > 0]
    levels = {**NEW_CLUSTER_LEVELS, **named}
    safety: list[R.MetadataRecord] = []
    if levels.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= ELR_V1:
        configs: dict[tuple[int, str], dict[str, str]] = {}
        for r in bootstrap:
            if r.get("type") == R.CONFIG and r.get("value") is not None:
                configs.setdefault((r["resource_type"], r["resource_name"]), {})[r["name"]] = r["value"]
        safety = elr_safety_records(configs, static_min_insync_replicas)
    return list(bootstrap) + safety + added
