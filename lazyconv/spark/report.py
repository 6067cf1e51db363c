"""Plain-text tables of a :class:`~lazyconv.spark.job.ValidationResult` (CLI output)."""

from __future__ import annotations

from typing import Any

__all__ = ["format_report"]


def _mib(n: float | None) -> str:
    return f"{(n or 0) / 1048576:.2f}"


def _size(n: int) -> str:
    return f"{n // 1024}K" if n < 1048576 else f"{n // 1048576}M"


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def format_report(result: Any, max_violations: int = 50) -> str:
    """Segment checks per topic, conversions per topic x target magic x chunk size, violations."""
    lines = [f"log directory {result.logdir}: {result.segments} segments, "
             f"{result.partitions} partitions, {_mib(result.bytes)} MiB, {result.batches} batches, "
             f"{result.records} records", ""]
    lines += _table(
        ["topic", "segments", "MiB", "batches", "records", "control", "violations"],
        [[r["topic"], r["segments"], _mib(r["bytes"]), r["batches"], r["records"],
          r["control_batches"], r["segment_violations"]] for r in result.segment_summary])
    if result.conversion_summary:
        lines += ["", "lazy down-conversion (per topic, target magic and chunk size):"]
        rows = []
        for r in result.conversion_summary:
            secs = (r["conversion_time_ns"] or 0) / 1e9
            rows.append([
                r["topic"], r["to_magic"], _size(r["chunk_size"]),
                f"{r['segments_ok']}/{r['segments']}", r["records_delivered"],
                _mib(r["bytes_in"]), _mib(r["bytes_written"]), _mib(r["padding_bytes"]),
                _mib(r["discarded_bytes"]), r["fetches"], r["chunks"], r["zstd_batches"], r["stalls"],
                f"{secs:.2f}", f"{(r['bytes_in'] or 0) / 1048576 / secs:.1f}" if secs else "-",
            ])
        lines += _table(["topic", "magic", "chunk", "ok", "records", "MiB in", "MiB out",
                         "MiB pad", "MiB cut", "fetches", "chunks", "zstd", "stalls", "conv s", "MiB/s"],
                        rows)
    lines.append("")
    if result.violation_count:
        lines.append(f"{result.violation_count} violation(s):")
        for v in result.violations[:max_violations]:
            where = f"{v['topic']}-{v['partition']}"
            if v["segment"]:
                where += f" {v['segment']}"
            if v["file"] not in ("log", "partition"):
                where += f" ({v['file']})"
            if v["position"] is not None and v["position"] >= 0:
                where += f" @ byte {v['position']}"
            lines.append(f"  [{v['kind']}] {where}: {v['message']}")
        if result.violation_count > max_violations:
            lines.append(f"  ... {result.violation_count - max_violations} more"
                         + (f" (all in {result.out}/violations)" if result.out else ""))
    else:
        lines.append("no violations")
    lines.append(f"validated {_mib(result.bytes)} MiB in {result.seconds:.1f} s "
                 f"({result.bytes / 1048576 / max(result.seconds, 1e-9):.2f} MiB/s)"
                 + (f"; Parquet under {result.out}" if result.out else ""))
    return "\n".join(lines)
