"""KIP-925 rack-aware task assignment for Kafka Streams, as Kafka computes it.

Sibling of the conversion stack (imports nothing from it). Layers, bottom up:

* :mod:`~lazyconv.assignment._graph` — min-cost flow (cycle canceling, Bellman-Ford) and max flow
  with Kafka's iteration order, so equal-cost ties resolve as in Kafka;
* :mod:`~lazyconv.assignment._constructors` — the ``min_traffic`` and ``balance_subtopology``
  flow networks;
* :mod:`~lazyconv.assignment._cost` — traffic / non-overlap cost, defaults by caller;
* :mod:`~lazyconv.assignment._assignor` — Kafka's ``RackAwareTaskAssignor`` (enable check,
  active and standby optimization);
* :mod:`~lazyconv.assignment._racks` — what rack information each optimizer needs;
* :mod:`~lazyconv.assignment._api` — :func:`assign` over plain dataclasses (the internal
  assignor's or KIP-924's public semantics, Kafka's behaviour on missing racks);
  :mod:`~lazyconv.assignment._jsonio` — the JSON format of ``lazyconv assign``.
"""

from lazyconv.assignment._api import (
    MISSING_RACKS,
    SEMANTICS,
    AssignmentInput,
    AssignmentResult,
    Client,
    ClientTasks,
    PartitionRacks,
    PhaseCost,
    Task,
    assign,
    validate_input,
)
from lazyconv.assignment._assignor import (
    RackAwareTaskAssignor,
    always_allow_standby_move,
    client_tag_aware_predicate,
    optimize_active_tasks,
    optimize_standby_tasks,
)
from lazyconv.assignment._cost import (
    HIGH_AVAILABILITY_DEFAULTS,
    LEGACY_STICKY_DEFAULTS,
    STATELESS_COSTS,
    CostModel,
    CostWeights,
)
from lazyconv.assignment._errors import (
    AssignmentError,
    AssignmentInputError,
    GraphError,
    MissingRacksError,
)
from lazyconv.assignment._graph import Graph
from lazyconv.assignment._ids import TaskId, TopicPartition, process_sort_key
from lazyconv.assignment._state import ClientState

__all__ = [
    "MISSING_RACKS",
    "SEMANTICS",
    "AssignmentInput",
    "AssignmentResult",
    "Client",
    "ClientTasks",
    "PartitionRacks",
    "PhaseCost",
    "Task",
    "assign",
    "validate_input",
    "RackAwareTaskAssignor",
    "always_allow_standby_move",
    "client_tag_aware_predicate",
    "optimize_active_tasks",
    "optimize_standby_tasks",
    "HIGH_AVAILABILITY_DEFAULTS",
    "LEGACY_STICKY_DEFAULTS",
    "STATELESS_COSTS",
    "CostModel",
    "CostWeights",
    "AssignmentError",
    "AssignmentInputError",
    "GraphError",
    "MissingRacksError",
    "Graph",
    "TaskId",
    "TopicPartition",
    "process_sort_key",
    "ClientState",
]
