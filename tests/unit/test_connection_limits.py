"""Connection quotas, the queued request bytes pool and their config keys, without sockets."""

from __future__ import annotations

import pytest

from odradek.broker.connection_limits import (
    BROKER,
    LISTENER,
    PER_IP,
    ConnectionQuotas,
    QueuedRequestBytes,
    RequestBytesAccount,
)
from odradek.config import BrokerConfig
from odradek.configdef import ConfigError

MiB = 1 << 20


def _quotas(**kw: object) -> ConnectionQuotas:
    args: dict[str, object] = {
        "max_connections": 2**31 - 1, "max_per_ip": 2**31 - 1, "per_ip_overrides": {},
        "listener_max": {"PLAINTEXT": 2**31 - 1}, "inter_broker_listener": "PLAINTEXT",
    }
    args.update(kw)
    return ConnectionQuotas(**args)  # type: ignore[arg-type]


def test_per_ip_limit_refuses_the_connection_past_it_and_frees_a_slot_on_release():
    q = _quotas(max_per_ip=2, per_ip_overrides={"127.0.0.2": 3})
    assert [q.admit("PLAINTEXT", "127.0.0.1") for _ in range(3)] == [None, None, PER_IP]
    assert [q.admit("PLAINTEXT", "127.0.0.2") for _ in range(4)] == [None] * 3 + [PER_IP]
    q.release("PLAINTEXT", "127.0.0.1")
    assert q.admit("PLAINTEXT", "127.0.0.1") is None
    assert q.total == 5 and q.by_address == {"127.0.0.1": 2, "127.0.0.2": 3}


def test_an_override_of_zero_refuses_every_connection_from_that_address():
    q = _quotas(max_per_ip=0, per_ip_overrides={"127.0.0.1": 1})
    assert q.admit("PLAINTEXT", "127.0.0.2") == PER_IP
    assert q.admit("PLAINTEXT", "127.0.0.1") is None


def test_listener_and_broker_limits():
    q = _quotas(max_connections=3, listener_max={"A": 2, "B": 5},
                inter_broker_listener=None)
    assert [q.admit("A", f"10.0.0.{i}") for i in range(3)] == [None, None, LISTENER]
    assert [q.admit("B", f"10.0.1.{i}") for i in range(2)] == [None, BROKER]


def test_the_inter_broker_listener_is_exempt_from_max_connections_when_there_are_others():
    q = _quotas(max_connections=2, listener_max={"CLIENT": 2, "INTERNAL": 10},
                inter_broker_listener="INTERNAL")
    assert q.admit("CLIENT", "10.0.0.1") is None and q.admit("CLIENT", "10.0.0.2") is None
    assert q.admit("CLIENT", "10.0.0.3") == LISTENER
    assert q.admit("INTERNAL", "10.0.0.9") is None
    assert q.excess() == 1  # a CLIENT connection must make room
    # Alone, the inter-broker listener is not protected (Kafka: listenerCounts.size > 1).
    alone = _quotas(max_connections=1, listener_max={"INTERNAL": 10},
                    inter_broker_listener="INTERNAL")
    assert alone.protected is None
    assert alone.admit("INTERNAL", "10.0.0.1") is None
    assert alone.admit("INTERNAL", "10.0.0.2") == BROKER


class FakeConn:
    def __init__(self) -> None:
        self.paused: set[str] = set()

    def pause_reading_for(self, reason: str) -> None:
        self.paused.add(reason)

    def resume_reading_for(self, reason: str) -> None:
        self.paused.discard(reason)


def _accounts(pool: QueuedRequestBytes, n: int) -> list[tuple[FakeConn, RequestBytesAccount]]:
    out = []
    for _ in range(n):
        conn = FakeConn()
        out.append((conn, RequestBytesAccount(pool, conn)))  # type: ignore[arg-type]
    return out


def test_pool_reserves_a_whole_request_and_keeps_reading_it_while_full():
    pool = QueuedRequestBytes(4 * MiB)
    (a, acct_a), (b, acct_b) = _accounts(pool, 2)
    acct_a.read([], 4 + 5 * MiB, 65536)  # a request bigger than the pool: reserved whole
    assert pool.used_bytes == 4 + 5 * MiB and pool.full and not a.paused
    acct_b.read([], 4 + MiB, 65536)  # b's request cannot be reserved: b waits
    assert b.paused == {"memory"} and pool.unreserved_bytes == 65536
    assert pool.used_bytes == 4 + 5 * MiB  # b's bytes do not keep the pool full
    frame = b"x" * (5 * MiB)
    acct_a.read([frame], None, 0)  # a's request complete, a at a boundary, pool full
    assert a.paused == {"memory"}
    acct_a.answered(4 + len(frame))
    # b is let in first, with its whole request reserved, then a.
    assert not b.paused and acct_b.reserved_bytes == 4 + MiB and pool.unreserved_bytes == 0
    assert not a.paused and acct_a.reserved_bytes == 0  # nothing to reserve until it reads
    acct_b.close()
    acct_a.close()
    assert pool.used_bytes == 0 and pool.unreserved_bytes == 0


def test_connections_waiting_with_half_a_request_each_do_not_wait_forever():
    pool = QueuedRequestBytes(4 * MiB)
    accounts = _accounts(pool, 40)
    for _conn, acct in accounts[:4]:
        acct.read([], 4 + MiB, 256 * 1024)  # four requests reserved: the pool is full
    for conn, acct in accounts[4:]:
        acct.read([], 4 + MiB, 256 * 1024)
        assert conn.paused == {"memory"}
    assert pool.unreserved_bytes == 36 * 256 * 1024
    done = 0
    while done < 40:  # the connections that read finish their request; it is answered
        reading = [acct for conn, acct in accounts if not conn.paused and acct.reserved_bytes]
        assert reading, "nobody may read: the pool waits forever"
        for acct in reading:
            frame = b"r" * MiB
            acct.read([frame], None, 0)
            acct.answered(4 + len(frame))
            acct.reserved_bytes and acct.read([], None, 0)
            done += 1
            assert pool.used_bytes <= 4 * MiB + 4 + MiB
    assert pool.unreserved_bytes == 0 and pool.used_bytes == 0


def test_a_followers_connection_leaves_the_full_pool_and_is_read_again():
    # The pool is full of parked produce requests; the follower's connection,
    # at a request boundary, was paused with the rest. Exempted (its fetch was
    # authorized), it gives back what it held, is read again, and is never
    # counted or paused after: its fetches are what empties the pool.
    pool = QueuedRequestBytes(4 * MiB)
    (_producer, acct_p), (follower, acct_f) = _accounts(pool, 2)
    acct_f.read([b"f" * 96], None, 0)
    acct_p.read([], 4 + 5 * MiB, 65536)  # a big produce reserved: the pool is full
    acct_f.read([], None, 0)
    assert pool.full and follower.paused == {"memory"}
    acct_f.exempt_from_pool()
    assert not follower.paused and pool.used_bytes == 4 + 5 * MiB
    acct_f.read([b"f" * 96] * 3, 4 + MiB, 100)
    acct_f.answered(100)
    assert not follower.paused and pool.used_bytes == 4 + 5 * MiB
    acct_f.close()
    acct_p.close()
    assert pool.used_bytes == 0 and pool.unreserved_bytes == 0


def test_pool_without_a_limit_counts_but_never_pauses():
    pool = QueuedRequestBytes(-1)
    [(conn, acct)] = _accounts(pool, 1)
    acct.read([b"y" * 100] * 3, 4 + 10 * MiB, 8)
    assert pool.used_bytes == 3 * 104 + 4 + 10 * MiB and not conn.paused


@pytest.mark.parametrize(("props", "key"), [
    ({"queued.max.request.bytes": "1048576"}, "queued.max.request.bytes"),
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip"),
    ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:-1"},
     "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:3"},
     "max.connections.per.ip.overrides"),
    ({"max.connections": "-1"}, "max.connections"),
    ({"listener.name.plaintext.max.connections": "many"},
     "listener.name.plaintext.max.connections"),
])
def test_bad_limits_stop_startup_naming_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_properties(props)
    assert e.value.key == key and key in str(e.value)


def test_limit_keys_parse_with_kafka_defaults_and_overrides():
    default = BrokerConfig.from_properties({})
    assert default.get("connections.max.idle.ms") == 600000
    assert default.get("queued.max.request.bytes") == -1
    assert default.get("max.connections") == default.get("max.connections.per.ip") == 2**31 - 1
    assert default.max_connections_per_ip_overrides == {}
    assert default.listener_max_connections("PLAINTEXT") == 2**31 - 1
    c = BrokerConfig.from_properties({
        "max.connections.per.ip": "0",
        "max.connections.per.ip.overrides": "127.0.0.2:5, [::1]:7,::ffff:10.1.2.3:1",
        "max.connections": "100",
        "listener.name.plaintext.max.connections": "10",
        "socket.request.max.bytes": "1048576",
        "queued.max.request.bytes": "1048576",
    })
    assert c.max_connections_per_ip_overrides == {"127.0.0.2": 5, "::1": 7, "10.1.2.3": 1}
    assert c.listener_max_connections("PLAINTEXT") == 10
    assert c.listener_max_connections("CONTROLLER") == 100


def test_queued_request_pool_is_kafkas_key_when_set_else_odradeks_bound():
    # Kafka's -1 (no limit) stays the key's default; odradek's own bound applies
    # then, so parked produce requests cannot grow the broker until it is killed.
    assert BrokerConfig.from_properties({}).queued_request_max_bytes == 512 * 1024 * 1024
    kafka = BrokerConfig.from_properties({"queued.max.request.bytes": str(200 * 1024 * 1024)})
    assert kafka.queued_request_max_bytes == 200 * 1024 * 1024
    off = BrokerConfig.from_properties({"odradek.queued.max.request.bytes": "-1"})
    assert off.queued_request_max_bytes == -1
    small = BrokerConfig.from_properties({"odradek.queued.max.request.bytes": "1000",
                                          "socket.request.max.bytes": "1048576"})
    assert small.queued_request_max_bytes == 1048576  # one request always fits


def test_connection_creation_rates_kip_612():
    from odradek.broker.connection_limits import CreationRates
    from odradek.metadata import client_quotas as Q

    config = BrokerConfig.from_properties({
        "quota.window.num": "2", "quota.window.size.seconds": "1",
        "max.connection.creation.rate": "2",
        "listener.name.client.max.connection.creation.rate": "1"})
    quotas = {Q.entity(ip=None): {"connection_creation_rate": 1.0},
              Q.entity(ip="10.0.0.7"): {"connection_creation_rate": 3.0}}
    rates = CreationRates(config, ["CLIENT", "OTHER", "BROKER"], ["BROKER"], lambda: quotas)
    assert rates.listener_bound == {"CLIENT": 1, "OTHER": 2**31 - 1, "BROKER": 2**31 - 1}
    assert (rates.ip_bound("10.0.0.7"), rates.ip_bound("10.0.0.8")) == (3.0, 1.0)
    # the broker-wide bound (2/s) spares the inter-broker listener
    assert [rates.throttle("BROKER", "10.0.0.7", 0)[0] for _ in range(3)] == [0, 0, 0]
    # per address (3/s for 10.0.0.7, the 3 above included): the 4th is refused,
    # closed after its throttle time ((4 - 3) / 3 of a window), and not counted
    assert rates.throttle("OTHER", "10.0.0.7", 0) == (333, True)
    assert rates.throttle("OTHER", "10.0.0.7", 0) == (333, True)
    # the broker-wide bound (2/s) on another address: served after a wait
    assert rates.throttle("OTHER", "10.0.0.8", 5000) == (0, False)
    assert rates.throttle("OTHER", "10.0.0.9", 5000) == (0, False)
    assert rates.throttle("OTHER", "10.0.0.10", 5000) == (500, False)
    with pytest.raises(ConfigError, match="listener.name.client.max.connection.creation.rate"):
        CreationRates(BrokerConfig.from_properties(
            {"listener.name.client.max.connection.creation.rate": "x"}), ["CLIENT"], [])
