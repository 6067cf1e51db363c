"""Errors of the rack-aware assignment package.

Kafka signals these with ``IllegalArgumentException`` / ``IllegalStateException``; here they are
part of lazyconv's one exception tree, so the CLI reports them as one line with exit status 1.
"""

from __future__ import annotations

from typing import Any

from lazyconv.errors import ConfigurationError, LazyconvError

__all__ = ["AssignmentError", "GraphError", "AssignmentInputError", "MissingRacksError"]


class AssignmentError(LazyconvError):
    """An assignment that cannot be optimized as given (task on two clients, no rack info, ...)."""


class GraphError(AssignmentError):
    """A flow network used in a way the min-cost-flow engine refuses (Kafka's ``Graph`` checks)."""


class AssignmentInputError(AssignmentError, ConfigurationError):
    """A bad field in an assignment input document; ``path`` is its JSON path (e.g. ``$.tasks[2].id``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}")

    def __reduce__(self) -> tuple[type[AssignmentInputError], tuple[Any, ...]]:  # keep pickling faithful (two-argument constructor)
        return (type(self), (self.path, self.detail))


class MissingRacksError(AssignmentInputError):
    """Rack information the optimizer needs is missing (``missing_racks="raise"``); ``gap`` says
    what is missing, without the hint about ``missing_racks="keep"`` the message ends with (a
    caller whose users set it otherwise, e.g. the CLI's ``--missing-racks``, names its own)."""

    def __init__(self, path: str, gap: str) -> None:
        self.gap = gap
        super().__init__(path, f"{gap} (missing_racks='keep' leaves the assignment as Kafka does)")

    def __reduce__(self) -> tuple[type[AssignmentInputError], tuple[Any, ...]]:
        return (type(self), (self.path, self.gap))
