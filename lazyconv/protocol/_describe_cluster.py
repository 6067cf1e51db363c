"""DescribeCluster (API key 60), versions 0–2, sans-IO.

An admin client's view of the cluster (KIP-700): cluster id, controller id, brokers with their
endpoints and racks, authorized operations. v1 adds the endpoint type (KIP-919: brokers or
controllers); v2 fenced brokers (KIP-1073).

Declared as in Kafka 4.0.1's DescribeClusterRequest.json and DescribeClusterResponse.json; field
names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import BOOL, INT8, INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "DescribeClusterRequest",
    (
        Field("include_cluster_authorized_operations", BOOL),
        Field("endpoint_type", INT8, "1+", default=1),
        Field("include_fenced_brokers", BOOL, "2+"),
    ),
)

_DESCRIBE_CLUSTER_BROKER = Struct(
    "DescribeClusterBroker",
    (
        Field("broker_id", INT32),
        Field("host", STRING),
        Field("port", INT32),
        Field("rack", STRING, nullable_versions="0+", null_default=True),
        Field("is_fenced", BOOL, "2+"),
    ),
)

RESPONSE = Struct(
    "DescribeClusterResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_versions="0+", null_default=True),
        Field("endpoint_type", INT8, "1+", default=1),
        Field("cluster_id", STRING),
        Field("controller_id", INT32, default=-1),
        Field("brokers", ArrayOf(_DESCRIBE_CLUSTER_BROKER)),
        Field("cluster_authorized_operations", INT32, default=-2147483648),
    ),
)

SPEC = ApiSpec(60, "DescribeCluster", 0, 2, 0, REQUEST, RESPONSE)
