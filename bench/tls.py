"""What TLS costs: produce and consume throughput over SSL and SASL_SSL as a ratio of
PLAINTEXT.

    python bench/tls.py             # 200,000 x 1 KiB records per listener
    python bench/tls.py --quick     # 10x fewer
    python bench/tls.py --rounds 3  # 3 rounds, the listeners' order rotated, medians

One odradek broker listens on a PLAINTEXT, an SSL and a SASL_SSL listener (server
authentication, certificates generated for the run, TLSv1.3; SASL_SSL with a
SCRAM-SHA-512 user, which costs the login, once per connection). For each listener
in turn, one confluent-kafka producer (acks=1, linger.ms=5, compression none)
writes the records into its own topic, then one consumer reads them all back
from the beginning (assign(), no group). Produce is timed once connected (after one
warm-up record: TCP, TLS handshake, SASL login and metadata are not part of the
throughput); the figure with the set-up timed too is reported beside it. Reports
records/s, MB/s and the broker's CPU (user+system / wall, psutil) per listener, and the ratios to PLAINTEXT.
CPU per record (broker, and this client process: librdkafka's threads and the Python
produce loop) does not depend on how busy the machine is, throughput does: on a shared
machine compare the microseconds per record. With `--rounds N` each round runs the
listeners in a rotated order (no listener always first) on fresh topics, and the
medians are reported with the load average before and after.
Every workload has a deadline. JSON goes to bench/results/tls-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.clients import upsert_scram
from tests.integration.tls_certs import TlsFiles

WORKLOAD_TIMEOUT_S = 300.0


def cpu_s(pid: int) -> float:
    import psutil

    p = psutil.Process(pid)
    procs = [p, *p.children(recursive=True)]
    total = 0.0
    for q in procs:
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def self_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def produce(conf: dict[str, Any], topic: str, n: int, size: int) -> tuple[float, float]:
    """(seconds from the client's creation, seconds once connected) to deliver n
    records: the first includes the connections' set-up (TCP, TLS handshake, SASL
    login, metadata), the second starts after one warm-up record is acknowledged."""
    from confluent_kafka import Producer

    cold = time.monotonic()
    p = Producer({**conf, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20})
    value = b"x" * size
    p.produce(topic, value, partition=0)
    assert p.flush(WORKLOAD_TIMEOUT_S) == 0, "the warm-up record was not delivered"
    started = time.monotonic()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
        if time.monotonic() - started > WORKLOAD_TIMEOUT_S:
            raise TimeoutError("produce missed its deadline")
    left = p.flush(WORKLOAD_TIMEOUT_S)
    assert left == 0, f"{left} records not delivered"
    end = time.monotonic()
    return end - cold, end - started


def consume(conf: dict[str, Any], topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf, "group.id": "bench-unused", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.monotonic()
    try:
        while got < n:
            for m in c.consume(10_000, timeout=1.0):
                if m.error() is None:
                    got += 1
            if time.monotonic() - started > WORKLOAD_TIMEOUT_S:
                raise TimeoutError(f"consume missed its deadline ({got} of {n})")
    finally:
        c.close()
    return time.monotonic() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    import os
    import statistics

    load_before = os.getloadavg()
    n = args.records // 10 if args.quick else args.records
    with tempfile.TemporaryDirectory(prefix="odradek-bench-tls-") as tmp:
        certs = TlsFiles(Path(tmp) / "certs")
        ssl_port, sasl_port = free_port(), free_port()
        broker = BrokerProcess(data_dir=Path(tmp) / "data", overrides={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
                                              "CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="admin" password="admin-secret" user_admin="admin-secret";'),
            **certs.server_pem_config(),
        })
        broker.overrides["listeners"] = (f"PLAINTEXT://{HOST}:{broker.port},"
                                         f"SSL://{HOST}:{ssl_port},SASL_SSL://{HOST}:{sasl_port}")
        broker.start()
        sasl_ssl = {"bootstrap.servers": f"{HOST}:{sasl_port}", "security.protocol": "SASL_SSL",
                    "ssl.ca.location": str(certs.ca_pem)}
        rounds: list[dict[str, dict[str, float]]] = []
        try:
            upsert_scram({**sasl_ssl, "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                          "sasl.password": "admin-secret"}, "bench", "bench-secret")
            listeners = [
                ("PLAINTEXT", {"bootstrap.servers": broker.bootstrap}),
                ("SSL", {"bootstrap.servers": f"{HOST}:{ssl_port}", **certs.librdkafka()}),
                ("SASL_SSL", {**sasl_ssl, "sasl.mechanism": "SCRAM-SHA-512",
                              "sasl.username": "bench", "sasl.password": "bench-secret"}),
            ]
            for r in range(args.rounds):
                k = r % len(listeners)
                this: dict[str, dict[str, float]] = {}
                for name, conf in listeners[k:] + listeners[:k]:
                    topic = f"bench-{name.lower()}-{r}"
                    assert broker.pid is not None
                    cpu0, me0 = cpu_s(broker.pid), self_cpu_s()
                    produce_cold_s, produce_s = produce(conf, topic, n, args.size)
                    cpu1, me1 = cpu_s(broker.pid), self_cpu_s()
                    consume_s = consume(conf, topic, n)
                    cpu2, me2 = cpu_s(broker.pid), self_cpu_s()
                    mb = n * args.size / 1e6
                    this[name] = {
                        "produce_records_s": n / produce_s, "produce_mb_s": mb / produce_s,
                        "produce_with_connect_mb_s": mb / produce_cold_s,
                        "produce_broker_cores": (cpu1 - cpu0) / produce_s,
                        "produce_broker_us_per_record": (cpu1 - cpu0) / n * 1e6,
                        "produce_client_us_per_record": (me1 - me0) / n * 1e6,
                        "consume_records_s": n / consume_s, "consume_mb_s": mb / consume_s,
                        "consume_broker_cores": (cpu2 - cpu1) / consume_s,
                        "consume_broker_us_per_record": (cpu2 - cpu1) / n * 1e6,
                        "consume_client_us_per_record": (me2 - me1) / n * 1e6,
                    }
                rounds.append(this)
        finally:
            broker.close()
    load_after = os.getloadavg()
    names = list(rounds[0])
    results = {name: {key: statistics.median(r[name][key] for r in rounds)
                      for key in rounds[0][name]} for name in names}
    ratios = {name: {k: statistics.median(r[name][k] / r["PLAINTEXT"][k] for r in rounds)
                     for k in ("produce_mb_s", "produce_with_connect_mb_s", "consume_mb_s")}
              for name in ("SSL", "SASL_SSL")}
    print(f"{n:,} x {args.size} B records, one producer (acks=1), one consumer; "
          f"{args.rounds} round(s), medians; load average {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after")
    print(f"{'':10} {'produce MB/s':>13} {'broker us/rec':>13} {'client us/rec':>13} "
          f"{'consume MB/s':>13} {'broker us/rec':>13}")
    for name, r in results.items():
        print(f"{name:10} {r['produce_mb_s']:13.1f} {r['produce_broker_us_per_record']:13.2f} "
              f"{r['produce_client_us_per_record']:13.2f} {r['consume_mb_s']:13.1f} "
              f"{r['consume_broker_us_per_record']:13.2f}")
    for name, ratio in ratios.items():
        print(f"{name + '/PLAIN':14} {ratio['produce_mb_s']:9.2f} {'':27} "
              f"{ratio['consume_mb_s']:13.2f}   (produce with the connections' set-up "
              f"timed, as before: {ratio['produce_with_connect_mb_s']:.2f})")
    out = REPO_ROOT / "bench" / "results" / f"tls-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"records": n, "size": args.size, "rounds": rounds,
                               "results": results, "ratio": ratios["SSL"], "ratios": ratios,
                               "load_average": [load_before, load_after]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
