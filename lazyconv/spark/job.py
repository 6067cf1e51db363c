"""The Spark job that validates a Kafka log directory and the lazy down-conversion over it.

Stages (everything below the driver's listing runs on executors; only aggregates, and the
violations found, come back to the driver):

1. the driver lists segments (paths and sizes only) and parallelizes them, one task per segment
   up to ``max_tasks``;
2. ``map(check_segment)``: every batch's frame, CRC and structure, offsets within the segment,
   the ``.index`` and ``.timeindex`` against the log (:mod:`lazyconv.spark.segment_check`);
3. ``reduceByKey`` per partition: counts and the consumer-view checksum summed over segments,
   compared with the fixture manifest when there is one; the segments' (base, first, last)
   offsets gathered per partition with ``reduceByKey`` to check offsets keep increasing from one
   segment to the next;
4. ``flatMap(check_conversions)`` over (clean segment × target magic), each task running the lazy
   send for every chunk size (:mod:`lazyconv.spark.conversion_check`);
5. DataFrames of segments, partitions, conversions and violations written as Parquet under
   ``out``; the summary per topic × target magic × chunk size is a ``groupBy`` on the cluster.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from lazyconv.fixtures.checksum import MASK64, format_checksum
from lazyconv.fixtures.layout import SegmentFiles, list_segments
from lazyconv.spark.conversion_check import check_conversions
from lazyconv.spark.segment_check import check_segment, violation

__all__ = [
    "DEFAULT_CHUNK_SIZES",
    "DEFAULT_TO_MAGICS",
    "ValidationResult",
    "run_validation",
]

log = logging.getLogger(__name__)

KIB = 1024
DEFAULT_CHUNK_SIZES = (16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 256 * KIB, 512 * KIB, 1024 * KIB)
DEFAULT_TO_MAGICS = (0, 1)


@dataclass
class ValidationResult:
    """What the job found; ``violations`` holds at most ``max_reported`` of them."""

    logdir: str
    out: str | None
    segments: int
    partitions: int
    bytes: int
    batches: int
    records: int
    violation_count: int
    violations: list[dict[str, Any]]
    segment_summary: list[dict[str, Any]]
    conversion_summary: list[dict[str, Any]]
    partition_rows: list[dict[str, Any]]
    seconds: float
    conversions_ok: int = 0
    conversions_run: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no violation was found."""
        return self.violation_count == 0


def _schemas() -> dict[str, Any]:
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    def st(*fields: tuple[str, Any]) -> StructType:
        return StructType([StructField(n, t, True) for n, t in fields])

    s, i, L, d, b = StringType(), IntegerType(), LongType(), DoubleType(), BooleanType()
    return {
        "violations": st(("topic", s), ("partition", i), ("segment", s), ("file", s),
                         ("position", L), ("kind", s), ("message", s)),
        "segments": st(("topic", s), ("partition", i), ("segment", s), ("base_offset", L),
                       ("path", s), ("bytes", L), ("batches", L), ("control_batches", L),
                       ("records", L), ("first_offset", L), ("last_offset", L),
                       ("checksum", s), ("batches_v0", L), ("batches_v1", L), ("batches_v2", L),
                       ("index_entries", L), ("timeindex_entries", L), ("violations", L),
                       ("check_seconds", d)),
        "partitions": st(("topic", s), ("partition", i), ("segments", L), ("bytes", L),
                         ("batches", L), ("control_batches", L), ("records", L),
                         ("checksum", s)),
        "conversions": st(("topic", s), ("partition", i), ("segment", s), ("to_magic", i),
                          ("chunk_size", i), ("bytes_in", L), ("records_expected", L),
                          ("records_delivered", L), ("fetches", L), ("bytes_committed", L),
                          ("bytes_written", L), ("bytes_valid", L), ("padding_bytes", L),
                          ("discarded_bytes", L), ("chunks", L), ("records_converted", L),
                          ("temporary_memory_bytes", L), ("conversion_time_ns", L),
                          ("zstd_batches", L), ("stalls", L), ("wall_seconds", d),
                          ("ok", b)),
    }


def _row(record: dict[str, Any], schema: Any) -> tuple:
    return tuple(record.get(f.name) for f in schema.fields)


# --- functions shipped to executors (module level so they pickle by reference) ---------------

def _check(seg_fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return seg_fields, check_segment(SegmentFiles(**seg_fields))


def _partition_value(item: tuple[dict[str, Any], dict[str, Any]]) -> tuple:
    s = item[1]["summary"]
    return (s["topic"], s["partition"]), (1, s["bytes"], s["batches"], s["control_batches"],
                                          s["records"], s["checksum"])


def _add_partition(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4],
            (a[5] + b[5]) & MASK64)


def _order_value(item: tuple[dict[str, Any], dict[str, Any]]) -> tuple:
    s = item[1]["summary"]
    return (s["topic"], s["partition"]), [(s["base_offset"], s["first_offset"], s["last_offset"],
                                           s["segment"])]


def _check_order(item: tuple[tuple[str, int], list[tuple]]) -> list[dict[str, Any]]:
    (topic, partition), segments = item
    found = []
    previous = None
    for _base, first, last, name in sorted(segments):
        if first is None:
            continue  # nothing decodable in that segment (its own violations say why)
        if previous is not None and first <= previous[1]:
            found.append(violation(
                None, "partition", -1, "segment_order",
                f"segment {name} starts at offset {first}, not after offset {previous[1]} "
                f"where segment {previous[0]} ends",
                topic=topic, partition=partition))
            found[-1]["segment"] = name
        previous = (name, last if previous is None else max(last, previous[1]))
    return found


def _manifest_check(manifest_partitions: dict[str, Any]):
    def check(item: tuple[tuple[str, int], tuple]) -> list[dict[str, Any]]:
        (topic, partition), (_, _bytes, batches, control, records, checksum) = item
        expected = manifest_partitions.get(f"{topic}-{partition}")
        if expected is None:
            return [violation(None, "partition", -1, "manifest",
                              "partition is not in the manifest", topic, partition)]
        found = []
        got = {"bytes": _bytes, "batches": batches, "control_batches": control,
               "records": records, "checksum": format_checksum(checksum)}
        for key, value in got.items():
            if expected.get(key) != value:
                found.append(violation(None, "partition", -1, "manifest",
                                       f"{key} is {value}, the manifest says {expected.get(key)}",
                                       topic, partition))
        return found

    return check


def _conversion_items(to_magics: tuple[int, ...]):
    def items(item: tuple[dict[str, Any], dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
        return [(item[0], m) for m in to_magics]

    return items


def _convert(chunk_sizes: tuple[int, ...]):
    def run(item: tuple[dict[str, Any], int]) -> list[dict[str, Any]]:
        return check_conversions(SegmentFiles(**item[0]), item[1], list(chunk_sizes))

    return run


# --- the job -----------------------------------------------------------------------------------

def run_validation(logdir: str, *, spark: Any = None, master: str = "local[*]",
                   chunk_sizes: tuple[int, ...] = DEFAULT_CHUNK_SIZES,
                   to_magics: tuple[int, ...] = DEFAULT_TO_MAGICS, out: str | None = None,
                   manifest: dict[str, Any] | None = None, max_reported: int = 1000,
                   max_tasks: int = 2000) -> ValidationResult:
    """Validate ``logdir`` with Spark; see the module docstring for the stages.

    ``spark`` reuses a session (tests); otherwise one is built for ``master``. ``manifest``
    defaults to the directory's ``manifest.json`` when present (local paths).
    """
    from pyspark.sql import functions as F

    from lazyconv.spark.session import build_session

    started = time.perf_counter()
    if spark is None:
        spark = build_session(master)
    sc = spark.sparkContext
    schemas = _schemas()
    if manifest is None and "://" not in logdir:
        from lazyconv.fixtures.generate import load_manifest

        manifest = load_manifest(logdir)

    segments = list_segments(logdir)
    seg_rdd = sc.parallelize([dataclasses.asdict(s) for s in segments],
                             max(1, min(len(segments), max_tasks)))
    checked = seg_rdd.map(_check).cache()

    partitions_rdd = checked.map(_partition_value).reduceByKey(_add_partition).cache()
    order_violations = (checked.map(_order_value).reduceByKey(lambda a, b: a + b)
                        .flatMap(_check_order))
    violations_rdd = checked.flatMap(lambda item: item[1]["violations"]).union(order_violations)
    if manifest is not None:
        mparts = sc.broadcast(manifest["partitions"])
        violations_rdd = violations_rdd.union(partitions_rdd.flatMap(
            lambda item: _manifest_check(mparts.value)(item)))

    clean = checked.filter(lambda item: not item[1]["violations"])
    n_items = max(1, min(len(segments) * len(to_magics), max_tasks))
    conv_rdd = (clean.flatMap(_conversion_items(tuple(to_magics)))
                .repartition(n_items)
                .flatMap(_convert(tuple(chunk_sizes)))
                .cache())
    violations_rdd = violations_rdd.union(conv_rdd.flatMap(lambda r: r["violations"]))

    seg_df = spark.createDataFrame(
        checked.map(lambda item: _row({**item[1]["summary"],
                                       "checksum": format_checksum(item[1]["summary"]["checksum"])},
                                      schemas["segments"])),
        schemas["segments"]).cache()
    part_df = spark.createDataFrame(
        partitions_rdd.map(lambda kv: (kv[0][0], kv[0][1], kv[1][0], kv[1][1], kv[1][2], kv[1][3],
                                       kv[1][4], format_checksum(kv[1][5]))),
        schemas["partitions"]).cache()
    conv_df = spark.createDataFrame(conv_rdd.map(lambda r: _row(r["stats"], schemas["conversions"])),
                                    schemas["conversions"]).cache()
    viol_df = spark.createDataFrame(violations_rdd.map(lambda v: _row(v, schemas["violations"])),
                                    schemas["violations"]).cache()

    # Aggregates: the only things collected to the driver.
    seg_summary = [r.asDict() for r in seg_df.groupBy("topic").agg(
        F.count("*").alias("segments"), F.sum("bytes").alias("bytes"),
        F.sum("batches").alias("batches"), F.sum("records").alias("records"),
        F.sum("control_batches").alias("control_batches"),
        F.sum("violations").alias("segment_violations"),
        F.sum("check_seconds").alias("check_seconds"),
    ).orderBy("topic").collect()]
    conv_summary = [r.asDict() for r in conv_df.groupBy("topic", "to_magic", "chunk_size").agg(
        F.count("*").alias("segments"), F.sum(F.col("ok").cast("long")).alias("segments_ok"),
        F.sum("records_expected").alias("records_expected"),
        F.sum("records_delivered").alias("records_delivered"),
        F.sum("bytes_in").alias("bytes_in"), F.sum("bytes_written").alias("bytes_written"),
        F.sum("bytes_valid").alias("bytes_valid"),
        F.sum("padding_bytes").alias("padding_bytes"),
        F.sum("discarded_bytes").alias("discarded_bytes"),
        F.sum("chunks").alias("chunks"), F.sum("fetches").alias("fetches"),
        F.sum("zstd_batches").alias("zstd_batches"), F.sum("stalls").alias("stalls"),
        F.sum("conversion_time_ns").alias("conversion_time_ns"),
        F.sum("wall_seconds").alias("wall_seconds"),
    ).orderBy("topic", "to_magic", "chunk_size").collect()]
    partition_rows = [r.asDict() for r in part_df.orderBy("topic", "partition").collect()]
    violation_count = viol_df.count()
    reported = [r.asDict() for r in viol_df.orderBy(
        "topic", "partition", "segment", "file", "position").limit(max_reported).collect()]

    if manifest is not None:
        seen = {f"{r['topic']}-{r['partition']}" for r in partition_rows}
        for name in sorted(set(manifest["partitions"]) - seen):
            m = manifest["partitions"][name]
            reported.append(violation(None, "partition", -1, "manifest",
                                      "partition in the manifest has no segments",
                                      m["topic"], m["partition"]))
            violation_count += 1

    if out is not None:
        seg_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/segments")
        part_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/partitions")
        conv_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/conversions")
        viol_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/violations")

    totals = seg_df.agg(F.sum("bytes"), F.sum("batches"), F.sum("records")).collect()[0]
    conversions_run = sum(r["segments"] for r in conv_summary)
    conversions_ok = sum(r["segments_ok"] or 0 for r in conv_summary)
    for df in (seg_df, part_df, conv_df, viol_df):
        df.unpersist()
    checked.unpersist()
    partitions_rdd.unpersist()
    conv_rdd.unpersist()
    return ValidationResult(
        logdir=logdir, out=out, segments=len(segments), partitions=len(partition_rows),
        bytes=int(totals[0] or 0), batches=int(totals[1] or 0), records=int(totals[2] or 0),
        violation_count=violation_count, violations=reported, segment_summary=seg_summary,
        conversion_summary=conv_summary, partition_rows=partition_rows,
        seconds=time.perf_counter() - started, conversions_ok=conversions_ok,
        conversions_run=conversions_run,
    )
