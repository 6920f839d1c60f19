"""`remote.log.index.file.cache.total.size.bytes` bounds the remote segments'
indexes held in memory (tiered/remote_reader.py): a consumer reads a topic from
offset 0 through many remote segments with a cache far smaller than their
indexes; the cache never holds more than the bound (and one file), evicts, and
every record comes back in order."""

from __future__ import annotations

import pytest

from tests.integration.broker_proc import free_port
from tests.integration.clients import Out, ck_consume, ck_produce, create_topic, wait_until
from tests.integration.test_tiered import _metric
from tests.integration.tiered_helpers import (
    TIERED_BROKER,
    list_offsets,
    tiered_topic,
    wait_copies_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

N = 1500
CACHE_BYTES = 1024


def test_remote_index_cache_is_bounded_and_evicts(broker_factory, topic_name):
    port = free_port()
    proc = broker_factory({**TIERED_BROKER, "odradek.metrics.port": str(port),
                           "remote.log.index.file.cache.total.size.bytes": CACHE_BYTES})
    # an index entry every 100 bytes: each 4 KiB segment's index is ~300 bytes
    create_topic(proc.bootstrap, topic_name, 1,
                 config=tiered_topic(**{"index.interval.bytes": "100"}))
    outs = [Out(key=b"k%05d" % i, value=b"v%05d-" % i * 8, partition=0) for i in range(N)]
    ck_produce(proc.bootstrap, topic_name, outs, **{"linger.ms": 0, "batch.num.messages": 1,
                                                    "compression.type": "none", "acks": "all"})
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > N // 2, timeout=60,
               desc="most of the topic only in the remote tier")
    wait_copies_settled(proc.port, topic_name)
    got = ck_consume(proc.bootstrap, topic_name, N, timeout=90)
    assert [(r.key, r.offset) for r in got] == [(o.key, i) for i, o in enumerate(outs)]
    held = _metric(port, "odradek_remote_index_cache_bytes")
    misses = _metric(port, "odradek_remote_index_cache_misses_total")
    evictions = _metric(port, "odradek_remote_index_cache_evictions_total")
    print(f"remote index cache {CACHE_BYTES} B: held {held:.0f} B in "
          f"{_metric(port, 'odradek_remote_index_cache_entries'):.0f} files, "
          f"{misses:.0f} misses, {evictions:.0f} evictions")
    assert _metric(port, "odradek_remote_index_cache_max_bytes") == CACHE_BYTES
    assert 0 < held <= CACHE_BYTES + 4096  # the bound, and the last file loaded
    assert misses > 3 and evictions > 0
