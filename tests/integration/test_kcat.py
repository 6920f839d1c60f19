"""kcat (Debian's package, librdkafka underneath) against a real broker.

Topics are created with confluent-kafka's AdminClient (kcat cannot create
topics); everything else is kcat: `-L` metadata, `-P` produce with keys
(`-K:`), headers (`-H`) and each `compression.codec`, `-C -e` consume with an
exact `-f` format and as JSON (`-J`, which tells a null key from an empty one).

About the library: Debian 12 ships kcat 1.7.1 on librdkafka 2.0.2. That
librdkafka mis-skips KIP-482 tagged fields (it skips one byte too few; fixed
upstream in librdkafka #4278), so it cannot read a response that carries any.
Apache Kafka writes a tagged field only when its value is not the default, so
kcat works against it; tansu 0.6.0 writes every ApiVersions tagged field
(features, epoch, ZkMigrationReady) and kcat's handshake with it fails with
"ApiVersionRequest failed: Local: Read underflow". So under
ODRADEK_TEST_BROKER=tansu these tests run kcat on the newer librdkafka that
the confluent-kafka wheel bundles (same ABI, via LD_LIBRARY_PATH); against
odradek they use the system library, as users will.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.broker_proc import BrokerProcess

pytestmark = pytest.mark.integration

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KCAT_TIMEOUT_S = 60
HEADERS = (("h1", "v1"), ("h2", ""), ("trace-id", "abc-123"))

# key, value as kcat reads them with -K: (key up to the first ':'; no ':' -> null key)
LINES = (
    "k1:v1",
    "k2:value with spaces",
    "k3:val:with:colons",
    "nokeyvalue",  # no delimiter: null key
    ":emptykey",  # empty key, not null
    "k6:",  # empty value
    "k7:" + "compressible " * 1500,  # ~19 KB
    "k8:ünïcødé ✓",
)


def _split(line: str) -> tuple[str | None, str]:
    if ":" not in line:
        return None, line
    key, value = line.split(":", 1)
    return key, value


@pytest.fixture(scope="module")
def kcat_env(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if shutil.which("kcat") is None:
        if os.environ.get("CI"):
            pytest.fail("kcat not on PATH (CI must have it: see .ci/run)", pytrace=False)
        pytest.skip("kcat not on PATH (apt-get install kcat)")
    env = dict(os.environ)
    if broker_kind == "tansu":
        spec = importlib.util.find_spec("confluent_kafka")
        assert spec is not None and spec.origin, "confluent-kafka is needed"
        libs = Path(spec.origin).parent.parent / "confluent_kafka.libs"
        found = sorted(libs.glob("librdkafka*.so*"))
        assert found, f"no bundled librdkafka in {libs}"
        libdir = tmp_path_factory.mktemp("librdkafka")
        (libdir / "librdkafka.so.1").symlink_to(found[0])
        env["LD_LIBRARY_PATH"] = f"{libdir}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
    return env


def kcat(broker: BrokerProcess, env: dict[str, str], *args: str, stdin: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    cmd = ["kcat", "-b", broker.bootstrap, "-m", "15", *args]
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env,
                            timeout=KCAT_TIMEOUT_S, check=False)
    assert result.returncode == 0, (
        f"{' '.join(cmd)} exited {result.returncode}\nstdout:\n{result.stdout[-3000:]}\n"
        f"stderr:\n{result.stderr[-3000:]}"
    )
    return result


def create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)],
                                      operation_timeout=15, request_timeout=15).values():
        future.result(timeout=30)
    # Wait until metadata shows every partition with a leader.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=10).topics.get(name)
        if md and md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} has no leaders after 15 s")


def test_kcat_metadata_lists_broker_and_topic_partitions(
    broker: BrokerProcess, kcat_env: dict[str, str], topic_name: str
) -> None:
    create_topic(broker, topic_name, 3)

    text = kcat(broker, kcat_env, "-L").stdout
    assert re.search(rf"^ 1 brokers:\n  broker (\d+) at 127\.0\.0\.1:{broker.port}\b", text, re.MULTILINE), text
    assert f'  topic "{topic_name}" with 3 partitions:' in text, text
    for p in range(3):
        assert re.search(
            rf"^    partition {p}, leader (\d+), replicas: \1, isrs: \1$", text, re.MULTILINE
        ), text

    md = json.loads(kcat(broker, kcat_env, "-L", "-J", "-t", topic_name).stdout)
    assert [b["name"] for b in md["brokers"]] == [f"127.0.0.1:{broker.port}"], md
    broker_id = md["brokers"][0]["id"]
    assert md["controllerid"] == broker_id, md
    (topic,) = md["topics"]
    assert topic["topic"] == topic_name and "error" not in topic, topic
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    for p in topic["partitions"]:
        assert p["leader"] == broker_id
        assert p["replicas"] == [{"id": broker_id}] and p["isrs"] == [{"id": broker_id}]


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_then_consume_exact_output(
    broker: BrokerProcess, kcat_env: dict[str, str], topic_name: str, codec: str
) -> None:
    create_topic(broker, topic_name, 1)
    header_args = [arg for k, v in HEADERS for arg in ("-H", f"{k}={v}")]
    before_ms = int(time.time() * 1000)
    kcat(broker, kcat_env, "-P", "-t", topic_name, "-p", "0", "-K:", *header_args,
         "-X", f"compression.codec={codec}", stdin="\n".join(LINES) + "\n")
    after_ms = int(time.time() * 1000)

    out = kcat(broker, kcat_env, "-C", "-t", topic_name, "-p", "0", "-e", "-q",
               "-o", "beginning", "-f", "%k %s %h %T\n").stdout
    got = out.split("\n")
    assert got[-1] == "", "output ends with a newline"
    got = got[:-1]
    headers_text = ",".join(f"{k}={v}" for k, v in HEADERS)
    assert len(got) == len(LINES), out[-2000:]
    for line, sent in zip(got, LINES):
        key, value = _split(sent)
        head, ts = line.rsplit(" ", 1)
        assert head == f"{key or ''} {value} {headers_text}"
        assert before_ms - 1000 <= int(ts) <= after_ms + 1000, (ts, before_ms, after_ms)

    records = [json.loads(x) for x in kcat(
        broker, kcat_env, "-C", "-t", topic_name, "-p", "0", "-e", "-q", "-o", "beginning", "-J"
    ).stdout.splitlines()]
    assert [r["offset"] for r in records] == list(range(len(LINES)))
    for r, sent in zip(records, LINES):
        key, value = _split(sent)
        assert r["key"] == key  # None for the line without ':', "" for ':emptykey'
        assert r["payload"] == value
        assert r["headers"] == [x for kv in HEADERS for x in kv]
        assert r["tstype"] == "create" and r["partition"] == 0 and r["topic"] == topic_name


def test_kcat_partitions_offsets_and_count(
    broker: BrokerProcess, kcat_env: dict[str, str], topic_name: str
) -> None:
    create_topic(broker, topic_name, 3)
    for p in range(3):
        lines = "".join(f"p{p}-k{i}:p{p}-v{i}\n" for i in range(10 + p))
        kcat(broker, kcat_env, "-P", "-t", topic_name, "-p", str(p), "-K:", stdin=lines)

    # All partitions at once, until the end of each.
    out = kcat(broker, kcat_env, "-C", "-t", topic_name, "-e", "-q", "-o", "beginning",
               "-f", "%p %o %k %s\n").stdout
    rows = sorted(tuple(line.split(" ")) for line in out.splitlines())
    want = sorted((str(p), str(i), f"p{p}-k{i}", f"p{p}-v{i}") for p in range(3)
                  for i in range(10 + p))
    assert rows == want

    # From an absolute offset, a bounded count.
    out = kcat(broker, kcat_env, "-C", "-t", topic_name, "-p", "2", "-e", "-q", "-o", "5",
               "-c", "3", "-f", "%o %s\n").stdout
    assert out == "5 p2-v5\n6 p2-v6\n7 p2-v7\n"
