"""A tqdm progress bar over a Spark job's tasks (stderr), fed by the status tracker."""

from __future__ import annotations

import sys
import threading
from typing import Any

__all__ = ["SparkProgress"]


class SparkProgress:
    """Context manager: while open, a thread polls ``sc.statusTracker()`` and shows the tasks
    completed out of the tasks of every stage seen so far. Disabled when ``disable`` is true."""

    def __init__(self, sc: Any, *, disable: bool = False, interval: float = 0.5,
                 desc: str = "spark tasks") -> None:
        self._sc = sc
        self._disable = disable
        self._interval = interval
        self._desc = desc
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stages: dict[int, tuple[int, int]] = {}
        self._bar: Any = None

    def __enter__(self) -> SparkProgress:
        if self._disable:
            return self
        from tqdm import tqdm

        self._bar = tqdm(total=0, unit="task", desc=self._desc, file=sys.stderr)
        self._thread = threading.Thread(target=self._poll, name="spark-progress", daemon=True)
        self._thread.start()
        return self

    def _update(self) -> None:
        tracker = self._sc.statusTracker()
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                self._stages[stage_id] = (info.numTasks, info.numCompletedTasks)
        total = sum(t for t, _ in self._stages.values())
        done = sum(c for _, c in self._stages.values())
        self._bar.total = total
        self._bar.n = done
        self._bar.refresh()

    def _poll(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._update()
            except Exception:  # noqa: BLE001 - the bar must never break the job (JVM shutdown)
                return

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
        if self._bar is not None:
            if exc_type is None:
                # every stage has finished: the last poll may have missed the last tasks
                try:
                    self._update()
                except Exception:  # noqa: BLE001 - the bar must never break the job
                    pass
                self._bar.total = max(self._bar.total or 0, 1)
                self._bar.n = self._bar.total
                self._bar.refresh()
            self._bar.close()
