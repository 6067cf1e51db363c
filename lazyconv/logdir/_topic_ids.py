"""Stable topic ids, kept in each partition folder as Kafka keeps them (``partition.metadata``).

Kafka writes ``version: 0\\ntopic_id: <id>`` (no trailing newline) into every partition
directory, the id in Kafka's text form: URL-safe base64 of the 16 bytes without padding (22
characters). A topic whose folders carry no id gets a fresh random one (never 0, 1, nor one
whose text starts with "-", as Kafka's ``Uuid.randomUuid``), written atomically into each of its
folders so that it survives restarts. When a folder cannot be written (a read-only log
directory) the id is derived from the topic name instead, which is just as stable.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterable
from pathlib import Path

from lazyconv.errors import ValidationError
from lazyconv.logdir._durability import write_atomically
from lazyconv.logdir._naming import PARTITION_METADATA_FILE

log = logging.getLogger(__name__)

__all__ = ["PARTITION_METADATA_FILE", "uuid_to_text", "text_to_uuid", "usable_topic_id",
           "partition_metadata_text", "read_topic_id", "ensure_topic_id"]

_METADATA_VERSION = "0"
_UUID_BYTES = 16  # a UUID's bytes
_TEXT_LENGTH = 22  # their URL-safe base64 text without padding
_RESERVED = (uuid.UUID(int=0), uuid.UUID(int=1))
_NAMESPACE = uuid.UUID("5f0e5a7e-6c1b-4d7a-9a3e-1a2b3c4d5e6f")


def uuid_to_text(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def text_to_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; raises :class:`ValidationError` for anything else."""
    try:
        data = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        data = b""
    if len(text) != _TEXT_LENGTH or len(data) != _UUID_BYTES:
        raise ValidationError(
            f"{text!r} is not a Kafka topic id ({_TEXT_LENGTH} URL-safe base64 characters)")
    return uuid.UUID(bytes=data)


def usable_topic_id(value: uuid.UUID) -> bool:
    """Whether Kafka would hand out ``value`` as a topic id (``Uuid.randomUuid`` skips 0, 1 and
    ids whose text starts with "-")."""
    return value not in _RESERVED and not uuid_to_text(value).startswith("-")


def partition_metadata_text(topic_id: uuid.UUID) -> str:
    """The content of ``partition.metadata`` for ``topic_id`` (no final newline, as Kafka)."""
    return f"version: {_METADATA_VERSION}\ntopic_id: {uuid_to_text(topic_id)}"


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id in ``directory/partition.metadata``; None when the file is missing.

    Raises :class:`ValidationError` (naming the file) when the file is not Kafka's format.
    """
    path = directory / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:  # bytes that are not text: not Kafka's format either
        raise ValidationError(f"{path}: expected 'version: 0' and 'topic_id: <id>', got bytes "
                              f"that are not UTF-8 ({exc})") from None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != _METADATA_VERSION or "topic_id" not in fields:
        raise ValidationError(f"{path}: expected 'version: 0' and 'topic_id: <id>', got {text!r}")
    try:
        return text_to_uuid(fields["topic_id"])
    except ValidationError as exc:
        raise ValidationError(f"{path}: {exc.message}") from None


def ensure_topic_id(topic: str, directories: Iterable[Path]) -> uuid.UUID:
    """The topic's id from its partition folders, creating and storing one if none has it.

    Folders that disagree are reported (Kafka would refuse to load such a log); the first id
    found wins. Folders without the file get it.
    """
    directories = list(directories)
    found: uuid.UUID | None = None
    missing: list[Path] = []
    for directory in directories:
        try:
            current = read_topic_id(directory)
        except ValidationError as exc:
            log.warning("%s", exc)
            current = None
        if current is None:
            missing.append(directory)
        elif found is None:
            found = current
        elif current != found:
            log.warning("topic %s: %s has topic id %s but another partition has %s", topic,
                        directory, uuid_to_text(current), uuid_to_text(found))
    if found is None:
        found = uuid.uuid4()
        while not usable_topic_id(found):
            found = uuid.uuid4()
    for directory in missing:
        if not _write_atomically(directory / PARTITION_METADATA_FILE, partition_metadata_text(found)):
            derived = uuid.uuid5(_NAMESPACE, topic)
            log.warning("topic %s: cannot store its id in %s; using the id derived from its name",
                        topic, directory)
            return derived if usable_topic_id(derived) else uuid.UUID(int=derived.int ^ (1 << 127))
    return found


def _write_atomically(path: Path, text: str) -> bool:
    """``text`` in ``path`` for good (the folder fsynced after the rename, as every file of ours:
    a power loss would otherwise bring back no file and a new topic id); False when it cannot be."""
    try:
        write_atomically(path, text.encode("utf-8"))
    except OSError:
        return False
    return True
