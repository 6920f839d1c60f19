"""Client quotas: entities and their precedence, the windowed rate and the
throttle time it calls for (Kafka's numbers), and the metadata side —
AlterClientQuotas' validation, DescribeClientQuotas' filters, replay and
snapshot."""

from __future__ import annotations

import pytest

from odradek.broker.quotas import (
    QuotaManager,
    Rate,
    applicable,
    precedence,
    throttle_time_ms,
)
from odradek.metadata import client_quotas as Q
from odradek.metadata import image as img


def test_precedence_is_kafkas_order():
    assert precedence("alice", "app") == [
        Q.entity(user="alice", client_id="app"),
        Q.entity(user="alice", client_id=None),
        Q.entity(user="alice"),
        Q.entity(user=None, client_id="app"),
        Q.entity(user=None, client_id=None),
        Q.entity(user=None),
        Q.entity(client_id="app"),
        Q.entity(client_id=None),
    ]


def test_the_most_specific_quota_applies_and_its_rate_is_shared_as_kafka_tags_it():
    quotas = {
        Q.entity(client_id=None): {"producer_byte_rate": 100.0},
        Q.entity(user="alice"): {"producer_byte_rate": 500.0},
        Q.entity(user="alice", client_id="batch"): {"producer_byte_rate": 50.0},
    }
    a = applicable(quotas, "producer_byte_rate", "alice", "batch")
    assert a is not None and (a.bound, a.sensor) == (50.0, ("producer_byte_rate", "alice", "batch"))
    # every client of alice shares the user quota (client id not in the sensor)
    b = applicable(quotas, "producer_byte_rate", "alice", "web")
    assert b is not None and (b.bound, b.sensor) == (500.0, ("producer_byte_rate", "alice", ""))
    # the default client-id quota: one rate per client id
    c = applicable(quotas, "producer_byte_rate", "bob", "web")
    assert c is not None and (c.bound, c.sensor) == (100.0, ("producer_byte_rate", "", "web"))
    assert applicable(quotas, "consumer_byte_rate", "bob", "web") is None


def test_throttle_time_is_kafkas_formula():
    # Kafka's QuotaUtilsTest: quota 50, observed 100, 3 one-second samples -> 2000 ms
    assert throttle_time_ms(100.0, 50.0, 2000.0) == 2000
    assert throttle_time_ms(16.5, 20.4, 10000.0) == 0


def test_the_rate_counts_at_least_samples_minus_one_whole_windows():
    rate = Rate(samples=11, window_ms=1000)
    rate.record(10_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)
    rate.record(10_000, now_ms=20_500)  # the first sample has expired
    assert rate.measure(20_500) == pytest.approx(1000.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_client_over_its_byte_rate_is_throttled_and_then_let_go():
    clock = Clock()
    manager = QuotaManager(samples=11, window_s=1, clock=clock)
    quotas = {Q.entity(client_id="p"): {"producer_byte_rate": 1000.0}}
    assert manager.record(quotas, "producer_byte_rate", "", "p", 9000) == 0  # 900 B/s
    throttle = manager.record(quotas, "producer_byte_rate", "", "p", 2000)  # 1100 B/s
    assert throttle == pytest.approx(1000, abs=1)  # (1100-1000)/1000 * 10 s
    clock.now += 30  # a quiet half-minute: the samples expire
    assert manager.record(quotas, "producer_byte_rate", "", "p", 100) == 0
    # another client id is not covered by this entity
    assert manager.record(quotas, "producer_byte_rate", "", "q", 10**9) == 0


def test_request_time_throttle_is_bounded_at_one_window():
    manager = QuotaManager(samples=11, window_s=1, clock=Clock())
    quotas = {Q.entity(user=None): {"request_percentage": 1.0}}
    assert manager.record(quotas, "request_percentage", "alice", "x", 5000.0) == 1000


def test_internal_admin_clients_are_never_throttled():
    manager = QuotaManager(clock=Clock())
    quotas = {Q.entity(client_id=None): {"producer_byte_rate": 1.0}}
    assert manager.record(quotas, "producer_byte_rate", "", "__admin_client-1", 10**9) == 0


def test_rates_of_vanished_clients_are_forgotten():
    clock = Clock()
    manager = QuotaManager(samples=2, window_s=1, clock=clock)
    quotas = {Q.entity(client_id=None): {"producer_byte_rate": 1e12}}
    for i in range(1000):
        manager.record(quotas, "producer_byte_rate", "", f"c{i}", 1)
    clock.now += 10
    manager.record(quotas, "producer_byte_rate", "", "last", 1)
    assert list(manager.rates) == [("producer_byte_rate", "", "last")]


# -- the metadata side --------------------------------------------------------------------


def _alter(quotas, *entries, validate_only=False):
    return Q.alter(quotas, list(entries), validate_only)


def test_alter_validates_entities_keys_and_values_as_kafka_does():
    ok = (Q.entity(user="alice"), [Q.Op("producer_byte_rate", 1024.0, False)])
    bad_key = (Q.entity(user="bob"), [Q.Op("connection_creation_rate", 5.0, False)])
    bad_value = (Q.entity(client_id="c"), [Q.Op("consumer_byte_rate", -1.0, False)])
    fraction = (Q.entity(client_id="d"), [Q.Op("consumer_byte_rate", 1.5, False)])
    mixed_ip = (Q.entity(user="x", ip="1.2.3.4"), [Q.Op("producer_byte_rate", 1.0, False)])
    bad_ip = (Q.entity(ip="not-an-ip"), [Q.Op("connection_creation_rate", 1.0, False)])
    unknown = ((("team", "a"),), [Q.Op("producer_byte_rate", 1.0, False)])
    results, records = _alter({}, ok, bad_key, bad_value, fraction, mixed_ip, bad_ip, unknown)
    assert [r.error_code for r in results] == [0, 42, 42, 42, 42, 42, 35]
    assert all(r.error_message for r in results[1:])
    assert records == [Q.R.client_quota_record(Q.entity(user="alice"), "producer_byte_rate",
                                               1024.0)]
    assert _alter({}, ok, validate_only=True)[1] == []


def test_replay_describe_remove_and_snapshot():
    image = img.MetadataImage()
    _, records = _alter({},
                        (Q.entity(user="alice"), [Q.Op("producer_byte_rate", 1024.0, False),
                                                  Q.Op("consumer_byte_rate", 2048.0, False)]),
                        (Q.entity(user=None, client_id=None),
                         [Q.Op("request_percentage", 50.0, False)]),
                        (Q.entity(client_id="app"), [Q.Op("producer_byte_rate", 10.0, False)]))
    image = img.apply(image, records, 5)
    assert image.client_quotas[Q.entity(user="alice")] == {
        "producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    # the snapshot gives the image back
    assert img.apply(img.MetadataImage(), img.records_of(image), 5) == image
    users = Q.describe(image.client_quotas, [("user", Q.MATCH_SPECIFIED, None)], False)
    assert [e for e, _ in users] == [Q.entity(user=None, client_id=None), Q.entity(user="alice")]
    strict = Q.describe(image.client_quotas, [("user", Q.MATCH_SPECIFIED, None)], True)
    assert [e for e, _ in strict] == [Q.entity(user="alice")]
    default = Q.describe(image.client_quotas, [("user", Q.MATCH_DEFAULT, None)], False)
    assert [e for e, _ in default] == [Q.entity(user=None, client_id=None)]
    exact = Q.describe(image.client_quotas, [("client-id", Q.MATCH_EXACT, "app")], True)
    assert exact == [(Q.entity(client_id="app"), {"producer_byte_rate": 10.0})]
    with pytest.raises(Q.QuotaError):
        Q.describe(image.client_quotas, [("ip", Q.MATCH_SPECIFIED, None),
                                         ("user", Q.MATCH_SPECIFIED, None)], False)
    # removing the last key removes the entity
    _, records = _alter(image.client_quotas,
                        (Q.entity(client_id="app"), [Q.Op("producer_byte_rate", 0.0, True)]))
    image = img.apply(image, records, 6)
    assert Q.entity(client_id="app") not in image.client_quotas


def test_controller_mutation_quota_is_kafkas_token_bucket():
    """KIP-599: burst = quota * (samples - 1) * window; strict refuses while the
    credits are below zero, permissive admits and reports the throttle time."""
    clock = Clock()
    manager = QuotaManager(samples=11, window_s=1, clock=clock)
    quotas = {Q.entity(user="u"): {"controller_mutation_rate": 2.0}}
    assert manager.mutation_quota(quotas, "v", "c", strict=True) is None  # not covered
    strict = manager.mutation_quota(quotas, "u", "c", strict=True)
    assert strict is not None
    assert strict.admit(15) and strict.admit(10)  # 20 credits -> 5 -> -5
    assert strict.throttle_ms == 0  # admitted while the credits were not negative
    assert not strict.admit(1)  # refused: -5 credits at 2/s, 2.5 s to zero
    assert strict.throttle_ms == 2500
    clock.now += 1.0  # -3 credits; the same bucket for every request of user u
    permissive = manager.mutation_quota(quotas, "u", "other-client", strict=False)
    assert permissive is not None and permissive.admit(1)
    assert permissive.throttle_ms == 2000  # -4 credits
    clock.now += 60.0  # refilled to the burst, not beyond
    later = manager.mutation_quota(quotas, "u", "c", strict=True)
    assert later is not None and later.admit(20) and later.admit(1) and not later.admit(1)
    assert manager.mutation_quota(quotas, "u", "__admin_client-1", strict=True) is None



def test_a_fetch_over_consumer_byte_rate_is_taken_back_from_the_rate():
    """Kafka answers such a fetch empty, so its bytes must not count."""
    clock = Clock()
    manager = QuotaManager(samples=2, window_s=1, clock=clock)
    quotas = {Q.entity(client_id="c"): {"consumer_byte_rate": 1000.0}}
    assert manager.fetch_quota(quotas, "", "other") is None
    fetch = manager.fetch_quota(quotas, "", "c")
    assert fetch is not None and fetch.window_bytes == 1000
    assert fetch.record(900) == 0  # 900 B/s
    over = manager.fetch_quota(quotas, "", "c")
    assert over is not None and over.record(900) == 800 and over.throttle_ms == 800
    # taken back: the rate is 900 B/s again, so 100 more bytes still fit
    assert manager.record(quotas, "consumer_byte_rate", "", "c", 100) == 0
