"""Tiered-storage metrics, registered in the broker's Prometheus registry
(broker/metrics.py) when tiered storage is on:

    odradek_remote_copy_lag_bytes{topic,partition}     closed local bytes not yet copied
    odradek_remote_copy_lag_segments{topic,partition}  closed local segments not yet copied
    odradek_remote_log_size_bytes{topic,partition}     bytes in the remote tier (Kafka's
                                                       RemoteLogSizeBytes)
    odradek_remote_log_segments{topic,partition}       segments in the remote tier (Kafka's
                                                       RemoteLogMetadataCount)
    odradek_remote_log_start_offset{topic,partition}   first offset in the remote tier
    odradek_remote_bytes_copied_total                  bytes uploaded
    odradek_remote_bytes_fetched_total                 bytes read from the remote tier
    odradek_remote_segments_copied_total               segments copied
    odradek_remote_task_errors_total                   failed partition passes
    odradek_remote_read_errors_total                   failed or timed-out remote reads
    odradek_remote_reads_total                         remote reads served
    odradek_remote_read_queue                          remote reads queued or running
    odradek_remote_index_cache_bytes                   remote index bytes cached in memory
    odradek_remote_index_cache_max_bytes               remote.log.index.file.cache.total.size.bytes
    odradek_remote_index_cache_entries                 remote index files cached
    odradek_remote_index_cache_{hits,misses,evictions}_total

Read when the endpoint is scraped (copy lag: leaders of remote-enabled partitions).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .service import RemoteTier

__all__ = ["RemoteTierCollector"]


class RemoteTierCollector(Collector):
    def __init__(self, tier: RemoteTier) -> None:
        self.tier = tier

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        rlm, reader = self.tier.rlm, self.tier.reader
        labels = ["topic", "partition"]
        lag_bytes = GaugeMetricFamily("odradek_remote_copy_lag_bytes",
                                      "Closed local bytes not yet in the remote tier", labels=labels)
        lag_segments = GaugeMetricFamily("odradek_remote_copy_lag_segments",
                                         "Closed local segments not yet in the remote tier",
                                         labels=labels)
        size = GaugeMetricFamily("odradek_remote_log_size_bytes", "Bytes in the remote tier",
                                 labels=labels)
        count = GaugeMetricFamily("odradek_remote_log_segments", "Segments in the remote tier",
                                  labels=labels)
        start = GaugeMetricFamily("odradek_remote_log_start_offset",
                                  "First offset in the remote tier", labels=labels)
        for part in rlm.hosted():
            key = [part.topic, str(part.partition)]
            plog = part.log
            closed = plog.segments[:-1]
            pending = [s for s in closed if s.next_offset - 1 > plog.highest_remote_offset]
            if part.leader == rlm.node_id:
                lag_bytes.add_metric(key, sum(s.size_bytes for s in pending))
                lag_segments.add_metric(key, len(pending))
            tier = rlm.tier_of(part.topic, part.partition)
            if tier is not None:
                size.add_metric(key, tier.size_bytes)
                count.add_metric(key, len(tier.segments))
                start.add_metric(key, tier.start_offset)
        yield from (lag_bytes, lag_segments, size, count, start)
        for name, doc, value in (
            ("odradek_remote_bytes_copied", "Bytes uploaded", rlm.rsm.bytes_copied),
            ("odradek_remote_bytes_fetched", "Bytes read from the remote tier",
             rlm.rsm.bytes_fetched),
            ("odradek_remote_segments_copied", "Segments copied", rlm.segments_copied),
            ("odradek_remote_task_errors", "Failed partition passes", rlm.copy_errors),
            ("odradek_remote_read_errors", "Failed or timed-out remote reads", reader.errors),
            ("odradek_remote_reads", "Remote reads served", reader.reads),
        ):
            yield CounterMetricFamily(name, doc, value=value)
        yield GaugeMetricFamily("odradek_remote_read_queue", "Remote reads queued or running",
                                value=reader.pending)
        cache = reader.cache
        for name, doc, gauge in (
            ("odradek_remote_index_cache_bytes", "Remote index bytes cached in memory",
             cache.size_bytes),
            ("odradek_remote_index_cache_max_bytes",
             "remote.log.index.file.cache.total.size.bytes", cache.max_bytes),
            ("odradek_remote_index_cache_entries", "Remote index files cached", len(cache)),
        ):
            yield GaugeMetricFamily(name, doc, value=gauge)
        for name, doc, value in (
            ("odradek_remote_index_cache_hits", "Remote index lookups served from memory",
             cache.hits),
            ("odradek_remote_index_cache_misses", "Remote index files fetched", cache.misses),
            ("odradek_remote_index_cache_evictions",
             "Remote index files evicted (remote.log.index.file.cache.total.size.bytes)",
             cache.evictions),
        ):
            yield CounterMetricFamily(name, doc, value=value)
