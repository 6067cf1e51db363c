"""serve's ApiVersions table is the protocol registry's (one table), with only Fetch capped."""

from __future__ import annotations

from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol._registry import ALL_APIS, api_versions_table
from lazyconv.serve import Broker, Listener, LogDirectory


def test_the_broker_serves_the_registry_table(tmp_path) -> None:
    broker = Broker(LogDirectory(tmp_path), [Listener(0, "127.0.0.1", 9092)])
    assert broker.apis.version_table() == api_versions_table()
    assert {e["api_key"] for e in broker.apis.version_table()} == {spec.key for spec in ALL_APIS}
    capped = Broker(LogDirectory(tmp_path), [Listener(0, "127.0.0.1", 9092)], max_fetch_version=2)
    assert capped.apis.version_table() == api_versions_table({fetch.SPEC.key: 2})
    broker.close()
    capped.close()
