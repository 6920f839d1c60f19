"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, brokers, groups.

Broker resources take only the dynamic keys (`DYNAMIC_BROKER_CONFIGS`: the
replication throttle rates), per broker id or for every broker (name "");
they are ConfigRecords like a topic's, and brokers read them from the image.
Group resources (KIP-848) take the group keys of `group_config.py`; the group
coordinator reads them from the image. Any group name may be configured,
before or after the group exists, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from ...group_config import describe_group_config
from ...metadata import records as R
from ...protocol import errors as E
from ...security.resources import CLUSTER_NAME, AclOperation, ResourceType
from ...topic_config import describe_broker_config, describe_topic_config
from ..context import RequestContext
from ..services import ConfigServices


def _entry(e: Any, include_synonyms: bool, include_docs: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": None if e.is_sensitive else e.value,
        "read_only": e.read_only,
        "config_source": e.source,
        "is_default": e.source == 5,
        "is_sensitive": e.is_sensitive,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": s.source} for s in e.synonyms
        ]
        if include_synonyms
        else [],
        "config_type": e.config_type,
        "documentation": e.documentation if include_docs else None,
    }


def _config_denial(ctx: RequestContext, op: AclOperation, resource_type: int,
                   name: str) -> int:
    """TOPIC_/CLUSTER_/GROUP_AUTHORIZATION_FAILED, or 0: a topic's configs need
    `op` on the topic, a broker's on the cluster, a group's on the group."""
    if resource_type == R.RESOURCE_TOPIC:
        ok = ctx.authorize(op, ResourceType.TOPIC, name)
        return 0 if ok else E.TOPIC_AUTHORIZATION_FAILED
    if resource_type == R.RESOURCE_BROKER:
        ok = ctx.authorize(op, ResourceType.CLUSTER, CLUSTER_NAME)
        return 0 if ok else E.CLUSTER_AUTHORIZATION_FAILED
    if resource_type == R.RESOURCE_GROUP:
        ok = ctx.authorize(op, ResourceType.GROUP, name)
        return 0 if ok else E.GROUP_AUTHORIZATION_FAILED
    return 0


class _Refused:
    def __init__(self, code: int) -> None:
        self.error_code = code
        self.error_message: str | None = None


async def _alter_authorized(broker: ConfigServices, ctx: RequestContext, resources: list[Any],
                            alter: Any) -> list[Any]:
    """Run `alter(image, resources)` on the resources the principal may alter;
    the others answer their authorization error, in request order."""
    denials = [_config_denial(ctx, AclOperation.ALTER_CONFIGS, t, n) for t, n, _ in resources]
    allowed = [r for r, d in zip(resources, denials) if not d]
    async with broker.metadata_lock:
        results, records = alter(broker.image, allowed)
        await broker.quorum.commit(records)
    it = iter(results)
    return [_Refused(d) if d else next(it) for d in denials]


async def handle_describe_configs(
    broker: ConfigServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    image = broker.image
    include_synonyms = getattr(req, "include_synonyms", False)
    include_docs = getattr(req, "include_documentation", False)
    results = []
    for res in req.resources:
        base = {
            "error_code": 0,
            "error_message": None,
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "configs": [],
        }
        denied = _config_denial(ctx, AclOperation.DESCRIBE_CONFIGS, res.resource_type,
                                res.resource_name)
        if denied:
            base["error_code"] = denied
            results.append(base)
            continue
        if res.resource_type == R.RESOURCE_TOPIC:
            if res.resource_name not in image.topics_by_name:
                base["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
                base["error_message"] = f"Topic {res.resource_name} does not exist"
                results.append(base)
                continue
            entries = describe_topic_config(
                broker.config, image.topic_configs(res.resource_name),
                image.broker_configs(broker.node_id),
                image.configs.get((R.RESOURCE_BROKER, ""), {}))
        elif res.resource_type == R.RESOURCE_BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                base["error_code"] = E.INVALID_REQUEST
                base["error_message"] = f"Unexpected broker id {res.resource_name}"
                results.append(base)
                continue
            entries = describe_broker_config(
                broker.config, image.broker_configs(broker.node_id),
                image.configs.get((R.RESOURCE_BROKER, ""), {}),
                per_broker=res.resource_name != "",
            )
        elif res.resource_type == R.RESOURCE_GROUP and res.resource_name:
            entries = describe_group_config(
                broker.config, image.configs.get((R.RESOURCE_GROUP, res.resource_name), {}))
        else:
            base["error_code"] = E.INVALID_REQUEST
            base["error_message"] = (
                "Group name must not be empty" if res.resource_type == R.RESOURCE_GROUP
                else f"Unsupported resource type {res.resource_type}")
            results.append(base)
            continue
        keys = res.configuration_keys
        if keys:  # null or empty: every key (Kafka's ConfigHelper)
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        base["configs"] = [_entry(e, include_synonyms, include_docs) for e in entries]
        results.append(base)
    return {"results": results}


async def handle_incremental_alter_configs(
    broker: ConfigServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    resources = [
        (r.resource_type, r.resource_name,
         [(c.name, c.config_operation, c.value) for c in r.configs])
        for r in req.resources
    ]
    results = await _alter_authorized(
        broker, ctx, resources, lambda image, rs: broker.controller.incremental_alter_configs(
            image, rs, req.validate_only))
    return {"responses": _responses(resources, results)}


async def handle_alter_configs(broker: ConfigServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    resources = [
        (r.resource_type, r.resource_name, [(c.name, c.value) for c in r.configs])
        for r in req.resources
    ]
    results = await _alter_authorized(
        broker, ctx, resources, lambda image, rs: broker.controller.alter_configs(
            image, rs, req.validate_only))
    return {"responses": _responses(resources, results)}


def _responses(resources: list[Any], results: list[Any]) -> list[dict[str, Any]]:
    return [
        {"error_code": res.error_code, "error_message": res.error_message,
         "resource_type": rtype, "resource_name": rname}
        for (rtype, rname, _), res in zip(resources, results)
    ]


# ConfigResource types ListConfigResources v1 lists here (KIP-1142). Kafka also
# lists BROKER_LOGGER (8); odradek has no broker-logger configs, so asking for
# it answers UNSUPPORTED_VERSION, as Kafka answers a type it does not list.
CLIENT_METRICS = 16
LISTED_TYPES = (R.RESOURCE_TOPIC, R.RESOURCE_BROKER, CLIENT_METRICS, R.RESOURCE_GROUP)


async def handle_list_config_resources(
    broker: ConfigServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """KIP-1142: the config resources of the asked types (none asked: every type
    listed): every topic, every live broker, the groups with group configs, and
    the client-metrics subscriptions (odradek has none: KIP-714 is not built).
    v0 (ListClientMetricsResources) lists client-metrics subscriptions only."""
    if ctx.api_version == 0:
        return {"error_code": 0, "config_resources": []}
    asked = tuple(int(t) for t in req.resource_types) or LISTED_TYPES
    if any(t not in LISTED_TYPES for t in asked):
        return {"error_code": E.UNSUPPORTED_VERSION, "config_resources": []}
    image = broker.image
    names: dict[int, list[str]] = {
        R.RESOURCE_TOPIC: sorted(image.topics_by_name),
        R.RESOURCE_BROKER: [str(n) for n, b in sorted(image.brokers.items()) if not b.fenced],
        R.RESOURCE_GROUP: sorted(n for t, n in image.configs if t == R.RESOURCE_GROUP),
        CLIENT_METRICS: [],
    }
    return {"error_code": 0, "config_resources": [
        {"resource_name": name, "resource_type": t}
        for t in LISTED_TYPES if t in asked for name in names[t]]}
