"""``manifest.json``: what a generated log directory says it holds (lazyconv's own file).

``lazyconv fixtures generate`` writes it beside the partition folders: per partition the
expected counts and the consumer-view checksum (the sum modulo 2**64 of one record digest per
record, :mod:`lazyconv.records._digest`, written as 16 lowercase hex digits);
``lazyconv validate`` compares what it finds with it. A log directory a broker wrote has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lazyconv.errors import ConfigurationError
from lazyconv.records._digest import MASK64

__all__ = [
    "MANIFEST_NAME", "MANIFEST_FORMAT", "format_checksum", "load_manifest", "parse_manifest",
    "checked_manifest",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "lazyconv-fixture/2"  # /1: the same with an XXH3-64 record checksum
_OLD_FORMAT = "lazyconv-fixture/1"


def format_checksum(value: int) -> str:
    """A checksum as written in manifests: 16 lowercase hex digits."""
    return f"{value & MASK64:016x}"


def load_manifest(logdir: str | Path) -> dict[str, Any] | None:
    """The manifest of a fixture directory (a local folder or an fsspec URL, as
    :func:`~lazyconv.logdir._layout.list_segments` takes), or ``None`` when it has none (a real
    broker log)."""
    where = str(logdir)
    if "://" in where:
        import fsspec

        fs, root = fsspec.core.url_to_fs(where)
        path = root.rstrip("/") + "/" + MANIFEST_NAME
        if not fs.exists(path):
            return None
        with fs.open(path, "rb") as f:
            return parse_manifest(f.read(), where.rstrip("/") + "/" + MANIFEST_NAME)
    local = Path(logdir) / MANIFEST_NAME
    if not local.is_file():
        return None
    return parse_manifest(local.read_bytes(), str(local))


def parse_manifest(content: bytes, where: str) -> dict[str, Any]:
    """The manifest in ``content`` (the bytes of the file ``where``), checked as
    :func:`checked_manifest` checks it; a file that is not JSON is a ConfigurationError too."""
    try:
        data = json.loads(content.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError too
        raise ConfigurationError(f"{where}: not a JSON document: {exc}") from None
    return checked_manifest(data, where)


def checked_manifest(data: Any, where: str) -> dict[str, Any]:
    """``data`` (a parsed manifest read from ``where``) if its format is this version's and its
    partitions are objects naming their topic and partition (what the validation job reads)."""
    found = data.get("format") if isinstance(data, dict) else None
    if found == _OLD_FORMAT:
        raise ConfigurationError(
            f"{where}: manifest format {_OLD_FORMAT} has record checksums this version no longer "
            f"computes; regenerate the fixture with `lazyconv fixtures generate`"
        )
    if found != MANIFEST_FORMAT:
        raise ConfigurationError(f"{where}: unknown manifest format {found!r}")
    partitions = data.get("partitions")
    if not isinstance(partitions, dict):
        raise ConfigurationError(f"{where}: \"partitions\" is not an object")
    for name, part in partitions.items():
        topic = part.get("topic") if isinstance(part, dict) else None
        partition = part.get("partition") if isinstance(part, dict) else None
        if not isinstance(topic, str) or type(partition) is not int:
            raise ConfigurationError(
                f"{where}: partition {name!r} is not an object with a topic and a partition")
    return data
