"""`odradek acls` against a real broker, with kafka-acls.sh's flags and output.

The broker runs the StandardAuthorizer with `allow.everyone.if.no.acl.found`,
so the CLI (User:ANONYMOUS over PLAINTEXT) may first grant itself ALTER and
DESCRIBE on the cluster; the last step denies it ALTER and sees the refusal.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .broker_proc import BrokerProcess

pytestmark = [pytest.mark.timeout(120), pytest.mark.odradek_only]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def acls_cli(broker: BrokerProcess, *args: str,
             stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "acls", "--bootstrap-server", broker.bootstrap,
         *args], capture_output=True, text=True, timeout=60, check=False, input=stdin)


def pattern(rtype: str, name: str, ptype: str = "LITERAL") -> str:
    return f"`ResourcePattern(resourceType={rtype}, name={name}, patternType={ptype})`"


def entry(principal: str, op: str, perm: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={op}, permissionType={perm})"


@pytest.fixture
def secured(broker_factory) -> BrokerProcess:
    broker = broker_factory({"authorizer.class.name": STANDARD,
                             "allow.everyone.if.no.acl.found": "true",
                             "super.users": "User:admin"})
    # once the cluster has an ACL (--idempotent below), ANONYMOUS needs its own
    out = acls_cli(broker, "--add", "--allow-principal", "User:ANONYMOUS", "--operation",
                   "Alter", "--operation", "Describe", "--cluster")
    assert out.returncode == 0, out.stderr
    return broker


def test_add_list_and_remove_as_kafka_acls_does(secured: BrokerProcess) -> None:
    out = acls_cli(secured, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                   "--operation", "Describe", "--topic", "orders", "--group", "billing")
    assert out.returncode == 0, out.stderr
    assert f"Adding ACLs for resource {pattern('TOPIC', 'orders')}" in out.stdout
    assert f"Current ACLs for resource {pattern('GROUP', 'billing')}" in out.stdout
    assert entry("User:alice", "READ") in out.stdout

    out = acls_cli(secured, "--add", "--allow-principal", "User:app", "--allow-host",
                   "10.0.0.1", "--producer", "--idempotent", "--topic", "events-",
                   "--resource-pattern-type", "prefixed")
    assert out.returncode == 0, out.stderr

    listed = acls_cli(secured, "--list", "--topic", "orders").stdout
    assert listed.count("Current ACLs") == 1
    assert entry("User:alice", "READ") in listed and entry("User:alice", "DESCRIBE") in listed
    everything = acls_cli(secured, "--list").stdout
    assert {pattern("TOPIC", "orders"), pattern("GROUP", "billing"),
            pattern("TOPIC", "events-", "PREFIXED"), pattern("CLUSTER", "kafka-cluster")} == {
        line.split("resource ", 1)[1].rstrip(": ") for line in everything.splitlines()
        if line.startswith("Current ACLs")}
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert entry("User:app", op, host="10.0.0.1") in everything
    assert entry("User:app", "IDEMPOTENT_WRITE", host="10.0.0.1") in everything
    apps = acls_cli(secured, "--list", "--principal", "User:app").stdout
    assert "User:alice" not in apps and apps.count("Current ACLs") == 2
    matched = acls_cli(secured, "--list", "--topic", "events-today",
                       "--resource-pattern-type", "match").stdout
    assert pattern("TOPIC", "events-", "PREFIXED") in matched

    # --remove asks first; "n" keeps the ACL, --force removes it
    out = acls_cli(secured, "--remove", "--allow-principal", "User:alice", "--operation",
                   "Read", "--topic", "orders", stdin="n\n")
    assert out.returncode == 0 and "Are you sure you want to remove" in out.stdout
    assert entry("User:alice", "READ") in acls_cli(secured, "--list", "--topic", "orders").stdout
    out = acls_cli(secured, "--remove", "--allow-principal", "User:alice", "--operation",
                   "Read", "--topic", "orders", "--force")
    assert out.returncode == 0, out.stderr
    assert entry("User:alice", "READ") in out.stdout  # what was removed
    listed = acls_cli(secured, "--list", "--topic", "orders").stdout
    assert entry("User:alice", "READ") not in listed and entry("User:alice", "DESCRIBE") in listed
    # without principals or operations: every ACL of the resource
    out = acls_cli(secured, "--remove", "--topic", "events-", "--resource-pattern-type",
                   "prefixed", "--force")
    assert out.returncode == 0, out.stderr
    assert "events-" not in acls_cli(secured, "--list").stdout


def test_usage_errors_and_refusals(secured: BrokerProcess) -> None:
    out = acls_cli(secured, "--add", "--topic", "t")
    assert out.returncode == 2 and "--allow-principal or --deny-principal" in out.stderr
    out = acls_cli(secured, "--add", "--allow-principal", "User:a", "--operation",
                   "IdempotentWrite", "--topic", "t")
    assert out.returncode == 2 and "TOPIC only supports operations" in out.stderr
    out = acls_cli(secured, "--add", "--allow-principal", "alice", "--topic", "t")
    assert out.returncode == 2 and "Type:name" in out.stderr
    out = acls_cli(secured, "--add", "--allow-principal", "User:a", "--consumer", "--topic", "t")
    assert out.returncode == 2 and "--group" in out.stderr
    # once ANONYMOUS is denied ALTER on the cluster, the broker refuses its changes
    out = acls_cli(secured, "--add", "--deny-principal", "User:ANONYMOUS", "--operation",
                   "Alter", "--cluster")
    assert out.returncode == 0, out.stderr
    out = acls_cli(secured, "--add", "--allow-principal", "User:a", "--topic", "t")
    assert out.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in out.stderr


def test_list_as_json(secured: BrokerProcess) -> None:
    import json

    out = acls_cli(secured, "--add", "--allow-principal", "User:bob", "--operation", "Write",
                   "--topic", "payments")
    assert out.returncode == 0, out.stderr
    out = acls_cli(secured, "--list", "--topic", "payments", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{
        "resource_type": "TOPIC", "resource_name": "payments", "pattern_type": "LITERAL",
        "principal": "User:bob", "host": "*", "operation": "WRITE", "permission_type": "ALLOW"}]
