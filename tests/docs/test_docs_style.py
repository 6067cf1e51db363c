"""The documentation is reference, not a work log (issue 24).

Figures live in the docs with the command that produces them and the conditions that matter
(the machine, what was compared with what in the same run, how many runs): never with the time of
day they were taken, a "UTC" timestamp or a comparison with "the previous round's code". This test
reads README.md and every page under docs/ (the changelogs excepted: dates are what they are
for) and fails on a time of day, "UTC" or "previous round" outside fenced code blocks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Changelogs are dated by design.
EXEMPT = {
    "CHANGELOG.md",
    "docs/changelog.md",
}

# A time of day: 7:05, 17:27, 23:06:41 — an hour (0–23) and minutes (00–59), optionally seconds,
# standing alone. Not part of an address or a longer number (127.0.0.1:9092, kafka1:9092,
# v0:, 1000:), hence nothing word-like, '.', ':', '/' or '-' right before the hour, and no
# letter, digit or further ':digit' / '.digit' right after.
TIME_OF_DAY = re.compile(r"(?<![\w.:/-])(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?!\w|:\d|\.\d)")
UTC = re.compile(r"\bUTC\b")
PREVIOUS_ROUND = re.compile(r"previous round", re.IGNORECASE)

FENCE = re.compile(r"^\s*(```|~~~)")


def _pages() -> list[str]:
    pages = ["README.md", *(str(p.relative_to(REPO)) for p in sorted((REPO / "docs").rglob("*.md")))]
    return [page for page in pages if page not in EXEMPT]


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks (command output may show a clock), numbered from 1."""
    lines = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            lines.append((number, line))
    return lines


def offences(text: str) -> list[str]:
    found = []
    for number, line in _prose_lines(text):
        for pattern, what in ((TIME_OF_DAY, "time of day"), (UTC, "UTC"), (PREVIOUS_ROUND, "'previous round'")):
            for match in pattern.finditer(line):
                found.append(f"line {number}: {what} {match.group(0)!r}: {line.strip()[:120]}")
    return found


@pytest.mark.parametrize("page", _pages())
def test_page_is_not_a_work_log(page: str) -> None:
    problems = offences((REPO / page).read_text(encoding="utf-8"))
    assert not problems, (
        f"{page} reads as a dated work log; state each figure with its command and conditions "
        "(machine, what was compared in the same run, number of runs) instead:\n" + "\n".join(problems)
    )


@pytest.mark.parametrize(
    "text",
    [
        "measured at 17:27 on the final code",
        "(final measurements 17:27–17:28 UTC)",
        "between 23:05 and 23:21",
        "at 9:05, load 2",
        "a run at 23:06:41 gave",
        "17:27: python 17.6 ms",
        "the previous round's code",
        "Previous round: 1.2x",
    ],
)
def test_the_patterns_catch_a_work_log(text: str) -> None:
    assert offences(text)


@pytest.mark.parametrize(
    "text",
    [
        "lazyconv gateway --upstream kafka1:9092,kafka2:9092 --port 9093",
        "lazyconv gateway --upstream 127.0.0.1:9092 --port 19092",
        "the old client at `127.0.0.1:9093`",
        "bootstrap_servers=\"127.0.0.1:9092\", --port 9092:",
        "only understands magic v1: it",
        "fetches below v10: the gateway",
        "| ce_subtopology | 700, 1000: 3 |",
        "ratios 3.5:1, 12:345, 1:2, 24:00 and 7:60",
        "```\nat 17:27 UTC\n```",
        "2026-11-24 (see the changelog)",
    ],
)
def test_the_patterns_spare_addresses_ports_and_code(text: str) -> None:
    assert not offences(text)


# a file of the repository named in the docs: lazyconv/serve/_broker.py, bench/serve_vs_kafka.py
PLACEHOLDER = re.compile(r"/[A-Z_]+\.\w+$")  # bench/NAME.py: any of them
REPO_PATH = re.compile(r"(?<![\w/.-])((?:lazyconv|bench|tests)/[\w/.-]*\w\.(?:py|c|h|sh|java))\b")


@pytest.mark.parametrize("page", _pages())
def test_every_file_the_page_names_exists(page: str) -> None:
    """A module renamed or moved must not leave the docs pointing at nothing."""
    text = (REPO / page).read_text(encoding="utf-8")
    named = {m for m in REPO_PATH.findall(text) if not PLACEHOLDER.search(m)}
    missing = sorted(m for m in named if not (REPO / m).exists())
    assert missing == [], f"{page} names files that do not exist: {missing}"


def test_the_file_pattern_finds_paths() -> None:
    text = "see `lazyconv/serve/_broker.py`, bench/serve_vs_kafka.py and tests/native/fuzz_asan.sh."
    assert REPO_PATH.findall(text) == ["lazyconv/serve/_broker.py", "bench/serve_vs_kafka.py",
                                       "tests/native/fuzz_asan.sh"]
