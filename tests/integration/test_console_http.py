"""The web console over plain HTTP (no browser): against a SASL cluster with an
authorizer it logs in as its --command-config user and shows only what that user may
describe; with --metrics-url it shows a broker's Prometheus numbers."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.clients import create_topic
from tests.integration.console_proc import ConsoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SERVER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="admin" password="admin-secret" user_admin="admin-secret" '
               'user_alice="alice-secret";')


def _client_props(path: Path, user: str, password: str) -> Path:
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{user}" password="{password}";')
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f"sasl.jaas.config={jaas}\n", encoding="utf-8")
    return path


def _get(console: ConsoleProcess, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(console.url + path, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _post(console: ConsoleProcess, path: str, form: dict[str, str]) -> tuple[int, str]:
    """A form of the console's, with its token, as the browser sends it (redirects
    followed)."""
    token = _get(console, "/new-topic")[1].split('name="token" value="')[1].split('"')[0]
    data = urllib.parse.urlencode({**form, "token": token}).encode()
    try:
        with urllib.request.urlopen(console.url + path, data, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BrokerProcess]:
    port = free_port()
    proc = BrokerProcess(port=port, data_dir=tmp_path / "data", log_path=tmp_path / "b.log",
                         overrides={
        "listeners": f"SASL_PLAINTEXT://{HOST}:{port}",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": SERVER_JAAS,
        "authorizer.class.name": STANDARD, "super.users": "User:admin"})
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def test_console_shows_what_its_user_may_see(secured: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    tag = uuid.uuid4().hex[:8]
    visible, hidden = f"visible-{tag}", f"hidden-{tag}"
    admin = AdminClient({"bootstrap.servers": secured.bootstrap,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                         "sasl.username": "admin", "sasl.password": "admin-secret"})
    for f in admin.create_topics([NewTopic(visible, 1, 1), NewTopic(hidden, 1, 1)],
                                 operation_timeout=30).values():
        f.result(30)
    for f in admin.create_acls([AclBinding(
            ResourceType.TOPIC, visible, ResourcePatternType.LITERAL, "User:alice", "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW)], request_timeout=30).values():
        f.result(30)

    alice = ConsoleProcess(secured.bootstrap, tmp_path / "alice.log", "--command-config",
                           str(_client_props(tmp_path / "alice.properties", "alice",
                                             "alice-secret")))
    admin_console = ConsoleProcess(secured.bootstrap, tmp_path / "admin.log",
                                   "--command-config",
                                   str(_client_props(tmp_path / "admin.properties", "admin",
                                                     "admin-secret")))
    try:
        status, page = _get(alice, "/topics")
        assert status == 200 and visible in page and hidden not in page
        assert "as alice" in page
        status, page = _get(alice, f"/topics/{visible}")
        assert status == 200 and 'id="partitions"' in page
        assert "cannot describe the configs" in page  # no DescribeConfigs for alice
        assert _get(alice, f"/topics/{hidden}")[0] == 404
        status, page = _get(alice, "/acls")  # only a super user (or Describe on the cluster)
        assert status != 200 and "DescribeAcls" in page
        # the super user sees both topics and alice's ACL
        status, page = _get(admin_console, "/topics")
        assert visible in page and hidden in page
        status, page = _get(admin_console, "/acls")
        assert status == 200 and "User:alice" in page and visible in page
        # the super user lets alice describe the hidden topic, through the confirmation
        acl = {"resource_type": "TOPIC", "resource": hidden, "pattern": "LITERAL",
               "principal": "User:alice", "host": "*", "operation": "DESCRIBE",
               "permission": "ALLOW"}
        status, page = _post(admin_console, "/acls/add", acl)
        assert status == 200 and f"Add the ACL: ALLOW User:alice from * to DESCRIBE TOPIC " \
            f"{hidden} (LITERAL)?" in page
        assert hidden not in _get(alice, "/topics")[1]  # not before the confirmation
        assert _post(admin_console, "/acls/add", {**acl, "confirmed": "yes"})[0] == 200
        assert hidden in _get(alice, "/topics")[1]
        # alice may not change ACLs: the broker's refusal in words
        status, page = _post(alice, "/acls/add", {**acl, "resource": visible,
                                                  "confirmed": "yes"})
        assert status == 502 and "CLUSTER_AUTHORIZATION_FAILED" in page.upper()
        # and the super user takes it away again
        status, page = _post(admin_console, "/acls/remove", {**acl, "confirmed": "yes"})
        assert status == 200 and "removed 1" in page
        assert hidden not in _get(alice, "/topics")[1]
        # SCRAM users: the super user sets bob's password, sees his credential, deletes it
        bob = {"user": "bob", "mechanism": "SCRAM-SHA-512", "password": "bob-secret",
               "iterations": "8192"}
        status, page = _post(admin_console, "/users/upsert", bob)
        assert status == 200 and "Set the SCRAM-SHA-512 password of user bob?" in page
        assert _post(admin_console, "/users/upsert", {**bob, "confirmed": "yes"})[0] == 200
        status, page = _get(admin_console, "/users")
        assert status == 200 and "<td>bob</td><td>SCRAM-SHA-512</td><td>8192</td>" in page
        assert "bob-secret" not in page
        status, page = _post(alice, "/users/upsert", {**bob, "user": "eve",
                                                      "confirmed": "yes"})
        assert status == 502 and "AlterUserScramCredentials" in page  # not hers to change
        status, page = _post(admin_console, "/users/delete",
                             {"user": "bob", "mechanism": "SCRAM-SHA-512", "confirmed": "yes"})
        assert status == 200 and "deleted SCRAM-SHA-512 of bob" in page
        assert "<td>bob</td>" not in page
    finally:
        alice.close()
        admin_console.close()


def test_metrics_page_reads_the_broker_endpoint(tmp_path: Path) -> None:
    metrics_port = free_port()
    broker = BrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "b.log",
                           overrides={"odradek.metrics.port": str(metrics_port)}).start()
    console = None
    try:
        create_topic(broker.bootstrap, f"m-{uuid.uuid4().hex[:8]}", 2)
        console = ConsoleProcess(broker.bootstrap, tmp_path / "c.log", "--metrics-url",
                                 f"http://{HOST}:{metrics_port}/metrics", "--metrics-url",
                                 f"http://{HOST}:{free_port()}/metrics")
        status, page = _get(console, "/metrics")
        assert status == 200
        assert "<td>CREATE_TOPICS</td>" in page and "<dt>partitions</dt><dd>2</dd>" in page
        assert page.count('class="error"') == 1  # the second URL: nothing listens there
        assert "<dt>under replicated partitions</dt><dd>0</dd>" in page
        status, page = _get(console, "/metrics?watch=1")
        assert '<meta http-equiv="refresh" content="5">' in page
    finally:
        if console is not None:
            console.close()
        broker.close()


def test_no_broker_is_said_in_words(tmp_path: Path) -> None:
    console = ConsoleProcess(f"{HOST}:{free_port()}", tmp_path / "c.log", "--timeout", "2")
    try:
        for path in ("/", "/topics", "/groups", "/transactions"):
            status, page = _get(console, path)
            assert status == 502, (path, page)
            assert 'id="error"' in page
        assert "%3|" not in console.log()  # librdkafka's own lines are not printed
    finally:
        console.close()


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=30) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in the metrics")


def _row(page: str, table: str, first_cell: str) -> list[str]:
    """The cells of the row of `table` whose first cell is `first_cell`."""
    import re

    body = page.split(f'<table id="{table}">')[1].split("</table>")[0]
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.DOTALL):
        cells = [re.sub(r"<[^>]+>", "", c).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell} in {table}")


def test_a_three_broker_cluster(tmp_path: Path) -> None:
    """Brokers with their racks, roles and log directories; the controller as the quorum
    leader and the brokers as observers; a stopped broker fenced, its partitions marked
    under-replicated on the topic page, and the ISR shrinks in the leaders' metrics."""
    import re

    from tests.integration.clients import wait_until
    from tests.integration.cluster_proc import CONTROLLER_ID, ClusterProcesses

    metrics = {n: free_port() for n in (1, 2, 3)}
    cluster = ClusterProcesses(tmp_path, brokers=3, racks={1: "rack-a", 2: "rack-b",
                                                           3: "rack-c"},
                               broker_overrides={n: {"odradek.metrics.port": port}
                                                 for n, port in metrics.items()})
    console = None
    try:
        cluster.start()
        cluster.create_topic("replicated", 2, 3)
        console = ConsoleProcess(cluster.bootstrap, tmp_path / "c.log", "--timeout", "5")
        # the observers catch up with the topic's records within a fetch or two
        wait_until(lambda: all(_row(_get(console, "/")[1], "quorum", str(n))[4] == "0"
                               for n in (1, 2, 3)), timeout=30, desc="observers caught up")
        status, page = _get(console, "/")
        assert status == 200
        for node_id, rack in ((1, "rack-a"), (2, "rack-b"), (3, "rack-c")):
            port = cluster.brokers[node_id].port
            assert _row(page, "brokers", str(node_id)) == [
                str(node_id), f"{HOST}:{port}", rack, "broker", "unfenced"]
            assert f"<td>{cluster.brokers[node_id].data_dir}</td><td>online</td>" in page
            observer = _row(page, "quorum", str(node_id))
            assert observer[1] == "observer" and observer[4] == "0", observer  # caught up
        leader = _row(page, "quorum", str(CONTROLLER_ID))
        assert leader[1] == "leader" and leader[2] == (
            f"CONTROLLER://{HOST}:{cluster.controller_port}") and leader[4] == "0"
        assert f'<dd id="quorum-leader">{CONTROLLER_ID}</dd>' in page
        status, page = _get(console, "/topics/replicated")
        assert status == 200 and page.count('<tr class="warn">') == 0
        cluster.brokers[3].stop()
        for p in (0, 1):
            cluster.wait_for_partition("replicated", p, lambda v: 3 not in v.isr, "3 out of ISR")
        status, page = _get(console, "/topics/replicated")
        assert status == 200 and page.count('<tr class="warn">') == 2  # under-replicated
        assert len(re.findall(r"<td>\d, \d, \d</td><td>[12], [12]</td>", page)) == 2
        # the stopped broker is fenced once its session expires (2 s here)
        wait_until(lambda: _row(_get(console, "/")[1], "brokers", "3")[4] == "fenced",
                   timeout=30, desc="broker 3 shown fenced")
        # Kafka's UnderReplicatedPartitions and IsrExpandsPerSec, as odradek's metrics:
        # both partitions, now led by 1 or 2, lack broker 3 until it is back and caught up
        wait_until(lambda: sum(_metric(metrics[n], "odradek_under_replicated_partitions")
                               for n in (1, 2)) == 2, timeout=30, desc="2 under-replicated")
        expands = sum(_metric(metrics[n], "odradek_isr_expands_total") for n in (1, 2))
        cluster.brokers[3].start()
        for p in (0, 1):
            cluster.wait_for_partition("replicated", p, lambda v: 3 in v.isr, "3 back in ISR")
        wait_until(lambda: sum(_metric(metrics[n], "odradek_under_replicated_partitions")
                               for n in (1, 2, 3)) == 0, timeout=30, desc="none under-replicated")
        assert sum(_metric(metrics[n], "odradek_isr_expands_total")
                   for n in (1, 2, 3)) >= expands + 2
        wait_until(lambda: _row(_get(console, "/")[1], "brokers", "3")[4] == "unfenced",
                   timeout=30, desc="broker 3 shown unfenced again")
    finally:
        if console is not None:
            console.close()
        cluster.close()


def test_the_broker_serves_the_console_itself(tmp_path: Path) -> None:
    """`odradek server --console HOST:PORT`: the same console from the broker's process,
    for its own listener and metrics endpoint; a bad --console stops start-up (exit 2)."""
    import subprocess
    import sys

    from tests.integration.clients import wait_until

    console_port, metrics_port = free_port(), free_port()
    broker = BrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "b.log",
                           overrides={"odradek.metrics.port": str(metrics_port)},
                           extra_args=["--console", f"{HOST}:{console_port}"]).start()
    try:
        url = f"http://{HOST}:{console_port}"

        def get(path: str) -> str:
            with urllib.request.urlopen(url + path, timeout=60) as resp:
                return str(resp.read().decode())

        page = get("/")
        assert _row(page, "brokers", "1")[1:] == [broker.bootstrap, "-", "broker, controller",
                                                  "unfenced"]
        assert _row(page, "quorum", "1")[1] == "leader"
        # the metrics endpoint was found from odradek.metrics.port, sampled in the background
        wait_until(lambda: get("/metrics").count("<polyline") >= 3, timeout=30,
                   desc="the broker's own console charting its metrics")
        assert f"odradek console for {broker.bootstrap} at {url}/" in broker.log_tail(1 << 22)
    finally:
        broker.close()
    for bad, why in ((["--console", "nowhere"], "--console 'nowhere': expected HOST:PORT"),
                     (["--console", f"{HOST}:{free_port()}", "--processes", "2"],
                      "--console goes with one process")):
        r = subprocess.run([sys.executable, "-m", "odradek", "server", *bad,
                            "--override", f"log.dirs={tmp_path / 'bad'}"],
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 2 and why in r.stderr, r.stderr
