"""The console summary of a :class:`~lazyconv.spark._job.ValidationResult` (CLI output).

Short by design: one line for the run, one table row per topic (log checks and, per target
magic, whether every consumer received exactly the expected records), a legend, then the first
violations. The full tables are the Parquet output.
"""

from __future__ import annotations

from typing import Any

__all__ = ["format_report"]

LEGEND = ("legend: MiB = log bytes checked; errors/warnings = violations found (warnings, e.g. "
          "preallocated zeros, do not fail the run); vN = lazy down-conversion to magic N: "
          "ranges whose consumer received exactly the expected records / ranges run, "
          "'-' = not run; pad% = padding bytes / bytes sent")


def _mib(n: float | None) -> str:
    return f"{(n or 0) / 1048576:.2f}"


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _conversion_cells(result: Any, topic: str, magics: list[int]) -> list[str]:
    cells = []
    for magic in magics:
        rows = [r for r in result.conversion_summary
                if r["topic"] == topic and r["to_magic"] == magic]
        if not rows:
            cells.append("-")
            continue
        ok = min(int(r["segments_ok"] or 0) for r in rows)
        run = max(int(r["segments"] or 0) for r in rows)
        cells.append(f"{ok}/{run}")
    rows = [r for r in result.conversion_summary if r["topic"] == topic]
    written = sum(int(r["bytes_written"] or 0) for r in rows)
    padding = sum(int(r["padding_bytes"] or 0) for r in rows)
    cells.append(f"{100 * padding / written:.1f}" if written else "-")
    return cells


def format_report(result: Any, max_violations: int = 20) -> str:
    """The run line, the per-topic table with its legend, the first violations, the verdict."""
    lines = [f"{result.logdir}: {result.segments} segments ({result.ranges} byte ranges), "
             f"{result.partitions} partitions, {_mib(result.bytes)} MiB, {result.batches} "
             f"batches, {result.records} records; run {result.run_id}", ""]
    magics = sorted({int(r["to_magic"]) for r in result.conversion_summary})
    headers = ["topic", "segments", "MiB", "records", "errors", "warnings",
               *[f"v{m}" for m in magics], "pad%"]
    rows = [[r["topic"], r["segments"], _mib(r["bytes"]), r["records"], r["errors"],
             r["warnings"], *_conversion_cells(result, r["topic"], magics)]
            for r in result.segment_summary]
    lines += _table(headers, rows)
    lines += [LEGEND, ""]
    if result.violation_count or result.warning_count:
        lines.append(f"{result.violation_count} error(s), {result.warning_count} warning(s):")
        for v in result.violations[:max_violations]:
            where = f"{v['topic']}-{v['partition']}"
            if v["segment"]:
                where += f" {v['segment']}"
            if v["file"] not in ("log", "partition"):
                where += f" ({v['file']})"
            if v["position"] is not None and v["position"] >= 0:
                where += f" @ byte {v['position']}"
            if v.get("offset") is not None:
                where += f" offset {v['offset']}"
            tag = v["kind"] if v.get("severity", "error") == "error" else f"{v['kind']}, warning"
            lines.append(f"  [{tag}] {where}: {v['message']}")
        shown = min(len(result.violations), max_violations)
        hidden = result.violation_count + result.warning_count - shown
        if hidden > 0:
            lines.append(f"  ... {hidden} more"
                         + (f" (all in {result.out}/violations)" if result.out else ""))
    if not result.violation_count:
        lines.append("no violations" if not result.warning_count else "no errors")
    unchecked = max(0, getattr(result, "size", 0) - result.bytes)
    lines.append(f"validated {_mib(result.bytes)} MiB in {result.seconds:.1f} s "
                 f"({result.bytes / 1048576 / max(result.seconds, 1e-9):.2f} MiB/s)"
                 + (f"; {_mib(unchecked)} MiB of the segments could not be read or delimited"
                    if unchecked else "")
                 + (f"; Parquet under {result.out}" if result.out else ""))
    return "\n".join(lines)
