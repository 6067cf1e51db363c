"""The producer's partition decision (Kafka's ``KafkaProducer.partition`` + the 8.1 protocol).

Order per record: explicit partition; else a configured (custom) partitioner, whose append runs
in "abort on new batch" mode followed by ``on_new_batch`` and a second ``partition()`` call; else
the key's murmur2 partition (unless ``partitioner.ignore.keys``); else the built-in partitioner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lazyconv._buffers import byte_size
from lazyconv.errors import ConfigurationError
from lazyconv.partitioner._accumulator import (
    UNKNOWN_PARTITION,
    AppendResult,
    ProducerConfig,
    RecordAccumulator,
)
from lazyconv.partitioner._cluster import ClusterView, RandomSource, check_cluster
from lazyconv.partitioner._legacy import Partitioner
from lazyconv.partitioner._murmur2 import partition_for_key
from lazyconv.partitioner._sizes import headers_size

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12: any buffer object

__all__ = ["PartitioningProducer"]


class PartitioningProducer:
    """Decides each record's partition and appends it to a :class:`RecordAccumulator`.

    ``partitioner`` is a custom :class:`~lazyconv.partitioner._legacy.Partitioner`
    (``partitioner.class``); ``None`` selects Kafka's built-in logic.
    """

    def __init__(
        self,
        cluster: ClusterView,
        config: ProducerConfig | None = None,
        partitioner: Partitioner | None = None,
        random: RandomSource | None = None,
    ) -> None:
        if config is not None and not isinstance(config, ProducerConfig):
            raise ConfigurationError(f"config must be a ProducerConfig or None, got {type(config).__name__}")
        check_cluster(cluster)  # kept for every record: refused here rather than at the first
        self.cluster = cluster
        self.config = config if config is not None else ProducerConfig()
        self.partitioner = partitioner
        self.accumulator = RecordAccumulator(
            cluster, self.config, random, custom_partitioner=partitioner is not None
        )

    def _custom_partition(self, topic: str, key: bytes | None, value: bytes | None) -> int:
        assert self.partitioner is not None
        chosen = self.partitioner.partition(topic, key, value, self.cluster)
        if chosen < 0:
            raise ConfigurationError(
                f"partitioner {type(self.partitioner).__name__} returned partition {chosen} "
                f"for topic {topic!r}; a custom partitioner must return a partition >= 0"
            )
        return chosen

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp: int = 0,
        now: float = 0.0,
        token: Any = None,
    ) -> AppendResult:
        """Place and append one record; the result's ``partition`` is where it went.

        A ``blocked`` result means ``buffer.memory`` is exhausted: call again later.
        """
        if not isinstance(topic, str):
            raise ConfigurationError(f"topic must be a str, got {topic!r:.40}")
        key_size = _size("a record's key", key)
        value_size = _size("a record's value", value)
        try:
            headers_bytes = headers_size(headers) if headers else 1
        except ConfigurationError:  # a header value that is not bytes-like: records' words
            raise
        except (TypeError, ValueError, AttributeError):  # not pairs of a str and bytes or None
            raise ConfigurationError(f"headers must be (str, bytes-like or None) pairs, got {headers!r:.60}") from None
        acc = self.accumulator
        if partition is not None and not isinstance(partition, int):
            raise ConfigurationError(f"partition must be an int or None, got {partition!r:.40}")
        if partition is not None:
            all_partitions = self.cluster.partitions_for_topic(topic)
            if partition < 0 or partition not in all_partitions:
                raise ConfigurationError(
                    f"partition {partition} is not a partition of topic {topic!r} "
                    f"({len(all_partitions)} partitions)"
                )
            return acc.append(topic, partition, key_size, value_size, headers_bytes, timestamp, now,
                              token=token)
        if self.partitioner is not None:
            first = self._custom_partition(topic, key, value)
            result = acc.append(topic, first, key_size, value_size, headers_bytes, timestamp, now,
                                abort_on_new_batch=True, token=token)
            if not result.abort_for_new_batch:
                return result
            self.partitioner.on_new_batch(topic, self.cluster, first)
            second = self._custom_partition(topic, key, value)
            return acc.append(topic, second, key_size, value_size, headers_bytes, timestamp, now,
                              token=token)
        if key is not None and not self.config.partitioner_ignore_keys:
            chosen = partition_for_key(key, len(self.cluster.partitions_for_topic(topic)))
            return acc.append(topic, chosen, key_size, value_size, headers_bytes, timestamp, now,
                              token=token)
        return acc.append(topic, UNKNOWN_PARTITION, key_size, value_size, headers_bytes, timestamp,
                          now, token=token)


def _size(what: str, data: Buffer | None) -> int:
    """A key's or value's size in bytes, -1 for None; what is not bytes-like (as records take
    one) is refused (a str's len() counts characters, an int has none)."""
    return -1 if data is None else byte_size(data, what)
