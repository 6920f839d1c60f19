"""What one client may hold of a broker: connections, idle time, request bytes.

Theory of operation. Every connection passes through `ConnectionLimits` when it
is accepted (`admit`), when it goes (`release`), and whenever it reads
(`account`) or finishes a request (`done`). The bookkeeping lives here; the
network layer (network.py) only asks and obeys: close this connection, stop
reading it, read it again. The rules are Kafka's (SocketServer's
ConnectionQuotas, Selector's idle expiry, the request memory pool):

- `max.connections.per.ip` (with `max.connections.per.ip.overrides`): a
  connection from an address that already has that many is closed right after
  accept (Kafka's TooManyConnectionsException).
- `max.connections` limits the connections of one listener group (the broker
  listeners; the controller listeners count apart, as Kafka's controller has
  its own SocketServer); `listener.name.<l>.max.connections` limits one
  listener (default: `max.connections`). The inter-broker listener is
  protected when the group has other listeners: it is not refused for the
  group's total, and when it pushes the total over `max.connections` the
  least recently active connection of another listener is closed (Kafka's
  `closeExcessConnections`). Differs from Kafka: Kafka's acceptor waits for a
  free slot (the connection waits in the listen backlog); here a connection
  over the listener or group limit is closed at once, as one over the per-IP
  limit is (asyncio cannot pause a listening socket), and the client retries
  after its reconnect backoff.
- `connections.max.idle.ms`: a connection with nothing read or written for
  that long is closed (a connection whose request is being handled is not
  idle; one whose responses the peer does not read is).
- `queued.max.request.bytes` (when > 0): the bytes of requests read but not
  yet answered, on all connections, are counted in one pool. A request's whole
  size is reserved once its size prefix is read, if the pool is not full then
  (Kafka's non-strict SimpleMemoryPool: one request may take it past the
  limit); a connection at a request boundary, or whose next request could not
  be reserved, stops being read while the pool is full. The start of a request
  read while the pool was full is counted apart (`unreserved_bytes`, at most
  one read per connection: uvloop reads up to 256 KiB) and does not keep the
  pool full, else connections each holding half a request would wait for each
  other forever. When the pool has room, waiting connections are let in first
  come first served: one holding the start of a request gets its whole size
  reserved (until the pool is full again); one at a request boundary is read
  again. So the pool exceeds the limit by at most one request plus one read
  per connection, and every request reserved is read to its end.
  While `queued.max.request.bytes` is -1 (Kafka's default),
  `odradek.queued.max.request.bytes` (512 MiB) is the pool's limit: produce
  requests parked for acks=all, and those queued behind them, would otherwise
  grow the broker until it is killed. Connections of a controller listener,
  and a connection once a follower has fetched on it (authorized for
  CLUSTER_ACTION), are not counted and never paused for the pool: the
  followers' fetches are what completes the parked produce requests, so they
  must not wait for the pool those requests fill.

Connection creation rates (KIP-612), measured as Kafka's quota `Rate` over
`quota.window.num` windows of `quota.window.size.seconds`:

- `max.connection.creation.rate` (all the broker listeners but the inter-broker
  one) and `listener.name.<l>.max.connection.creation.rate` (one listener): a
  connection that takes a rate over its bound is not read for the throttle time,
  `(rate - bound) / bound * window` (Kafka's acceptor waits that long before it
  accepts the next connection);
- the `connection_creation_rate` client quota of the peer's address (an `ip`
  entity, else the default ip entity, set with AlterClientQuotas / `odradek quotas
  alter --ip`): a connection over it is not counted, not read, and closed after
  the throttle time (Kafka's ConnectionThrottledException).

Rejections and closes are logged (at most once a second per reason, with the
number left out) and counted: `odradek_connections_rejected_total{listener,
reason}`, `odradek_connections_closed_total{listener,reason}`, and the pool
in `odradek_queued_request_bytes`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from ..config import BrokerConfig, ConfigError, normalize_address
from ..metadata.client_quotas import CONNECTION_CREATION_RATE, IP, Entity
from .quotas import Rate, throttle_time_ms

log = logging.getLogger(__name__)

# Reasons a connection is refused or closed (metric labels).
PER_IP = "max_connections_per_ip"
LISTENER = "listener_max_connections"
BROKER = "max_connections"
IDLE = "idle"
CREATION_RATE = "connection_creation_rate"
INT_MAX = 2**31 - 1
# How often the idle sweep runs, at most and at least.
IDLE_SWEEP_MAX_INTERVAL_S = 1.0
IDLE_SWEEP_MIN_INTERVAL_S = 0.01
LOG_INTERVAL_S = 1.0  # one log line per reason per interval; the rest are counted


class LimitedConnection(Protocol):
    """What the limits read of a connection and ask of it (network.KafkaConnection)."""

    listener: str
    peer_address: str  # normalized IP (normalize_address)
    last_active_s: float  # time.monotonic() of the last byte read or written
    @property
    def busy(self) -> bool:
        """A request of it is being handled or waits for its answer."""

    def abort(self) -> None: ...
    def pause_reading_for(self, reason: str) -> None: ...
    def resume_reading_for(self, reason: str) -> None: ...


class ConnectionQuotas:
    """Kafka's ConnectionQuotas for one group of listeners: counts by address, by
    listener and in all; which connection may stay. No I/O, no clock."""

    def __init__(self, max_connections: int, max_per_ip: int,
                 per_ip_overrides: dict[str, int], listener_max: dict[str, int],
                 inter_broker_listener: str | None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = per_ip_overrides
        self.listener_max = listener_max
        self.by_address: collections.Counter[str] = collections.Counter()
        self.by_listener: collections.Counter[str] = collections.Counter()
        self.total = 0
        # Kafka: the inter-broker listener is protected only when there are others.
        self.protected = (inter_broker_listener
                          if inter_broker_listener in listener_max and len(listener_max) > 1
                          else None)

    def admit(self, listener: str, address: str) -> str | None:
        """Count a new connection and return None, or return why it is refused."""
        if self.by_listener[listener] >= self.listener_max.get(listener, 2**31 - 1):
            return LISTENER
        if listener != self.protected and self.total >= self.max_connections:
            return BROKER
        if self.by_address[address] >= self.per_ip_overrides.get(address, self.max_per_ip):
            return PER_IP
        self.by_address[address] += 1
        self.by_listener[listener] += 1
        self.total += 1
        return None

    def release(self, listener: str, address: str) -> None:
        assert self.by_address[address] > 0 and self.by_listener[listener] > 0
        self.by_address[address] -= 1
        if not self.by_address[address]:
            del self.by_address[address]
        self.by_listener[listener] -= 1
        self.total -= 1
        assert self.total >= 0

    def excess(self) -> int:
        """How many connections of unprotected listeners must go (the protected
        listener took the total over `max_connections`)."""
        return max(0, self.total - self.max_connections)

    def limit_of(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.max_per_ip)


class QueuedRequestBytes:
    """`queued.max.request.bytes`: bytes of requests read and not yet answered.

    `used_bytes` counts whole requests read and the reservations of requests
    being read; `unreserved_bytes` the start of a request a connection read
    while the pool was full (at most one read each: such a connection is
    paused at once). The latter never keeps the pool full, or connections
    that wait with half a request would wait for each other forever. Waiting
    connections are let in one at a time, first come first served, each with a
    reservation made before it reads again."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes  # <= 0: no limit
        self.used_bytes = 0
        self.unreserved_bytes = 0
        self._waiting: dict[RequestBytesAccount, None] = {}  # insertion order: FIFO

    @property
    def full(self) -> bool:
        return 0 < self.max_bytes <= self.used_bytes

    def change(self, delta: int, unreserved_delta: int = 0) -> None:
        self.used_bytes += delta
        self.unreserved_bytes += unreserved_delta
        assert self.used_bytes >= 0 and self.unreserved_bytes >= 0
        while self._waiting and not self.full:
            account = next(iter(self._waiting))
            del self._waiting[account]
            account.grant()

    def wait(self, account: RequestBytesAccount) -> None:
        if account not in self._waiting:
            self._waiting[account] = None
            account.conn.pause_reading_for("memory")

    def forget(self, account: RequestBytesAccount) -> None:
        self._waiting.pop(account, None)


class RequestBytesAccount:
    """One connection's part of the `queued.max.request.bytes` pool: the whole
    requests it read and has not had answered, plus the request it is reading:
    its whole size once reserved (or, let in from the wait, a first read's
    worth until its size is known), else the bytes of it buffered so far."""

    __slots__ = ("complete_bytes", "conn", "exempt", "next_frame_bytes", "pool",
                 "reserved_bytes", "reserving", "unreserved_bytes")

    def __init__(self, pool: QueuedRequestBytes, conn: LimitedConnection,
                 exempt: bool = False) -> None:
        self.pool = pool
        self.conn = conn
        # not counted: a controller listener's connection, or a follower's
        # (exempt_from_pool); replication and the quorum never wait for the pool
        self.exempt = exempt
        self.complete_bytes = 0
        self.reserved_bytes = 0
        self.unreserved_bytes = 0
        self.next_frame_bytes: int | None = None
        # May reserve the request being read whatever the pool holds: it is that
        # request's reservation already, or the pool let this connection in.
        self.reserving = False

    def read(self, frames: list[bytes], next_frame_bytes: int | None, buffered: int) -> None:
        """Account a read: `frames` it completed, then what is left buffered
        (`next_frame_bytes`: that request's whole size once its prefix is in)."""
        if self.exempt:
            return
        pool = self.pool
        self.next_frame_bytes = next_frame_bytes
        before, unreserved_before = self.complete_bytes + self.reserved_bytes, \
            self.unreserved_bytes
        if frames:
            self.complete_bytes += sum(4 + len(f) for f in frames)
            # The reservation was for a request now complete: the next one needs
            # its own, as in Kafka, where each request is allocated on its own.
            self.reserving = False
        if buffered == 0:
            self.reserved_bytes = self.unreserved_bytes = 0
            self.reserving = False
        elif next_frame_bytes is not None and (self.reserving or not pool.full):
            self.reserved_bytes, self.unreserved_bytes = next_frame_bytes, 0
            self.reserving = True
        else:
            self.reserved_bytes, self.unreserved_bytes = 0, buffered
            self.reserving = False
        pool.change(self.complete_bytes + self.reserved_bytes - before,
                    self.unreserved_bytes - unreserved_before)
        if pool.full and not self.reserving:
            pool.wait(self)

    def grant(self) -> None:
        """The pool has room: a connection holding the start of a request gets
        that request's whole size reserved; one at a request boundary (nothing
        to reserve yet, and it may never send again) is just read again, and
        waits anew if the pool is full once its next request starts."""
        if self.next_frame_bytes is not None and self.unreserved_bytes:
            self.reserving = True
            self.pool.used_bytes += self.next_frame_bytes - self.reserved_bytes
            self.pool.unreserved_bytes -= self.unreserved_bytes
            self.reserved_bytes, self.unreserved_bytes = self.next_frame_bytes, 0
        self.conn.resume_reading_for("memory")

    def answered(self, request_bytes: int) -> None:
        """A request of `request_bytes` (size prefix included) was handled."""
        if self.exempt:
            return
        self.complete_bytes -= request_bytes
        assert self.complete_bytes >= 0
        self.pool.change(-request_bytes)

    def exempt_from_pool(self) -> None:
        """Leave the pool for good: what this connection holds is given back and
        it is read again if the pool had paused it."""
        if self.exempt:
            return
        self.close()
        self.exempt = True
        self.conn.resume_reading_for("memory")

    def close(self) -> None:
        held, unreserved = self.complete_bytes + self.reserved_bytes, self.unreserved_bytes
        self.complete_bytes = self.reserved_bytes = self.unreserved_bytes = 0
        self.pool.forget(self)
        self.pool.change(-held, -unreserved)


Quotas = Mapping[Entity, Mapping[str, float]]


class CreationRates:
    """KIP-612: connection creation rates, broker-wide, per listener and per address."""

    def __init__(self, config: BrokerConfig, listeners: Iterable[str],
                 exempt: Iterable[str | None], ip_quotas: Callable[[], Quotas] = dict
                 ) -> None:
        self.samples: int = config.get("quota.window.num")
        self.window_ms: int = config.get("quota.window.size.seconds") * 1000
        self.broker_bound: int = config.get("max.connection.creation.rate")
        self.listener_bound = {n: self._listener_bound(config, n) for n in listeners}
        # the inter-broker and controller listeners: no broker-wide bound
        self.exempt = frozenset(exempt)
        self.ip_quotas = ip_quotas
        self.rates: dict[str, Rate] = {}

    @staticmethod
    def _listener_bound(config: BrokerConfig, listener: str) -> int:
        raw = config.listener_overrides(listener).get("max.connection.creation.rate")
        if raw is None:
            return INT_MAX
        key = f"listener.name.{listener.lower()}.max.connection.creation.rate"
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, "Expected value to be a 32-bit integer", raw) from None
        if not 0 <= value <= INT_MAX:
            raise ConfigError(key, "Value must be at least 0", raw)
        return value

    def _record(self, key: str, bound: float, value: float, now_ms: float) -> int:
        rate = self.rates.get(key)
        if rate is None:
            rate = self.rates[key] = Rate(self.samples, self.window_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if bound <= 0:
            return self.samples * self.window_ms if value > 0 else 0
        return throttle_time_ms(observed, bound, rate.window_size_ms(now_ms)) \
            if observed > bound else 0

    def ip_bound(self, address: str) -> float | None:
        quotas = self.ip_quotas()
        default = None
        for ent, values in quotas.items():
            if len(ent) != 1 or ent[0][0] != IP or CONNECTION_CREATION_RATE not in values:
                continue
            name = ent[0][1]
            if name is None:
                default = values[CONNECTION_CREATION_RATE]
            elif normalize_address(name) == address:
                return values[CONNECTION_CREATION_RATE]
        return default

    def throttle(self, listener: str, address: str, now_ms: float) -> tuple[int, bool]:
        """(ms to wait before reading the new connection, whether to close it then)."""
        wait = 0
        bound = self.listener_bound.get(listener, INT_MAX)
        if bound < INT_MAX:
            wait = self._record(f"listener:{listener}", bound, 1, now_ms)
        if self.broker_bound < INT_MAX and listener not in self.exempt:
            wait = max(wait, self._record("broker", self.broker_bound, 1, now_ms))
        ip_bound = self.ip_bound(address)
        if ip_bound is not None:
            ms = self._record(f"ip:{address}", ip_bound, 1, now_ms)
            if ms:
                self._record(f"ip:{address}", ip_bound, -1, now_ms)  # not accepted
                return ms, True
        if len(self.rates) > 10_000:  # addresses come and go
            span = self.samples * self.window_ms
            self.rates = {k: r for k, r in self.rates.items()
                          if r.starts and r.starts[-1] > now_ms - span}
        return wait, False


class ConnectionLimits:
    """The broker's connection quotas, idle expiry and request byte pool."""

    def __init__(self, config: BrokerConfig, registry: CollectorRegistry | None = None,
                 ip_quotas: Callable[[], Quotas] = dict) -> None:
        controller = config.controller_listener_names
        overrides = config.max_connections_per_ip_overrides
        max_connections = config.get("max.connections")
        max_per_ip = config.get("max.connections.per.ip")
        names = [e.name for e in config.listeners]
        inter_broker = (config.inter_broker_listener_name
                        if "broker" in config.process_roles else None)

        def quotas(group: Iterable[str], protected: str | None) -> ConnectionQuotas:
            return ConnectionQuotas(max_connections, max_per_ip, overrides,
                                    {n: config.listener_max_connections(n) for n in group},
                                    protected)

        self.broker_quotas = quotas([n for n in names if n not in controller], inter_broker)
        self.controller_quotas = quotas([n for n in names if n in controller], None)
        self.creation = CreationRates(config, names, [inter_broker, *controller], ip_quotas)
        self._controller_listeners = frozenset(controller)
        self.idle_ms: int = config.get("connections.max.idle.ms")
        self.queued = QueuedRequestBytes(config.queued_request_max_bytes)
        # Admitted connections, oldest activity first is found by a scan (rare).
        self.connections: set[LimitedConnection] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._last_log_s: dict[str, float] = {}
        self._unlogged: collections.Counter[str] = collections.Counter()
        registry = registry if registry is not None else CollectorRegistry()
        self.rejected = Counter("odradek_connections_rejected",
                                "Connections closed right after accept, by limit",
                                ["listener", "reason"], registry=registry)
        self.closed = Counter("odradek_connections_closed",
                              "Connections the broker closed for a limit (idle, or to make "
                              "room for the inter-broker listener)",
                              ["listener", "reason"], registry=registry)
        Gauge("odradek_queued_request_bytes", "Bytes of requests read and not yet answered "
              "(queued.max.request.bytes)", registry=registry
              ).set_function(lambda: self.queued.used_bytes)

    def _quotas(self, listener: str) -> ConnectionQuotas:
        return (self.controller_quotas if listener in self._controller_listeners
                else self.broker_quotas)

    # -- accept and close ------------------------------------------------------------

    def admit(self, conn: LimitedConnection) -> bool:
        """Count `conn` in; False (after logging and counting) when it must be closed."""
        quotas = self._quotas(conn.listener)
        refused = quotas.admit(conn.listener, conn.peer_address)
        if refused is not None:
            self.rejected.labels(conn.listener, refused).inc()
            if refused == PER_IP:
                self._log(refused, "Rejected connection from %s, address already has the "
                          "configured maximum of %d connections.", conn.peer_address,
                          quotas.limit_of(conn.peer_address))
            else:
                limit = (quotas.listener_max.get(conn.listener) if refused == LISTENER
                         else quotas.max_connections)
                self._log(refused, "Rejected connection from %s on listener %s: %s (%s) "
                          "reached.", conn.peer_address, conn.listener,
                          "its max.connections" if refused == LISTENER
                          else "max.connections", limit)
            return False
        self.connections.add(conn)
        if quotas.excess():
            self._close_excess(quotas)
        self._schedule_sweep()
        return True

    def creation_throttle(self, conn: LimitedConnection) -> tuple[float, bool]:
        """KIP-612, for a connection just admitted: (seconds before its first request
        is served, whether it is closed then instead). The network layer obeys."""
        wait_ms, close = self.creation.throttle(conn.listener, conn.peer_address,
                                                time.monotonic() * 1000.0)
        if close:
            self.rejected.labels(conn.listener, CREATION_RATE).inc()
            self._log(CREATION_RATE, "Closing connection from %s in %d ms: its address is "
                      "over its connection_creation_rate quota.", conn.peer_address, wait_ms)
        elif wait_ms:
            self._log("listener_creation_rate", "Delaying connection from %s on listener %s "
                      "by %d ms: max.connection.creation.rate reached.", conn.peer_address,
                      conn.listener, wait_ms)
        return wait_ms / 1000.0, close

    def release(self, conn: LimitedConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self._quotas(conn.listener).release(conn.listener, conn.peer_address)

    def _close_excess(self, quotas: ConnectionQuotas) -> None:
        victims = sorted((c for c in self.connections
                          if c.listener != quotas.protected
                          and self._quotas(c.listener) is quotas),
                         key=lambda c: c.last_active_s)[:quotas.excess()]
        for conn in victims:
            self.closed.labels(conn.listener, BROKER).inc()
            self._log("excess", "Closing connection from %s on listener %s: max.connections "
                      "(%d) exceeded by the inter-broker listener.", conn.peer_address,
                      conn.listener, quotas.max_connections)
            self.release(conn)
            conn.abort()

    # -- idle expiry -----------------------------------------------------------------

    def _schedule_sweep(self) -> None:
        if self.idle_ms < 0 or self._sweep is not None or not self.connections:
            return
        interval = min(IDLE_SWEEP_MAX_INTERVAL_S,
                       max(IDLE_SWEEP_MIN_INTERVAL_S, self.idle_ms / 4000))
        self._sweep = asyncio.get_running_loop().call_later(interval, self._close_idle)

    def _close_idle(self) -> None:
        self._sweep = None
        deadline = time.monotonic() - self.idle_ms / 1000
        for conn in [c for c in self.connections if not c.busy and c.last_active_s < deadline]:
            self.closed.labels(conn.listener, IDLE).inc()
            log.debug("closing connection from %s on %s: idle for connections.max.idle.ms "
                      "(%d)", conn.peer_address, conn.listener, self.idle_ms)
            self.release(conn)
            conn.abort()
        self._schedule_sweep()

    def stop(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None

    def account(self, conn: LimitedConnection) -> RequestBytesAccount:
        return RequestBytesAccount(self.queued, conn,
                                   exempt=conn.listener in self._controller_listeners)

    def _log(self, reason: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_log_s.get(reason, -LOG_INTERVAL_S) < LOG_INTERVAL_S:
            self._unlogged[reason] += 1
            return
        self._last_log_s[reason] = now
        left_out = self._unlogged.pop(reason, 0)
        if left_out:
            msg += " (%d more like this not logged)"
            args = (*args, left_out)
        log.info(msg, *args)


def peer_address(peername: object) -> str:
    """The normalized IP of a transport's `peername` ('?' when there is none)."""
    if isinstance(peername, tuple) and peername:
        try:
            return normalize_address(str(peername[0]))
        except ValueError:
            return str(peername[0])
    return "?"
