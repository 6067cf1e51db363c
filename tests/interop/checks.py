"""Comparing what a client delivered with what the fixture holds."""

from __future__ import annotations

import base64
from typing import Any

from tests.interop.expected import Record


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def received(events: list[dict[str, Any]]) -> dict[tuple[str, int], list[Record]]:
    """The records of ``record`` events per (topic, partition), in arrival order."""
    out: dict[tuple[str, int], list[Record]] = {}
    for e in events:
        if e["ev"] == "record":
            out.setdefault((e["t"], e["p"]), []).append(
                (e["o"], e["ts"], _bytes(e["k"]), _bytes(e["v"]),
                 tuple((k, _bytes(v)) for k, v in e["h"])))
    return out


def assert_same_records(got: list[Record], want: list[Record], where: str) -> None:
    """Exact equality, with a short message naming the first difference."""
    if got == want:
        return
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            raise AssertionError(f"{where}: record #{i} differs: got {_short(g)}, want {_short(w)}")
    common = min(len(got), len(want))
    longer = got if len(got) > common else want
    raise AssertionError(f"{where}: got {len(got)} records, want {len(want)}; first "
                         f"{'extra' if longer is got else 'missing'}: {_short(longer[common])}")


def _clip(data: bytes | None) -> bytes | None:
    return data if data is None or len(data) <= 24 else data[:24] + b"..."


def _short(record: Record) -> str:
    offset, ts, key, value, headers = record
    return f"(offset={offset}, ts={ts}, key={_clip(key)!r}, value={_clip(value)!r}, headers={headers!r})"
