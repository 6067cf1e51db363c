"""DescribeConfigs (API key 32), versions 1–4, sans-IO.

An admin client reads the configs of topics, brokers, broker loggers, client-metrics
subscriptions or groups (resource types 2, 4, 8, 16, 32). A broker or broker-logger resource
(its name a broker id) is answered by that broker only. v1 adds synonyms and config sources; v3
config types and documentation; v4 is the first flexible version. Kafka 4.0 dropped v0.

Declared as in Kafka 4.0.1's DescribeConfigsRequest.json and DescribeConfigsResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

_DESCRIBE_CONFIGS_RESOURCE = Struct(
    "DescribeConfigsResource",
    (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configuration_keys", ArrayOf(STRING), nullable_versions="0+"),
    ),
)

REQUEST = Struct(
    "DescribeConfigsRequest",
    (
        Field("resources", ArrayOf(_DESCRIBE_CONFIGS_RESOURCE)),
        Field("include_synonyms", BOOL, "1+"),
        Field("include_documentation", BOOL, "3+"),
    ),
)

_DESCRIBE_CONFIGS_SYNONYM = Struct(
    "DescribeConfigsSynonym",
    (
        Field("name", STRING, "1+"),
        Field("value", STRING, "1+", nullable_versions="0+"),
        Field("source", INT8, "1+"),
    ),
)

_DESCRIBE_CONFIGS_RESOURCE_RESULT = Struct(
    "DescribeConfigsResourceResult",
    (
        Field("name", STRING),
        Field("value", STRING, nullable_versions="0+"),
        Field("read_only", BOOL),
        Field("config_source", INT8, "1+", default=-1, ignorable=True),
        Field("is_sensitive", BOOL),
        Field("synonyms", ArrayOf(_DESCRIBE_CONFIGS_SYNONYM), "1+", ignorable=True),
        Field("config_type", INT8, "3+", ignorable=True),
        Field("documentation", STRING, "3+", nullable_versions="0+", ignorable=True),
    ),
)

_DESCRIBE_CONFIGS_RESULT = Struct(
    "DescribeConfigsResult",
    (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+"),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", ArrayOf(_DESCRIBE_CONFIGS_RESOURCE_RESULT)),
    ),
)

RESPONSE = Struct(
    "DescribeConfigsResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("results", ArrayOf(_DESCRIBE_CONFIGS_RESULT)),
    ),
)

SPEC = ApiSpec(32, "DescribeConfigs", 1, 4, 4, REQUEST, RESPONSE, first_client_throttled=2)
