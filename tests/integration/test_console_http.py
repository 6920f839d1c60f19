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
        assert "load the page again" in page and 'aria-label="requests per second"' not in page
        assert _get(console, "/topics")[0] == 200  # a few requests to the broker meanwhile
        status, page = _get(console, "/metrics?watch=1")  # a second load: a rate, a chart
        assert '<meta http-equiv="refresh" content="5">' in page
        rate = page.split('<dd class="rate">')[1].split("<")[0]
        assert float(rate) > 0 and 'aria-label="requests per second"' in page
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


def test_a_three_broker_cluster(tmp_path: Path) -> None:
    """Brokers with their racks and log directories; a stopped broker's partitions marked
    under-replicated on the topic page."""
    import re

    from tests.integration.cluster_proc import ClusterProcesses

    cluster = ClusterProcesses(tmp_path, brokers=3, racks={1: "rack-a", 2: "rack-b",
                                                           3: "rack-c"})
    console = None
    try:
        cluster.start()
        cluster.create_topic("replicated", 2, 3)
        console = ConsoleProcess(cluster.bootstrap, tmp_path / "c.log", "--timeout", "5")
        status, page = _get(console, "/")
        assert status == 200
        for node_id, rack in ((1, "rack-a"), (2, "rack-b"), (3, "rack-c")):
            port = cluster.brokers[node_id].port
            assert f"<tr><td>{node_id}</td><td>{HOST}:{port}</td><td>{rack}</td>" in page
            assert f"<td>{cluster.brokers[node_id].data_dir}</td><td>online</td>" in page
        status, page = _get(console, "/topics/replicated")
        assert status == 200 and page.count('<tr class="warn">') == 0
        cluster.brokers[3].stop()
        for p in (0, 1):
            cluster.wait_for_partition("replicated", p, lambda v: 3 not in v.isr, "3 out of ISR")
        status, page = _get(console, "/topics/replicated")
        assert status == 200 and page.count('<tr class="warn">') == 2  # under-replicated
        assert len(re.findall(r"<td>\d, \d, \d</td><td>[12], [12]</td>", page)) == 2
    finally:
        if console is not None:
            console.close()
        cluster.close()
