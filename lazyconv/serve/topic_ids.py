"""Moved to :mod:`lazyconv.logdir.topic_ids`:
these names stay only until their users import them from there."""

from lazyconv.logdir.topic_ids import (
    PARTITION_METADATA_FILE,
    ensure_topic_id,
    read_topic_id,
    text_to_uuid,
    uuid_to_text,
)

__all__ = ["PARTITION_METADATA_FILE", "uuid_to_text", "text_to_uuid", "read_topic_id",
           "ensure_topic_id"]
