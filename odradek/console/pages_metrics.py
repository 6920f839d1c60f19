"""The metrics page: a few numbers from brokers' Prometheus endpoints (odradek's
`odradek.metrics.port`; any exporter's names that match are shown too), read when the
page is shown: requests and mean latency per API, bytes in and out, connections and
partitions, and the request rate between loads of the page as a chart ("watch"
reloads it every few seconds). Plain HTTP GETs of the URLs given with --metrics-url,
nothing else."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field

from . import chart
from .server import Console, Request, Response

MAX_METRICS_BYTES = 8 * 1024 * 1024
TIMEOUT_S = 5.0
WATCH_S = 5
_requests = chart.History()  # each URL's total request count at each load of the page


@dataclass
class BrokerNumbers:
    url: str
    error: str | None = None
    gauges: dict[str, float] = field(default_factory=dict)
    requests: list[tuple[str, float, float | None]] = field(default_factory=list)
    rate_points: list[tuple[float, float]] = field(default_factory=list)
    rate_top: float = 0
    rate: float | None = None  # requests per second since the page's last load


def read(url: str) -> BrokerNumbers:
    from prometheus_client.parser import text_string_to_metric_families

    out = BrokerNumbers(url)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            body = resp.read(MAX_METRICS_BYTES).decode("utf-8", errors="replace")
        families = list(text_string_to_metric_families(body))
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
            elif s.name in ("odradek_connections", "odradek_partitions"):
                out.gauges[s.name.removeprefix("odradek_")] = s.value
    out.requests = sorted(((api, n, sums[api] / n * 1000 if n and api in sums else None)
                           for api, n in counts.items()), key=lambda r: -r[1])
    rates = chart.rates(_requests.add(url, sum(counts.values())))
    out.rate_points, out.rate_top = chart.points(rates)
    out.rate = rates[-1][1] if rates else None
    return out


def metrics_page(console: Console, req: Request) -> Response:
    brokers = [read(url) for url in console.metrics_urls]
    return console.render("metrics.html", title="Metrics", brokers=brokers,
                          watch=req.arg("watch") == "1", watch_s=WATCH_S)


def register(console: Console) -> None:
    console.route("GET", "/metrics", metrics_page)
