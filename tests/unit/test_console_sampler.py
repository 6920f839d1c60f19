"""The console's metrics sampler: what it keeps of a Prometheus scrape, the series it
draws (rates, a restarted counter, the p99 from histogram deltas) and its bound."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from odradek.console import sampler

BODY = """\
# TYPE odradek_requests_total counter
odradek_requests_total{{api="PRODUCE"}} {produce}
odradek_requests_total{{api="METADATA"}} 3.0
# TYPE odradek_request_seconds histogram
odradek_request_seconds_bucket{{api="PRODUCE",le="0.001"}} {fast}
odradek_request_seconds_bucket{{api="PRODUCE",le="0.01"}} {produce}
odradek_request_seconds_bucket{{api="PRODUCE",le="+Inf"}} {produce}
odradek_request_seconds_count{{api="PRODUCE"}} {produce}
odradek_request_seconds_sum{{api="PRODUCE"}} 0.5
# TYPE odradek_under_replicated_partitions gauge
odradek_under_replicated_partitions {under}
# TYPE odradek_isr_shrinks counter
odradek_isr_shrinks_total {shrinks}
"""


def scrape(t: float, produce: float, fast: float, under: float = 0, shrinks: float = 0
           ) -> sampler.Scrape:
    return sampler.parse(BODY.format(produce=produce, fast=fast, under=under,
                                     shrinks=shrinks), t)


def test_parse_keeps_only_what_the_charts_need() -> None:
    s = scrape(10.0, produce=100, fast=90, under=2, shrinks=1)
    assert s.values == {"requests PRODUCE": 100, "under_replicated_partitions": 2,
                        "isr_shrinks": 1}
    assert s.buckets == {"PRODUCE": [(0.001, 90), (0.01, 100), (float("inf"), 100)]}


def test_quantile_of_the_requests_between_two_scrapes() -> None:
    before = [(0.001, 90.0), (0.01, 100.0), (float("inf"), 100.0)]
    # 100 new requests, 50 under 1 ms and 50 between 1 and 10 ms: p99 inside the second
    after = [(0.001, 140.0), (0.01, 200.0), (float("inf"), 200.0)]
    q = sampler.quantile(0.99, before, after)
    assert q is not None and q == pytest.approx(0.001 + 0.009 * (99 - 50) / 50)
    assert sampler.quantile(0.5, before, after) == pytest.approx(0.001)
    assert sampler.quantile(0.99, after, after) is None  # nothing answered meanwhile
    # a restart (counts went down): the new counts alone
    assert sampler.quantile(0.99, after, before) == pytest.approx(0.001 + 0.009 * 9 / 10)
    beyond = [(0.001, 0.0), (float("inf"), 10.0)]
    assert sampler.quantile(0.99, [], beyond) == 0.001  # past the last bound: its edge


def test_series_rates_survive_a_restarted_broker() -> None:
    history = [scrape(0, 100, 100), scrape(2, 120, 110, under=1, shrinks=1),
               scrape(4, 10, 10, under=0, shrinks=1)]  # restarted: counters from 0
    charts = {s.key: s for s in sampler.series(history)}
    assert charts["produce-rate"].points == [(2, 10.0), (4, 5.0)]
    assert charts["under-replicated"].points == [(0, 0), (2, 1), (4, 0)]
    assert charts["isr-shrinks"].points == [(2, 30.0), (4, 0.0)]  # per minute
    assert [round(v, 4) for _, v in charts["produce-p99"].points] == [
        round((0.001 + 0.009 * (19.8 - 10) / 10) * 1000, 4), 0.99]  # then from 0
    assert charts["fetch-rate"].points == [] and charts["fetch-rate"].last is None


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[int]]]:
    produced = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            produced[0] += 10
            body = BODY.format(produce=produced[0], fast=produced[0], under=0,
                               shrinks=0).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics", produced
    finally:
        server.shutdown()
        server.server_close()


def test_the_ring_is_bounded_and_a_dead_endpoint_is_said(
        endpoint: tuple[str, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = endpoint
    monkeypatch.setattr(sampler, "SAMPLES", 5)
    dead = "http://127.0.0.1:1/metrics"
    s = sampler.Sampler([url, dead], interval_s=0.01)
    for _ in range(8):
        s.sample_once()
    history = s.history(url)
    assert len(history) == 5 and [h.values["requests PRODUCE"] for h in history] == [
        40, 50, 60, 70, 80]
    assert s.history(dead) == [] and "cannot read http://127.0.0.1:1/metrics" in s.errors[dead]


def test_the_thread_samples_without_anyone_asking(endpoint: tuple[str, list[int]]) -> None:
    url, produced = endpoint
    s = sampler.Sampler([url], interval_s=0.02)
    s.start()
    try:
        deadline = threading.Event()
        for _ in range(500):
            if len(s.history(url)) >= 3:
                break
            deadline.wait(0.01)
    finally:
        s.stop()
    assert len(s.history(url)) >= 3 and produced[0] >= 30
