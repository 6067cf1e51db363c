"""What the vectorized min-cost-flow engines share: the cycle-canceling loop and its constants."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    #: The solvers' vectors and matrices: distances, parents, costs, owners (int64) and masks.
    IntArray = NDArray[np.int64]
    BoolArray = NDArray[np.bool_]

MAX_PERIOD = 64
BIG = np.int64(1) << np.int64(61)  # an edge with no residual capacity: never relaxes


class PeriodMismatch(Exception):
    """The shortcut's last pass would not provably match Kafka's: redo the search in full."""


class CycleCancelingSolver:
    """Cancel negative cycles until none is left, as Kafka's ``Graph.cycleCanceling`` does.

    Subclasses provide ``_bellman_ford(detect_period)`` (``None`` when no negative cycle is
    left, else the arguments of ``_cancel``) and ``_cancel(...)``.
    """

    cycles: int

    def solve(self) -> None:
        while True:
            try:
                found = self._bellman_ford(detect_period=True)
            except PeriodMismatch:
                found = self._bellman_ford(detect_period=False)
            if found is None:
                return
            self._cancel(*found)
            self.cycles += 1

    def _bellman_ford(self, detect_period: bool) -> tuple[Any, ...] | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _cancel(self, *found: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
