"""format("odradek") over SASL_SSL, with Spark's Kafka connector's option names:
`kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.jaas.config`
(ScramLoginModule) and `kafka.ssl.truststore.*` (PEM for the source, PKCS12 for
the sink), mapped to librdkafka's settings for the driver's and the executors'
clients (security/client_properties.py, the mapping of the CLI's --command-config).

One broker whose only listener is SASL_SSL (SCRAM-SHA-512 for the Spark user,
PLAIN for the broker and the admin; trustme certificates). A streaming query reads
a topic and writes it with the exactly-once sink (transactions over SASL_SSL), a
batch read reads the result back; a wrong password fails a batch read and a
streaming write on the driver with the broker's reason, within seconds.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.spark.options import OdradekOptionError, parse_sink_options
from tests.integration.broker_proc import HOST, REPO_ROOT, BrokerProcess, free_port
from tests.integration.clients import upsert_scram
from tests.integration.tls_certs import PASSWORD, TlsFiles
from tests.spark.conftest import SPARK_TIMEOUT_S

ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
USER, USER_PASSWORD = "sparky", "sparky-secret"


def scram_jaas(password: str) -> str:
    return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{USER}" password="{password}";')


class SecuredBroker:
    def __init__(self, base: Path) -> None:
        self.certs = TlsFiles(base / "certs")
        port = free_port()
        self.broker = BrokerProcess(port=port, data_dir=base / "data",
                                    log_path=base / "broker.log", overrides={
            "listeners": f"SASL_SSL://{HOST}:{port}",
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
            "num.partitions": 1, "auto.create.topics.enable": "false",
            **self.certs.server_pem_config(),
        })
        self.bootstrap = f"{HOST}:{port}"

    def admin_conf(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                "sasl.password": "admin-secret", "ssl.ca.location": str(self.certs.ca_pem),
                "broker.address.family": "v4"}

    def source_options(self, password: str = USER_PASSWORD) -> dict[str, str]:
        """Kafka's client keys, PEM trust store, host name checked."""
        return {"kafka.bootstrap.servers": self.bootstrap,
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config": scram_jaas(password),
                "kafka.ssl.truststore.type": "PEM",
                "kafka.ssl.truststore.location": str(self.certs.ca_pem),
                "kafka.ssl.endpoint.identification.algorithm": "https"}

    def sink_options(self, password: str = USER_PASSWORD) -> dict[str, str]:
        """The same with a PKCS12 trust store (no type given: sniffed)."""
        return {"kafka.bootstrap.servers": self.bootstrap,
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config": scram_jaas(password),
                "kafka.ssl.truststore.location": str(self.certs.truststore_p12),
                "kafka.ssl.truststore.password": PASSWORD}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    s = SecuredBroker(tmp_path_factory.mktemp("spark-sasl-ssl"))
    s.broker.start()
    try:
        upsert_scram(s.admin_conf(), USER, USER_PASSWORD)
        yield s
    finally:
        s.broker.stop()
        shutil.rmtree(s.broker.data_dir, ignore_errors=True)


def create_topics(s: SecuredBroker, *names: str) -> None:
    admin = AdminClient(s.admin_conf())
    futures = admin.create_topics([NewTopic(n, 2, 1) for n in names], operation_timeout=30)
    for f in futures.values():
        f.result(timeout=30)


def test_options_map_kafka_security_keys_to_librdkafka(secured: SecuredBroker) -> None:
    opts = parse_sink_options({**secured.sink_options(), "topic": "t"})
    assert opts.kafka["security.protocol"] == "sasl_ssl"
    assert opts.kafka["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert (opts.kafka["sasl.username"], opts.kafka["sasl.password"]) == (USER, USER_PASSWORD)
    assert opts.kafka["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----")  # from PKCS12
    assert not any(k.startswith(("ssl.truststore", "sasl.jaas")) for k in opts.kafka)
    with pytest.raises(OdradekOptionError, match="'kafka.ssl.truststore.password'"):
        parse_sink_options({**secured.sink_options(), "topic": "t",
                            "kafka.ssl.truststore.password": "wrong"})
    with pytest.raises(OdradekOptionError, match="'kafka.sasl.jaas.config'"):
        parse_sink_options({**secured.sink_options(), "topic": "t",
                            "kafka.sasl.jaas.config": "com.example.Nope required;"})


def test_exactly_once_sink_and_batch_read_over_sasl_ssl(
    spark: Any, secured: SecuredBroker, tmp_path: Path
) -> None:
    src, dst = f"sec-src-{uuid.uuid4().hex[:8]}", f"sec-dst-{uuid.uuid4().hex[:8]}"
    create_topics(secured, src, dst)
    p = Producer(secured.admin_conf())
    for i in range(50):
        p.produce(src, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0

    q = (spark.readStream.format("odradek").options(**secured.source_options())
         .option("subscribe", src).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "20").load()
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
         .writeStream.format("odradek").options(**secured.sink_options())
         .option("topic", dst).option("deliveryGuarantee", "exactly-once")
         .option("checkpointLocation", str(tmp_path / "checkpoint"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(SPARK_TIMEOUT_S), "availableNow query did not finish"
    assert q.exception() is None, q.exception()

    back = (spark.read.format("odradek").options(**secured.source_options())
            .option("subscribe", dst).option("kafka.isolation.level", "read_committed")
            .load().collect())
    assert Counter((r.key, r.value) for r in back) == Counter(
        (f"k{i}".encode(), f"V{i}".encode()) for i in range(50))
    # The executors imported this checkout's odradek (the one under test).
    where = spark.sparkContext.parallelize([0], 1).map(
        lambda _: __import__("odradek").__file__).collect()[0]
    assert where.startswith(str(REPO_ROOT)), where


def test_wrong_password_is_a_clear_error_not_a_hang(spark: Any, secured: SecuredBroker,
                                                    tmp_path: Path) -> None:
    name = f"sec-wrong-{uuid.uuid4().hex[:8]}"
    create_topics(secured, name)
    started = time.monotonic()
    with pytest.raises(Exception, match="refused the login") as e:
        (spark.read.format("odradek").options(**secured.source_options("not-the-password"))
         .option("subscribe", name).load().collect())
    assert "Authentication failed" in str(e.value) or "authentication" in str(e.value).lower()
    assert "not-the-password" not in str(e.value)
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="refused the login"):
        (df.write.format("odradek").options(**secured.sink_options("not-the-password"))
         .option("topic", name).mode("append").save())
    assert time.monotonic() - started < 90


def test_an_untrusted_broker_certificate_is_a_clear_error(secured: SecuredBroker,
                                                          tmp_path: Path) -> None:
    """check_login, as the driver runs it before planning: a trust store without
    the broker's CA fails at once with the TLS reason (no Spark job needed)."""
    from odradek.spark.broker import OdradekAuthenticationError, check_login
    from odradek.spark.options import parse_source_options

    rogue = tmp_path / "rogue-ca.pem"
    rogue.write_bytes(secured.certs.rogue_ca.cert_pem.bytes())
    opts = parse_source_options({**secured.source_options(), "subscribe": "t",
                                 "kafka.ssl.truststore.location": str(rogue)}, streaming=False)
    started = time.monotonic()
    with pytest.raises(OdradekAuthenticationError, match="refused the login"):
        check_login(opts.bootstrap_servers, opts.kafka)
    assert time.monotonic() - started < 30


def test_fetch_read_path_over_sasl_ssl_equals_consumer(spark: Any, secured: SecuredBroker
                                                       ) -> None:
    """The read tasks' own Fetch client over TLS with a SCRAM login (PEM trust store,
    host name checked) returns what the librdkafka consumer returns."""
    name = f"sec-fetch-{uuid.uuid4().hex[:8]}"
    create_topics(secured, name)
    p = Producer({**secured.admin_conf(), "compression.type": "zstd"})
    for i in range(300):
        p.produce(name, key=None if i % 7 == 0 else f"k{i}".encode(), value=f"v{i}".encode(),
                  partition=i % 2, headers=[("h", b"x")] if i % 5 == 0 else None)
    assert p.flush(30) == 0

    def rows(path: str) -> list[Any]:
        return (spark.read.format("odradek").options(**secured.source_options())
                .option("subscribe", name).option("includeHeaders", "true")
                .option("brokerReadPath", path).load().orderBy("partition", "offset").collect())

    fetched = rows("fetch")
    assert len(fetched) == 300
    assert fetched == rows("consumer")
