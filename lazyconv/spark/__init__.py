"""PySpark jobs over Kafka log directories.

:func:`run_validation` (``lazyconv validate``) checks every batch and index of a log directory
and the lazy down-converting send over it, in byte ranges packed into Spark tasks
(:mod:`lazyconv.spark._planning`). All per-byte work is one call per range,
:func:`lazyconv.spark._segment_scan.scan_range` (the seam for a compiled kernel), which derives
the lazy send for every chunk size from one conversion per batch
(:mod:`lazyconv.spark._derived_conversion`); what spans ranges is checked per partition
(:mod:`lazyconv.spark._partition_checks`). :mod:`lazyconv.spark._conversion_check` is the
reference consumer that runs the real lazy send per chunk size (tests hold the two equal).
Around them: :mod:`lazyconv.spark._listing` (the driver's listing: absolute paths, hostile
entries as findings), :mod:`lazyconv.spark._executors` (which lazyconv and kernel each executor
runs, checked before the scan), :mod:`lazyconv.spark._topic_config` (``--topic-config``) and
:mod:`lazyconv.spark._tables` (the Parquet report's columns, rows kept as Arrow columns).
"""

from lazyconv.spark._job import (
    DEFAULT_CHUNK_SIZES,
    DEFAULT_TO_MAGICS,
    ValidationResult,
    run_validation,
)

__all__ = ["DEFAULT_CHUNK_SIZES", "DEFAULT_TO_MAGICS", "ValidationResult", "run_validation"]
