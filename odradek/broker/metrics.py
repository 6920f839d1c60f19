"""Broker metrics, in Prometheus' text format over HTTP (`odradek.metrics.port`).

Kafka exposes JMX MBeans; odradek exposes the same ideas with Prometheus names:

    odradek_requests_total{api}                 requests answered, by API
    odradek_request_errors_total{api}           requests that closed the connection
    odradek_request_seconds{api}                handling time (histogram)
    odradek_network_bytes_total{direction}      bytes read from / written to clients
    odradek_connections                         open client connections
    odradek_partitions                          partitions hosted
    odradek_partition_log_end_offset{topic,partition}
    odradek_partition_log_start_offset{topic,partition}
    odradek_partition_size_bytes{topic,partition}
    odradek_log_dir_free_bytes{dir}             free bytes of the dir's filesystem
    odradek_log_dir_below_free_space_floor{dir} 1 while produce to it is refused
    odradek_log_load_partitions_total           partitions found at start-up
    odradek_log_load_partitions_loaded          of those, loaded so far
    odradek_log_load_partitions_recovered       of those, CRC-scanned (unflushed tail)
    odradek_log_load_recovered_bytes            bytes the recovery scans checked
    odradek_log_load_seconds                    how long the load took
    odradek_under_replicated_partitions         partitions led here whose ISR lacks a replica
    odradek_isr_shrinks_total                   ISR shrinks this broker made as leader
    odradek_isr_expands_total                   ISR expansions this broker made as leader
    odradek_log_segment_open_files              segments' .log files open now (active ones too)
    odradek_log_segment_open_files_max          the bound of that LRU (0: none)
    odradek_log_segment_files_opened_total      segments' files (re)opened on use
    odradek_log_segment_files_evicted_total     idle files closed by the bound
    odradek_event_loop_lag_seconds              how late the loop ran a 50 ms timer (loop_watch.py)
    odradek_gc_pause_seconds{generation}        Python's garbage collections
    odradek_log_index_cache_bytes               closed segments' index entries in memory
    odradek_log_index_cache_max_bytes           their budget (0: none)
    odradek_log_index_cache_entries             closed indexes in memory
    odradek_log_index_cache_loads_total         closed indexes read from their files
    odradek_log_index_cache_evictions_total     idle closed indexes dropped by the budget

Per-request cost is one counter increment and one histogram observation; the
per-partition figures are read only when the endpoint is scraped. Each broker
has its own registry, so several brokers can live in one process (tests).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sized
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..protocol import api
from ..replication.leader_replication import LeaderReplication
from ..replication.replica_manager import ReplicaManager
from ..replication.scrubber import Scrubber
from ..storage.index_cache import INDEX_CACHE
from ..storage.log_manager import LogManager
from ..storage.open_files import SEGMENT_FILES
from .fetch_memory import FetchMemory
from .loop_watch import LoopWatch


class MetricsHost(Protocol):
    """What the metrics read of their node."""

    @property
    def connections(self) -> Sized: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def log_manager(self) -> LogManager: ...
    @property
    def scrubber(self) -> Scrubber: ...
    @property
    def replication(self) -> LeaderReplication: ...
    @property
    def fetch_memory(self) -> FetchMemory: ...

log = logging.getLogger(__name__)

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30)


class _PartitionCollector(Collector):
    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        leo = GaugeMetricFamily("odradek_partition_log_end_offset", "Log end offset",
                                labels=["topic", "partition"])
        lso = GaugeMetricFamily("odradek_partition_log_start_offset", "Log start offset",
                                labels=["topic", "partition"])
        size = GaugeMetricFamily("odradek_partition_size_bytes", "Bytes on disk",
                                 labels=["topic", "partition"])
        for (topic, index), part in list(self.broker.replica_manager.partitions.items()):
            labels = [topic, str(index)]
            leo.add_metric(labels, part.log.log_end_offset)
            lso.add_metric(labels, part.log.log_start_offset)
            try:
                size.add_metric(labels, part.log.size_bytes())
            except OSError:
                pass
        yield leo
        yield lso
        yield size
        free = GaugeMetricFamily("odradek_log_dir_free_bytes",
                                 "Free bytes of the log dir's filesystem", labels=["dir"])
        below = GaugeMetricFamily(
            "odradek_log_dir_below_free_space_floor",
            "1 while produce to the dir is refused for want of free space", labels=["dir"])
        floor = self.broker.log_manager.free_space
        for dir in self.broker.log_manager.online_dirs():
            space = floor.space(dir)
            free.add_metric([str(dir)], space.free_bytes)
            below.add_metric([str(dir)], 1 if space.below else 0)
        yield free
        yield below
        scrub = self.broker.scrubber
        for name, help_text, value in (
            ("odradek_log_scrub_corrupt_segments",
             "Corrupt closed segments the scrubber found (CRC or structure)", scrub.corrupt_found),
            ("odradek_log_scrub_repaired_segments",
             "Corrupt segments cut on a follower to fetch again from the leader", scrub.repaired),
            ("odradek_log_scrub_bytes", "Bytes of closed segments the scrubber read",
             scrub.scanned_bytes),
        ):
            family = GaugeMetricFamily(name, help_text)
            family.add_metric([], value)
            yield family
        replication = self.broker.replication
        under = GaugeMetricFamily("odradek_under_replicated_partitions",
                                  "Partitions led here whose ISR lacks a replica")
        under.add_metric([], replication.under_replicated())
        yield under
        yield CounterMetricFamily("odradek_isr_shrinks", "ISR shrinks made as leader",
                                  replication.isr_shrinks)
        yield CounterMetricFamily("odradek_isr_expands", "ISR expansions made as leader",
                                  replication.isr_expands)


class BrokerMetrics:
    def __init__(self, broker: MetricsHost) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("odradek_requests", "Requests answered", ["api"],
                                registry=self.registry)
        self.errors = Counter("odradek_request_errors", "Requests that closed the connection",
                              ["api"], registry=self.registry)
        self.latency = Histogram("odradek_request_seconds", "Request handling time", ["api"],
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        net = Counter("odradek_network_bytes", "Bytes from and to clients", ["direction"],
                      registry=self.registry)
        self.bytes_in = net.labels("in")
        self.bytes_out = net.labels("out")
        # the part of bytes out that left a segment file with sendfile (file_slice.py)
        self.bytes_sendfile = Counter(
            "odradek_network_sendfile_bytes", "Bytes out sent from segment files with "
            "sendfile(2), without a copy through the broker", registry=self.registry)
        Gauge("odradek_connections", "Open client connections", registry=self.registry
              ).set_function(lambda: len(broker.connections))
        Gauge("odradek_partitions", "Partitions hosted", registry=self.registry
              ).set_function(lambda: len(broker.replica_manager.partitions))
        self.registry.register(_PartitionCollector(broker))
        memory = broker.fetch_memory
        Gauge("odradek_fetch_memory_bytes", "Bytes of records consumer Fetch and "
              "ShareFetch answers hold (odradek.fetch.memory.max.bytes)", registry=self.registry
              ).set_function(lambda: memory.used_bytes)
        Gauge("odradek_fetch_memory_max_bytes", "odradek.fetch.memory.max.bytes (<= 0: none)",
              registry=self.registry).set_function(lambda: memory.max_bytes)
        Gauge("odradek_fetch_memory_waits", "Consumer fetches and share fetches that "
              "found the fetch memory budget spent and waited", registry=self.registry
              ).set_function(lambda: memory.waits)
        progress = broker.log_manager.load_progress
        for name, what, read in (
            ("partitions_total", "Partitions found in the log dirs at start-up",
             lambda: progress.partitions_total),
            ("partitions_loaded", "Partitions loaded so far at start-up",
             lambda: progress.partitions_loaded),
            ("partitions_recovered", "Partitions recovered (CRC-scanned) at start-up",
             lambda: progress.partitions_recovered),
            ("recovered_bytes", "Bytes CRC-checked by start-up recovery",
             lambda: progress.bytes_recovered),
            ("seconds", "Seconds the logs took to load at start-up",
             lambda: progress.seconds),
        ):
            Gauge(f"odradek_log_load_{name}", what, registry=self.registry).set_function(read)
        files = SEGMENT_FILES
        for name, what, read in (
            ("open_files", "Closed segments' .log files open now (storage/open_files.py)",
             lambda: files.open_count),
            ("open_files_max", "Bound of the LRU of segments' open .log files (0: none)",
             lambda: files.max_open),
            ("files_opened_total", "Closed segments' files opened on use",
             lambda: files.opened_total),
            ("files_evicted_total", "Idle closed segments' files closed by the bound",
             lambda: files.evicted_total),
        ):
            Gauge(f"odradek_log_segment_{name}", what, registry=self.registry
                  ).set_function(read)
        indexes = INDEX_CACHE
        for name, what, read in (
            ("bytes", "Bytes of closed segments' index entries in memory", lambda: indexes.bytes),
            ("max_bytes", "odradek.log.index.cache.max.bytes (0: none)",
             lambda: indexes.max_bytes),
            ("entries", "Closed segments' indexes whose entries are in memory",
             lambda: indexes.entries),
            ("loads_total", "Closed segments' indexes read from their files",
             lambda: indexes.loads_total),
            ("evictions_total", "Idle closed segments' indexes dropped by the budget",
             lambda: indexes.evictions_total),
        ):
            Gauge(f"odradek_log_index_cache_{name}", what, registry=self.registry
                  ).set_function(read)
        self.loop_watch = LoopWatch(self.registry)
        # api key -> (requests child, latency child, errors child), made on first use
        self._children: dict[int, tuple[Any, Any, Any]] = {}
        self.port: int | None = None
        self._server: Any = None

    def observe(self, api_key: int, seconds: float, closed: bool) -> None:
        children = self._children.get(api_key)
        if children is None:
            name = api.api_name(api_key)
            children = (self.requests.labels(name), self.latency.labels(name),
                        self.errors.labels(name))
            self._children[api_key] = children
        if closed:
            children[2].inc()
        else:
            children[0].inc()
            children[1].observe(seconds)

    def serve(self, host: str, port: int) -> int:
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        self.port = server.server_address[1]
        log.info("metrics on http://%s:%d/metrics", host, self.port)
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None
