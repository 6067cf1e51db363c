"""The job a driver runs and the events it reports, shared by the Python drivers.

Job (JSON, argv[1]) keys:

- ``bootstrap``: "host:port"; ``client``: client-specific settings; ``timeout``: seconds.
- ``action`` "consume":
  ``mode`` "assign" (``partitions``: [[topic, p], ...], read from offset 0) or "subscribe"
  (``topics``, ``group``); ``isolation`` "read_committed" / "read_uncommitted";
  ``last``: {"topic/p": offset of the last record to report, or -1 for none}: a partition is
  done once that record arrived, and later records are not reported;
  ``expect_partitions`` (subscribe): consume only while the assignment has exactly this many
  partitions (pausing and discarding otherwise, never committing), so a member does not read
  partitions a second member is about to take; ``commit``: commit ``last + 1`` for each
  assigned partition once done; ``hold``: stay in the group (polling, reporting later
  assignments, kafka-python and confluent-kafka) until stdin closes;
  ``stop_on_error`` (confluent-kafka): stop at the first partition error (a ``warning`` event).
- ``action`` "produce": ``topic``, ``records``: [{"partition", "key", "value", "headers"}]
  with base64 bytes (None for null); the driver waits for every acknowledgement.
- ``action`` "produce_txn" (not kcat): ``topic``, ``transactional_id``, ``transactions``:
  [{"outcome": "commit" or "abort", "records": [...]}], one transaction after the other.

Events (one JSON object a line): ``assigned`` (partitions), ``record`` (t, p, o, ts, k, v, h),
``committed`` (offsets [[t, p, o]]), ``produced`` (t, p, o), ``warning`` (a non-fatal client
error: message, code, t, p), ``done``, ``error`` (message).
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from typing import Any


def load_job() -> dict[str, Any]:
    return json.loads(sys.argv[1])


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"ev": event, **fields}) + "\n")
    sys.stdout.flush()


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def emit_record(topic: str, partition: int, offset: int, timestamp: int | None,
                key: bytes | None, value: bytes | None, headers) -> None:
    emit("record", t=topic, p=partition, o=offset, ts=-1 if timestamp is None else timestamp,
         k=b64(key), v=b64(value), h=[[k, b64(v)] for k, v in (headers or ())])


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


class Progress:
    """Which partitions have delivered their last wanted record."""

    def __init__(self, last: dict[str, int]) -> None:
        self.last = last
        self.seen: dict[str, int] = {}

    def wanted(self, topic: str, partition: int, offset: int) -> bool:
        """Report this record? (Not past the partition's last one, not twice.)"""
        key = tp_key(topic, partition)
        if offset > self.last[key] or offset <= self.seen.get(key, -1):
            return False
        self.seen[key] = offset
        return True

    def done(self, topic: str, partition: int) -> bool:
        key = tp_key(topic, partition)
        return self.last[key] < 0 or self.seen.get(key, -1) >= self.last[key]

    def commit_offset(self, topic: str, partition: int) -> int:
        return self.last[tp_key(topic, partition)] + 1


def stdin_closed_event() -> threading.Event:
    """An event set once the test closes our stdin (the signal to leave the group)."""
    closed = threading.Event()

    def watch() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=watch, daemon=True).start()
    return closed
