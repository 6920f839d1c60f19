"""The topic and message pages. A change is two POSTs: the first renders
confirm.html (what will happen, the form's fields kept), the second, with
confirmed=yes, acts and redirects to the page showing the result."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

from . import log_dirs, messages, partition_sizes, topics
from .client import ConsoleError
from .server import Console, Request, Response, redirect

TOPIC = r"/topics/([^/]+)"
FOLLOW_S = 2  # a followed partition's page reloads this often


def confirm(console: Console, req: Request, title: str, what: str,
            danger: bool = False) -> Response:
    fields = {k: v for k, v in req.form.items() if k not in ("token", "confirmed")}
    return console.render("confirm.html", title=title, what=what, action=req.path,
                          fields=fields, danger=danger)


def failed(console: Console, title: str, error: str, status: int = 502) -> Response:
    return console.render("error.html", status, title=title, error=error)


def listing(console: Console, title: str, template: str, fetch: Callable[[], Any],
            name: str = "rows", **context: Any) -> Response:
    """`template` showing `fetch()`'s answer as `name`, or the page saying why not."""
    try:
        data = fetch()
    except (ConsoleError, OSError) as e:  # OSError: the blocking Connection's failures
        return failed(console, title, str(e))
    return console.render(template, title=title, **{name: data}, **context)


def _int(req: Request, name: str, default: int | None = None) -> int | None:
    raw = req.arg(name)
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConsoleError(f"{name}: not a whole number: {raw!r}") from None


def topics_page(console: Console, req: Request) -> Response:
    query = req.arg("q")
    return listing(console, "Topics", "topics.html",
                   lambda: topics.topics(console.clients, query), q=query, done=req.arg("done"))


def new_topic_page(console: Console, req: Request) -> Response:
    return console.render("topic_new.html", title="Create a topic")


def create_topic(console: Console, req: Request) -> Response:
    name = req.arg("name")
    try:
        partitions = _int(req, "partitions", -1)
        replication = _int(req, "replication_factor", -1)
        config = topics.parse_configs(req.form.get("configs", ""))
    except (ConsoleError, ValueError) as e:
        return failed(console, "Create a topic", str(e), 400)
    if not name:
        return failed(console, "Create a topic", "a topic needs a name", 400)
    if req.form.get("confirmed") != "yes":
        parts = "the broker's default" if partitions == -1 else str(partitions)
        what = f"Create topic {name} with {parts} partitions"
        if config:
            what += " and " + ", ".join(f"{k}={v}" for k, v in config.items())
        return confirm(console, req, "Create a topic", what + "?")
    try:
        topics.create(console.clients, name, partitions or -1, replication or -1, config)
    except ConsoleError as e:
        return failed(console, "Create a topic", str(e))
    return redirect(f"/topics/{urllib.parse.quote(name, safe='')}?done=created")


def topic_page(console: Console, req: Request, name: str) -> Response:
    try:
        detail = topics.topic(console.clients, name)
    except ConsoleError as e:
        return failed(console, f"Topic {name}", str(e), 404)
    partition_sizes.fill(console.clients, detail)
    return console.render("topic.html", title=f"Topic {name}", t=detail, done=req.arg("done"),
                          human=log_dirs.human)


def delete_topic(console: Console, req: Request, name: str) -> Response:
    if req.form.get("confirmed") != "yes":
        return confirm(console, req, f"Delete {name}",
                       f"Delete topic {name} and all its records? This cannot be undone.",
                       danger=True)
    try:
        topics.delete(console.clients, name)
    except ConsoleError as e:
        return failed(console, f"Delete {name}", str(e))
    return redirect(f"/topics?done={urllib.parse.quote('deleted ' + name)}")


def alter_config(console: Console, req: Request, name: str) -> Response:
    key = req.arg("key")
    remove = req.form.get("remove") == "yes"
    value = None if remove else req.form.get("value", "")
    if not key:
        return failed(console, f"Topic {name}", "which config?", 400)
    if req.form.get("confirmed") != "yes":
        what = (f"Remove the override of {key} on {name} (back to the broker's default)?"
                if remove else f"Set {key} = {value} on topic {name}?")
        return confirm(console, req, f"Change a config of {name}", what)
    try:
        topics.alter_config(console.clients, name, key, value)
    except ConsoleError as e:
        return failed(console, f"Topic {name}", str(e))
    return redirect(f"/topics/{urllib.parse.quote(name, safe='')}?done=config+changed")


def add_partitions(console: Console, req: Request, name: str) -> Response:
    try:
        total = _int(req, "total")
    except ConsoleError as e:
        return failed(console, f"Topic {name}", str(e), 400)
    if total is None:
        return failed(console, f"Topic {name}", "how many partitions in all?", 400)
    if req.form.get("confirmed") != "yes":
        return confirm(console, req, f"Add partitions to {name}",
                       f"Grow topic {name} to {total} partitions? Partitions cannot be "
                       "removed again, and keys may map to other partitions.")
    try:
        topics.add_partitions(console.clients, name, total)
    except ConsoleError as e:
        return failed(console, f"Topic {name}", str(e))
    return redirect(f"/topics/{urllib.parse.quote(name, safe='')}?done=partitions+added")


def messages_page(console: Console, req: Request, name: str) -> Response:
    fmt = req.arg("format", "text")
    fmt = fmt if fmt in messages.FORMATS else "text"
    follow = req.arg("follow") == "1"  # the last records, the page reloading itself
    stamp = "" if follow else req.arg("timestamp")
    form = {"partition": req.arg("partition", "0"), "offset": "" if follow else req.arg("offset"),
            "timestamp": stamp, "limit": req.arg("limit"), "format": fmt, "follow": follow}
    page, error = None, None
    try:
        partition = _int(req, "partition", 0) or 0
        limit = _int(req, "limit", messages.DEFAULT_RECORDS) or messages.DEFAULT_RECORDS
        page = messages.browse(
            console.clients, name, partition,
            offset=None if follow else _int(req, "offset"),
            timestamp_ms=messages.parse_timestamp(stamp) if stamp else None,
            limit=limit, fmt=fmt)
    except (ConsoleError, ValueError) as e:
        error = str(e)
    return console.render("messages.html", title=f"Messages of {name}", topic=name,
                          page=page, error=error, form=form, formats=messages.FORMATS,
                          max_records=messages.MAX_RECORDS, follow_s=FOLLOW_S)


def produce_page(console: Console, req: Request, name: str) -> Response:
    return console.render("produce.html", title=f"Produce to {name}", topic=name,
                          done=req.arg("done"))


def produce(console: Console, req: Request, name: str) -> Response:
    try:
        partition = _int(req, "partition")
    except ConsoleError as e:
        return failed(console, f"Produce to {name}", str(e), 400)
    value = req.form.get("value", "")
    if req.form.get("confirmed") != "yes":
        return confirm(console, req, f"Produce to {name}",
                       f"Produce one record of {len(value.encode())} bytes to topic {name}?")
    try:
        sent = messages.produce(console.clients, name, value, req.form.get("key") or None,
                                partition, messages.parse_headers(req.form.get("headers", "")))
    except ConsoleError as e:
        return failed(console, f"Produce to {name}", str(e))
    done = urllib.parse.quote(f"written at partition {sent.partition}, offset {sent.offset}")
    return redirect(f"/topics/{urllib.parse.quote(name, safe='')}/produce?done={done}")


PAGES: list[tuple[str, str, Callable[..., Response]]] = [
    ("GET", "/topics", topics_page),
    ("GET", "/new-topic", new_topic_page),
    ("POST", "/new-topic", create_topic),
    ("GET", TOPIC, topic_page),
    ("POST", TOPIC + "/delete", delete_topic),
    ("POST", TOPIC + "/config", alter_config),
    ("POST", TOPIC + "/partitions", add_partitions),
    ("GET", TOPIC + "/messages", messages_page),
    ("GET", TOPIC + "/produce", produce_page),
    ("POST", TOPIC + "/produce", produce),
]


def register(console: Console) -> None:
    for method, path, handler in PAGES:
        console.route(method, path, handler)
