"""The console's HTTP server: the standard library's ThreadingHTTPServer (a thread a
request: the Kafka clients block), jinja2 templates with autoescape, and the guards
every page passes:

* Host: when the console listens on a loopback address, a request must name a
  loopback host (a DNS-rebinding page cannot reach it through its own name).
* Changes are POSTs only, each carrying the form token, a random value made at start
  and written into the console's own forms; another site's page cannot read it, so it
  cannot forge a change (and an Origin header, when sent, must be this console).
* Content-Security-Policy without scripts, frames denied: even a value that escaped
  escaping would not run, and a confirmation page cannot be framed and clicked.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
import secrets
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

import jinja2

from .client import Clients
from .sampler import DEFAULT_INTERVAL_S, Sampler

LOG = logging.getLogger("odradek.console")
MAX_FORM_BYTES = 1024 * 1024
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def arg(self, name: str, default: str = "") -> str:
        return self.form.get(name, self.query.get(name, default)).strip()


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def redirect(location: str) -> Response:
    return Response(303, b"", headers={"Location": location})


class Console:
    """What every request shares: the Kafka clients, the templates, the form token."""

    def __init__(self, clients: Clients, listen_host: str, metrics_urls: list[str],
                 sample_interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.clients = clients
        self.sampler = Sampler(metrics_urls, sample_interval_s)
        self.token = secrets.token_urlsafe(32)
        self.loopback_only = _is_loopback(listen_host)
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("odradek.console", "templates"),
            autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
            lstrip_blocks=True)
        self.env.globals.update(token=self.token, bootstrap=clients.bootstrap,
                                quote=lambda s: urllib.parse.quote(str(s), safe=""),
                                user=clients.config.sasl.username
                                if clients.config and clients.config.sasl else None)
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., Response]]] = []

    def route(self, method: str, path: str, handler: Callable[..., Response]) -> None:
        """`handler(console, request, *path groups)` answers `method path` (a regex)."""
        self.routes.append((method, re.compile(path), handler))

    def render(self, template: str, status: int = 200, **context: Any) -> Response:
        body = self.env.get_template(template).render(**context)
        return Response(status, body.encode())

    def host_allowed(self, host: str) -> bool:
        if not self.loopback_only:
            return True
        name = urllib.parse.urlsplit(f"//{host}").hostname or ""
        return name in LOOPBACK_NAMES

    def form_allowed(self, req: Request) -> bool:
        origin = req.headers.get("origin")
        if origin and origin != "null" and (
                urllib.parse.urlsplit(origin).netloc != req.headers.get("host", "")):
            return False
        return hmac.compare_digest(req.form.get("token", ""), self.token)

    def handle(self, req: Request) -> Response:
        if not self.host_allowed(req.headers.get("host", "")):
            return Response(421, b"this console answers to its loopback address only",
                            "text/plain; charset=utf-8")
        if req.path == "/static/console.css":
            css = resources.files("odradek.console").joinpath("static/console.css")
            return Response(200, css.read_bytes(), "text/css; charset=utf-8")
        if req.method == "POST" and not self.form_allowed(req):
            return self.render("error.html", 403, title="Refused",
                               error="this form did not come from this console's page "
                                     "(its token is missing or stale): reload the page")
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(req.path)
            if match and method == req.method:
                return handler(self, req, *[urllib.parse.unquote(g) for g in match.groups()])
        return self.render("error.html", 404, title="Not found",
                           error=f"no page at {req.path}")


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    console: Console
    server_version = "odradek-console"
    sys_version = ""

    def _serve(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        req = Request(method, url.path, query,
                      headers={k.lower(): v for k, v in self.headers.items()})
        if method == "POST":
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_FORM_BYTES:
                self._send(Response(413, b"form too large", "text/plain"))
                return
            req.form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode(
                "utf-8", errors="replace"), keep_blank_values=True))
        try:
            resp = self.console.handle(req)
        except Exception:  # a bug: the page says so, the log has the traceback
            LOG.exception("%s %s", method, self.path)
            resp = Response(500, b"internal error; see the console's log",
                            "text/plain; charset=utf-8")
        self._send(resp)

    def _send(self, resp: Response) -> None:
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(resp.body)))
        for k, v in {**SECURITY_HEADERS, **resp.headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(resp.body)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:
        LOG.info("%s %s", self.address_string(), format % args)


def make_server(console: Console, host: str, port: int) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"console": console})
    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer
    if ":" in host:  # an IPv6 address, e.g. --listen [::1]:9080
        server_class = type("Server6", (ThreadingHTTPServer,),
                            {"address_family": socket.AF_INET6})
    server = server_class((host, port), handler)
    server.daemon_threads = True
    return server
