"""PySpark jobs over Kafka log directories.

:func:`run_validation` (``lazyconv validate``) checks every batch and index of a log directory
and the lazy down-converting send over it, in byte ranges packed into Spark tasks
(:mod:`lazyconv.spark.planning`). All per-byte work is one call per range,
:func:`lazyconv.spark.segment_scan.scan_range` (the seam for a compiled kernel), which derives
the lazy send for every chunk size from one conversion per batch
(:mod:`lazyconv.spark.derived_conversion`); what spans ranges is checked per partition
(:mod:`lazyconv.spark.partition_checks`). :mod:`lazyconv.spark.conversion_check` is the
reference consumer that runs the real lazy send per chunk size (tests hold the two equal).
Around them: :mod:`lazyconv.spark.listing` (the driver's listing: absolute paths, hostile
entries as findings), :mod:`lazyconv.spark.executors` (which lazyconv and kernel each executor
runs, checked before the scan), :mod:`lazyconv.spark.topic_config` (``--topic-config``) and
:mod:`lazyconv.spark.tables` (the Parquet report's columns, rows kept as Arrow columns).
"""

from lazyconv.spark.job import (
    DEFAULT_CHUNK_SIZES,
    DEFAULT_TO_MAGICS,
    ValidationResult,
    run_validation,
)

__all__ = ["DEFAULT_CHUNK_SIZES", "DEFAULT_TO_MAGICS", "ValidationResult", "run_validation"]
