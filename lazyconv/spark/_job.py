"""The Spark job that validates a Kafka log directory and the lazy down-conversion over it.

Stages (only aggregates and the violations found come back to the driver):

1. the driver lists segments (paths and sizes), cuts large ones into byte ranges at offset-index
   entries and packs the ranges into tasks by bytes (:mod:`lazyconv.spark._planning`); the packs
   are parallelized one per slice, so each task scans one pack and every core has work (no
   shuffle is needed to place them, as a ``partitionBy`` on the pack number would be);
2. ``map(scan_range)``: one pass over each range does every check of its bytes and index
   entries and derives the lazy send for every target magic and chunk size
   (:mod:`lazyconv.spark._segment_scan`); an exception in a task becomes an ``internal_error``
   violation at its place;
3. per partition (``groupByKey`` on the partition, in the same Spark job as the scan): counts
   and the consumer-view checksum summed (and compared with the fixture manifest when there is
   one), the checks between ranges and segments (:mod:`lazyconv.spark._partition_checks`); only
   the summaries, the counts and the first violations come back to the driver, which adds up
   the per-topic tables (Spark jobs cost about a second each on a small machine, so the job
   runs as few as it can);
4. Parquet tables of ranges, partitions, conversions and violations written under ``out``,
   each row with the run id, the run's options and its timestamp (the violations from the
   executors' cached results, every one of them).
"""

from __future__ import annotations

import datetime
import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lazyconv.logdir._manifest import format_checksum, load_manifest
from lazyconv.records._digest import MASK64
from lazyconv.spark._conversion_check import DEFAULT_FETCH_MAX_BYTES
from lazyconv.spark._executors import (
    PURE_PYTHON_MARKER,
    ExecutorRuntimeError,
    check_runtimes,
    describe_runtime,
    probe_executors,
    require_kernel,
    task_failure,
)
from lazyconv.spark._listing import LogListing, list_log_directory
from lazyconv.spark._partition_checks import check_partition, range_boundary
from lazyconv.spark._planning import pack_tasks, plan_ranges, range_target
from lazyconv.spark._scan_state import ScanOptions, ScanTask
from lazyconv.spark._segment_scan import scan_range
from lazyconv.spark._tables import (
    RUN_COLUMNS,
    from_ipc,
    row_keys,
    spark_schema,
    to_ipc,
    write_local,
)
from lazyconv.spark._topic_config import TopicConfig
from lazyconv.spark._violations import ERROR, violation

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
    """What the job found; ``violations`` holds at most ``max_reported`` of them (errors first).

    ``violation_count`` counts errors, ``warning_count`` warnings; the log is valid when there
    is no error. ``bytes`` counts the log bytes checked, ``size`` the segments' sizes as
    listed (they differ where a file could not be read or delimited to its end);
    ``executors`` says which lazyconv each executor ran and how many ranges it scanned.
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
    size: int = 0
    executors: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no error was found (warnings allowed)."""
        return self.violation_count == 0


# --- functions shipped to executors (module level so they pickle by reference) ---------------

def _pack_scanner(options: ScanOptions, allow_pure_python: bool) -> Any:
    def run(pack: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        require_kernel(allow_pure_python)  # an executor that joined after the probe
        runtime = describe_runtime()
        for task in pack:
            result = scan_range(ScanTask(**task), options)
            result["summary"]["executor"] = runtime["executor"]
            result["summary"]["implementation"] = runtime["implementation"]
            yield result

    return run


def _executors_seen(probed: list[dict[str, Any]],
                    counts: list[dict[str, list[Any]]]) -> list[dict[str, Any]]:
    """The probed executors, each with the number of ranges it scanned, and any executor that
    scanned without having been probed (it joined later; its implementation as it reported)."""
    found = {e["executor"]: {**e, "ranges": 0} for e in probed}
    for partition_counts in counts:
        for executor, (implementation, ranges) in partition_counts.items():
            entry = found.setdefault(executor, {"executor": executor,
                                                "implementation": implementation, "ranges": 0})
            entry["ranges"] += ranges
    return [found[k] for k in sorted(found)]


def _executor_failure(exc: BaseException) -> ExecutorRuntimeError | None:
    """The one line of a scan task that refused to run in pure Python, if that failed the job."""
    text = str(exc)
    at = text.find(PURE_PYTHON_MARKER)
    if at < 0:
        return None
    line = text[at + len(PURE_PYTHON_MARKER):].splitlines()[0].lstrip(": ")
    return ExecutorRuntimeError(f"{line} (pass --allow-pure-python to accept that)")


def _violation_order(v: dict[str, Any]) -> tuple[Any, ...]:
    return (v["severity"] != ERROR, v["topic"] or "",
            v["partition"] if v["partition"] is not None else -1, v["segment"] or "",
            v["file"] or "", v["position"] if v["position"] is not None else -1)


def _first(violations: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` violations in report order (errors first, then by place)."""
    return sorted(violations, key=_violation_order)[:limit]


def _range_part(limit: int) -> Any:
    """What the per-partition reduce needs of one range's result: its summary, conversion
    rows (value tuples in the table's column order: far smaller than dicts) and boundary, how many errors and warnings it found, and its first ``limit``
    violations (all of them stay on the executors, for the Parquet table)."""
    conversion_keys = row_keys("conversions")

    def part(result: dict[str, Any]) -> tuple[tuple[str, int], dict[str, Any]]:
        s = result["summary"]
        errors = sum(1 for v in result["violations"] if v["severity"] == ERROR)
        return (s["topic"], s["partition"]), {
            "summary": s, "conversions": [tuple(c[k] for k in conversion_keys)
                                          for c in result["conversions"]],
            "boundary": range_boundary(result), "errors": errors,
            "warnings": len(result["violations"]) - errors,
            "first": _first(result["violations"], limit)}

    return part


def _partition_reducer(manifest_partitions: Any, limit: int,
                       topic_configs: dict[str, TopicConfig]) -> Any:
    """The per-partition reduce: sums and checksum, the checks between ranges and segments,
    the manifest comparison; returns the partition's row, its ranges' and conversions' rows
    (value lists in column order) with their sums for the console summary, and everything else
    the driver reports (:func:`_combine` gathers them per task)."""
    segment_keys = row_keys("segments")

    def reduce(item: tuple[tuple[str, int], Any]) -> dict[str, Any]:
        (topic, partition), parts = item
        parts = sorted(parts, key=lambda p: (p["summary"]["base_offset"], p["summary"]["start"]))
        sums = [0, 0, 0, 0, 0, 0]
        for p in parts:
            s = p["summary"]
            sums[0] += 1 if s["range_index"] == 0 else 0
            sums[1] += s["bytes"]
            sums[2] += s["batches"]
            sums[3] += s["control_batches"]
            sums[4] += s["records"]
            sums[5] = (sums[5] + s["checksum"]) & MASK64
        config = topic_configs.get(topic)
        found = _partition_checks(topic, partition, [p["boundary"] for p in parts],
                                  config is not None and config.contiguous_offsets)
        if manifest_partitions is not None:
            found += _manifest_check(manifest_partitions.value)(((topic, partition), tuple(sums)))
        folder = parts[0]["summary"]["path"].rsplit("/", 1)[0]
        for v in found:
            if v["path"] is None:
                v["path"] = folder
        errors = sum(p["errors"] for p in parts) + sum(1 for v in found if v["severity"] == ERROR)
        warnings = sum(p["warnings"] for p in parts) + sum(1 for v in found if v["severity"] != ERROR)
        firsts = [p["summary"]["first_offset"] for p in parts
                  if p["summary"]["first_offset"] is not None]
        lasts = [p["summary"]["last_offset"] for p in parts
                 if p["summary"]["last_offset"] is not None]
        return {
            "partition": {"topic": topic, "partition": partition, "path": folder,
                          "segments": sums[0], "ranges": len(parts), "bytes": sums[1],
                          "batches": sums[2], "control_batches": sums[3], "records": sums[4],
                          "first_offset": firsts[0] if firsts else None,
                          "last_offset": lasts[-1] if lasts else None,
                          "checksum": format_checksum(sums[5]), "errors": errors,
                          "warnings": warnings},
            "topic_sums": _range_sums([p["summary"] for p in parts]),
            "conversion_sums": _conversion_sums(topic, [c for p in parts for c in p["conversions"]]),
            "executors": _executor_counts([p["summary"] for p in parts]),
            "range_rows": [[p["summary"][k] if k != "checksum" else format_checksum(p["summary"][k])
                            for k in segment_keys] for p in parts],
            "conversion_rows": [c for p in parts for c in p["conversions"]],
            "errors": errors, "warnings": warnings, "found": found,
            "first": _first([v for p in parts for v in p["first"]] + found, limit),
        }

    return reduce


def _combine(limit: int) -> Any:
    """Gather the partitions one reduce task produced into one result for the driver: their
    rows, the ranges' and conversions' rows as Arrow IPC bytes (:mod:`lazyconv.spark._tables`:
    one schema per task, not per partition), the console summary's sums per topic, and the
    first ``limit`` violations. What the driver collects then grows with the partitions by
    their rows only."""
    def combine(results: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        task: dict[str, Any] = {"partitions": [], "counts": {}, "topic_sums": {},
                                "conversion_sums": [], "executors": [], "found": [],
                                "first": []}
        range_rows: list[list[Any]] = []
        conversion_rows: list[tuple[Any, ...]] = []
        executors: dict[str, list[Any]] = {}
        task["executors"] = [executors]
        for r in results:
            topic = r["partition"]["topic"]
            task["partitions"].append(r["partition"])
            counts = task["counts"].setdefault(topic, [0, 0])
            counts[0] += r["errors"]
            counts[1] += r["warnings"]
            sums = task["topic_sums"].setdefault(topic, dict.fromkeys(r["topic_sums"], 0))
            for key, value in r["topic_sums"].items():
                sums[key] += value
            task["conversion_sums"] = _conversion_summary(task["conversion_sums"]
                                                          + r["conversion_sums"])
            for executor, (implementation, ranges) in r["executors"].items():
                executors.setdefault(executor, [implementation, 0])[1] += ranges
            task["found"] += r["found"]
            task["first"] = _first(task["first"] + r["first"], limit)
            range_rows += r["range_rows"]
            conversion_rows += r["conversion_rows"]
        task["ranges"] = to_ipc("segments", range_rows)
        task["conversions"] = to_ipc("conversions", conversion_rows)
        yield task

    return combine


def _partition_checks(topic: str, partition: int, ranges: list[dict[str, Any]],
                      contiguous: bool) -> list[dict[str, Any]]:
    try:
        return check_partition(topic, partition, ranges, contiguous=contiguous)
    except Exception as exc:  # noqa: BLE001 - a task reports, it never aborts the job
        log.exception("internal error in the checks between ranges of %s-%d", topic, partition)
        return [violation(topic, partition, "", "partition", -1, "internal_error",
                          f"checks between ranges and segments: {type(exc).__name__}: {exc}")]


def _manifest_check(manifest_partitions: dict[str, Any]) -> Any:
    def check(item: tuple[tuple[str, int], tuple[Any, ...]]) -> list[dict[str, Any]]:
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


def _stamp(run: dict[str, Any], table: str) -> Any:
    """A row dict of ``table`` as a tuple of its columns, the run's first (Spark's writer)."""
    keys = [name for name, _ in RUN_COLUMNS] + row_keys(table)

    def row(record: dict[str, Any]) -> tuple[Any, ...]:
        merged = {**run, **record}
        return tuple(merged.get(k) for k in keys)

    return row


# --- the driver's summaries --------------------------------------------------------------------

_CONVERSION_SUMS = ("records_expected", "records_delivered", "bytes_in", "bytes_written",
                    "bytes_valid", "padding_bytes", "discarded_bytes", "chunks", "fetches",
                    "zstd_batches", "stalls")


_RANGE_SUMS = ("bytes", "batches", "records", "control_batches", "check_seconds")


def _range_sums(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """A partition's ranges added up for its topic's row of the console summary."""
    sums: dict[str, Any] = {"ranges": len(summaries),
                            "segments": sum(1 for r in summaries if r["range_index"] == 0)}
    for key in _RANGE_SUMS:
        sums[key] = sum(r[key] for r in summaries)
    return sums


def _topic_summary(tasks: list[dict[str, Any]],
                   counts: dict[str, list[int]]) -> list[dict[str, Any]]:
    """One row per topic: segments, ranges, bytes, batches, records, control batches, check
    seconds, errors and warnings (from each reduce task's sums per topic)."""
    rows: dict[str, dict[str, Any]] = {}
    for task in tasks:
        for topic, sums in task["topic_sums"].items():
            row = rows.setdefault(topic, {"topic": topic, "segments": 0, "ranges": 0,
                                          **{k: 0 for k in _RANGE_SUMS}})
            for key, value in sums.items():
                row[key] += value
    for topic, row in rows.items():
        row["errors"], row["warnings"] = counts.get(topic, [0, 0])
    return [rows[t] for t in sorted(rows)]


def _conversion_sums(topic: str, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """A partition's conversion rows (tuples in column order) added up per target magic and
    chunk size: ranges run and ok, the sums, the largest window."""
    keys = row_keys("conversions")
    at = {k: keys.index(k) for k in ("to_magic", "chunk_size", "ok", "window_peak_bytes",
                                     *_CONVERSION_SUMS)}
    sums: dict[tuple[int, int], dict[str, Any]] = {}
    for c in rows:
        key = (c[at["to_magic"]], c[at["chunk_size"]])
        row = sums.get(key)
        if row is None:
            row = sums[key] = {"topic": topic, "to_magic": key[0], "chunk_size": key[1],
                               "segments": 0, "segments_ok": 0, "window_peak_bytes": 0,
                               **{k: 0 for k in _CONVERSION_SUMS}}
        row["segments"] += 1
        row["segments_ok"] += 1 if c[at["ok"]] else 0
        row["window_peak_bytes"] = max(row["window_peak_bytes"], c[at["window_peak_bytes"]])
        for k in _CONVERSION_SUMS:
            row[k] += c[at[k]]
    return [sums[k] for k in sorted(sums)]


def _conversion_summary(partials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per topic, target magic and chunk size, from the partitions' sums."""
    rows: dict[tuple[str, int, int], dict[str, Any]] = {}
    for part in partials:
        key = (part["topic"], part["to_magic"], part["chunk_size"])
        row = rows.get(key)
        if row is None:
            rows[key] = dict(part)
            continue
        for k in ("segments", "segments_ok", *_CONVERSION_SUMS):
            row[k] += part[k]
        row["window_peak_bytes"] = max(row["window_peak_bytes"], part["window_peak_bytes"])
    return [rows[k] for k in sorted(rows)]


def _executor_counts(summaries: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """``{executor: [implementation, ranges scanned]}`` of a partition's ranges."""
    counts: dict[str, list[Any]] = {}
    for r in summaries:
        counts.setdefault(r["executor"], [r["implementation"], 0])[1] += 1
    return counts


def _write_tables(spark: Any, out: str, run: dict[str, Any], tasks: list[dict[str, Any]],
                  partition_rows: list[dict[str, Any]], violations: Any,
                  violation_count: int) -> None:
    """The four Parquet tables under ``out``, every row stamped with the run's columns.

    The ranges' and conversions' rows are the reduce tasks' Arrow IPC bytes, the partitions'
    rows the driver's; the violations are the executors' (``violations``: an RDD,
    ``violation_count`` of them). A local ``out`` gets the driver's rows (and no violations)
    written by pyarrow, without a Spark job for each; a URL, or violations to write, go through
    Spark's writer. Either way each table is a folder of Parquet files that Spark, pyarrow and
    pandas read alike (:mod:`lazyconv.spark._tables`, docs/guide/validate-report.md)."""
    # a Parquet timestamp that says it is UTC (Spark's default, INT96, reads back without one)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")

    def parts(name: str) -> Iterator[Any]:
        if name == "partitions":
            keys = row_keys(name)
            yield from_ipc(to_ipc(name, ([r[k] for k in keys] for r in partition_rows)))
        elif name in ("segments", "conversions"):
            key = "ranges" if name == "segments" else "conversions"
            for task in tasks:
                yield from_ipc(task[key])

    names = ["segments", "partitions", "conversions"] + ([] if violation_count else ["violations"])
    for name in names:
        if "://" not in out:
            write_local(f"{out}/{name}", name, parts(name), run)
            continue
        rows = [(run["run_id"], run["run_options"], run["run_timestamp"], *values)
                for part in parts(name) for values in zip(*part.to_pydict().values(), strict=True)]
        frame = spark.createDataFrame(rows, spark_schema(name))
        frame.coalesce(1).write.mode("overwrite").parquet(f"{out}/{name}")
    if violation_count:
        frame = spark.createDataFrame(violations.map(_stamp(run, "violations")),
                                      spark_schema("violations"))
        frame.coalesce(1).write.mode("overwrite").parquet(f"{out}/violations")


# --- the job -----------------------------------------------------------------------------------

def run_validation(logdir: str, *, spark: Any = None, master: str = "local[*]",
                   chunk_sizes: tuple[int, ...] = DEFAULT_CHUNK_SIZES,
                   to_magics: tuple[int, ...] = DEFAULT_TO_MAGICS, out: str | None = None,
                   manifest: dict[str, Any] | None = None, max_reported: int = 1000,
                   tasks_per_core: int = 3,
                   fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
                   range_bytes: int | None = None,
                   listing: LogListing | None = None,
                   allow_pure_python: bool = False,
                   topic_configs: dict[str, TopicConfig] | None = None) -> ValidationResult:
    """Validate ``logdir`` with Spark; see the module docstring for the stages.

    ``spark`` reuses a session (tests); otherwise one is built for ``master``. ``manifest``
    defaults to the directory's ``manifest.json`` when present (local paths and URLs). The
    ranges are packed into ``tasks_per_core`` x the cluster's default parallelism tasks;
    ``range_bytes`` (default: an even share, 1–64 MiB) is where large segments are cut.
    ``fetch_max_bytes`` is the emulated consumer's ``max.partition.fetch.bytes``.
    ``listing`` is :func:`~lazyconv.spark._listing.list_log_directory`'s (made when omitted).
    Every executor is asked which lazyconv it runs before the scan
    (:mod:`lazyconv.spark._executors`); one that would run pure Python while the driver has the
    compiled kernel stops the run unless ``allow_pure_python``. ``topic_configs`` turns on the
    checks that need a topic's configuration (:mod:`lazyconv.spark._topic_config`).
    Raises :class:`~lazyconv.errors.ValidationError` when ``logdir`` has no segments and
    :class:`~lazyconv.spark._executors.ExecutorRuntimeError` for an executor refused.
    """
    from lazyconv.spark._session import build_session

    started = time.perf_counter()
    if listing is None:
        listing = list_log_directory(logdir)
    logdir = listing.logdir
    segments = listing.segments
    if spark is None:
        spark = build_session(master)
    sc = spark.sparkContext
    driver = describe_runtime()
    try:
        executors = probe_executors(sc)
    except Exception as exc:
        # an executor's Python that cannot import lazyconv (a missing dependency, too old) or
        # cannot be started: say which and why, not Py4J's "An error occurred while calling"
        failure = task_failure(exc)
        if failure is None:
            raise
        raise ExecutorRuntimeError(
            f"{failure} (lazyconv and its dependencies must import in the executors' "
            "Python: --executor-python or PYSPARK_PYTHON)") from None
    check_runtimes(executors, allow_pure_python=allow_pure_python)
    allow_tasks = allow_pure_python or driver["implementation"] != "native"
    log.info("executors: %s", ", ".join(f"{e['executor']} {e['implementation']}"
                                        for e in executors))
    if manifest is None:
        manifest = load_manifest(logdir)
    run_timestamp = datetime.datetime.now(datetime.timezone.utc)
    options_json = {"logdir": logdir, "to_magics": list(to_magics),
                    "chunk_sizes": list(chunk_sizes), "fetch_max_bytes": fetch_max_bytes,
                    "lazyconv_version": driver["lazyconv_version"],
                    "implementation": driver["implementation"],
                    "allow_pure_python": allow_pure_python,
                    "topic_configs": {t: c.as_dict() for t, c in sorted((topic_configs or {}).items())}}
    run_id = uuid.uuid4().hex

    bins = max(1, tasks_per_core * sc.defaultParallelism)
    total = sum(s.size for s in segments)
    target = range_bytes or range_target(total, bins)
    ranges = plan_ranges(segments, target)
    packed = pack_tasks(ranges, bins)
    n_tasks = max(1, min(bins, len(ranges)))
    log.info("%d segments, %d byte ranges of about %d bytes in %d tasks", len(segments),
             len(ranges), target, n_tasks)
    options = ScanOptions(tuple(to_magics) if chunk_sizes else (), tuple(chunk_sizes),
                          fetch_max_bytes, dict(topic_configs or {}))
    packs: list[list[dict[str, Any]]] = [[] for _ in range(n_tasks)]
    for b, t in packed:
        packs[b].append(t.to_dict())
    # one pack per slice: parallelize cuts a list of n items into n slices of one item each,
    # so each task scans one pack without a shuffle to place them
    results = sc.parallelize(packs, n_tasks).flatMap(_pack_scanner(options, allow_tasks))
    if out is not None:
        results = results.cache()  # the violations table is written from it afterwards
    mparts = sc.broadcast(manifest["partitions"]) if manifest is not None else None
    # One Spark job: the scan, then the per-partition reduce (a groupByKey on the partition,
    # one reduce task per core: the reduce is small and every task costs a Python worker
    # round); only what the driver reports comes back.
    try:
        tasks = (results.map(_range_part(max_reported)).groupByKey(sc.defaultParallelism)
                 .map(_partition_reducer(mparts, max_reported, topic_configs or {}))
                 .mapPartitions(_combine(max_reported)).collect())
    except Exception as exc:
        refused = _executor_failure(exc)
        if refused is not None:
            raise refused from None
        raise
    log.info("checks done (%.1f s)", time.perf_counter() - started)
    missing: list[dict[str, Any]] = []  # manifest partitions without segments
    if manifest is not None:
        listed = {f"{s.topic}-{s.partition}" for s in segments}
        missing = [violation(m["topic"], m["partition"], "", "partition", -1, "manifest",
                             "partition in the manifest has no segments",
                             path=f"{logdir.rstrip('/')}/{m['topic']}-{m['partition']}")
                   for name, m in sorted(manifest["partitions"].items()) if name not in listed]
    missing += listing.problems  # partition folders that could not be listed
    counts: dict[str, list[int]] = {}  # topic -> [errors, warnings]
    for task in tasks:
        for topic, (errors, warnings) in task["counts"].items():
            topic_counts = counts.setdefault(topic, [0, 0])
            topic_counts[0] += errors
            topic_counts[1] += warnings
    for v in missing:
        counts.setdefault(v["topic"], [0, 0])[0 if v["severity"] == ERROR else 1] += 1
    error_count = sum(e for e, _ in counts.values())
    warning_count = sum(w for _, w in counts.values())
    partition_rows = sorted((p for task in tasks for p in task["partitions"]),
                            key=lambda r: (r["topic"], r["partition"]))
    seg_summary = _topic_summary(tasks, counts)
    conv_summary = _conversion_summary([c for task in tasks for c in task["conversion_sums"]])
    reported = _first([v for task in tasks for v in task["first"]] + missing, max_reported)
    # found by the reduce or the driver: written with the ranges' own violations
    driver_found = [v for task in tasks for v in task["found"]] + missing
    executors = _executors_seen(executors, [e for task in tasks for e in task["executors"]])
    run = {"run_id": run_id,
           "run_options": json.dumps({**options_json, "executors": executors}, sort_keys=True),
           "run_timestamp": run_timestamp}
    if out is not None:
        _write_tables(spark, out, run, tasks, partition_rows,
                      results.flatMap(lambda r: r["violations"]).union(sc.parallelize(driver_found, 1)),
                      error_count + warning_count)
        results.unpersist()
        log.info("Parquet written (%.1f s)", time.perf_counter() - started)
    conversions_run = sum(r["segments"] for r in conv_summary)
    conversions_ok = sum(r["segments_ok"] for r in conv_summary)
    return ValidationResult(
        logdir=logdir, out=out, run_id=run_id, segments=len(segments),
        ranges=len(ranges), partitions=len(partition_rows),
        bytes=sum(int(r["bytes"] or 0) for r in seg_summary),
        batches=sum(int(r["batches"] or 0) for r in seg_summary),
        records=sum(int(r["records"] or 0) for r in seg_summary),
        violation_count=error_count, warning_count=warning_count, violations=reported,
        segment_summary=seg_summary, conversion_summary=conv_summary,
        partition_rows=partition_rows, seconds=time.perf_counter() - started,
        conversions_ok=conversions_ok, conversions_run=conversions_run,
        size=sum(s.size for s in segments), executors=executors,
    )
