"""A client's assigned tasks (Kafka's ``ClientState``, the parts the optimizer touches)."""

from __future__ import annotations

from collections.abc import Iterable

from lazyconv.assignment._errors import AssignmentError
from lazyconv.assignment._ids import TaskId, process_sort_key
from lazyconv.errors import ConfigurationError

__all__ = ["ClientState", "sorted_clients"]


class ClientState:
    """Active and standby tasks of one client (a Kafka Streams process) on one rack.

    Assigning a task the client already holds (in either role) is an error, as in Kafka.
    """

    __slots__ = ("process_id", "rack", "threads", "active", "standby")

    def __init__(
        self,
        process_id: str,
        rack: str | None,
        threads: int = 1,
        active: Iterable[TaskId] = (),
        standby: Iterable[TaskId] = (),
    ) -> None:
        self.process_id = process_id
        self.rack = rack
        self.threads = threads
        try:
            self.active: set[TaskId] = set(active)
            self.standby: set[TaskId] = set(standby)
        except TypeError:  # not iterable, or holding unhashable items
            raise ConfigurationError(f"client {process_id}: active and standby must be iterables of "
                                     f"task ids, got {active!r:.40}, {standby!r:.40}") from None
        both = self.active & self.standby
        if both:
            raise AssignmentError(
                f"client {process_id} holds task {min(both)} as both active and standby"
            )

    def has_active(self, task: TaskId) -> bool:
        return task in self.active

    def has_standby(self, task: TaskId) -> bool:
        return task in self.standby

    def has_assigned(self, task: TaskId) -> bool:
        return task in self.active or task in self.standby

    def assign_active(self, task: TaskId) -> None:
        self._check_free(task)
        self.active.add(task)

    def assign_standby(self, task: TaskId) -> None:
        self._check_free(task)
        self.standby.add(task)

    def unassign_active(self, task: TaskId) -> None:
        if task not in self.active:
            raise AssignmentError(f"task {task} is not active on client {self.process_id}")
        self.active.remove(task)

    def unassign_standby(self, task: TaskId) -> None:
        if task not in self.standby:
            raise AssignmentError(f"task {task} is not a standby on client {self.process_id}")
        self.standby.remove(task)

    def _check_free(self, task: TaskId) -> None:
        if self.has_assigned(task):
            raise AssignmentError(f"task {task} is already assigned to client {self.process_id}")

    def copy(self) -> ClientState:
        return ClientState(self.process_id, self.rack, self.threads, self.active, self.standby)

    def __repr__(self) -> str:
        return (
            f"ClientState({self.process_id!r}, rack={self.rack!r}, active={sorted(map(str, self.active))}, "
            f"standby={sorted(map(str, self.standby))})"
        )


def sorted_clients(clients: Iterable[ClientState]) -> list[ClientState]:
    """Clients in Kafka's ProcessId order."""
    return sorted(clients, key=lambda c: process_sort_key(c.process_id))
