"""PySpark jobs over Kafka log directories.

:func:`run_validation` (``lazyconv validate``) checks every batch and index of a log directory
and runs the lazy down-converting send over every segment, distributed over Spark tasks; the
per-segment work is plain Python in :mod:`lazyconv.spark.segment_check` and
:mod:`lazyconv.spark.conversion_check`.
"""

from lazyconv.spark.job import (
    DEFAULT_CHUNK_SIZES,
    DEFAULT_TO_MAGICS,
    ValidationResult,
    run_validation,
)

__all__ = ["DEFAULT_CHUNK_SIZES", "DEFAULT_TO_MAGICS", "ValidationResult", "run_validation"]
