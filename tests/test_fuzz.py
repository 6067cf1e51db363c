"""The mutation fuzzer: its saved corpus replays cleanly, and a short run finds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fuzz import TARGETS, Oracle, make_target, replay_corpus, run_fuzz

CORPUS = Path(__file__).parent / "fuzz_corpus"


def test_the_corpus_covers_every_target() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) == sorted(TARGETS)
    assert all(any((CORPUS / name).glob("*.bin")) for name in TARGETS)


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_the_saved_corpus_raises_only_lazyconv_errors() -> None:
    count, findings = replay_corpus(CORPUS)
    assert count >= len(TARGETS) * 5
    assert findings == [], "\n".join(str(f) for f in findings)


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_the_oracle_reports_foreign_exceptions_hangs_and_memory(tmp_path: Path) -> None:
    target = make_target("records", tmp_path)

    def crash(data: bytes) -> None:
        raise KeyError(data)

    def spin(data: bytes) -> None:
        while True:
            pass

    def hog(data: bytes) -> None:
        block = bytearray(8 << 20)
        del block

    oracle = Oracle(timeout=0.2, memory_bound=1 << 20)
    with oracle.armed():
        assert oracle.check(target, b"")[0] is None
        for run, kind in ((crash, "exception"), (spin, "hang"), (hog, "memory")):
            target.run = run
            finding, _ = oracle.check(target, b"x")
            assert finding is not None and finding.kind == kind, (run, finding)


@pytest.mark.slow
def test_a_short_fuzz_run_finds_nothing() -> None:
    report = run_fuzz(15.0, seed=20261124)
    assert report.findings == [], "\n".join(str(f) for f in report.findings[:5])
    assert set(report.per_target) == set(TARGETS)
    assert report.executions > 5_000
    assert report.max_traced_bytes < 64 << 20


def test_a_running_alarm_timer_survives_the_oracle() -> None:
    import signal

    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    signal.setitimer(signal.ITIMER_REAL, 60.0)
    try:
        with Oracle(timeout=0.5).armed():
            pass
        left, _interval = signal.getitimer(signal.ITIMER_REAL)
        assert 55.0 < left <= 60.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_fuzzing_gives_the_library_loggers_level_back(tmp_path: Path) -> None:
    """A fuzz run silences the library's logs while it runs, and leaves the level as it was: the
    CLI's warnings in the same process (another test, a later command) are still printed."""
    import logging

    logger = logging.getLogger("lazyconv")
    before = logger.level
    logger.setLevel(logging.INFO)
    try:
        run_fuzz(0.2, seed=1, targets=("records",))
        assert logger.level == logging.INFO
        replay_corpus(tmp_path)
        assert logger.level == logging.INFO
    finally:
        logger.setLevel(before)
