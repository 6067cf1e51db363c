"""The Parquet tables of the validation report: their columns, and rows kept as Arrow columns.

The columns are declared once here (:data:`COLUMNS`), for Spark's writer
(:func:`spark_schema`) and pyarrow's (:func:`arrow_schema`); docs/guide/validate-report.md
describes them and a test holds the two equal. The row-per-range and row-per-conversion tables
grow with the log (14 conversion rows per range with the default options), so the per-partition
reduce packs its rows into Arrow IPC bytes (:func:`to_ipc`, a few bytes per value instead of a
Python dict per row) and the driver streams them into one Parquet file per table
(:func:`write_local`), adding the run's columns one batch at a time.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "ROW_KEYS", "RUN_COLUMNS", "arrow_schema", "from_ipc", "row_keys",
           "spark_schema", "to_ipc", "write_local"]

S, I32, I64, F64, BOOL, TS = "string", "int32", "int64", "float64", "bool", "timestamp"
_SLICE_ROWS = 8192

RUN_COLUMNS: tuple[tuple[str, str], ...] = (("run_id", S), ("run_options", S),
                                             ("run_timestamp", TS))

#: table -> its columns after the run's, in order: (name, type)
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "violations": (("topic", S), ("partition_id", I32), ("segment", S), ("file", S),
                   ("path", S), ("position", I64), ("kafka_offset", I64), ("last_offset", I64),
                   ("batch_bytes", I64), ("kind", S), ("severity", S), ("message", S)),
    "segments": (("topic", S), ("partition_id", I32), ("segment", S), ("base_offset", I64),
                 ("path", S), ("start_position", I64), ("end_position", I64),
                 ("range_index", I32), ("range_count", I32), ("range_bytes", I64),
                 ("bytes", I64), ("batches", I64), ("control_batches", I64), ("records", I64),
                 ("first_offset", I64), ("last_offset", I64), ("checksum", S),
                 ("batches_v0", I64), ("batches_v1", I64), ("batches_v2", I64),
                 ("index_entries", I64), ("timeindex_entries", I64),
                 ("txnindex_entries", I64), ("violations", I64), ("warnings", I64),
                 ("check_seconds", F64), ("executor", S), ("implementation", S)),
    "partitions": (("topic", S), ("partition_id", I32), ("path", S), ("segments", I64),
                   ("ranges", I64), ("bytes", I64), ("batches", I64), ("control_batches", I64),
                   ("records", I64), ("first_offset", I64), ("last_offset", I64),
                   ("checksum", S), ("errors", I64), ("warnings", I64)),
    "conversions": (("topic", S), ("partition_id", I32), ("segment", S),
                    ("start_position", I64), ("first_offset", I64), ("last_offset", I64),
                    ("to_magic", I32), ("chunk_size", I32), ("bytes_in", I64),
                    ("records_expected", I64), ("records_delivered", I64), ("fetches", I64),
                    ("bytes_committed", I64), ("bytes_written", I64), ("bytes_valid", I64),
                    ("padding_bytes", I64), ("discarded_bytes", I64), ("chunks", I64),
                    ("records_converted", I64), ("temporary_memory_bytes", I64),
                    ("zstd_batches", I64), ("stalls", I64), ("window_peak_bytes", I64),
                    ("ok", BOOL)),
}

#: column -> the key of the rows the job builds, where they differ: ``partition``, ``offset``
#: and ``end`` are reserved words in SQL engines (Spark SQL, Trino, ...), so the columns are
#: named so that no query needs quotes
ROW_KEYS = {"partition_id": "partition", "kafka_offset": "offset", "start_position": "start",
            "end_position": "end"}


def row_keys(table: str) -> list[str]:
    """The keys of a row dict of ``table``, in column order (without the run's columns)."""
    return [ROW_KEYS.get(name, name) for name, _ in COLUMNS[table]]


def spark_schema(table: str) -> Any:
    """``table``'s Spark schema, the run's columns first."""
    from pyspark.sql import types as t

    kinds = {S: t.StringType(), I32: t.IntegerType(), I64: t.LongType(), F64: t.DoubleType(),
             BOOL: t.BooleanType(), TS: t.TimestampType()}
    return t.StructType([t.StructField(name, kinds[kind], True)
                         for name, kind in (*RUN_COLUMNS, *COLUMNS[table])])


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    # a UTC timestamp in microseconds: what Spark writes with TIMESTAMP_MICROS
    return pa.timestamp("us", tz="UTC") if kind == TS else pa.type_for_alias(kind)


def arrow_schema(table: str, *, run: bool = True) -> Any:
    """``table``'s Arrow schema, with the run's columns first unless ``run`` is false."""
    import pyarrow as pa

    columns = (*RUN_COLUMNS, *COLUMNS[table]) if run else COLUMNS[table]
    return pa.schema([pa.field(name, _arrow_type(kind)) for name, kind in columns])


def to_ipc(table: str, rows: Iterable[Sequence[Any]]) -> bytes:
    """``rows`` (value sequences in column order, without the run's columns) as Arrow IPC
    stream bytes: compact enough to collect many of them to the driver."""
    import pyarrow as pa

    schema = arrow_schema(table, run=False)
    columns = list(zip(*rows, strict=True)) or [()] * len(schema)
    batch = pa.record_batch([pa.array(list(c), type=f.type)
                             for c, f in zip(columns, schema, strict=True)], schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(data: bytes) -> Any:
    """The Arrow table of :func:`to_ipc`'s bytes."""
    import pyarrow as pa

    return pa.ipc.open_stream(data).read_all()


def write_local(folder: str, table: str, parts: Iterable[Any], run: dict[str, Any]) -> None:
    """``parts`` (Arrow tables of ``table``'s columns without the run's) as
    ``folder/part-00000.parquet``, each part with the run's columns added as it is written;
    whatever the folder held is replaced (Spark's ``mode("overwrite")``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = Path(folder)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    schema = arrow_schema(table)
    with pq.ParquetWriter(target / "part-00000.parquet", schema) as writer:
        wrote = False
        for part in parts:
            # in slices: the run's columns repeat a value (run_options is a JSON text) per row
            for batch in part.to_batches(max_chunksize=_SLICE_ROWS):
                n = batch.num_rows
                run_columns = [pa.array([run[name]] * n, type=schema.field(name).type)
                               for name, _ in RUN_COLUMNS]
                writer.write_batch(pa.RecordBatch.from_arrays([*run_columns, *batch.columns],
                                                              schema=schema))
                wrote = True
        if not wrote:
            writer.write_table(schema.empty_table())
    (target / "_SUCCESS").touch()
