"""Connection creation rates (KIP-612) against a real broker, with raw sockets that
each send one ApiVersions v0 request:

- `listener.name.<l>.max.connection.creation.rate` (`max.connection.creation.rate`
  spares the inter-broker listener, here the only one): connections beyond the rate
  are accepted but not read for their throttle time, so a burst is served at about
  the rate;
- the `connection_creation_rate` quota of an address (`odradek quotas alter --ip`):
  connections beyond it are closed after their throttle time without an answer,
  the ones within it are served, and once the window has passed a new connection
  is served again.

Rates are measured over 2 windows of 1 s; every connection of the harness (the
readiness probe, the CLI) counts too, so each check first lets the window pass.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.clients import Wire
from tests.integration.test_quotas import quotas_cli

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(120)]

WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}
# Kafka's Rate keeps a sample until it is a whole window older than the 2 windows:
# after this long, earlier connections no longer count
QUIET_S = 3.5


def burst(bootstrap: str, n: int) -> list[tuple[bool, float]]:
    """Open n connections at once, send ApiVersions v0 on each; per connection:
    (answered, seconds from the burst's start to the answer or the close)."""
    started = time.monotonic()
    wires = [Wire(bootstrap, timeout=15) for _ in range(n)]
    try:
        for i, w in enumerate(wires):
            w.send_request(18, 0, i, b"", header_version=1)
        out = []
        for w in wires:
            frame = w.read_frame()
            out.append((frame is not None, time.monotonic() - started))
        return out
    finally:
        for w in wires:
            w.close()


def test_max_connection_creation_rate_delays_a_burst(broker_factory: Any) -> None:
    # the only listener is the inter-broker one, which the broker-wide bound spares
    # (as Kafka's does): its own bound applies
    broker = broker_factory({**WINDOW, "max.connection.creation.rate": 5,
                             "listener.name.plaintext.max.connection.creation.rate": 5})
    time.sleep(QUIET_S)
    results = burst(broker.bootstrap, 15)
    assert all(answered for answered, _ in results)
    # 5 within the rate at once; the 15th waits (15 - 5) / 5 s = 2 s (less the time
    # the burst took)
    assert max(t for _, t in results[:5]) < 1.0, results
    assert results[-1][1] >= 1.2, results


def test_connection_creation_rate_quota_of_an_address(broker_factory: Any) -> None:
    broker = broker_factory(WINDOW)
    out = quotas_cli(broker, "alter", "--ip", "127.0.0.1", "--add-config",
                     "connection_creation_rate=3")
    assert out.returncode == 0, out.stderr
    time.sleep(QUIET_S)
    results = burst(broker.bootstrap, 10)
    answered = [a for a, _ in results]
    assert answered.count(True) == 3 and answered[:3] == [True] * 3, results
    refused_after = [t for a, t in results if not a]
    assert min(refused_after) >= 0.2, results  # closed after the throttle time, not at once
    time.sleep(QUIET_S)
    assert burst(broker.bootstrap, 1)[0][0]  # the window passed: served again
