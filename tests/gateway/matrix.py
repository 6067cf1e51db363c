"""The gateway's client matrix (docs/guide/gateway.md), built from what the tests run: every
configuration of tests/gateway/clients.py, the API versions it sends, and which of the real-Kafka
tests it takes part in. ``python -m tests.gateway.matrix`` prints it; test_matrix.py checks the
docs hold exactly this table, so the page cannot claim more than the tests check."""

from __future__ import annotations

from tests.gateway.clients import DRIVERS, Driver

# The test that gives each column (all in tests/gateway/, marker kafka, Kafka 4.0.1):
CONSUME = "test_gateway_kafka.py::test_old_client_consumes_through_the_gateway"
PRODUCE = "test_gateway_kafka.py::test_old_client_produces_through_the_gateway"
GROUP = "test_gateway_groups.py::test_old_and_modern_members_share_a_group_commit_and_resume"
FAILOVER = "test_gateway_cluster.py::test_an_old_group_consumer_survives_a_leader_stop"

# kafka-python 3.0 pinned to an old api_version (tests/interop's driver): what it sends
_KAFKA_PYTHON_3 = {(0, 8, 2): (0, 0, None), (0, 9): (1, 1, 0), (0, 10): (2, 2, 0),
                   (0, 10, 1): (3, 2, 1)}
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def sends(driver: Driver) -> tuple[object, object, object]:
    """(Fetch, Produce, JoinGroup) versions the configuration sends ("negotiated" or "–")."""
    if driver.old is not None:
        got = driver.old.sends
        return tuple(("negotiated" if got[api] is None else got[api]) if api in got else "–"
                     for api in ("Fetch", "Produce", "JoinGroup"))  # type: ignore[return-value]
    assert driver.interop is not None
    fetch, produce, join = _KAFKA_PYTHON_3[tuple(driver.interop.settings["api_version"])]
    return fetch, produce, "–" if join is None else join


def rows() -> list[list[str]]:
    from tests.gateway.test_gateway_cluster import FAILOVER_DRIVERS

    out = []
    for d in DRIVERS:
        fetch, produce, join = sends(d)
        readable = [c for c in _CODECS if c not in d.unreadable]
        notes = "; ".join(f"{c}: {why}" for c, why in d.unreadable.items())
        group = "✓" if d.groups else "n/a: " + (
            "kcat's balanced consumer is not driven here" if d.old and d.old.family == "kcat"
            else "no group APIs at this protocol level")
        out.append([d.id, f"{fetch} / {produce} / {join}", str(d.magic),
                    "✓ " + ", ".join(readable), group, "✓",
                    "✓" if d.id in FAILOVER_DRIVERS else "–", notes or "–"])
    return out


def render() -> str:
    head = ["client", "Fetch / Produce / JoinGroup sent", "reads magic",
            "consume (codecs)", "group + commit + resume", "produce", "leader stopped", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows()]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render())
