"""CPU seconds of a process tree, sampled with psutil (benchmarks and the standalone test)."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["TreeCPU"]


class TreeCPU:
    """CPU seconds (user + system) of a process and all its descendants while sampled: every
    0.1 s each live process's total is noted, so processes that start and end in between
    (executors, Python workers) count up to their last sample; a process that existed at the
    start counts only what it used since. :meth:`stop` returns the total; ``peak_rss`` holds
    the largest resident set seen per process."""

    def __init__(self, root_pid: int, interval: float = 0.1) -> None:
        import psutil

        self._root = psutil.Process(root_pid)
        self._interval = interval
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self.peak_rss: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self._stop = threading.Event()
        for proc in self._tree():
            self._start[proc.pid] = self._last[proc.pid] = self._cpu(proc)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[Any]:
        import psutil

        try:
            return [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return []

    @staticmethod
    def _cpu(proc: Any) -> float:
        import psutil

        try:
            t = proc.cpu_times()
        except psutil.Error:
            return -1.0
        return float(t.user + t.system)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            for proc in self._tree():
                cpu = self._cpu(proc)
                if cpu >= 0:
                    self._last[proc.pid] = max(cpu, self._last.get(proc.pid, 0.0))
                try:
                    rss = proc.memory_info().rss
                    self.peak_rss[proc.pid] = max(rss, self.peak_rss.get(proc.pid, 0))
                    self.names.setdefault(proc.pid, proc.name())
                except psutil.Error:
                    pass
            self._stop.wait(self._interval)

    def stop(self) -> float:
        """The CPU seconds used since the start."""
        self._stop.set()
        self._thread.join()
        return sum(cpu - self._start.get(pid, 0.0) for pid, cpu in self._last.items())
