"""The web console's pure parts: how a record's bytes are shown, the form helpers, the
lag chart's points, the Host and form-token guards, and that every page's template
escapes what it shows (rendered from data, no cluster)."""

from __future__ import annotations

import json

import pytest

from odradek.console import app, chart, groups, messages, topics
from odradek.console.client import Clients
from odradek.console.server import Console, Request


def test_show_formats_and_caps() -> None:
    assert messages.show(None, "text").text is None
    assert messages.show(b"\xffhi", "text").text == "\ufffdhi"
    pretty = messages.show(b'{"a":[1,2]}', "json")
    assert json.loads(pretty.text or "") == {"a": [1, 2]} and "\n" in (pretty.text or "")
    assert messages.show(b"nope", "json").note == "not JSON; shown as text"
    assert messages.show(b"nope", "json", quiet=True).note is None
    assert messages.show(b"\x00\x01", "hex").text == "00 01"
    big = messages.show(b"x" * (messages.MAX_SHOWN_BYTES + 10), "text")
    assert big.truncated and len(big.text or "") == messages.MAX_SHOWN_BYTES
    assert big.size == messages.MAX_SHOWN_BYTES + 10


def test_form_helpers() -> None:
    assert messages.parse_timestamp("1700000000000") == 1700000000000
    assert messages.parse_timestamp("2024-01-01T00:00:00") == 1704067200000
    assert messages.parse_timestamp("2024-01-01T01:00:00+01:00") == 1704067200000
    assert messages.parse_headers("a=1\n\nb=x=y\n") == [("a", "1"), ("b", "x=y")]
    assert topics.parse_configs("retention.ms = 5\n\ncleanup.policy=compact") == {
        "retention.ms": "5", "cleanup.policy": "compact"}
    with pytest.raises(ValueError, match="not key=value"):
        topics.parse_configs("oops")
    assert app.parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert app.parse_listen("[::1]:9080") == ("::1", 9080)
    with pytest.raises(ValueError):
        app.parse_listen("9080")


def test_clients_never_create_topics() -> None:
    # a topic deleted through the console must not come back through the console's
    # own producer or admin client refreshing what they know of it
    assert Clients("127.0.0.1:1").settings()["allow.auto.create.topics"] == "false"


def test_chart_points_and_history() -> None:
    assert chart.points([]) == ([], 0)
    points, top = chart.points([(0.0, 10), (1.0, 5), (2.0, 0)], 100, 50)
    assert top == 10 and points == [(0.0, 0.0), (50.0, 25.0), (100.0, 50.0)]
    history = chart.History()
    for i in range(chart.SAMPLES + 5):
        kept = history.add("g", i, now=float(i))
    assert len(kept) == chart.SAMPLES and kept[-1] == (chart.SAMPLES + 4.0, chart.SAMPLES + 4)


def _console(listen: str = "127.0.0.1") -> Console:
    return app.build(Clients("127.0.0.1:1"), listen, [])


def test_host_guard() -> None:
    console = _console()
    assert console.host_allowed("127.0.0.1:9080") and console.host_allowed("localhost:1")
    assert console.host_allowed("[::1]:9080")
    assert not console.host_allowed("evil.example:9080") and not console.host_allowed("")
    resp = console.handle(Request("GET", "/", {}, headers={"host": "evil.example"}))
    assert resp.status == 421
    assert _console("0.0.0.0").host_allowed("console.internal:9080")


def test_form_guard() -> None:
    console = _console()
    host = {"host": "127.0.0.1:9080"}
    ok = Request("POST", "/new-topic", {}, {"token": console.token}, host)
    assert console.form_allowed(ok)
    assert not console.form_allowed(Request("POST", "/", {}, {"token": "x"}, host))
    assert not console.form_allowed(Request("POST", "/", {}, {}, host))
    cross = {**host, "origin": "http://evil.example"}
    assert not console.form_allowed(Request("POST", "/", {}, {"token": console.token}, cross))
    same = {**host, "origin": "http://127.0.0.1:9080"}
    assert console.form_allowed(Request("POST", "/", {}, {"token": console.token}, same))
    refused = console.handle(Request("POST", "/topics/x/delete", {},
                                     {"confirmed": "yes"}, host))
    assert refused.status == 403


EVIL = '"><script>alert(1)</script>'


def test_templates_escape_record_data() -> None:
    console = _console()
    record = messages.Record(0, "-", messages.show(EVIL.encode(), "text"),
                             messages.show(EVIL.encode(), "json"),
                             [(EVIL, messages.show(EVIL.encode(), "text"))])
    page = messages.Page([record], 0, 1, 0, None)
    body = console.render("messages.html", title=EVIL, topic=EVIL, page=page, error=EVIL,
                          form={"partition": EVIL, "offset": "", "timestamp": "", "limit": "",
                                "format": "text", "follow": False},
                          formats=messages.FORMATS, max_records=5, follow_s=2).body.decode()
    assert "<script>" not in body and body.count("&lt;script&gt;") >= 6
    body = console.render("confirm.html", title="t", what=EVIL, action="/x",
                          fields={EVIL: EVIL}, danger=True).body.decode()
    assert "<script>" not in body
    detail = groups.GroupDetail(EVIL, "Empty", EVIL, EVIL,
                                [groups.Member(EVIL, EVIL, EVIL, [(EVIL, 0)])],
                                [groups.OffsetRow(EVIL, 0, 1, 2, EVIL)])
    body = console.render("group.html", title=EVIL, g=detail, points=[], top=0, done=EVIL,
                          resets=groups.RESETS, watch=True, watch_s=5).body.decode()
    assert "<script>" not in body
