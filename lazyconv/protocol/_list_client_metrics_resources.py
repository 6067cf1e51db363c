"""ListClientMetricsResources (API key 74), version 0, sans-IO.

An admin client lists the client-metrics subscriptions (KIP-714) defined in the cluster.

Declared as in Kafka 4.0.1's ListClientMetricsResourcesRequest.json and
ListClientMetricsResourcesResponse.json; field names in snake_case.
"""

from __future__ import annotations

from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._schema import INT16, INT32, STRING, ArrayOf, Field, Struct

__all__ = ["SPEC"]

REQUEST = Struct(
    "ListClientMetricsResourcesRequest", ()
)

_CLIENT_METRICS_RESOURCE = Struct("ClientMetricsResource", (Field("name", STRING),))

RESPONSE = Struct(
    "ListClientMetricsResourcesResponse",
    (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("client_metrics_resources", ArrayOf(_CLIENT_METRICS_RESOURCE)),
    ),
)

SPEC = ApiSpec(74, "ListClientMetricsResources", 0, 0, 0, REQUEST, RESPONSE)
