"""PySpark data source for odradek: `spark.read.format("odradek")`, `readStream`,
`write` and `writeStream`, with the schema and options of Spark's Kafka source and sink.

    import odradek.spark
    odradek.spark.register(spark)
    df = (spark.readStream.format("odradek")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Needs `pip install odradek[spark]` (pyspark 4.2+, pyarrow) and a Java 17 runtime.
Modules: `options` (parsing and validation), `broker` (driver-side offset
look-ups), `reader` (batch and streaming source), `writer` (batch and streaming
sink, at-least-once or exactly-once), `source` (the DataSource Spark instantiates).
The design, the delivery guarantees and the differences from Spark's Kafka
connector are in docs/spark.md.
"""

from __future__ import annotations

from typing import Any

from odradek.spark.options import OdradekOptionError

__all__ = ["NAME", "OdradekOptionError", "register"]

NAME = "odradek"


def register(spark: Any) -> None:
    """Make `format("odradek")` available in this SparkSession."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
