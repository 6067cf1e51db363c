"""The small value types the broker and its helpers share: topic settings and stats."""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

__all__ = ["TopicConfig", "BrokerStats"]


@dataclass(frozen=True)
class TopicConfig:
    """The topic settings that change what a fetch returns.

    ``compression_type`` is Kafka's ``compression.type`` ("producer", "zstd", ...): "zstd" makes
    fetches below v10 fail with UNSUPPORTED_COMPRESSION_TYPE. ``downconversion_enable`` is
    ``message.downconversion.enable``. The message format is always v2 (inter-broker protocol
    ≥ 3.0), so Fetch v0–1 get magic 0 and v2–3 magic 1.
    """

    compression_type: str = "producer"
    downconversion_enable: bool = True


@dataclass
class BrokerStats:
    """Counters over everything this broker answered (tests and logs read them)."""

    fetch_partitions: int = 0
    zero_copy_partitions: int = 0  # records sent straight from the file
    converted_partitions: int = 0  # records lazily down-converted
    partial_tail_responses: int = 0  # records that end inside a batch (cut by a byte limit)
    padded_bytes: int = 0  # overflow padding written by lazy sends (after they completed)
    converted_chunks: int = 0
    records_converted: int = 0
    zero_copy_bytes: int = 0  # bytes that went from a log file to a socket with os.sendfile
    rejected_produce_partitions: int = 0  # produced partitions refused by append validation
    storage_errors: int = 0  # partitions answered KAFKA_STORAGE_ERROR (unreadable log data)
    corrupt_sends: int = 0  # lazy sends that met corrupt data after committing their size
    conversions_reused: int = 0  # conversions the conversion cache answered (first batches, chunks)
