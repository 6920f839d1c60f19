"""Background sampling of brokers' Prometheus endpoints for the metrics page's charts.

One daemon thread of the console scrapes each --metrics-url every `interval_s`
seconds and keeps the last SAMPLES scrapes of each URL (a bounded ring), so a chart
has history the moment its page is opened, whether or not anyone looked before.
A scrape keeps only the few numbers the charts need, by odradek's metric names
(broker/metrics.py): requests and the request-time histogram of Produce and Fetch,
bytes in and out, under-replicated partitions, ISR shrinks and expansions. The
series are computed from consecutive scrapes when a page asks: counters as rates
(a counter that went down, a restarted broker, starts again), latency as the 99th
percentile of the requests answered between two scrapes (from the histogram's
bucket deltas, interpolated within a bucket as Prometheus' histogram_quantile does;
after a restart, from zero).
"""

from __future__ import annotations

import collections
import itertools
import logging
import math
import threading
import time
import urllib.request
from dataclasses import dataclass, field

LOG = logging.getLogger("odradek.console.sampler")
SAMPLES = 180  # per URL: 15 minutes at the default interval
DEFAULT_INTERVAL_S = 5.0
MAX_METRICS_BYTES = 8 * 1024 * 1024
TIMEOUT_S = 5.0
CHARTED_APIS = ("PRODUCE", "FETCH")


@dataclass
class Scrape:
    """The numbers the charts need from one read of one endpoint."""
    t: float
    values: dict[str, float] = field(default_factory=dict)
    # api -> [(upper bound in seconds, cumulative count)], by bound
    buckets: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
        return str(resp.read(MAX_METRICS_BYTES).decode("utf-8", errors="replace"))


def parse(body: str, t: float) -> Scrape:
    from prometheus_client.parser import text_string_to_metric_families

    out = Scrape(t)
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            api = s.labels.get("api", "")
            if s.name == "odradek_requests_total" and api in CHARTED_APIS:
                out.values[f"requests {api}"] = s.value
            elif s.name == "odradek_request_seconds_bucket" and api in CHARTED_APIS:
                out.buckets.setdefault(api, []).append((float(s.labels["le"]), s.value))
            elif s.name == "odradek_network_bytes_total":
                out.values[f"bytes {s.labels.get('direction', '?')}"] = s.value
            elif s.name in ("odradek_under_replicated_partitions",
                            "odradek_isr_shrinks_total", "odradek_isr_expands_total"):
                out.values[s.name.removeprefix("odradek_").removesuffix("_total")] = s.value
    for bounds in out.buckets.values():
        bounds.sort()
    return out


@dataclass
class Series:
    key: str
    title: str
    unit: str
    points: list[tuple[float, float]]  # (time, value), oldest first

    @property
    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None


def _rate(history: list[Scrape], name: str, per_s: float = 1.0) -> list[tuple[float, float]]:
    out = []
    for a, b in itertools.pairwise(history):
        if name in a.values and name in b.values and b.t > a.t:
            v0, v1 = a.values[name], b.values[name]
            out.append((b.t, (v1 - v0 if v1 >= v0 else v1) / (b.t - a.t) * per_s))
    return out


def quantile(q: float, before: list[tuple[float, float]], after: list[tuple[float, float]]
             ) -> float | None:
    """The q-quantile (seconds) of the observations between two reads of a cumulative
    histogram (all of `after` if the histogram went down: a restarted broker); None
    when there were none."""
    prev = dict(before)
    deltas = [(le, n - prev.get(le, 0.0)) for le, n in after]
    if any(d < 0 for _, d in deltas):
        deltas = after
    total = deltas[-1][1] if deltas else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le, count in deltas:
        if count >= rank:
            if math.isinf(le):
                return lower  # beyond the last bound: its lower edge, as Prometheus does
            inside = count - below
            return lower + (le - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = le, count
    return lower


def _p99_ms(history: list[Scrape], api: str) -> list[tuple[float, float]]:
    out = []
    for a, b in itertools.pairwise(history):
        if api in b.buckets:
            q = quantile(0.99, a.buckets.get(api, []), b.buckets[api])
            if q is not None:
                out.append((b.t, q * 1000))
    return out


def series(history: list[Scrape]) -> list[Series]:
    """The charts of one endpoint's scrapes."""
    gauge = [(s.t, s.values["under_replicated_partitions"]) for s in history
             if "under_replicated_partitions" in s.values]
    return [
        Series("produce-rate", "Produce requests per second", "/s",
               _rate(history, "requests PRODUCE")),
        Series("fetch-rate", "Fetch requests per second (consumers and followers)", "/s",
               _rate(history, "requests FETCH")),
        Series("bytes-in", "Bytes in per second", "B/s", _rate(history, "bytes in")),
        Series("bytes-out", "Bytes out per second", "B/s", _rate(history, "bytes out")),
        Series("produce-p99", "Produce latency, 99th percentile", "ms",
               _p99_ms(history, "PRODUCE")),
        Series("fetch-p99", "Fetch latency, 99th percentile (a fetch may wait for data)",
               "ms", _p99_ms(history, "FETCH")),
        Series("under-replicated", "Under-replicated partitions (led by this broker)", "",
               gauge),
        Series("isr-shrinks", "ISR shrinks per minute", "/min",
               _rate(history, "isr_shrinks", 60)),
        Series("isr-expands", "ISR expansions per minute", "/min",
               _rate(history, "isr_expands", 60)),
    ]


class Sampler:
    """The scraping thread and each URL's ring of scrapes."""

    def __init__(self, urls: list[str], interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.urls = urls
        self.interval_s = interval_s
        self._rings = {url: collections.deque[Scrape](maxlen=SAMPLES) for url in urls}
        self.errors: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.urls and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="console-sampler",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(TIMEOUT_S * 2)

    def sample_once(self) -> None:
        for url in self.urls:
            try:
                scrape = parse(fetch_text(url), time.time())
            except (OSError, ValueError) as e:
                with self._lock:
                    self.errors[url] = f"cannot read {url}: {e}"
                continue
            with self._lock:
                self._rings[url].append(scrape)
                self.errors.pop(url, None)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.sample_once()
            except Exception:  # a bug: logged, the next round tries again
                LOG.exception("sampling the metrics endpoints")
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def history(self, url: str) -> list[Scrape]:
        with self._lock:
            return list(self._rings.get(url, ()))
