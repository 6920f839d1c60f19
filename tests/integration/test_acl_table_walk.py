"""Walk the API table (broker/apis.py, docs/security.md) against a real broker:
every client API with an ACL check, sent as a principal without the
permission, answers the API's authorization error; with the ACLs granted it
passes the checks (no authorization error left in the answer).

Requests are raw frames (`Wire`) of kio messages filled by tests/fuzz/samples.py:
every name in them is "ab", so topic "ab" (created first), group "ab",
transactional id "ab" and the cluster are the resources. The client is
User:ANONYMOUS (PLAINTEXT); the ACLs are granted and revoked between the two
sends by User:client, a super user over the broker's mTLS listener. Checks whose
denial leaves a resource out of the answer (ListGroups, ListTransactions) are
walked for the allowed case only.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import time
from typing import Any

import pytest
from confluent_kafka import admin as ck
from kio.serial import entity_writer

from odradek.broker.apis import API_TABLE, LEFT_OUT, ApiSpec, Scope
from odradek.protocol import api
from odradek.protocol.guard import decode_message
from odradek.security.resources import CLUSTER_NAME, ResourceType
from tests.fuzz.samples import sample
from tests.integration.broker_proc import HOST, free_port
from tests.integration.clients import TIMEOUT, Wire, ck_admin
from tests.integration.tls_certs import TlsFiles

pytestmark = [pytest.mark.timeout(110), pytest.mark.odradek_only]

K = api.ApiKey
NAME = "ab"  # samples.py's string
AUTH_ERRORS = {"TOPIC_AUTHORIZATION_FAILED": 29, "GROUP_AUTHORIZATION_FAILED": 30,
               "CLUSTER_AUTHORIZATION_FAILED": 31, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53}
# versions that name topics by name (later ones use topic ids, which samples cannot know)
VERSIONS = {K.FETCH: 12, K.OFFSET_COMMIT: 9, K.OFFSET_FETCH: 9, K.DELETE_TOPICS: 5,
            K.METADATA: 9, K.PRODUCE: 12}
# what a client would send where samples' values mean something else: a consumer's
# full fetch (no replica id, no session), configs of a topic (resource type 2)
OVERRIDES: dict[int, dict[str, Any]] = {
    K.FETCH: {"replica_id": -1, "session_id": 0, "session_epoch": -1},
    K.DESCRIBE_CONFIGS: {"resources.resource_type": 2},
    K.ALTER_CONFIGS: {"resources.resource_type": 2},
    K.INCREMENTAL_ALTER_CONFIGS: {"resources.resource_type": 2},
}
_CK_TYPES = {ResourceType.TOPIC: ck.ResourceType.TOPIC, ResourceType.GROUP: ck.ResourceType.GROUP,
             ResourceType.CLUSTER: ck.ResourceType.BROKER,
             ResourceType.TRANSACTIONAL_ID: ck.ResourceType.TRANSACTIONAL_ID}


def _walked() -> list[ApiSpec]:
    return [s for s in API_TABLE.values()
            if not s.controller and s.checks
            and any(c.scope in (Scope.REQUEST, Scope.RESOURCE) for c in s.checks)]


def _request(spec: ApiSpec, version: int) -> bytes:
    cls = api.request_class(spec.key, version)
    entity = sample(cls)
    for path, value in OVERRIDES.get(spec.key, {}).items():
        entity = _override(entity, path.split("."), value)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    return buf.getvalue()


def _override(entity: Any, path: list[str], value: Any) -> Any:
    if isinstance(entity, tuple):
        return tuple(_override(e, path, value) for e in entity)
    if not any(f.name == path[0] for f in dataclasses.fields(entity)):
        return entity
    inner = value if len(path) == 1 else _override(getattr(entity, path[0]), path[1:], value)
    return dataclasses.replace(entity, **{path[0]: inner})


def _error_codes(obj: Any) -> list[int]:
    """Every error code in a kio response, nested ones included."""
    out: list[int] = []
    if isinstance(obj, tuple):
        for item in obj:
            out += _error_codes(item)
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.name.endswith("error_code"):
                out.append(int(getattr(value, "value", value)))
            else:
                out += _error_codes(value)
    return out


class UndecodableAnswer(Exception):
    pass


def _send(bootstrap: str, spec: ApiSpec, version: int) -> list[int] | None:
    """The response's error codes, or None if the broker closed the connection."""
    header_version = api.request_header_version(spec.key, version)
    with Wire(bootstrap) as wire:
        wire.send_request(spec.key, version, 7, _request(spec, version),
                          header_version=header_version)
        frame = wire.read_frame()
    if frame is None:
        return None
    pos = 4 + (1 if api.response_header_version(spec.key, version) >= 1 else 0)
    try:
        return _error_codes(decode_message(api.response_class(spec.key, version), frame, pos))
    except Exception as e:
        if spec.key == K.DESCRIBE_TRANSACTIONS and version == 0:
            # kio cannot read Kafka's -1 transaction_start_time_ms (no ongoing
            # transaction): the first state's error code, read by hand
            # (throttle_time_ms, then a compact array of 2)
            assert frame[pos + 4] == 3, frame
            return [struct.unpack_from(">h", frame, pos + 5)[0]]
        raise UndecodableAnswer(f"{spec.name} v{version}: undecodable answer: {e}") from e


def _bindings(spec: ApiSpec) -> list[ck.AclBinding]:
    out = []
    for c in spec.checks:
        name = CLUSTER_NAME if c.resource_type is ResourceType.CLUSTER else NAME
        binding = ck.AclBinding(_CK_TYPES[c.resource_type], name, ck.ResourcePatternType.LITERAL,
                                "User:ANONYMOUS", "*", getattr(ck.AclOperation, c.operation.name),
                                ck.AclPermissionType.ALLOW)
        if binding not in out:
            out.append(binding)
    return out


EVERYTHING = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, None,
                                 None, ck.AclOperation.ANY, ck.AclPermissionType.ANY)


@pytest.fixture
def walk_broker(broker_factory, tmp_path):
    certs = TlsFiles(tmp_path / "certs")
    ssl_port = free_port()
    broker = broker_factory({
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL,CONTROLLER:PLAINTEXT",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:client", "allow.everyone.if.no.acl.found": "false",
        **certs.server_pem_config(client_auth="required"),
    }, start=False)
    broker.overrides["listeners"] = f"PLAINTEXT://{HOST}:{broker.port},MTLS://{HOST}:{ssl_port}"
    broker.start()
    admin = ck_admin(f"{HOST}:{ssl_port}", **certs.librdkafka(client_cert=True))
    fs = admin.create_topics([ck.NewTopic(NAME, 1, 1)], request_timeout=TIMEOUT)
    fs[NAME].result(timeout=TIMEOUT)
    return broker, admin


def _walk_one(broker: Any, admin: Any, spec: ApiSpec) -> list[str]:
    version = VERSIONS.get(spec.key, api.SUPPORTED_VERSIONS[spec.key][1])
    what = f"{spec.name} v{version}"
    problems = []
    expected = {AUTH_ERRORS[c.error.split()[0]] for c in spec.checks if c.error != LEFT_OUT}
    if expected:
        codes = _send(broker.bootstrap, spec, version)
        if codes is None:
            problems.append(f"{what} without ACLs: connection closed")
        elif not expected & set(codes):
            problems.append(f"{what} without ACLs: {sorted(set(codes))}, "
                            f"wanted one of {sorted(expected)}")
    for f in admin.create_acls(_bindings(spec), request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)
    try:
        deadline = time.monotonic() + 5  # the broker's image follows the metadata log
        while True:
            codes = _send(broker.bootstrap, spec, version)
            left = None if codes is None else set(codes) & set(AUTH_ERRORS.values())
            if left == set() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if codes is None:
            problems.append(f"{what} with ACLs: connection closed")
        elif left:
            problems.append(f"{what} with ACLs still answers {sorted(left)}")
    finally:
        for f in admin.delete_acls([EVERYTHING], request_timeout=TIMEOUT).values():
            f.result(timeout=TIMEOUT)
        while admin.describe_acls(EVERYTHING, request_timeout=TIMEOUT).result(timeout=TIMEOUT):
            time.sleep(0.05)
    return problems


def test_every_checked_api_refuses_without_the_acl_and_passes_with_it(walk_broker) -> None:
    broker, admin = walk_broker
    problems: list[str] = []
    walked = _walked()
    assert len(walked) >= 45  # every client API but ApiVersions
    for spec in walked:
        try:
            problems += _walk_one(broker, admin, spec)
        except UndecodableAnswer as e:
            problems.append(str(e))
    assert not problems, "\n".join(problems)
