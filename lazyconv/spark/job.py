"""The Spark job that validates a Kafka log directory and the lazy down-conversion over it.

Stages (only aggregates and the violations found come back to the driver):

1. the driver lists segments (paths and sizes), cuts large ones into byte ranges at offset-index
   entries and packs the ranges into tasks by bytes (:mod:`lazyconv.spark.planning`); the packs
   are keyed and ``partitionBy`` puts one pack in each task, so every core has work;
2. ``map(scan_range)``: one pass over each range does every check of its bytes and index
   entries and derives the lazy send for every target magic and chunk size
   (:mod:`lazyconv.spark.segment_scan`); an exception in a task becomes an ``internal_error``
   violation at its place;
3. per partition: counts and the consumer-view checksum summed with ``reduceByKey`` (and
   compared with the fixture manifest when there is one); the ranges' boundaries gathered with
   ``groupByKey`` for the checks between ranges and segments
   (:mod:`lazyconv.spark.partition_checks`);
4. DataFrames of ranges, partitions, conversions and violations written as Parquet under
   ``out``, each row with the run id, the run's options and its timestamp; the summaries per
   topic are ``groupBy`` s on the cluster.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from lazyconv.fixtures.checksum import MASK64, format_checksum
from lazyconv.fixtures.layout import SegmentFiles, list_segments
from lazyconv.spark.conversion_check import DEFAULT_FETCH_MAX_BYTES
from lazyconv.spark.partition_checks import check_partition, range_boundary
from lazyconv.spark.planning import pack_tasks, plan_ranges, range_target
from lazyconv.spark.segment_scan import ScanOptions, ScanTask, scan_range
from lazyconv.spark.violations import ERROR, violation

__all__ = [
    "DEFAULT_CHUNK_SIZES",
    "DEFAULT_TO_MAGICS",
    "ValidationResult",
    "list_log_directory",
    "run_validation",
]

log = logging.getLogger(__name__)

KIB = 1024
DEFAULT_CHUNK_SIZES = (16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 256 * KIB, 512 * KIB, 1024 * KIB)
DEFAULT_TO_MAGICS = (0, 1)


@dataclass
class ValidationResult:
    """What the job found; ``violations`` holds at most ``max_reported`` of them (errors first).

    ``violation_count`` counts errors, ``warning_count`` warnings; the log is valid when there
    is no error.
    """

    logdir: str
    out: str | None
    run_id: str
    segments: int
    ranges: int
    partitions: int
    bytes: int
    batches: int
    records: int
    violation_count: int
    warning_count: int
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
        """True when no error was found (warnings allowed)."""
        return self.violation_count == 0


def list_log_directory(logdir: str) -> list[SegmentFiles]:
    """The segments of ``logdir``; raises :class:`~lazyconv.errors.ValidationError` (one line)
    for a missing path, a file, or a folder without any segment."""
    import os

    from lazyconv.errors import ValidationError

    if "://" not in logdir:
        if not os.path.exists(logdir):
            raise ValidationError(f"log directory {logdir} does not exist")
        if not os.path.isdir(logdir):
            raise ValidationError(f"{logdir} is a file, not a log directory")
    try:
        segments = list_segments(logdir)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot list log directory {logdir}: {exc}") from None
    if not segments:
        raise ValidationError(f"{logdir} holds no segments (no <topic>-<N>/<20 digits>.log "
                              "files): nothing to validate")
    return segments


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

    s, i, L, d, b = StringType(), IntegerType(), LongType(), DoubleType(), BooleanType()
    run = [("run_id", s), ("run_options", s), ("run_timestamp", s)]

    def st(*fields: tuple[str, Any]) -> StructType:
        return StructType([StructField(n, t, True) for n, t in [*run, *fields]])

    return {
        "violations": st(("topic", s), ("partition", i), ("segment", s), ("file", s),
                         ("position", L), ("offset", L), ("kind", s), ("severity", s),
                         ("message", s)),
        "segments": st(("topic", s), ("partition", i), ("segment", s), ("base_offset", L),
                       ("path", s), ("start", L), ("end", L), ("range_index", i),
                       ("range_count", i), ("bytes", L), ("batches", L),
                       ("control_batches", L), ("records", L), ("first_offset", L),
                       ("last_offset", L), ("checksum", s), ("batches_v0", L),
                       ("batches_v1", L), ("batches_v2", L), ("index_entries", L),
                       ("timeindex_entries", L), ("txnindex_entries", L), ("violations", L),
                       ("warnings", L), ("check_seconds", d)),
        "partitions": st(("topic", s), ("partition", i), ("segments", L), ("bytes", L),
                         ("batches", L), ("control_batches", L), ("records", L),
                         ("checksum", s)),
        "conversions": st(("topic", s), ("partition", i), ("segment", s), ("start", L),
                          ("to_magic", i), ("chunk_size", i), ("bytes_in", L),
                          ("records_expected", L), ("records_delivered", L), ("fetches", L),
                          ("bytes_committed", L), ("bytes_written", L), ("bytes_valid", L),
                          ("padding_bytes", L), ("discarded_bytes", L), ("chunks", L),
                          ("records_converted", L), ("temporary_memory_bytes", L),
                          ("zstd_batches", L), ("stalls", L), ("window_peak_bytes", L),
                          ("ok", b)),
    }


# --- functions shipped to executors (module level so they pickle by reference) ---------------

def _scanner(options: ScanOptions) -> Any:
    def run(item: tuple[int, dict[str, Any]]) -> dict[str, Any]:
        return scan_range(ScanTask(**item[1]), options)

    return run


def _partition_value(result: dict[str, Any]) -> tuple:
    s = result["summary"]
    segments = 1 if s["range_index"] == 0 else 0
    return (s["topic"], s["partition"]), (segments, s["bytes"], s["batches"],
                                          s["control_batches"], s["records"], s["checksum"])


def _add_partition(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4],
            (a[5] + b[5]) & MASK64)


def _boundary_item(result: dict[str, Any]) -> tuple:
    s = result["summary"]
    return (s["topic"], s["partition"]), range_boundary(result)


def _partition_checks(item: tuple[tuple[str, int], Any]) -> list[dict[str, Any]]:
    (topic, partition), ranges = item
    try:
        return check_partition(topic, partition, list(ranges))
    except Exception as exc:  # noqa: BLE001 - a task reports, it never aborts the job
        log.exception("internal error in the checks between ranges of %s-%d", topic, partition)
        return [violation(topic, partition, "", "partition", -1, "internal_error",
                          f"checks between ranges and segments: {type(exc).__name__}: {exc}")]


def _manifest_check(manifest_partitions: dict[str, Any]) -> Any:
    def check(item: tuple[tuple[str, int], tuple]) -> list[dict[str, Any]]:
        (topic, partition), (segments, size, batches, control, records, checksum) = item
        expected = manifest_partitions.get(f"{topic}-{partition}")
        if expected is None:
            return [violation(topic, partition, "", "partition", -1, "manifest",
                              "partition is not in the manifest")]
        found = []
        got = {"bytes": size, "batches": batches, "control_batches": control,
               "records": records, "checksum": format_checksum(checksum), "segments": segments}
        for key, value in got.items():
            if key in expected and expected[key] != value:
                found.append(violation(topic, partition, "", "partition", -1, "manifest",
                                       f"{key} is {value}, the manifest says {expected[key]}"))
        return found

    return check


def _violation_order(v: dict[str, Any]) -> tuple:
    return (v["severity"] != ERROR, v["topic"] or "",
            v["partition"] if v["partition"] is not None else -1, v["segment"] or "",
            v["file"] or "", v["position"] if v["position"] is not None else -1)


def _stamp(run: dict[str, str], schema: Any) -> Any:
    names = [f.name for f in schema.fields]

    def row(record: dict[str, Any]) -> tuple:
        merged = {**run, **record}
        return tuple(merged.get(n) for n in names)

    return row


def _load_manifest(logdir: str) -> dict[str, Any] | None:
    """``manifest.json`` of ``logdir`` (a local folder or an fsspec URL), if there is one."""
    if "://" not in logdir:
        from lazyconv.fixtures.generate import load_manifest

        return load_manifest(logdir)
    import fsspec

    fs, root = fsspec.core.url_to_fs(logdir)
    path = root.rstrip("/") + "/manifest.json"
    if not fs.exists(path):
        return None
    from lazyconv.fixtures.generate import checked_manifest

    with fs.open(path, "rb") as f:
        return checked_manifest(json.loads(f.read()), logdir.rstrip("/") + "/manifest.json")


# --- the job -----------------------------------------------------------------------------------

def run_validation(logdir: str, *, spark: Any = None, master: str = "local[*]",
                   chunk_sizes: tuple[int, ...] = DEFAULT_CHUNK_SIZES,
                   to_magics: tuple[int, ...] = DEFAULT_TO_MAGICS, out: str | None = None,
                   manifest: dict[str, Any] | None = None, max_reported: int = 1000,
                   tasks_per_core: int = 3,
                   fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
                   range_bytes: int | None = None,
                   segments: list[SegmentFiles] | None = None) -> ValidationResult:
    """Validate ``logdir`` with Spark; see the module docstring for the stages.

    ``spark`` reuses a session (tests); otherwise one is built for ``master``. ``manifest``
    defaults to the directory's ``manifest.json`` when present (local paths and URLs). The
    ranges are packed into ``tasks_per_core`` x the cluster's default parallelism tasks;
    ``range_bytes`` (default: an even share, 1–64 MiB) is where large segments are cut.
    ``fetch_max_bytes`` is the emulated consumer's ``max.partition.fetch.bytes``.
    Raises :class:`~lazyconv.errors.ValidationError` when ``logdir`` has no segments.
    """
    from pyspark.sql import functions as F

    from lazyconv.spark.session import build_session

    started = time.perf_counter()
    if segments is None:
        segments = list_log_directory(logdir)
    if spark is None:
        spark = build_session(master)
    sc = spark.sparkContext
    schemas = _schemas()
    if manifest is None:
        manifest = _load_manifest(logdir)
    run = {
        "run_id": uuid.uuid4().hex,
        "run_options": json.dumps({"logdir": logdir, "to_magics": list(to_magics),
                                   "chunk_sizes": list(chunk_sizes),
                                   "fetch_max_bytes": fetch_max_bytes}, sort_keys=True),
        "run_timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
    }

    bins = max(1, tasks_per_core * sc.defaultParallelism)
    total = sum(s.size for s in segments)
    target = range_bytes or range_target(total, bins)
    ranges = plan_ranges(segments, target)
    packed = pack_tasks(ranges, bins)
    n_tasks = max(1, min(bins, len(ranges)))
    log.info("%d segments, %d byte ranges of about %d bytes in %d tasks", len(segments),
             len(ranges), target, n_tasks)
    options = ScanOptions(tuple(to_magics) if chunk_sizes else (), tuple(chunk_sizes),
                          fetch_max_bytes)
    results = (sc.parallelize([(b, t.to_dict()) for b, t in packed], n_tasks)
               .partitionBy(n_tasks, lambda b: b)
               .map(_scanner(options))
               .cache())

    partitions_rdd = results.map(_partition_value).reduceByKey(_add_partition).cache()
    between = results.map(_boundary_item).groupByKey().flatMap(_partition_checks)
    violations_rdd = results.flatMap(lambda r: r["violations"]).union(between)
    if manifest is not None:
        mparts = sc.broadcast(manifest["partitions"])
        violations_rdd = violations_rdd.union(partitions_rdd.flatMap(
            lambda item: _manifest_check(mparts.value)(item)))
        listed = {f"{s.topic}-{s.partition}" for s in segments}
        missing = [violation(m["topic"], m["partition"], "", "partition", -1, "manifest",
                             "partition in the manifest has no segments")
                   for name, m in sorted(manifest["partitions"].items()) if name not in listed]
        if missing:
            violations_rdd = violations_rdd.union(sc.parallelize(missing, 1))

    seg_schema = schemas["segments"]
    seg_df = spark.createDataFrame(
        results.map(lambda r: {**r["summary"],
                               "checksum": format_checksum(r["summary"]["checksum"])})
        .map(_stamp(run, seg_schema)), seg_schema).cache()
    part_schema = schemas["partitions"]
    part_df = spark.createDataFrame(
        partitions_rdd.map(lambda kv: {"topic": kv[0][0], "partition": kv[0][1],
                                       "segments": kv[1][0], "bytes": kv[1][1],
                                       "batches": kv[1][2], "control_batches": kv[1][3],
                                       "records": kv[1][4],
                                       "checksum": format_checksum(kv[1][5])})
        .map(_stamp(run, part_schema)), part_schema).cache()
    conv_schema = schemas["conversions"]
    conv_df = spark.createDataFrame(
        results.flatMap(lambda r: r["conversions"]).map(_stamp(run, conv_schema)),
        conv_schema).cache()
    viol_schema = schemas["violations"]
    viol_df = spark.createDataFrame(violations_rdd.map(_stamp(run, viol_schema)),
                                    viol_schema).cache()

    seg_summary = [r.asDict() for r in seg_df.groupBy("topic").agg(
        F.countDistinct("segment", "partition").alias("segments"),
        F.count("*").alias("ranges"), F.sum("bytes").alias("bytes"),
        F.sum("batches").alias("batches"), F.sum("records").alias("records"),
        F.sum("control_batches").alias("control_batches"),
        F.sum("check_seconds").alias("check_seconds"),
    ).orderBy("topic").collect()]
    # one small job for every violation count: per topic and severity
    counts = viol_df.groupBy("topic", "severity").count().collect()
    by_topic: dict[str, list[int]] = {}
    for c in counts:
        by_topic.setdefault(c["topic"], [0, 0])[0 if c["severity"] == ERROR else 1] += c["count"]
    error_count = sum(e for e, _ in by_topic.values())
    warning_count = sum(w for _, w in by_topic.values())
    for r in seg_summary:
        r["errors"], r["warnings"] = by_topic.get(r["topic"], [0, 0])
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
        F.max("window_peak_bytes").alias("window_peak_bytes"),
    ).orderBy("topic", "to_magic", "chunk_size").collect()]
    partition_rows = [r.asDict() for r in part_df.orderBy("topic", "partition").collect()]
    # findings, not record data: at most max_reported of them come to the driver, errors first
    reported = sorted((r.asDict() for r in viol_df.orderBy(
        (F.col("severity") != ERROR).cast("int"), "topic", "partition", "segment", "file",
        "position").take(max_reported)), key=_violation_order) if counts else []
    log.info("checks done (%.1f s)", time.perf_counter() - started)
    if out is not None:
        seg_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/segments")
        part_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/partitions")
        conv_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/conversions")
        viol_df.coalesce(1).write.mode("overwrite").parquet(f"{out}/violations")
        log.info("Parquet written (%.1f s)", time.perf_counter() - started)
    conversions_run = sum(r["segments"] for r in conv_summary)
    conversions_ok = sum(r["segments_ok"] or 0 for r in conv_summary)
    for df in (seg_df, part_df, conv_df, viol_df):
        df.unpersist()
    results.unpersist()
    partitions_rdd.unpersist()
    return ValidationResult(
        logdir=logdir, out=out, run_id=run["run_id"], segments=len(segments),
        ranges=len(ranges), partitions=len(partition_rows),
        bytes=sum(int(r["bytes"] or 0) for r in seg_summary),
        batches=sum(int(r["batches"] or 0) for r in seg_summary),
        records=sum(int(r["records"] or 0) for r in seg_summary),
        violation_count=error_count, warning_count=warning_count, violations=reported,
        segment_summary=seg_summary, conversion_summary=conv_summary,
        partition_rows=partition_rows, seconds=time.perf_counter() - started,
        conversions_ok=conversions_ok, conversions_run=conversions_run,
    )
