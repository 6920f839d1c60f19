"""`OdradekDataSource`: the `format("odradek")` entry point Spark instantiates.

Spark builds one instance per query definition with the user's options; each
method below validates the options it needs first, so a bad or missing option
fails `load()`, `save()` or `start()` with a message naming it, before any
job runs.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.options import (
    OdradekOptionError,
    parse_sink_options,
    parse_source_options,
)

NAME = "odradek"

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]),
    True,
)


def source_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, column for column."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE, True))
    return StructType(fields)


class OdradekDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        # Batch and streaming share the schema; only includeHeaders changes it.
        # Options are checked again, for the mode, by reader() / streamReader().
        opts = parse_source_options(self.options, streaming=None)
        return source_schema(opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        from odradek.spark.reader import OdradekBatchReader

        return OdradekBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from odradek.spark.reader import OdradekStreamReader

        return OdradekStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.writer import OdradekBatchWriter, check_sink_schema

        if overwrite:
            raise OdradekOptionError(
                "format(\"odradek\") sink: save mode Overwrite is not supported (a Kafka "
                "topic is appended to, as with Spark's Kafka sink); write with "
                ".mode(\"append\")"
            )
        opts = parse_sink_options(self.options)
        check_sink_schema(schema, opts)
        return OdradekBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.writer import OdradekStreamWriter, check_sink_schema

        opts = parse_sink_options(self.options)
        check_sink_schema(schema, opts)
        return OdradekStreamWriter(opts)

