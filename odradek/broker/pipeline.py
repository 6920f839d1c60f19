"""The request pipeline: every request a node answers passes these stages, in order.

    frame        network.py cuts size-prefixed frames (socket.request.max.bytes)
    header       parse the request header; an unknown API or version closes the
                 connection, except ApiVersions, answered in v0 with our ranges
    route        find the API's line in apis.API_TABLE: controller APIs (KRaft,
                 broker lifecycle) only on a node with the controller role and only
                 on its controller listeners (controller.listener.names), as Kafka
                 scopes APIs by listener: on a client listener they close the
                 connection like an unknown API
    authenticate the connection's principal (PLAINTEXT: User:ANONYMOUS); until a
                 SASL connection has authenticated only `before_auth` APIs pass,
                 and once its session expired (KIP-368) only those again. A
                 SaslHandshake v0 client's tokens are bare frames: they go to the
                 connection's SASL session before the header stage
    decode       protocol/guard.py checks every length and count, then kio decodes;
                 a null where the schema has none closes the connection
    forward      on a broker-only node, admin APIs marked `forwarded` go to the
                 active controller in an Envelope (KIP-590) carrying the client's
                 principal and address (protocol/envelope.py); the controller's
                 EnvelopeResponse holds the answer, sent on as it is
    authorize    the API's REQUEST-scoped checks (cluster-level operations), each
                 through the authorizer; a denial answers with the API's
                 authorization error. RESOURCE-scoped checks (topics, groups,
                 transactional ids) are made by the handler through the context
    unwrap       (Envelope only, on a controller listener, after CLUSTER_ACTION was
                 authorized) the inner request runs the decode, authorize, handle
                 and encode stages as the principal and host the Envelope names;
                 its answer goes back inside an EnvelopeResponse
    handle       the API's handler, with the node's services and a RequestContext;
                 a handler whose answer only waits (an acks=all produce, after its
                 appends) may return a Later: the stages below then run when it is
                 ready, while the connection goes on to its next request
    downgrade    error codes the request's version cannot carry become the older
                 codes Kafka answers instead (the API line's `older_errors`:
                 version_errors.py), e.g. PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH
    throttle     the response's throttle_time_ms (quotas plug in here)
    encode       the response header of the API version, then the body (Fetch
                 bodies go out as file bytes, protocol/fetch_codec.py)

Each stage is a method below; `RequestPipeline.handle` chains them. Every
failure a client can cause ends as an answer or a closed connection, never an
exception out of this module. A failed SASL exchange ends as `CloseAfter`: the
error answer is written, then the connection is closed (Kafka's rule).
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
import time
from typing import Any, NamedTuple, Protocol

from kio.serial import entity_writer

from ..metadata.client_quotas import Quotas
from ..metadata.raft_quorum import NotControllerError
from ..protocol import api, entities, envelope
from ..protocol.client import ChannelError
from ..protocol.fetch_codec import encode_fetch_response
from ..protocol.framing import (
    MalformedRequest,
    RequestHeader,
    encode_response_frame,
    parse_request_header,
)
from ..protocol.guard import decode_message
from ..security.authorizer import AllowAll, Authorizer
from ..security.resources import ANONYMOUS, CLUSTER_NAME, AclOperation, Principal, ResourceType
from ..security.sasl import SaslSession
from .apis import API_TABLE, ApiSpec, Scope
from .context import Later, RequestContext
from .handlers.cluster import replica_id_of
from .quotas import (
    MUTATION_STRICT_SINCE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaManager,
)
from .version_errors import downgrade

log = logging.getLogger(__name__)

CLOSE = object()  # a stage's answer that means: close this connection


class CloseAfter(NamedTuple):
    """Write this response, then close the connection (a failed SASL exchange)."""

    response: Any


UNKNOWN_SERVER_ERROR = -1
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
PRINCIPAL_DESERIALIZATION_FAILURE = 97


class Connection(Protocol):
    """What the pipeline reads of a connection (network.KafkaConnection)."""

    peer: str
    listener: str
    principal: Principal
    authenticated: bool
    sasl: SaslSession | None  # None unless the listener is SASL_PLAINTEXT or SASL_SSL

    def throttle(self, ms: int) -> None: ...


class Forwarder(Protocol):
    async def forward(self, envelope: dict[str, Any]) -> Any:
        """Send an Envelope request to the active controller; its EnvelopeResponse."""
        ...


class PipelineHost(Protocol):
    """What the pipeline asks of the node it serves (the Broker wires it)."""

    @property
    def serves_controller_apis(self) -> bool: ...
    @property
    def forwarder(self) -> Forwarder | None: ...
    @property
    def is_active_controller(self) -> bool: ...
    @property
    def controller_listener_names(self) -> frozenset[str]: ...
    def security_protocol(self, listener: str) -> str: ...
    def observe_request(self, api_key: int, seconds: float, closed: bool) -> None: ...
    @property
    def client_quotas(self) -> Quotas: ...
    @property
    def quota_window(self) -> tuple[int, int]: ...


class RequestPipeline:
    def __init__(self, host: PipelineHost, services: Any,
                 authorizer: Authorizer | None = None,
                 table: dict[int, ApiSpec] | None = None) -> None:
        self.host = host
        self.services = services  # handed to every handler as its `node`
        self.authorizer: Authorizer = authorizer or AllowAll()
        self.table = API_TABLE if table is None else table
        samples, window_s = host.quota_window
        self.quotas = QuotaManager(samples, window_s)

    async def handle(self, frame: bytes, conn: Connection | None) -> Any:
        """One request frame in; a response frame (bytes or a list of chunks),
        None (no response: acks=0), or CLOSE out."""
        started = time.perf_counter()
        result = await self._handle(frame, conn)
        key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if type(result) is Later:  # observed once answered
            observe = self.host.observe_request
            result.task.add_done_callback(lambda task: observe(
                key, time.perf_counter() - started,
                task.cancelled() or task.exception() is not None or task.result() is CLOSE))
            return result
        self.host.observe_request(key, time.perf_counter() - started, result is CLOSE)
        return result

    async def _handle(self, frame: bytes, conn: Connection | None) -> Any:
        if conn is not None and conn.sasl is not None and conn.sasl.raw_tokens:
            return self._raw_sasl_token(conn.sasl, frame)
        try:
            header = parse_request_header(frame)
        except MalformedRequest as e:
            log.warning("closing %s: malformed request header: %s", _peer(conn), e)
            return CLOSE
        spec = self._route(header, conn)
        if not isinstance(spec, ApiSpec):
            return spec  # an answer (ApiVersions v0) or CLOSE
        if not self._authenticated(spec, conn):
            return CLOSE
        request = self._decode(spec, header, frame, _peer(conn))
        if request is CLOSE:
            return CLOSE
        ctx = self._context(header, conn)
        if spec.forwarded and self._forwards(conn):
            return await self._forward(spec, header, frame, ctx, conn)
        answer = None
        try:
            answer = await self._serve(spec, header, request, ctx, conn, len(frame))
            return answer
        finally:
            release = ctx.release_after_write
            if release is not None:
                # held until the connection has written the answer (fetch_memory.py)
                hold = getattr(conn, "hold_until_written", None)
                if type(answer) is Later:
                    answer.task.add_done_callback(lambda _task: release())
                elif hold is not None and answer is not None and answer is not CLOSE:
                    hold(release)
                else:
                    release()

    async def _serve(self, spec: ApiSpec, header: RequestHeader, request: Any,
                     ctx: RequestContext, conn: Connection | None, request_bytes: int) -> Any:
        """The stages after decoding: authorize, (unwrap,) handle, throttle, encode."""
        if not self._authorize(spec, ctx):
            return self._denial(spec, header, request)
        if spec.key == api.ApiKey.ENVELOPE:
            return await self._unwrap(header, request, ctx, conn)
        if spec.key in MUTATION_STRICT_SINCE:
            self._mutation_quota(spec, ctx)
        elif spec.key == api.ApiKey.FETCH and conn is not None:
            if replica_id_of(request) < 0:
                if self.host.client_quotas:
                    user = ctx.principal.name if ctx.principal.type == "User" else ""
                    ctx.fetch_quota = self.quotas.fetch_quota(self.host.client_quotas, user,
                                                              ctx.client_id or "")
            elif not getattr(conn, "replication", True) and ctx.authorize(
                    AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
                # A follower's connection leaves the queued request pool, once:
                # replication must never wait behind the produce requests that
                # wait for it (connection_limits.py).
                conn.replicating()  # type: ignore[attr-defined]
        try:
            handler_started = time.perf_counter()
            data = await spec.handler(self.services, ctx, request)
            handler_s = time.perf_counter() - handler_started
        except NotControllerError as e:
            # a standby controller, or leadership lost meanwhile: the caller
            # (a broker) reconnects and finds the active controller
            log.info("closing %s: %s v%d: %s", ctx.peer, spec.name, header.api_version, e)
            return CLOSE
        except Exception:
            log.exception("handler for %s v%d failed", spec.name, header.api_version)
            return CLOSE
        if isinstance(data, Later):
            # the handler's ordered part is done; the stages after it run when its
            # answer is ready (the time it waits is not handler time for quotas)
            # The request is not passed on (no stage after the handler reads it):
            # its records (a copy of up to a whole produce request) would stay in
            # memory for as long as the answer waits, up to MAX_LATER_ANSWERS per
            # connection, and each new request would land in fresh, cache-cold
            # memory (issue 18: RSS +47 MiB per broker, 3x the page faults at acks=all).
            return Later(asyncio.ensure_future(self._answer_later(
                spec, header, ctx, conn, request_bytes, data, handler_s)))
        return self._answer(spec, header, ctx, conn, request_bytes, data, handler_s)

    async def _answer_later(self, spec: ApiSpec, header: RequestHeader,
                            ctx: RequestContext, conn: Connection | None,
                            request_bytes: int, later: Later, handler_s: float) -> Any:
        try:
            data = await later.task
        except Exception:
            log.exception("handler for %s v%d failed", spec.name, header.api_version)
            return CLOSE
        return self._answer(spec, header, ctx, conn, request_bytes, data, handler_s)

    def _answer(self, spec: ApiSpec, header: RequestHeader, ctx: RequestContext,
                conn: Connection | None, request_bytes: int, data: dict[str, Any] | None,
                handler_s: float) -> Any:
        """The stages after the handler: downgrade, throttle, encode."""
        if data is None:  # acks=0: no answer, but the bytes still count
            self._throttle(spec, ctx, conn, request_bytes, handler_s)
            return None
        data.setdefault("throttle_time", 0)
        if spec.older_errors:
            downgrade(spec.older_errors, header.api_version, data)
        answer = self._encode(header, data)
        throttle_ms = self._throttle(spec, ctx, conn, request_bytes, handler_s)
        if throttle_ms:
            data["throttle_time"] = throttle_ms
            answer = self._encode(header, data)
        if ctx.sasl is not None and ctx.sasl.close_after_response:
            return CloseAfter(answer)
        return answer

    # -- the stages ---------------------------------------------------------------------

    def _route(self, header: RequestHeader, conn: Connection | None) -> Any:
        key, version = header.api_key, header.api_version
        spec = self.table.get(key)
        offered = api.is_supported(key, version) or (
            self.host.serves_controller_apis and self._on_controller_listener(conn)
            and api.is_controller_api(key, version))
        if spec is not None and offered:
            return spec
        if key == api.ApiKey.API_VERSIONS:
            # Kafka's rule: answer in v0 with UNSUPPORTED_VERSION and our ranges,
            # so the client can pick a version we speak.
            body = encode_body(api.ApiKey.API_VERSIONS, 0, {
                "error_code": UNSUPPORTED_VERSION, "api_keys": api_version_entries()})
            return encode_response_frame(header.correlation_id, 0, body)
        log.warning("closing %s: unsupported request %s v%d (client %r)", _peer(conn),
                    api.api_name(key), version, header.client_id)
        return CLOSE

    def _on_controller_listener(self, conn: Connection | None) -> bool:
        """A controller listener's connection, or an in-process call (conn None)."""
        return conn is None or conn.listener in self.host.controller_listener_names

    @staticmethod
    def _authenticated(spec: ApiSpec, conn: Connection | None) -> bool:
        if conn is None or spec.before_auth:
            return True
        if not conn.authenticated:
            log.warning("closing %s: %s before authentication", _peer(conn), spec.name)
            return False
        if conn.sasl is not None and conn.sasl.expired(int(time.time() * 1000)):
            log.info("closing %s: %s after its SASL session expired "
                     "(connections.max.reauth.ms) without re-authentication",
                     _peer(conn), spec.name)
            return False
        return True

    @staticmethod
    def _raw_sasl_token(session: SaslSession, frame: bytes) -> Any:
        """A SaslHandshake v0 client's bare token: the answer as a bare frame, or
        CLOSE when authentication failed (Kafka answers nothing then)."""
        answer = session.raw_token(frame, int(time.time() * 1000))
        if answer is None:
            return CLOSE
        return struct.pack(">i", len(answer)) + answer

    def _forwards(self, conn: Connection | None) -> bool:
        return self.host.forwarder is not None and not self.host.is_active_controller

    async def _forward(self, spec: ApiSpec, header: RequestHeader, frame: bytes,
                       ctx: RequestContext, conn: Connection | None) -> Any:
        """KIP-590: the request goes to the active controller in an Envelope that
        names the client's principal and address; the controller authorizes it as
        the client. The EnvelopeResponse holds the answer frame (header included,
        the client's correlation id) or an error of the Envelope itself."""
        if ctx.listener in self.host.controller_listener_names:
            # Relayed to us, a standby voter: the relaying broker moves on.
            log.info("closing %s: %s relayed to a standby controller", ctx.peer, spec.name)
            return CLOSE
        forwarder = self.host.forwarder
        assert forwarder is not None
        try:
            address = envelope.pack_host(ctx.client_host)
        except ValueError:
            log.warning("closing %s: %s: client address %r is not an IP", ctx.peer,
                        spec.name, ctx.client_host)
            return CLOSE
        try:
            response = await forwarder.forward({
                "request_data": frame,
                "request_principal": envelope.serialize_principal(
                    ctx.principal.type, ctx.principal.name),
                "client_host_address": address,
            })
        except ChannelError as e:
            log.warning("closing %s: cannot forward %s to the controller: %s",
                        ctx.peer, spec.name, e)
            return CLOSE
        code = _code(response.error_code)
        if code == UNSUPPORTED_VERSION:
            # the controller does not speak this version (Kafka: the client
            # reconnects and learns the versions again)
            log.warning("closing %s: the controller does not take %s v%d", ctx.peer,
                        spec.name, header.api_version)
            return CLOSE
        if code or response.response_data is None:
            # The Envelope itself failed: this broker is misconfigured (e.g. its
            # principal lacks CLUSTER_ACTION). Kafka answers the client
            # UNKNOWN_SERVER_ERROR, not the error meant for the broker.
            log.warning("forwarding %s from %s: the controller answered the Envelope with "
                        "error %d (the broker's principal needs CLUSTER_ACTION on the "
                        "cluster)", spec.name, ctx.peer, code)
            cls = api.response_class(spec.key, header.api_version)
            return self._encode(header, entities.error_response(
                cls, UNKNOWN_SERVER_ERROR, "The controller refused the forwarded request."))
        data = bytes(response.response_data)
        if conn is not None and spec.key in MUTATION_STRICT_SINCE:
            throttle_ms = forwarded_throttle_ms(header, data)
            if throttle_ms > 0:  # the controller's mutation quota (KIP-599)
                conn.throttle(throttle_ms)
        return struct.pack(">i", len(data)) + data

    async def _unwrap(self, header: RequestHeader, request: Any, ctx: RequestContext,
                      conn: Connection | None) -> Any:
        """An Envelope from a broker (CLUSTER_ACTION already authorized): run the
        inner request as the client it names, answer inside an EnvelopeResponse."""
        if ctx.listener and ctx.listener not in self.host.controller_listener_names:
            log.warning("closing %s: Envelope on listener %s, not a controller listener",
                        ctx.peer, ctx.listener)
            return CLOSE

        def refuse(code: int, why: str) -> Any:
            log.warning("refusing an Envelope from %s (%s): %s", ctx.principal, ctx.peer, why)
            return self._encode(header, {"error_code": code, "response_data": None})

        try:
            principal = Principal(*envelope.deserialize_principal(
                bytes(request.request_principal)))
        except envelope.PrincipalDeserializationError as e:
            return refuse(PRINCIPAL_DESERIALIZATION_FAILURE, f"principal: {e}")
        try:
            client_host = envelope.unpack_host(bytes(request.client_host_address))
        except ValueError as e:
            return refuse(INVALID_REQUEST, f"client address: {e}")
        frame = bytes(request.request_data)
        try:
            inner_header = parse_request_header(frame)
        except MalformedRequest as e:
            return refuse(INVALID_REQUEST, f"inner header: {e}")
        spec = self.table.get(inner_header.api_key)
        if spec is None or not spec.forwarded:
            return refuse(INVALID_REQUEST, f"{api.api_name(inner_header.api_key)} is not "
                          "forwardable")
        if not api.is_supported(inner_header.api_key, inner_header.api_version):
            return refuse(UNSUPPORTED_VERSION,
                          f"{spec.name} v{inner_header.api_version} is not supported")
        peer = f"{client_host} (via {ctx.peer})"
        inner = self._decode(spec, inner_header, frame, peer)
        if inner is CLOSE:
            return refuse(INVALID_REQUEST, f"cannot parse the inner {spec.name}")
        inner_ctx = RequestContext(
            inner_header.api_key, inner_header.api_version, inner_header.correlation_id,
            inner_header.client_id, ctx.listener, client_host=client_host, peer=peer,
            principal=principal, security_protocol=ctx.security_protocol,
            authorizer=self.authorizer)
        answer = await self._serve(spec, inner_header, inner, inner_ctx, None, len(frame))
        if answer is CLOSE or answer is None:
            return CLOSE  # e.g. not the active controller: the broker moves on
        data = b"".join(answer) if type(answer) is list else answer
        return self._encode(header, {"error_code": 0, "response_data": data[4:]})

    @staticmethod
    def _decode(spec: ApiSpec, header: RequestHeader, frame: bytes, peer: str) -> Any:
        version = header.api_version
        try:
            request = decode_message(api.request_class(spec.key, version), frame,
                                     header.body_offset)
        except Exception as e:  # noqa: BLE001 - the guard's MalformedRequest, or kio's own refusals
            log.warning("closing %s: cannot parse %s v%d: %s", peer, spec.name, version, e)
            return CLOSE
        illegal = entities.find_illegal_null(request)
        if illegal is not None:
            log.warning("closing %s: %s v%d has null in non-nullable field %s",
                        peer, spec.name, version, illegal)
            return CLOSE
        return request

    def _context(self, header: RequestHeader, conn: Connection | None) -> RequestContext:
        peer = _peer(conn)
        listener = conn.listener if conn is not None else ""
        return RequestContext(
            header.api_key, header.api_version, header.correlation_id, header.client_id,
            listener, client_host=peer.rsplit(":", 1)[0], peer=peer,
            principal=conn.principal if conn is not None else ANONYMOUS,
            security_protocol=self.host.security_protocol(listener) if listener else "PLAINTEXT",
            authorizer=self.authorizer,
            sasl=conn.sasl if conn is not None else None,
            controller_listener=self._on_controller_listener(conn),
            may_answer_later=getattr(conn, "answers_later", False),
            connection_id=getattr(conn, "connection_id", -1),
        )

    @staticmethod
    def _authorize(spec: ApiSpec, ctx: RequestContext) -> bool:
        """The REQUEST-scoped checks (cluster-level operations): all must pass."""
        for check in spec.checks:
            if check.scope is not Scope.REQUEST:
                continue
            if not ctx.authorize(check.operation, check.resource_type, CLUSTER_NAME):
                log.info("denied %s %s on %s to %s from %s", spec.name, check.operation.name,
                         check.resource_type.name, ctx.principal, ctx.client_host)
                return False
        return True

    def _denial(self, spec: ApiSpec, header: RequestHeader, request: Any) -> Any:
        """CLUSTER_AUTHORIZATION_FAILED as the whole answer (an empty answer for
        versions without a top-level error code, as Kafka sends), or per item
        where the API's line says how (CreateAcls, DeleteAcls)."""
        message = "Cluster authorization failed."
        if spec.denial is not None:
            data = spec.denial(request, CLUSTER_AUTHORIZATION_FAILED, message)
            data["throttle_time"] = 0
            return self._encode(header, data)
        cls = api.response_class(spec.key, header.api_version)
        data = entities.error_response(cls, CLUSTER_AUTHORIZATION_FAILED, message)
        return self._encode(header, data)

    def _mutation_quota(self, spec: ApiSpec, ctx: RequestContext) -> None:
        """KIP-599: the controller mutation quota the handler spends (here, where
        the controller decides: a forwarded request is counted by the controller,
        as the client the Envelope names)."""
        quotas = self.host.client_quotas
        if quotas:
            user = ctx.principal.name if ctx.principal.type == "User" else ""
            ctx.mutation_quota = self.quotas.mutation_quota(
                quotas, user, ctx.client_id or "",
                strict=ctx.api_version >= MUTATION_STRICT_SINCE[spec.key])

    def _throttle(self, spec: ApiSpec, ctx: RequestContext, conn: Connection | None,
                  request_bytes: int, handler_s: float) -> int:
        """Client quotas (broker/quotas.py): record what this request used
        against the quotas that apply to its user and client id; the throttle
        time, for which the connection is muted after the answer (KIP-219)."""
        quotas = self.host.client_quotas
        mutation = ctx.mutation_quota.throttle_ms if ctx.mutation_quota is not None else 0
        if not quotas or conn is None or spec.controller or spec.before_auth:
            return mutation  # forwarded: the relaying broker mutes its client
        user = ctx.principal.name if ctx.principal.type == "User" else ""
        client_id = ctx.client_id or ""
        record = self.quotas.record
        throttle = record(quotas, REQUEST_PERCENTAGE, user, client_id, handler_s * 100.0)
        throttle = max(throttle, mutation)
        if spec.key == api.ApiKey.PRODUCE:
            throttle = max(throttle, record(quotas, PRODUCER_BYTE_RATE, user, client_id,
                                            request_bytes))
        elif spec.key == api.ApiKey.FETCH and ctx.fetch_quota is not None:
            # recorded by the handler, which answered empty if over the quota
            throttle = max(throttle, ctx.fetch_quota.throttle_ms)
        if throttle:
            log.debug("throttling %s (user %r, client %r) for %d ms after %s", ctx.peer,
                      user, client_id, throttle, spec.name)
            conn.throttle(throttle)
        return throttle

    @staticmethod
    def _encode(header: RequestHeader, data: dict[str, Any]) -> Any:
        key, version = header.api_key, header.api_version
        if key == api.ApiKey.FETCH:
            # file bytes go out as they were read, without a copy in Python
            return encode_fetch_response(version, header.correlation_id, data)
        body = encode_body(key, version, data)
        return encode_response_frame(
            header.correlation_id, api.response_header_version(key, version), body)


def encode_body(key: int, version: int, data: dict[str, Any]) -> bytes:
    cls = api.response_class(key, version)
    entity = entities.build(cls, data)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    return buf.getvalue()


def api_version_entries() -> list[dict[str, int]]:
    return [
        {"api_key": k, "min_version": lo, "max_version": hi}
        for k, (lo, hi) in sorted(api.SUPPORTED_VERSIONS.items())
    ]


def forwarded_throttle_ms(header: RequestHeader, data: bytes) -> int:
    """throttle_time_ms of a forwarded CreateTopics (v2+), DeleteTopics (v1+) or
    CreatePartitions answer: the body's first field, after the response header
    (correlation id, and for flexible versions an empty tagged-field list)."""
    key, version = header.api_key, header.api_version
    if (key, version) in ((api.ApiKey.CREATE_TOPICS, 0), (api.ApiKey.CREATE_TOPICS, 1),
                          (api.ApiKey.DELETE_TOPICS, 0)):
        return 0
    at = 4
    if api.response_header_version(key, version) >= 1:
        if data[at:at + 1] != b"\x00":
            return 0  # header tags: none are sent today
        at += 1
    if len(data) < at + 4:
        return 0
    return int(struct.unpack_from(">i", data, at)[0])


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


def _peer(conn: Connection | None) -> str:
    return conn.peer if conn is not None else "?"
