"""The web console (`odradek console`) in a real headless browser against a live broker:
each page loads, a click through the topics reaches a partition's records (a `<script>`
in a record stays text), a topic is created through the confirmation page, a produced
record and a group's lag show up; the cluster page's quorum, a tiered topic's local and
remote sizes, and the metrics charts the console samples in the background. One broker
(odradek's with tiered storage and its metrics endpoint), one console and one Chromium
for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from tests.integration.broker_proc import REPO_ROOT, BrokerProcess, free_port
from tests.integration.clients import (
    Out,
    ck_admin,
    ck_consumer,
    ck_produce,
    create_topic,
    wait_until,
)
from tests.integration.console_proc import ConsoleProcess, browser_available, chrome
from tests.integration.tiered_helpers import (
    TIERED_BROKER,
    remote_objects,
    tiered_topic,
    wait_copies_settled,
)

pytestmark = [pytest.mark.integration]

SCRIPT_VALUE = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def broker(broker_kind: str, metrics_port: int, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[BrokerProcess]:
    """The module's broker; odradek's with tiered storage and its metrics endpoint."""
    base = tmp_path_factory.mktemp(f"{broker_kind}-console")
    overrides = {**TIERED_BROKER, "odradek.metrics.port": str(metrics_port)} \
        if broker_kind == "odradek" else {}
    proc = BrokerProcess(broker_kind, overrides=overrides, data_dir=base / "data",
                         log_path=base / "broker.log")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def console(broker: BrokerProcess, broker_kind: str, metrics_port: int,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    extra = ["--metrics-url", f"http://127.0.0.1:{metrics_port}/metrics",
             "--sample-interval", "1"] if broker_kind == "odradek" else []
    proc = ConsoleProcess(broker.bootstrap, tmp_path_factory.mktemp("console") / "console.log",
                          *extra)
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium; without it the browser tests are skipped, but fail under CI (.ci/run
    installs it)."""
    why_not = browser_available()
    if why_not is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI and no browser: {why_not}")
        pytest.skip(why_not)
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def _cells(driver: Any, table_id: str) -> list[list[str]]:
    rows = driver.find_elements(_by("CSS_SELECTOR"), f"#{table_id} tbody tr")
    return [[td.text for td in r.find_elements(_by("TAG_NAME"), "td")] for r in rows]


def _click(driver: Any, kind: str, value: str) -> None:
    """Click what leads to another page, and wait until that page has replaced this one."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    loaded = WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,))
    loaded.until(lambda d: d.execute_script("return document.readyState") == "complete")
    page = driver.find_element(_by("TAG_NAME"), "html")
    target = loaded.until(lambda d: d.find_element(_by(kind), value))
    try:
        target.click()  # once: a confirmation's click must not be repeated
    except WebDriverException as e:
        # chromedriver's own look at the node after the click can race the navigation
        # the click started (the node is gone); the click itself happened
        if "does not belong to the document" not in str(e):
            raise
    WebDriverWait(driver, 30).until(lambda d: _gone(page))
    loaded.until(lambda d: d.execute_script("return document.readyState") == "complete")


def _gone(element: Any) -> bool:
    """The element's document was replaced (chromedriver says so in two ways)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as e:
        if "does not belong to the document" in str(e):
            return True
        raise
    return False


def _open(driver: Any, console: ConsoleProcess, path: str) -> None:
    driver.get(console.url + path)


def test_the_console_subprocess_runs_this_checkout(console: ConsoleProcess) -> None:
    """The console's interpreter and environment import this checkout's odradek."""
    code = "import odradek.console; print(odradek.console.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env=console.env, cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(str(REPO_ROOT)), out


def test_cluster_page_lists_the_broker(broker: BrokerProcess, console: ConsoleProcess,
                                       browser: Any, broker_kind: str) -> None:
    _open(browser, console, "/")
    assert browser.title.startswith("Cluster")
    rows = _cells(browser, "brokers")
    assert len(rows) == 1 and rows[0][1] == broker.bootstrap
    assert browser.find_element(_by("ID"), "controller").text == rows[0][0]
    if broker_kind != "odradek":  # the parts tansu does not answer say so in a line
        assert rows[0][3:] == ["broker", "-"]  # fenced or not: DescribeCluster v1 cannot say
        for part in ("quorum-error", "fenced-error", "dirs-error"):
            assert "not available from this cluster" in browser.find_element(
                _by("ID"), part).text
        assert browser.find_elements(_by("ID"), "quorum") == []
        return
    # one combined node: a broker, unfenced, and the quorum's only voter and its leader
    assert rows[0][3:] == ["broker, controller", "unfenced"]
    assert browser.find_element(_by("ID"), "quorum-leader").text == rows[0][0]
    (voter,) = _cells(browser, "quorum")
    assert voter[:2] == [rows[0][0], "leader"] and int(voter[3]) > 0 and voter[4] == "0"
    assert voter[5].endswith("ms ago")
    # its one log directory, online, with free space
    (d,) = _cells(browser, "log-dirs")
    assert d[0] == rows[0][0] and d[1] == str(broker.data_dir) and d[2] == "online"
    assert d[5].endswith("iB")


def test_click_through_a_topic_to_its_records(broker: BrokerProcess, console: ConsoleProcess,
                                              browser: Any, topic_name: str,
                                              broker_kind: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    ck_produce(broker.bootstrap, topic_name, [
        Out(SCRIPT_VALUE.encode(), b"<b>key</b>", [("h<i>", b"<svg onload=alert(2)>")],
            partition=0),
        Out(json.dumps({"a": [1, 2], "b": "<x>"}).encode(), b"k2", partition=0),
        Out(b"\x00\xffbinary", None, partition=0)])
    _open(browser, console, "/topics")
    browser.find_element(_by("ID"), "search").send_keys(topic_name[-12:])
    _click(browser, "CSS_SELECTOR", "form.inline button")
    _click(browser, "LINK_TEXT", topic_name)
    assert browser.find_element(_by("TAG_NAME"), "h1").text == f"Topic {topic_name}"
    parts = _cells(browser, "partitions")
    assert [(r[0], r[4]) for r in parts] == [("0", "0"), ("1", "0")]
    if broker_kind == "odradek":  # tansu answers ListOffsets(latest) below the end
        assert [r[5] for r in parts] == ["3", "0"]
    if broker_kind == "odradek":  # the leader's local size (DescribeLogDirs); not tiered
        assert int(browser.find_element(_by("CSS_SELECTOR"), "td.local-size")
                   .get_attribute("title")) > 0
        assert browser.find_elements(_by("CSS_SELECTOR"), "td.remote-size") == []
    else:  # tansu has no DescribeLogDirs: said in a line, the table still shown
        assert "local sizes: not available from this cluster" in browser.find_element(
            _by("ID"), "sizes-error").text
        assert {c.text for c in browser.find_elements(_by("CSS_SELECTOR"),
                                                      "td.local-size")} == {"-"}
    if broker_kind == "odradek":  # tansu describes no default configs
        configs = {r[0]: r for r in _cells(browser, "configs")}
        assert "retention.ms" in configs and configs["retention.ms"][2] == "default config"
    _click(browser, "ID", "browse")
    rows = _cells(browser, "records")
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert rows[0][2] == "<b>key</b>" and rows[0][3] == SCRIPT_VALUE  # shown as text
    assert "h<i>: <svg onload=alert(2)>" in rows[0][4]
    assert browser.title.endswith("odradek console")  # the script did not run
    assert browser.find_elements(_by("CSS_SELECTOR"), "main script, main img, main svg") == []
    assert rows[2][2] == "null"
    # the same records as JSON (pretty) and hex
    _select(browser, "format", "json")
    _click(browser, "ID", "show")
    rows = _cells(browser, "records")
    assert json.loads(rows[1][3]) == {"a": [1, 2], "b": "<x>"} and "\n" in rows[1][3]
    assert "not JSON" in rows[0][3]
    _select(browser, "format", "hex")
    _click(browser, "ID", "show")
    assert _cells(browser, "records")[2][3].startswith("00 ff 62 69")
    # following the end: the page reloads itself and shows a record produced meanwhile
    _open(browser, console, f"/topics/{topic_name}/messages?partition=0&follow=1")
    assert browser.find_element(_by("ID"), "follow").is_selected()
    ck_produce(broker.bootstrap, topic_name, [Out(b"tail me", partition=0)])
    wait_until(lambda: any(r[3] == "tail me" for r in _cells(browser, "records")),
               timeout=15, desc="the followed page showing the new record")
    if broker_kind != "odradek":
        return  # tansu's ListOffsets (latest, timestamp) answers are off: pages would be too
    # from an offset, then the next page
    _open(browser, console, f"/topics/{topic_name}/messages?partition=0&offset=1&limit=1")
    assert [r[0] for r in _cells(browser, "records")] == ["1"]
    _click(browser, "ID", "next")
    assert [r[0] for r in _cells(browser, "records")] == ["2"]
    # from a timestamp: before the records were written, so from the first
    _open(browser, console,
          f"/topics/{topic_name}/messages?partition=0&timestamp=2020-01-01T00:00:00")
    assert [r[0] for r in _cells(browser, "records")][:3] == ["0", "1", "2"]


def _select(driver: Any, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(_by("ID"), element_id)).select_by_visible_text(value)


def _confirm(driver: Any, expected: str) -> None:
    what = driver.find_element(_by("ID"), "confirm-what").text
    assert expected in what, what
    _click(driver, "ID", "confirm")


def test_create_change_grow_and_delete_a_topic_through_confirmations(
        broker: BrokerProcess, console: ConsoleProcess, browser: Any, topic_name: str,
        broker_kind: str) -> None:
    _open(browser, console, "/topics")
    _click(browser, "ID", "new-topic")
    browser.find_element(_by("ID"), "name").send_keys(topic_name)
    browser.find_element(_by("ID"), "partitions").send_keys("2")
    _click(browser, "ID", "create")
    admin = ck_admin(broker.bootstrap)
    assert topic_name not in admin.list_topics(timeout=10).topics  # not before the confirmation
    _confirm(browser, f"Create topic {topic_name} with 2 partitions")
    assert browser.find_element(_by("ID"), "done").text == "created"
    assert len(_cells(browser, "partitions")) == 2
    # list_topics() of all topics: asking for this one would keep it in the client's
    # metadata cache, whose refreshes create it again after the delete below
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 2

    browser.find_element(_by("ID"), "config-key").send_keys("retention.ms")
    browser.find_element(_by("ID"), "config-value").send_keys("123456")
    _click(browser, "ID", "alter-config")
    _confirm(browser, "Set retention.ms = 123456")
    configs = {r[0]: r for r in _cells(browser, "configs")}
    assert configs["retention.ms"][1] == "123456"
    if broker_kind == "odradek":  # tansu calls every config DEFAULT_CONFIG
        assert configs["retention.ms"][2] == "dynamic topic config"

    _click(browser, "ID", "add-partitions")  # 2 -> 3, the form's default
    _confirm(browser, f"Grow topic {topic_name} to 3 partitions")
    if broker_kind == "odradek":
        wait_until(lambda: len(admin.list_topics(timeout=10).topics[topic_name]
                               .partitions) == 3, desc="3 partitions")
    else:  # tansu has no CreatePartitions: said in words
        assert "CreatePartitions" in browser.find_element(_by("ID"), "error").text
        _open(browser, console, f"/topics/{topic_name}")

    _click(browser, "ID", "delete")
    _confirm(browser, f"Delete topic {topic_name}")
    assert browser.find_element(_by("ID"), "done").text == f"deleted {topic_name}"
    wait_until(lambda: topic_name not in admin.list_topics(timeout=10).topics,
               desc="topic deleted")


def test_produce_a_test_record(broker: BrokerProcess, console: ConsoleProcess, browser: Any,
                               topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    _open(browser, console, f"/topics/{topic_name}")
    _click(browser, "ID", "produce")
    browser.find_element(_by("ID"), "key").send_keys("k")
    browser.find_element(_by("ID"), "value").send_keys('{"hello": "<world>"}')
    browser.find_element(_by("ID"), "headers").send_keys("source=console")
    _click(browser, "ID", "send")
    _confirm(browser, f"Produce one record of 20 bytes to topic {topic_name}")
    assert browser.find_element(_by("ID"), "done").text == "written at partition 0, offset 0"
    _open(browser, console, f"/topics/{topic_name}/messages?partition=0&format=json")
    (row,) = _cells(browser, "records")
    assert row[2] == "k" and json.loads(row[3]) == {"hello": "<world>"}
    assert row[4] == "source: console"


def _offsets(browser: Any) -> tuple[str, list[tuple[str, str]]]:
    """The total lag, and (committed, lag) of each partition."""
    rows = [(r[2], r[4]) for r in _cells(browser, "offsets")]
    return browser.find_element(_by("ID"), "total-lag").text, rows


def test_group_lag_changes_after_a_commit_and_reset(
        broker: BrokerProcess, console: ConsoleProcess, browser: Any, topic_name: str,
        broker_kind: str) -> None:
    # tansu answers ListOffsets(latest) below the log end: its lag is checked only where it
    # is 0 either way; the committed offsets are checked on both
    odradek = broker_kind == "odradek"
    from confluent_kafka import TopicPartition

    create_topic(broker.bootstrap, topic_name, 1)
    ck_produce(broker.bootstrap, topic_name, [Out(f"v{i}".encode()) for i in range(10)])
    group = f"g-{topic_name}"
    consumer = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    _open(browser, console, "/groups")
    _click(browser, "LINK_TEXT", group)
    assert _offsets(browser) == (("6", [("4", "6")]) if odradek else (ANY, [("4", ANY)]))
    assert browser.find_element(_by("ID"), "state").text == "Empty"

    # watched, the page reloads itself: the next commit shows without a click
    _click(browser, "ID", "watch")
    consumer = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 9)], asynchronous=False)
    finally:
        consumer.close()
    wait_until(lambda: _offsets(browser) == (("1", [("9", "1")]) if odradek
                                             else (ANY, [("9", ANY)])),
               timeout=20, desc="the watched group page showing the new commit")
    _open(browser, console, f"/groups/{urllib.parse.quote(group)}")
    assert browser.find_elements(_by("CSS_SELECTOR"), "svg.chart polyline")  # the lag chart

    _select(browser, "reset-to", "earliest")
    _click(browser, "ID", "reset")
    _confirm(browser, f"Set the committed offsets of group {group} to {topic_name}-0: 0")
    assert browser.find_element(_by("ID"), "done").text == "offsets reset"
    assert _offsets(browser) == (("10", [("0", "10")]) if odradek else (ANY, [("0", ANY)]))
    if odradek:  # tansu: the offset is clamped to its (too low) latest offset
        _select(browser, "reset-to", "offset")
        browser.find_element(_by("ID"), "reset-value").send_keys("7")
        _click(browser, "ID", "reset")
        _confirm(browser, f"{topic_name}-0: 7")
        assert _offsets(browser) == ("3", [("7", "3")])
    _select(browser, "reset-to", "offset")
    browser.find_element(_by("ID"), "reset-value").send_keys("seven")
    _click(browser, "ID", "reset")
    assert "'seven' is not a whole number" in browser.find_element(_by("ID"), "error").text


def test_transactions_page_shows_an_open_transaction(
        broker: BrokerProcess, console: ConsoleProcess, browser: Any, topic_name: str,
        broker_kind: str) -> None:
    from confluent_kafka import Producer

    create_topic(broker.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": f"tx-{topic_name}"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic_name, b"in a transaction")
    producer.flush(15)
    try:
        _open(browser, console, "/transactions")
        if broker_kind != "odradek":  # tansu has no ListTransactions: said in words
            assert "ListTransactions" in browser.find_element(_by("ID"), "error").text
            return
        rows = {r[0]: r for r in _cells(browser, "transactions")}
        assert rows[f"tx-{topic_name}"][3] == "Ongoing"
        assert rows[f"tx-{topic_name}"][6] == f"{topic_name}-0"
        _open(browser, console, f"/topics/{topic_name}/producers")
        (row,) = _cells(browser, "producers")
        assert row[0] == "0" and row[5] == "0"  # its open transaction starts at offset 0
    finally:
        producer.abort_transaction(15)


@pytest.mark.odradek_only
def test_topic_page_shows_local_and_remote_sizes(broker: BrokerProcess, console: ConsoleProcess,
                                                 browser: Any, topic_name: str) -> None:
    """A tiered topic: its remote bytes and segments, read from __remote_log_metadata
    as `odradek topics describe` reads them, equal the objects in the remote store."""
    create_topic(broker.bootstrap, topic_name, 1, config=tiered_topic())
    ck_produce(broker.bootstrap, topic_name,
               [Out((b"v%05d-" % i) * 30, b"k%05d" % i, partition=0) for i in range(300)],
               **{"linger.ms": 0, "batch.num.messages": 5, "compression.type": "none",
                  "acks": "all"})
    wait_copies_settled(broker.port, topic_name)
    logs = remote_objects(Path(broker.data_dir).resolve().parent / "remote-tier", topic_name,
                          "log")
    assert logs
    _open(browser, console, f"/topics/{topic_name}")
    assert browser.find_elements(_by("ID"), "sizes-error") == []

    def cell(css: str) -> Any:
        return browser.find_element(_by("CSS_SELECTOR"), f"#partitions td.{css}")

    assert int(cell("remote-size").get_attribute("title")) == sum(
        p.stat().st_size for p in logs)
    assert cell("remote-segments").text == str(len(logs))
    assert cell("remote-size").text.endswith("iB")
    assert int(cell("local-size").get_attribute("title")) > 0  # the active segment at least


def _chart(browser: Any, key: str) -> tuple[list[float], str]:
    """The heights of the metrics page's chart `key` (0 for a value of 0), and its
    latest value as written above it."""
    box = browser.find_element(_by("ID"), f"b0-{key}")
    lines = box.find_elements(_by("TAG_NAME"), "polyline")
    points = (lines[0].get_dom_attribute("points") or "").split() if lines else []
    heights = [round(120 - float(p.split(",")[1]), 1) for p in points]  # _chart.html's 120
    return heights, box.find_element(_by("CSS_SELECTOR"), "span.last").text


@pytest.mark.odradek_only
def test_metrics_charts_have_history_without_page_loads(
        broker: BrokerProcess, console: ConsoleProcess, browser: Any, topic_name: str) -> None:
    """The module's first load of the metrics page already has charts of many points:
    the console's sampler read the endpoint every second since it started (a point a
    page load would give one). Then produce and fetch show as rates and latencies."""
    time.sleep(max(0.0, 8 - (time.monotonic() - console.started)))  # >= 6 samples taken
    _open(browser, console, "/metrics")
    heights, last = _chart(browser, "under-replicated")
    assert len(heights) >= 6 and set(heights) == {0} and last == "0.00"  # RF=1
    create_topic(broker.bootstrap, topic_name, 1)
    ck_produce(broker.bootstrap, topic_name, [Out(b"x" * 100, partition=0)] * 50,
               **{"linger.ms": 0, "batch.num.messages": 1})
    consumer = ck_consumer(broker.bootstrap, **{"group.id": f"g-{topic_name}"})
    try:
        consumer.subscribe([topic_name])
        consumer.consume(50, timeout=10)
    finally:
        consumer.close()

    def charted() -> bool:
        _open(browser, console, "/metrics")
        moving = ("produce-rate", "fetch-rate", "bytes-in", "bytes-out", "produce-p99")
        return all(any(h > 0 for h in _chart(browser, key)[0]) for key in moving)

    wait_until(charted, timeout=30, interval=1.0,
               desc="produce and fetch rates, bytes and produce latency charted")
    assert _chart(browser, "fetch-p99")[0]  # consumers' fetches were timed
    for key in ("isr-shrinks", "isr-expands"):  # one replica: the ISR never changes
        heights, _ = _chart(browser, key)
        assert len(heights) >= 6 and set(heights) == {0}


def test_other_pages_load(broker: BrokerProcess, console: ConsoleProcess, browser: Any,
                          broker_kind: str) -> None:
    _open(browser, console, "/metrics")
    if broker_kind != "odradek":  # this module's console reads metrics from odradek only
        assert "--metrics-url" in browser.find_element(_by("TAG_NAME"), "main").text
    _open(browser, console, "/acls")
    if broker_kind == "odradek":  # no authorizer on this broker: said in words
        assert "SECURITY_DISABLED" in browser.find_element(_by("ID"), "error").text
    else:  # tansu answers an empty list
        assert _cells(browser, "acls") == [["no ACLs this user may see"]]
    _open(browser, console, "/users")
    assert _cells(browser, "users") == [["no SCRAM users this user may see"]]
    _open(browser, console, "/topics/no-such-topic-here")
    assert "no-such-topic-here" in browser.find_element(_by("ID"), "error").text
    # looking did not create it (a Metadata request naming it would, on this broker)
    assert "no-such-topic-here" not in ck_admin(broker.bootstrap).list_topics(timeout=10).topics


def _post(console: ConsoleProcess, path: str, form: dict[str, str],
          headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(console.url + path, urllib.parse.urlencode(form).encode(),
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_changes_need_the_console_form_token(broker: BrokerProcess, console: ConsoleProcess,
                                             topic_name: str) -> None:
    form = {"name": topic_name, "partitions": "1", "confirmed": "yes"}
    assert _post(console, "/new-topic", form)[0] == 403
    assert _post(console, "/new-topic", {**form, "token": "guess"})[0] == 403
    with urllib.request.urlopen(console.url + "/new-topic", timeout=30) as resp:
        page = resp.read().decode()
        assert "script-src" not in resp.headers["Content-Security-Policy"]  # none at all
        assert resp.headers["X-Frame-Options"] == "DENY"
    token = page.split('name="token" value="')[1].split('"')[0]
    other_site = {"Origin": "http://evil.example"}
    assert _post(console, "/new-topic", {**form, "token": token}, other_site)[0] == 403
    assert topic_name not in ck_admin(broker.bootstrap).list_topics(timeout=10).topics
    rebinding = urllib.request.Request(console.url + "/", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(rebinding, timeout=30)
    assert refused.value.code == 421
