"""Producer-side partitioning: Kafka's murmur2, KIP-794's built-in partitioner, KIP-480's sticky one.

Independent of the conversion stack. Entry points:

* :func:`murmur2`, :func:`to_positive`, :func:`partition_for_key` — keyed partitioning.
* :class:`BuiltInPartitioner` — KIP-794 sticky / adaptive switching for one topic, fed by an
  accumulator; :class:`RecordAccumulator` and :class:`PartitioningProducer` drive it as Kafka's
  producer does.
* :class:`StickyPartitionCache`, :class:`DefaultPartitioner`, :class:`UniformStickyPartitioner`,
  :class:`RoundRobinPartitioner` — the pluggable partitioners for comparison.
* :mod:`lazyconv.partitioner.kafka_python` — a plug-in for kafka-python's ``KafkaProducer``.
* :mod:`lazyconv.partitioner._simulator` — KIP-794's experiment as a discrete-event simulation.
"""

from lazyconv.partitioner._accumulator import (
    UNKNOWN_PARTITION,
    AppendResult,
    Batch,
    ProducerConfig,
    RecordAccumulator,
)
from lazyconv.partitioner._builtin import (
    BuiltInPartitioner,
    PartitionLoadStats,
    StickyPartitionInfo,
    SwitchRule,
)
from lazyconv.partitioner._cluster import ClusterView, StaticCluster, default_random_source
from lazyconv.partitioner._legacy import (
    DefaultPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    StickyPartitionCache,
    UniformStickyPartitioner,
)
from lazyconv.partitioner._murmur2 import murmur2, partition_for_key, to_positive
from lazyconv.partitioner._producer import PartitioningProducer

__all__ = [
    "UNKNOWN_PARTITION",
    "AppendResult",
    "Batch",
    "BuiltInPartitioner",
    "ClusterView",
    "DefaultPartitioner",
    "PartitionLoadStats",
    "Partitioner",
    "PartitioningProducer",
    "ProducerConfig",
    "RecordAccumulator",
    "RoundRobinPartitioner",
    "StaticCluster",
    "StickyPartitionCache",
    "StickyPartitionInfo",
    "SwitchRule",
    "UniformStickyPartitioner",
    "default_random_source",
    "murmur2",
    "partition_for_key",
    "to_positive",
]
