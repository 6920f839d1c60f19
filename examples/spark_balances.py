"""Running account balances with Spark, written exactly once to a compacted topic.

With a broker on 127.0.0.1:9092 (`scripts/run` in another terminal) and the
spark extra installed (`.venv/bin/pip install -e '.[spark]'`, Java 17):

    .venv/bin/python examples/spark_balances.py

What it does, in `--rounds` rounds (default 2):

1. produces a stream of debits and credits to the topic `transfers` (2
   partitions, key = account): every account first gets an opening deposit,
   then each transfer is two records, a debit of the sender and a credit of the
   receiver, as JSON `{"account": "acct-3", "amount": -25, "kind": "debit", "transfer": 17}`;
2. runs a Spark streaming job (Trigger.AvailableNow, so it stops when it has
   caught up) that reads `transfers` with `format("odradek")`, sums the amounts
   per account — the running balance, kept in Spark's state store — and writes
   the balances (key = account, value = the balance as text; output mode
   complete: every account at every micro-batch, and compaction keeps the last
   one) to the compacted topic `balances` with the exactly-once sink
   (`deliveryGuarantee=exactly-once`). Python data sources cannot take output
   mode update (Spark gives them no SupportsStreamingUpdateAsAppend). The checkpoint makes the next round (or a
   restart after a crash) continue where the last one stopped.

Then it checks, reading `balances` with read_committed and keeping the last
value of each key (what compaction keeps): every balance equals the sum of that
account's records in `transfers`, no balance is negative, and the balances add
up to the deposits — transfers move money, they do not make it.

Options: --bootstrap, --prefix (topic name prefix, e.g. `demo-`), --accounts,
--transfers (per round), --rounds, --checkpoint, --seed, --master (Spark's master
URL, default `local[2]`; `spark://host:7077` runs the job on a standalone
cluster, whose executors must reach the broker, the checkpoint directory and
this interpreter's packages), --conf KEY=VALUE (a Spark setting, repeatable, as
spark-submit's). Exit status 0 when the check holds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import defaultdict
from typing import Any

DEPOSIT = 1000


def create_topics(bootstrap: str, transfers: str, balances: str) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(transfers, 2, 1),
            NewTopic(balances, 1, 1, config={"cleanup.policy": "compact"}),
        ]
    )
    for f in futures.values():
        try:
            f.result(30)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def produce_transfers(
    bootstrap: str,
    topic: str,
    accounts: int,
    transfers: int,
    rng: random.Random,
    ledger: dict[str, int],
    first_transfer: int,
) -> int:
    """Deposits for accounts not in `ledger` yet, then `transfers` transfers that
    never overdraw (the producer keeps its own ledger). Returns records produced."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    n = 0

    def send(account: str, amount: int, kind: str, transfer: int | None) -> None:
        nonlocal n
        value = {"account": account, "amount": amount, "kind": kind, "transfer": transfer}
        p.produce(topic, json.dumps(value).encode(), account.encode())
        ledger[account] = ledger.get(account, 0) + amount
        n += 1

    names = [f"acct-{i}" for i in range(accounts)]
    for a in names:
        if a not in ledger:
            send(a, DEPOSIT, "deposit", None)
    for t in range(first_transfer, first_transfer + transfers):
        sender, receiver = rng.sample(names, 2)
        if ledger[sender] <= 0:
            continue
        amount = rng.randint(1, min(100, ledger[sender]))
        send(sender, -amount, "debit", t)
        send(receiver, amount, "credit", t)
    if p.flush(60) != 0:
        raise RuntimeError("transfers not acknowledged")
    return n


def run_balances_job(
    spark: Any, bootstrap: str, transfers: str, balances: str, checkpoint: str
) -> int:
    """One AvailableNow run of the streaming job. Returns the input rows it read."""
    from pyspark.sql import functions as F

    q = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", transfers)
        .option("startingOffsets", "earliest")
        .load()
        .select(
            F.from_json(
                F.col("value").cast("string"), "account string, amount long, kind string"
            ).alias("t")
        )
        .groupBy("t.account")
        .agg(F.sum("t.amount").alias("balance"))
        .selectExpr("account AS key", "CAST(balance AS STRING) AS value")
        .writeStream.format("odradek")
        .outputMode("complete")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", balances)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    if not q.awaitTermination(600):
        q.stop()
        raise TimeoutError("the balances job did not catch up within 600 s")
    if q.exception() is not None:
        raise RuntimeError(f"the balances job failed: {q.exception()}")
    return sum(p["numInputRows"] for p in q.recentProgress)


def check(spark: Any, bootstrap: str, transfers: str, balances: str) -> dict[str, Any]:
    """Last balance per account (read_committed) against the transfers topic."""

    def read(topic: str) -> list[Any]:
        return (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("kafka.isolation.level", "read_committed")
            .load()
            .select("key", "value", "partition", "offset")
            .collect()
        )

    last: dict[str, tuple[int, int]] = {}
    for r in read(balances):
        key = bytes(r.key).decode()
        if key not in last or r.offset > last[key][0]:
            last[key] = (r.offset, int(bytes(r.value).decode()))
    got = {k: v for k, (_, v) in last.items()}
    want: dict[str, int] = defaultdict(int)
    deposits = 0
    for r in read(transfers):
        t = json.loads(bytes(r.value))
        want[t["account"]] += t["amount"]
        if t["kind"] == "deposit":
            deposits += t["amount"]
    problems = []
    if got != dict(want):
        diff = {
            a: (got.get(a), want.get(a)) for a in set(got) | set(want) if got.get(a) != want.get(a)
        }
        problems.append(f"balances differ from the transfers (got, want): {diff}")
    if any(v < 0 for v in got.values()):
        problems.append("a balance is negative")
    if sum(got.values()) != deposits:
        problems.append(f"balances add up to {sum(got.values())}, deposits to {deposits}")
    return {"balances": got, "total": sum(got.values()), "deposits": deposits, "problems": problems}


def make_session(master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("odradek-spark-balances")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None, spark: Any = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--accounts", type=int, default=20)
    ap.add_argument("--transfers", type=int, default=5000, help="transfers per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--checkpoint", default=os.path.join(tempfile.gettempdir(), "odradek-spark-balances")
    )
    ap.add_argument(
        "--master", default="local[2]", help="Spark master URL, e.g. spark://127.0.0.1:7077"
    )
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the session (repeatable)",
    )
    args = ap.parse_args(argv)
    if any("=" not in c for c in args.conf):
        ap.error("--conf takes KEY=VALUE")
    conf = dict(c.split("=", 1) for c in args.conf)
    transfers, balances = f"{args.prefix}transfers", f"{args.prefix}balances"
    checkpoint = os.path.join(args.checkpoint, balances)

    import odradek.spark

    own_session = spark is None
    if own_session:
        spark = make_session(args.master, conf)
    odradek.spark.register(spark)
    try:
        create_topics(args.bootstrap, transfers, balances)
        rng = random.Random(args.seed)
        ledger: dict[str, int] = {}
        for r in range(args.rounds):
            n = produce_transfers(
                args.bootstrap,
                transfers,
                args.accounts,
                args.transfers,
                rng,
                ledger,
                first_transfer=r * args.transfers,
            )
            rows = run_balances_job(spark, args.bootstrap, transfers, balances, checkpoint)
            print(f"round {r + 1}: produced {n} records to {transfers}; the job read {rows}")
        result = check(spark, args.bootstrap, transfers, balances)
    finally:
        if own_session:
            spark.stop()
    print(
        f"{len(result['balances'])} accounts in {balances}; balances add up to "
        f"{result['total']} (deposits {result['deposits']})"
    )
    for p in result["problems"]:
        print(f"CHECK FAILED: {p}")
    if not result["problems"]:
        print("check passed: every balance matches its transfers, once")
    return result


if __name__ == "__main__":
    sys.exit(1 if main()["problems"] else 0)
