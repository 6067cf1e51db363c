"""Fixtures of the tests that take a real broker's log as the oracle (tests/kafka_logs.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from kafka_broker import KafkaBroker
from kafka_logs import CLEANER_PROPS, copy_log_dir, write_oracle_topics


class OracleLog(NamedTuple):
    broker: KafkaBroker  # stopped after writing; the serve tests start it again on its data
    copy: Path  # the partition folders copied after the clean shutdown
    facts: dict[str, Any]


def _oracle(dist: Path, root: Path) -> OracleLog:
    broker = KafkaBroker(dist, root / "broker", extra_props=CLEANER_PROPS)
    broker.start()
    try:
        facts = write_oracle_topics(broker)
    finally:
        broker.stop()
    return OracleLog(broker, copy_log_dir(broker, root / "copy"), facts)


@pytest.fixture(scope="session")
def oracle_log_4(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OracleLog]:
    """The oracle topics written by a Kafka 4.x broker, copied after its clean shutdown."""
    oracle = _oracle(kafka_dist, tmp_path_factory.mktemp("oracle-4"))
    yield oracle
    oracle.broker.stop()


@pytest.fixture(scope="session")
def oracle_log_3(kafka_dist_3: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OracleLog]:
    """The oracle topics written by a Kafka 3.x broker (the one that still down-converts)."""
    oracle = _oracle(kafka_dist_3, tmp_path_factory.mktemp("oracle-3"))
    yield oracle
    oracle.broker.stop()
