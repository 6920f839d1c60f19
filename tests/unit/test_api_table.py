"""The API table (broker/apis.py) and the pipeline's use of it.

The table is the one place an API is declared; these tests walk it: every API
we offer has exactly one line, and every cluster-level (REQUEST-scoped) check
is enforced by the pipeline before the handler runs — with an authorizer that
denies, each such API of each version answers CLUSTER_AUTHORIZATION_FAILED (31)
and its handler never runs; with one that allows, the pipeline asks exactly
the table's checks and the handler runs.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, ClassVar

import pytest
from kio.serial import entity_writer

from odradek.broker.apis import API_TABLE, FORWARDED_TO_CONTROLLER, ApiSpec, Scope
from odradek.broker.pipeline import CLOSE, RequestPipeline
from odradek.protocol import api
from odradek.protocol.guard import decode_message
from odradek.security.resources import (
    CLUSTER_NAME,
    AclOperation,
    Action,
    Principal,
    ResourceType,
)
from tests.fuzz.samples import sample

K = api.ApiKey


def test_every_offered_api_has_one_line_and_every_line_is_offered():
    offered = set(api.SUPPORTED_VERSIONS) | set(api.CONTROLLER_VERSIONS)
    assert set(API_TABLE) == offered
    for key, spec in API_TABLE.items():
        assert spec.key == key
        assert inspect.iscoroutinefunction(spec.handler), spec.name
        # controller-listener APIs are never offered to clients in ApiVersions
        assert spec.controller == (key not in api.SUPPORTED_VERSIONS), spec.name


def test_forwarded_apis_are_kafkas_admin_apis():
    assert FORWARDED_TO_CONTROLLER == {
        K.CREATE_TOPICS, K.DELETE_TOPICS, K.CREATE_PARTITIONS, K.ALTER_CONFIGS,
        K.INCREMENTAL_ALTER_CONFIGS, K.ELECT_LEADERS, K.ALTER_PARTITION_REASSIGNMENTS,
        K.LIST_PARTITION_REASSIGNMENTS, K.ALTER_CLIENT_QUOTAS, K.CREATE_ACLS, K.DELETE_ACLS,
        K.ALTER_USER_SCRAM_CREDENTIALS, K.DESCRIBE_QUORUM, K.UPDATE_FEATURES,
        K.ADD_RAFT_VOTER, K.REMOVE_RAFT_VOTER, K.UNREGISTER_BROKER,
    }
    assert all(not API_TABLE[k].controller for k in FORWARDED_TO_CONTROLLER)


BEFORE_AUTH = {K.API_VERSIONS, K.SASL_HANDSHAKE, K.SASL_AUTHENTICATE}


def test_only_api_versions_and_sasl_run_before_authentication():
    assert {s.key for s in API_TABLE.values() if s.before_auth} == BEFORE_AUTH


def test_every_api_but_those_before_authentication_authorizes_something():
    for spec in API_TABLE.values():
        if spec.key not in BEFORE_AUTH:
            assert spec.checks, f"{spec.name} declares no authorization"
        for check in spec.checks:
            if check.scope is Scope.REQUEST:  # the pipeline checks these by name
                assert check.resource_type is ResourceType.CLUSTER, spec.name


# -- the pipeline against the table ------------------------------------------------------


@dataclass
class Recording:
    """An authorizer that answers `allow` and keeps what it was asked."""

    allow: bool
    asked: list[Action] = field(default_factory=list)

    def authorize(self, principal: Principal, host: str,
                  actions: Sequence[Action]) -> list[bool]:
        self.asked.extend(actions)
        return [self.allow] * len(actions)


class Host:
    serves_controller_apis = True
    forwarder = None
    is_active_controller = True
    controller_listener_names = frozenset({"CONTROLLER"})

    def security_protocol(self, listener: str) -> str:
        return "PLAINTEXT"

    def observe_request(self, api_key: int, seconds: float, closed: bool) -> None:
        pass

    client_quotas: ClassVar[dict[Any, Any]] = {}
    quota_window = (11, 1)


@dataclass
class Conn:
    peer: str = "10.0.0.7:5555"
    listener: str = "PLAINTEXT"
    principal: Principal = field(default_factory=lambda: Principal("User", "mallory"))
    authenticated: bool = True
    sasl: Any = None

    def throttle(self, ms: int) -> None:
        raise AssertionError("no quota is set")


def _conn_for(spec: ApiSpec) -> Conn:
    return Conn(listener="CONTROLLER") if spec.controller else Conn()


def _frame(key: int, version: int, correlation_id: int) -> bytes:
    header = struct.pack(">hhih", key, version, correlation_id, 4) + b"test"
    if api.request_header_version(key, version) >= 2:
        header += b"\x00"
    cls = api.request_class(key, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, sample(cls))
    return header + buf.getvalue()


def _response(key: int, version: int, frame: bytes) -> Any:
    size, _corr = struct.unpack_from(">ii", frame, 0)
    assert size == len(frame) - 4
    pos = 8 + (1 if api.response_header_version(key, version) >= 1 else 0)
    return decode_message(api.response_class(key, version), frame, pos)


def _cluster_checked() -> list[tuple[ApiSpec, int]]:
    out = []
    for spec in API_TABLE.values():
        if any(c.scope is Scope.REQUEST for c in spec.checks):
            lo, hi = api.SUPPORTED_VERSIONS.get(spec.key) or api.CONTROLLER_VERSIONS[spec.key]
            out.extend((spec, v) for v in range(lo, hi + 1))
    return out


def _ran(calls: list[int]) -> Any:
    async def handler(node: Any, ctx: Any, request: Any) -> dict[str, Any]:
        calls.append(ctx.api_key)
        return None  # no answer: the pipeline sends none
    return handler


def _nested_error_codes(obj: Any) -> list[int]:
    if isinstance(obj, tuple):
        return [c for item in obj for c in _nested_error_codes(item)]
    if not is_dataclass(obj):
        return []
    out: list[int] = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name == "error_code":
            out.append(int(getattr(value, "value", value)))
        else:
            out += _nested_error_codes(value)
    return out


@pytest.mark.parametrize(("spec", "version"), _cluster_checked(),
                         ids=lambda x: x.name if isinstance(x, ApiSpec) else f"v{x}")
def test_a_principal_without_the_cluster_permission_is_refused(spec: ApiSpec, version: int):
    calls: list[int] = []
    table = {spec.key: replace(spec, handler=_ran(calls))}
    denier = Recording(allow=False)
    pipeline = RequestPipeline(Host(), None, authorizer=denier, table=table)
    answer = asyncio.run(pipeline.handle(_frame(spec.key, version, 77), _conn_for(spec)))
    assert calls == []  # the handler never ran
    wanted = [c for c in spec.checks if c.scope is Scope.REQUEST]
    assert denier.asked[:1] == [Action(wanted[0].operation, ResourceType.CLUSTER, CLUSTER_NAME)]
    response = _response(spec.key, version, answer)
    if hasattr(response, "error_code"):
        assert response.error_code.value == 31  # CLUSTER_AUTHORIZATION_FAILED
    elif spec.denial is not None:  # CreateAcls, AlterReplicaLogDirs...: each item answers 31
        codes = _nested_error_codes(response)
        assert codes and all(c == 31 for c in codes)
    else:  # e.g. DescribeLogDirs v0-2: Kafka answers with no results
        lists = [getattr(response, f.name) for f in fields(response)
                 if isinstance(getattr(response, f.name), tuple)]
        assert lists and all(v == () for v in lists)


@pytest.mark.parametrize("key", [K.DESCRIBE_CLUSTER, K.DESCRIBE_LOG_DIRS, K.ELECT_LEADERS,
                                 K.BROKER_HEARTBEAT])
def test_a_principal_with_the_permission_reaches_the_handler(key: int):
    spec = API_TABLE[key]
    calls: list[int] = []
    allower = Recording(allow=True)
    pipeline = RequestPipeline(Host(), None, authorizer=allower,
                               table={key: replace(spec, handler=_ran(calls))})
    version = (api.SUPPORTED_VERSIONS.get(key) or api.CONTROLLER_VERSIONS[key])[1]
    asyncio.run(pipeline.handle(_frame(key, version, 5), _conn_for(spec)))
    assert calls == [key]
    assert allower.asked == [Action(c.operation, ResourceType.CLUSTER, CLUSTER_NAME)
                             for c in spec.checks if c.scope is Scope.REQUEST]


def test_an_unauthenticated_connection_gets_only_before_auth_apis():
    calls: list[int] = []
    table = {k: replace(s, handler=_ran(calls)) for k, s in API_TABLE.items()}
    pipeline = RequestPipeline(Host(), None, table=table)
    conn = Conn(authenticated=False)
    assert asyncio.run(pipeline.handle(_frame(K.METADATA, 12, 1), conn)) is CLOSE
    assert calls == []
    asyncio.run(pipeline.handle(_frame(K.API_VERSIONS, 3, 2), conn))
    assert calls == [K.API_VERSIONS]


def test_the_context_carries_the_connections_principal_and_host():
    seen: list[Any] = []

    async def handler(node: Any, ctx: Any, request: Any) -> dict[str, Any]:
        seen.append(ctx)
        return None

    spec = replace(API_TABLE[K.DESCRIBE_CLUSTER], handler=handler)
    pipeline = RequestPipeline(Host(), None, table={K.DESCRIBE_CLUSTER: spec})
    asyncio.run(pipeline.handle(_frame(K.DESCRIBE_CLUSTER, 0, 3), Conn()))
    (ctx,) = seen
    assert (str(ctx.principal), ctx.client_host, ctx.peer, ctx.listener, ctx.client_id) == (
        "User:mallory", "10.0.0.7", "10.0.0.7:5555", "PLAINTEXT", "test")
    assert ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, "t")  # AllowAll


CONTROLLER_SPECS = [s for s in API_TABLE.values() if s.controller]


@pytest.mark.parametrize("spec", CONTROLLER_SPECS, ids=lambda s: s.name)
def test_controller_apis_close_a_client_listeners_connection(spec: ApiSpec):
    calls: list[int] = []
    table = {k: replace(s, handler=_ran(calls)) for k, s in API_TABLE.items()}
    pipeline = RequestPipeline(Host(), None, table=table)
    lo, hi = api.CONTROLLER_VERSIONS[spec.key]
    for version in range(lo, hi + 1):
        frame = _frame(spec.key, version, 9)
        before = len(calls)
        assert asyncio.run(pipeline.handle(frame, Conn(listener="PLAINTEXT"))) is CLOSE
        assert len(calls) == before  # the handler never ran
        if spec.key == K.ENVELOPE:
            continue  # unwrapped by the pipeline itself (test_envelope.py), no handler
        asyncio.run(pipeline.handle(frame, Conn(listener="CONTROLLER")))
        asyncio.run(pipeline.handle(frame, None))  # in-process: the node's own broker
    wanted = 0 if spec.key == K.ENVELOPE else 2 * (hi - lo + 1)
    assert calls == [spec.key] * wanted


def test_the_context_says_whether_the_listener_is_a_controller_listener():
    seen: list[Any] = []

    async def handler(node: Any, ctx: Any, request: Any) -> dict[str, Any]:
        seen.append(ctx.controller_listener)
        return None

    pipeline = RequestPipeline(Host(), None, table={
        K.FETCH: replace(API_TABLE[K.FETCH], handler=handler)})
    for conn in (Conn(listener="PLAINTEXT"), Conn(listener="CONTROLLER"), None):
        asyncio.run(pipeline.handle(_frame(K.FETCH, 12, 1), conn))
    assert seen == [False, True, True]
