"""Topic configurations the log must obey (``lazyconv validate --topic-config TOPIC:KEY=VALUE``).

A log directory does not say how its topics are configured (the broker keeps that in its
metadata), so the checks that depend on a topic's configuration run only for the settings given:

- ``max.message.bytes``: no entry (a v2 batch or a top-level v0/v1 message, log header included,
  as Kafka's ``LogValidator`` measures it) is larger (``max_message_bytes``);
- ``message.timestamp.type`` (``CreateTime`` or ``LogAppendTime``): every v1 and v2 entry says
  that timestamp type in its attributes (v0 messages have no timestamp) (``timestamp_type``);
- ``cleanup.policy``: ``delete`` alone means nothing was compacted away, so offsets are
  contiguous: each batch starts right after the one before and a v2 data batch holds one record
  per offset of its range (``offset_gap``); with ``compact``, every data record has a key, as
  Kafka refuses keyless records on compacted topics (``null_key``; the records of that topic are
  decoded one by one for it, which costs CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from lazyconv.errors import ConfigurationError

__all__ = ["TIMESTAMP_TYPES", "TopicConfig", "parse_topic_configs"]

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_POLICIES = ("delete", "compact")
_KEYS = ("max.message.bytes", "message.timestamp.type", "cleanup.policy")


@dataclass(frozen=True)
class TopicConfig:
    """The settings of one topic that the checks use (``None``: not given, not checked)."""

    max_message_bytes: int | None = None
    log_append_time: bool | None = None
    cleanup_policy: frozenset[str] | None = None

    @property
    def contiguous_offsets(self) -> bool:
        """Whether offsets must have no gaps (``cleanup.policy=delete`` without compaction)."""
        return self.cleanup_policy is not None and "compact" not in self.cleanup_policy

    @property
    def keys_required(self) -> bool:
        """Whether every data record needs a key (a compacted topic)."""
        return self.cleanup_policy is not None and "compact" in self.cleanup_policy

    def as_dict(self) -> dict[str, object]:
        """The settings given, under Kafka's names (for the report's ``run_options``)."""
        out: dict[str, object] = {}
        if self.max_message_bytes is not None:
            out["max.message.bytes"] = self.max_message_bytes
        if self.log_append_time is not None:
            out["message.timestamp.type"] = TIMESTAMP_TYPES[self.log_append_time]
        if self.cleanup_policy is not None:
            out["cleanup.policy"] = ",".join(p for p in _POLICIES if p in self.cleanup_policy)
        return out


def _setting(option: str) -> tuple[str, str, str]:
    topic, sep, rest = option.rpartition(":")
    key, eq, value = rest.partition("=")
    if not sep or not topic or not eq or not key.strip() or not value.strip():
        raise ConfigurationError(f"{option!r} is not TOPIC:KEY=VALUE")
    return topic, key.strip(), value.strip()


def parse_topic_configs(options: list[str] | None) -> dict[str, TopicConfig]:
    """``{topic: TopicConfig}`` from ``TOPIC:KEY=VALUE`` strings (later ones win); raises
    :class:`~lazyconv.errors.ConfigurationError` with one line, quoting the string refused,
    for anything else."""
    settings: dict[str, dict[str, object]] = {}
    for option in options or ():
        topic, key, value = _setting(option)
        fields = settings.setdefault(topic, {})
        if key == "max.message.bytes":
            try:
                size = int(value)
            except ValueError:
                size = 0
            if size < 1:
                raise ConfigurationError(f"{option!r}: max.message.bytes must be "
                                         "a positive number of bytes")
            fields["max_message_bytes"] = size
        elif key == "message.timestamp.type":
            if value not in TIMESTAMP_TYPES:
                raise ConfigurationError(f"{option!r}: message.timestamp.type is "
                                         f"{' or '.join(TIMESTAMP_TYPES)}")
            fields["log_append_time"] = value == "LogAppendTime"
        elif key == "cleanup.policy":
            policies = frozenset(p.strip() for p in value.split(","))
            if not policies <= set(_POLICIES):
                raise ConfigurationError(f"{option!r}: cleanup.policy is delete, "
                                         "compact or compact,delete")
            fields["cleanup_policy"] = policies
        else:
            raise ConfigurationError(f"{option!r}: {key} is not checked (the keys "
                                     f"are {', '.join(_KEYS)})")
    return {topic: TopicConfig(**fields) for topic, fields in settings.items()}  # type: ignore[arg-type]
