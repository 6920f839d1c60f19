"""The request pipeline: every request a node answers passes these stages, in order.

    frame        network.py cuts size-prefixed frames (socket.request.max.bytes)
    header       parse the request header; an unknown API or version closes the
                 connection, except ApiVersions, answered in v0 with our ranges
    route        find the API's line in apis.API_TABLE: controller APIs (KRaft,
                 broker lifecycle) only on a node with the controller role and only
                 on its controller listeners (controller.listener.names), as Kafka
                 scopes APIs by listener: on a client listener they close the
                 connection like an unknown API; on a broker-only node, admin APIs
                 marked `forwarded` are relayed to the active controller as they are
    authenticate the connection's principal (PLAINTEXT: User:ANONYMOUS); until a
                 SASL connection has authenticated only `before_auth` APIs pass
    decode       protocol/guard.py checks every length and count, then kio decodes;
                 a null where the schema has none closes the connection
    authorize    the API's REQUEST-scoped checks (cluster-level operations), each
                 through the authorizer; a denial answers with the API's
                 authorization error. RESOURCE-scoped checks (topics, groups,
                 transactional ids) are made by the handler through the context
    handle       the API's handler, with the node's services and a RequestContext
    throttle     the response's throttle_time_ms (quotas plug in here)
    encode       the response header of the API version, then the body (Fetch
                 bodies go out as file bytes, protocol/fetch_codec.py)

Each stage is a method below; `RequestPipeline.handle` chains them. Every
failure a client can cause ends as an answer or a closed connection, never an
exception out of this module.
"""

from __future__ import annotations

import io
import logging
import time
from typing import Any, Protocol

from kio.serial import entity_writer

from ..metadata.client_quotas import Quotas
from ..metadata.raft_quorum import NotControllerError
from ..protocol import api, entities
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
from ..security.resources import ANONYMOUS, CLUSTER_NAME, Principal
from .apis import API_TABLE, ApiSpec, Scope
from .context import RequestContext
from .handlers.cluster import replica_id_of
from .quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaManager,
)

log = logging.getLogger(__name__)

CLOSE = object()  # a stage's answer that means: close this connection

UNSUPPORTED_VERSION = 35
CLUSTER_AUTHORIZATION_FAILED = 31


class Connection(Protocol):
    """What the pipeline reads of a connection (network.KafkaConnection)."""

    peer: str
    listener: str
    principal: Principal
    authenticated: bool

    def throttle(self, ms: int) -> None: ...


class Forwarder(Protocol):
    async def forward(self, frame: bytes) -> bytes: ...


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
        self.host.observe_request(key, time.perf_counter() - started, result is CLOSE)
        return result

    async def _handle(self, frame: bytes, conn: Connection | None) -> Any:
        try:
            header = parse_request_header(frame)
        except MalformedRequest as e:
            log.warning("closing %s: malformed request header: %s", _peer(conn), e)
            return CLOSE
        spec = self._route(header, conn)
        if not isinstance(spec, ApiSpec):
            return spec  # an answer (ApiVersions v0) or CLOSE
        if not self._authenticated(spec, conn):
            log.warning("closing %s: %s before authentication", _peer(conn), spec.name)
            return CLOSE
        if spec.forwarded and self._forwards(conn):
            return await self._forward(spec, frame, conn)
        request = self._decode(spec, header, frame, conn)
        if request is CLOSE:
            return CLOSE
        ctx = self._context(header, conn)
        if not self._authorize(spec, ctx):
            return self._denial(spec, header, request)
        try:
            handler_started = time.perf_counter()
            data = await spec.handler(self.services, ctx, request)
            handler_s = time.perf_counter() - handler_started
        except NotControllerError as e:
            # a standby controller, or leadership lost meanwhile: the caller
            # (a broker) reconnects and finds the active controller
            log.info("closing %s: %s v%d: %s", _peer(conn), spec.name, header.api_version, e)
            return CLOSE
        except Exception:
            log.exception("handler for %s v%d failed", spec.name, header.api_version)
            return CLOSE
        if data is None:  # acks=0: no answer, but the bytes still count
            self._throttle(spec, ctx, conn, request, len(frame), 0, handler_s)
            return None
        data.setdefault("throttle_time", 0)
        answer = self._encode(header, data)
        throttle_ms = self._throttle(spec, ctx, conn, request, len(frame), _size(answer), handler_s)
        if throttle_ms:
            data["throttle_time"] = throttle_ms
            answer = self._encode(header, data)
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
        return conn is None or conn.authenticated or spec.before_auth

    def _forwards(self, conn: Connection | None) -> bool:
        return self.host.forwarder is not None and not self.host.is_active_controller

    async def _forward(self, spec: ApiSpec, frame: bytes, conn: Connection | None) -> Any:
        if conn is not None and conn.listener in self.host.controller_listener_names:
            # Relayed to us, a standby voter: the relaying broker moves on.
            log.info("closing %s: %s relayed to a standby controller", _peer(conn), spec.name)
            return CLOSE
        forwarder = self.host.forwarder
        assert forwarder is not None
        try:
            return await forwarder.forward(frame)
        except ChannelError as e:
            log.warning("closing %s: cannot forward %s to the controller: %s",
                        _peer(conn), spec.name, e)
            return CLOSE

    @staticmethod
    def _decode(spec: ApiSpec, header: RequestHeader, frame: bytes,
                conn: Connection | None) -> Any:
        version = header.api_version
        try:
            request = decode_message(api.request_class(spec.key, version), frame,
                                     header.body_offset)
        except Exception as e:  # the guard's MalformedRequest, or kio's own refusals
            log.warning("closing %s: cannot parse %s v%d: %s", _peer(conn), spec.name,
                        version, e)
            return CLOSE
        illegal = entities.find_illegal_null(request)
        if illegal is not None:
            log.warning("closing %s: %s v%d has null in non-nullable field %s",
                        _peer(conn), spec.name, version, illegal)
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
            controller_listener=self._on_controller_listener(conn),
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

    def _throttle(self, spec: ApiSpec, ctx: RequestContext, conn: Connection | None,
                  request: Any, request_bytes: int, response_bytes: int,
                  handler_s: float) -> int:
        """Client quotas (broker/quotas.py): record what this request used
        against the quotas that apply to its user and client id; the throttle
        time, for which the connection is muted after the answer (KIP-219)."""
        quotas = self.host.client_quotas
        if not quotas or conn is None or spec.controller or spec.before_auth:
            return 0
        user = ctx.principal.name if ctx.principal.type == "User" else ""
        client_id = ctx.client_id or ""
        record = self.quotas.record
        throttle = record(quotas, REQUEST_PERCENTAGE, user, client_id, handler_s * 100.0)
        if spec.key == api.ApiKey.PRODUCE:
            throttle = max(throttle, record(quotas, PRODUCER_BYTE_RATE, user, client_id,
                                            request_bytes))
        elif spec.key == api.ApiKey.FETCH and replica_id_of(request) < 0:
            throttle = max(throttle, record(quotas, CONSUMER_BYTE_RATE, user, client_id,
                                            response_bytes))
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


def _size(answer: Any) -> int:
    return sum(map(len, answer)) if type(answer) is list else len(answer)


def _peer(conn: Connection | None) -> str:
    return conn.peer if conn is not None else "?"
