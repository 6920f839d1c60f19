"""The metrics page: numbers from brokers' Prometheus endpoints (odradek's
`odradek.metrics.port`; any exporter's names that match are shown too). The table
(requests and mean latency per API, bytes in and out, connections and partitions) is
read when the page is shown; the charts (produce and fetch rates, bytes, p99 latency,
under-replicated partitions, ISR shrinks and expansions) come from the console's
background sampler (sampler.py), so they have history without page loads ("watch"
reloads the page every few seconds). Plain HTTP GETs of the URLs given with
--metrics-url, nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import chart, sampler
from .server import Console, Request, Response

WATCH_S = 5


@dataclass
class BrokerNumbers:
    url: str
    error: str | None = None
    gauges: dict[str, float] = field(default_factory=dict)
    requests: list[tuple[str, float, float | None]] = field(default_factory=list)
    charts: list[dict[str, Any]] = field(default_factory=list)


def read(url: str) -> BrokerNumbers:
    from prometheus_client.parser import text_string_to_metric_families

    out = BrokerNumbers(url)
    try:
        families = list(text_string_to_metric_families(sampler.fetch_text(url)))
    except (OSError, ValueError) as e:
        out.error = f"cannot read {url}: {e}"
        return out
    counts: dict[str, float] = {}
    sums: dict[str, float] = {}
    for family in families:
        for s in family.samples:
            if s.name == "odradek_requests_total":
                counts[s.labels.get("api", "?")] = s.value
            elif s.name == "odradek_request_seconds_sum":
                sums[s.labels.get("api", "?")] = s.value
            elif s.name == "odradek_network_bytes_total":
                out.gauges[f"bytes {s.labels.get('direction', '?')}"] = s.value
            elif s.name in ("odradek_connections", "odradek_partitions",
                            "odradek_under_replicated_partitions"):
                out.gauges[s.name.removeprefix("odradek_").replace("_", " ")] = s.value
    out.requests = sorted(((api, n, sums[api] / n * 1000 if n and api in sums else None)
                           for api, n in counts.items()), key=lambda r: -r[1])
    return out


def _charts(history: list[sampler.Scrape]) -> list[dict[str, Any]]:
    out = []
    for s in sampler.series(history):
        points, top = chart.points(s.points)
        out.append({"key": s.key, "title": s.title, "unit": s.unit, "points": points,
                    "top": top, "last": s.last})
    return out


def metrics_page(console: Console, req: Request) -> Response:
    brokers = []
    for url in console.sampler.urls:
        numbers = read(url)
        numbers.charts = _charts(console.sampler.history(url))
        brokers.append(numbers)
    return console.render("metrics.html", title="Metrics", brokers=brokers,
                          watch=req.arg("watch") == "1", watch_s=WATCH_S,
                          interval_s=console.sampler.interval_s,
                          span_min=sampler.SAMPLES * console.sampler.interval_s / 60)


def register(console: Console) -> None:
    console.route("GET", "/metrics", metrics_page)
