"""DescribeLogDirs (API key 35), versions 1–4, sans-IO.

An admin client asks one broker for its log directories and the replicas (sizes, offset lags)
in each. v2 is the first flexible version; v3 adds a top-level error code; v4 each directory's
total and usable bytes. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's DescribeLogDirsRequest.json and DescribeLogDirsResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_DESCRIBABLE_LOG_DIR_TOPIC = Struct(
    "DescribableLogDirTopic",
    (
        Field("topic", STRING),
        Field("partitions", ArrayOf(INT32)),
    ),
)

REQUEST = Struct(
    "DescribeLogDirsRequest",
    (
        Field("topics", ArrayOf(_DESCRIBABLE_LOG_DIR_TOPIC), nullable_versions="0+"),
    ),
)

_DESCRIBE_LOG_DIRS_PARTITION = Struct(
    "DescribeLogDirsPartition",
    (
        Field("partition_index", INT32),
        Field("partition_size", INT64),
        Field("offset_lag", INT64),
        Field("is_future_key", BOOL),
    ),
)

_DESCRIBE_LOG_DIRS_TOPIC = Struct(
    "DescribeLogDirsTopic",
    (
        Field("name", STRING),
        Field("partitions", ArrayOf(_DESCRIBE_LOG_DIRS_PARTITION)),
    ),
)

_DESCRIBE_LOG_DIRS_RESULT = Struct(
    "DescribeLogDirsResult",
    (
        Field("error_code", INT16),
        Field("log_dir", STRING),
        Field("topics", ArrayOf(_DESCRIBE_LOG_DIRS_TOPIC)),
        Field("total_bytes", INT64, "4+", default=-1, ignorable=True),
        Field("usable_bytes", INT64, "4+", default=-1, ignorable=True),
    ),
)

RESPONSE = Struct(
    "DescribeLogDirsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "3+", ignorable=True),
        Field("results", ArrayOf(_DESCRIBE_LOG_DIRS_RESULT)),
    ),
)

SPEC = ApiSpec(35, "DescribeLogDirs", 1, 4, 2, REQUEST, RESPONSE, first_client_throttled=1)
