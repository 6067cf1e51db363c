"""How Kafka routes each API, and where its requests and answers name brokers (sans-IO facts).

For every API of :data:`~lazyconv.protocol._kafka_apis.KAFKA_APIS`, :data:`ROUTES` says

- where a Kafka client sends it (:class:`Route`): the broker it is connected to, any broker, the
  controller (through any broker, which forwards it), the group or transaction coordinator
  found with FindCoordinator, each partition's leader, every broker in turn, or the broker a
  field names; with the fields that carry the routing key (group ids, transactional ids,
  topic-partitions, broker ids) as paths into the declared schema;
- which request and response fields name brokers (:class:`NodeField`: node ids, hosts, ports,
  racks, a broker id written as a config resource's name): what a proxy that presents itself as
  one broker must rewrite, consistently with its Metadata answer.

These are facts read from Kafka 4.0.1's Java (each row names its class): the admin client's
``KafkaAdminClient`` (its ``NodeProvider`` per call: ``LeastLoadedNodeProvider``,
``ControllerNodeProvider``, ``ConstantNodeIdProvider``, ``LeastLoadedBrokerOrActiveKController``,
``MetadataUpdateNodeIdProvider``) and ``admin.internals`` handlers (``CoordinatorStrategy``,
``PartitionLeaderStrategy``, ``AllBrokersStrategy``); the producer's ``Sender`` and
``TransactionManager``; the consumer's fetcher and coordinators; and the broker's ``KafkaApis``
(``forwardToController``: a KRaft broker relays those to the active controller, KIP-590, so any
broker takes them). Nothing here does I/O; ``tests/protocol/test_routing.py`` holds every path
against the declarations and every broker-naming field of every schema against this table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "FieldPath",
    "Route",
    "NodeRole",
    "NodeField",
    "PartitionKey",
    "ApiRoute",
    "ROUTES",
    "GROUP_COORDINATOR_KEY_TYPE",
    "TRANSACTION_COORDINATOR_KEY_TYPE",
    "BROKER_RESOURCE_TYPES",
    "route_of",
]

FieldPath = tuple[str, ...]
"""Field names from the message's root down (arrays are walked through), as declared."""

GROUP_COORDINATOR_KEY_TYPE = 0  # FindCoordinator KeyType (FindCoordinatorRequest.CoordinatorType)
TRANSACTION_COORDINATOR_KEY_TYPE = 1
# ConfigResource.Type BROKER (4) and BROKER_LOGGER (8): a resource named by a broker id, answered
# by that broker only (ConfigHelper / ConfigAdminManager: "Unexpected broker id" elsewhere)
BROKER_RESOURCE_TYPES = frozenset({4, 8})


class Route(enum.Enum):
    """Where a Kafka client sends a request."""

    CONNECTION = "connection"
    """About the connection itself (versions, SASL): answered by the broker it is open to."""
    ANY_BROKER = "any broker"
    """Any broker answers from state every broker has (the least loaded node)."""
    CONTROLLER = "controller"
    """The active controller, through any broker: KRaft brokers forward it
    (``forwardToController``); the admin client sends it to Metadata's controller id or the
    least loaded broker."""
    GROUP_COORDINATOR = "group coordinator"
    """The coordinator of the group in :attr:`ApiRoute.keys` (FindCoordinator key type 0)."""
    TRANSACTION_COORDINATOR = "transaction coordinator"
    """The coordinator of the transactional id in :attr:`ApiRoute.keys` (key type 1)."""
    PARTITION_LEADER = "partition leader"
    """Each partition's leader: a request is split by :attr:`ApiRoute.partitions`."""
    EACH_BROKER = "each broker"
    """Every broker in turn, each answering for what it hosts; the client merges the answers."""
    NAMED_BROKER = "named broker"
    """The broker a field names (:attr:`ApiRoute.keys`) or the client picked by its id: a per-broker
    resource (broker configs, log directories)."""


class NodeRole(enum.Enum):
    """What a broker-naming field holds."""

    NODE_ID = "node id"  # int32
    NODE_IDS = "node ids"  # []int32
    HOST = "host"  # string
    PORT = "port"  # int32 (uint16 in the KRaft voter APIs)
    RACK = "rack"  # nullable string
    NODE_ID_TEXT = "node id as text"  # a config resource's name: "1"


@dataclass(frozen=True)
class NodeField:
    """A field naming brokers (or, with ``controllers``, KRaft controllers), in the response
    unless ``in_request``; with ``when``, only in elements whose sibling field (the path's last
    name) holds one of the values (config resources of the broker types)."""

    path: FieldPath
    role: NodeRole
    in_request: bool = False
    when: tuple[str, frozenset[int]] | None = None
    controllers: bool = False


@dataclass(frozen=True)
class PartitionKey:
    """Where a request names topic-partitions: the topic (a name or, from some version, an id)
    and the partition indexes under it."""

    topic: FieldPath
    partition: FieldPath


@dataclass(frozen=True)
class ApiRoute:
    """How one API is routed (``route``; ``otherwise`` for requests whose key field is absent or
    does not select it, e.g. an idempotent producer's null transactional id) and where its
    messages name brokers. ``source``: the Kafka class the facts come from."""

    key: int
    name: str
    route: Route
    source: str
    keys: tuple[FieldPath, ...] = ()
    key_when: tuple[FieldPath, frozenset[int]] | None = None
    partitions: tuple[PartitionKey, ...] = ()
    otherwise: Route | None = None
    names_nodes: tuple[NodeField, ...] = ()
    note: str = ""

    @property
    def coordinator_key_type(self) -> int | None:
        """FindCoordinator's key type for a coordinator route, else None."""
        if self.route is Route.GROUP_COORDINATOR:
            return GROUP_COORDINATOR_KEY_TYPE
        if self.route is Route.TRANSACTION_COORDINATOR:
            return TRANSACTION_COORDINATOR_KEY_TYPE
        return None


# -- shared pieces -------------------------------------------------------------------------------

_ADMIN = "KafkaAdminClient"
_FORWARDED = "KafkaApis: forwardToController"


def _endpoints(
    prefix: FieldPath, node: str = "node_id", rack: bool = True
) -> tuple[NodeField, ...]:
    fields = [
        NodeField((*prefix, node), NodeRole.NODE_ID),
        NodeField((*prefix, "host"), NodeRole.HOST),
        NodeField((*prefix, "port"), NodeRole.PORT),
    ]
    if rack:
        fields.append(NodeField((*prefix, "rack"), NodeRole.RACK))
    return tuple(fields)


def _replicas(prefix: FieldPath, *names: str) -> tuple[NodeField, ...]:
    return tuple(NodeField((*prefix, name), NodeRole.NODE_IDS) for name in names)


def _config_resources(request: FieldPath, response: FieldPath) -> tuple[NodeField, ...]:
    return (
        NodeField(
            (*request, "resource_name"),
            NodeRole.NODE_ID_TEXT,
            in_request=True,
            when=("resource_type", BROKER_RESOURCE_TYPES),
        ),
        NodeField(
            (*response, "resource_name"),
            NodeRole.NODE_ID_TEXT,
            when=("resource_type", BROKER_RESOURCE_TYPES),
        ),
    )


_GROUP = Route.GROUP_COORDINATOR
_TXN = Route.TRANSACTION_COORDINATOR
_LEADER = Route.PARTITION_LEADER

_TABLE = (
    ApiRoute(
        0,
        "Produce",
        _LEADER,
        "producer Sender (leader of each partition)",
        partitions=(
            PartitionKey(("topic_data", "name"), ("topic_data", "partition_data", "index")),
        ),
        names_nodes=(
            NodeField(
                ("responses", "partition_responses", "current_leader", "leader_id"),
                NodeRole.NODE_ID,
            ),
            *_endpoints(("node_endpoints",)),
        ),
        note="v10+ (KIP-951): a NOT_LEADER answer names the new leader and its endpoint (tagged)",
    ),
    ApiRoute(
        1,
        "Fetch",
        _LEADER,
        "consumer AbstractFetch (the leader, or KIP-392's preferred read replica)",
        partitions=(
            PartitionKey(("topics", "topic"), ("topics", "partitions", "partition")),
            PartitionKey(("topics", "topic_id"), ("topics", "partitions", "partition")),
        ),
        names_nodes=(
            NodeField(("responses", "partitions", "current_leader", "leader_id"), NodeRole.NODE_ID),
            NodeField(("responses", "partitions", "preferred_read_replica"), NodeRole.NODE_ID),
            *_endpoints(("node_endpoints",)),
        ),
        note="a fetch session (session id and epoch, forgotten topics) is state of the broker that "
        "holds it; the request's replica id is -1 for consumers",
    ),
    ApiRoute(
        2,
        "ListOffsets",
        _LEADER,
        "consumer OffsetFetcher; admin ListOffsetsHandler (PartitionLeaderStrategy)",
        partitions=(PartitionKey(("topics", "name"), ("topics", "partitions", "partition_index")),),
    ),
    ApiRoute(
        3,
        "Metadata",
        Route.ANY_BROKER,
        "NetworkClient DefaultMetadataUpdater (least loaded node)",
        names_nodes=(
            *_endpoints(("brokers",)),
            NodeField(("controller_id",), NodeRole.NODE_ID),
            NodeField(("topics", "partitions", "leader_id"), NodeRole.NODE_ID),
            *_replicas(("topics", "partitions"), "replica_nodes", "isr_nodes", "offline_replicas"),
        ),
        note="a KRaft broker answers a random alive broker as controller_id",
    ),
    ApiRoute(
        8,
        "OffsetCommit",
        _GROUP,
        "ConsumerCoordinator; admin AlterConsumerGroupOffsetsHandler",
        keys=(("group_id",),),
    ),
    ApiRoute(
        9,
        "OffsetFetch",
        _GROUP,
        "ConsumerCoordinator; admin ListConsumerGroupOffsetsHandler",
        keys=(("group_id",), ("groups", "group_id")),
        note="v8+ batches groups: each group's coordinator answers for its groups",
    ),
    ApiRoute(
        10,
        "FindCoordinator",
        Route.ANY_BROKER,
        "AbstractCoordinator.lookupCoordinator; admin CoordinatorStrategy (least loaded node)",
        names_nodes=(*_endpoints((), rack=False), *_endpoints(("coordinators",), rack=False)),
    ),
    ApiRoute(11, "JoinGroup", _GROUP, "AbstractCoordinator", keys=(("group_id",),)),
    ApiRoute(12, "Heartbeat", _GROUP, "AbstractCoordinator", keys=(("group_id",),)),
    ApiRoute(
        13,
        "LeaveGroup",
        _GROUP,
        "AbstractCoordinator; admin RemoveMembersFromConsumerGroupHandler",
        keys=(("group_id",),),
    ),
    ApiRoute(14, "SyncGroup", _GROUP, "AbstractCoordinator", keys=(("group_id",),)),
    ApiRoute(
        15,
        "DescribeGroups",
        _GROUP,
        "admin DescribeClassicGroupsHandler / DescribeConsumerGroupsHandler",
        keys=(("groups",),),
        note="members' client_host is the client's address as the broker saw it (behind a proxy, "
        "the proxy's)",
    ),
    ApiRoute(
        16,
        "ListGroups",
        Route.EACH_BROKER,
        f"{_ADMIN}.listGroups (findAllBrokers, then ConstantNodeIdProvider per broker)",
        note="each broker lists the groups it coordinates",
    ),
    ApiRoute(17, "SaslHandshake", Route.CONNECTION, "SaslClientAuthenticator"),
    ApiRoute(
        18, "ApiVersions", Route.CONNECTION, "NetworkClient (first request on every connection)"
    ),
    ApiRoute(
        19,
        "CreateTopics",
        Route.CONTROLLER,
        f"{_ADMIN}.createTopics (ControllerNodeProvider); {_FORWARDED}",
        names_nodes=(
            NodeField(("topics", "assignments", "broker_ids"), NodeRole.NODE_IDS, in_request=True),
        ),
    ),
    ApiRoute(
        20,
        "DeleteTopics",
        Route.CONTROLLER,
        f"{_ADMIN}.deleteTopics (ControllerNodeProvider); {_FORWARDED}",
    ),
    ApiRoute(
        21,
        "DeleteRecords",
        _LEADER,
        "admin DeleteRecordsHandler (PartitionLeaderStrategy)",
        partitions=(PartitionKey(("topics", "name"), ("topics", "partitions", "partition_index")),),
    ),
    ApiRoute(
        22,
        "InitProducerId",
        _TXN,
        "TransactionManager.InitProducerIdHandler; admin FenceProducersHandler",
        keys=(("transactional_id",),),
        otherwise=Route.ANY_BROKER,
        note="an idempotent producer (null transactional id) asks the least loaded node",
    ),
    ApiRoute(
        23,
        "OffsetForLeaderEpoch",
        _LEADER,
        "consumer OffsetFetcher (OffsetsForLeaderEpochUtils)",
        partitions=(PartitionKey(("topics", "topic"), ("topics", "partitions", "partition")),),
    ),
    ApiRoute(
        24,
        "AddPartitionsToTxn",
        _TXN,
        "TransactionManager.AddPartitionsToTxnHandler (v0-3); the "
        "partition leaders' AddPartitionsToTxnManager (v4+, broker to coordinator)",
        keys=(("v3_and_below_transactional_id",), ("transactions", "transactional_id")),
        note="Kafka 4.0.1 never answers a v4+ request whose Transactions list is empty",
    ),
    ApiRoute(
        25,
        "AddOffsetsToTxn",
        _TXN,
        "TransactionManager.AddOffsetsToTxnHandler",
        keys=(("transactional_id",),),
    ),
    ApiRoute(26, "EndTxn", _TXN, "TransactionManager.EndTxnHandler", keys=(("transactional_id",),)),
    ApiRoute(
        27,
        "WriteTxnMarkers",
        _LEADER,
        "the transaction coordinator's marker channel; admin "
        "AbortTransactionHandler (PartitionLeaderStrategy)",
        partitions=(
            PartitionKey(("markers", "topics", "name"), ("markers", "topics", "partition_indexes")),
        ),
    ),
    ApiRoute(
        28,
        "TxnOffsetCommit",
        _GROUP,
        "TransactionManager.TxnOffsetCommitHandler (CoordinatorType.GROUP)",
        keys=(("group_id",),),
        note="the group's coordinator, not the transaction's",
    ),
    ApiRoute(
        29,
        "DescribeAcls",
        Route.ANY_BROKER,
        f"{_ADMIN}.describeAcls (LeastLoadedBrokerOrActiveKController)",
        note="ACL hosts are client hosts, not brokers",
    ),
    ApiRoute(
        30,
        "CreateAcls",
        Route.CONTROLLER,
        f"{_ADMIN}.createAcls (LeastLoadedBrokerOrActiveKController); {_FORWARDED}",
    ),
    ApiRoute(
        31,
        "DeleteAcls",
        Route.CONTROLLER,
        f"{_ADMIN}.deleteAcls (LeastLoadedBrokerOrActiveKController); {_FORWARDED}",
    ),
    ApiRoute(
        32,
        "DescribeConfigs",
        Route.NAMED_BROKER,
        f"{_ADMIN}.describeConfigs (nodeFor: "
        "ConstantNodeIdProvider for BROKER and BROKER_LOGGER resources); ConfigHelper",
        keys=(("resources", "resource_name"),),
        key_when=(("resources", "resource_type"), BROKER_RESOURCE_TYPES),
        otherwise=Route.ANY_BROKER,
        names_nodes=_config_resources(("resources",), ("results",)),
        note="a broker's config values (listeners, advertised.listeners, ...) name that broker's "
        "own addresses; a BROKER resource with an empty name is the cluster default: any broker",
    ),
    ApiRoute(
        33,
        "AlterConfigs",
        Route.NAMED_BROKER,
        "ConfigAdminManager.preprocess (a BROKER resource "
        f"names the receiving broker); {_FORWARDED}",
        keys=(("resources", "resource_name"),),
        key_when=(("resources", "resource_type"), BROKER_RESOURCE_TYPES),
        otherwise=Route.CONTROLLER,
        names_nodes=_config_resources(("resources",), ("responses",)),
    ),
    ApiRoute(
        34,
        "AlterReplicaLogDirs",
        Route.NAMED_BROKER,
        f"{_ADMIN}.alterReplicaLogDirs (ConstantNodeIdProvider: the broker of each replica)",
        note="moves replicas within the receiving broker: its answer covers that broker only",
    ),
    ApiRoute(
        35,
        "DescribeLogDirs",
        Route.NAMED_BROKER,
        f"{_ADMIN}.describeLogDirs (ConstantNodeIdProvider per broker asked)",
        note="the receiving broker's log directories: its answer covers that broker only",
    ),
    ApiRoute(36, "SaslAuthenticate", Route.CONNECTION, "SaslClientAuthenticator"),
    ApiRoute(
        37,
        "CreatePartitions",
        Route.CONTROLLER,
        f"{_ADMIN}.createPartitions (ControllerNodeProvider); {_FORWARDED}",
        names_nodes=(
            NodeField(("topics", "assignments", "broker_ids"), NodeRole.NODE_IDS, in_request=True),
        ),
    ),
    ApiRoute(
        38,
        "CreateDelegationToken",
        Route.CONTROLLER,
        f"{_ADMIN}.createDelegationToken "
        "(LeastLoadedNodeProvider); KafkaApis.handleCreateTokenRequest forwards it",
        note="refused on a connection that is not authenticated (or authenticated with a token)",
    ),
    ApiRoute(
        39,
        "RenewDelegationToken",
        Route.CONTROLLER,
        f"{_ADMIN}.renewDelegationToken "
        "(LeastLoadedNodeProvider); KafkaApis.handleRenewTokenRequest forwards it",
    ),
    ApiRoute(
        40,
        "ExpireDelegationToken",
        Route.CONTROLLER,
        f"{_ADMIN}.expireDelegationToken "
        "(LeastLoadedNodeProvider); KafkaApis.handleExpireTokenRequest forwards it",
    ),
    ApiRoute(
        41,
        "DescribeDelegationToken",
        Route.ANY_BROKER,
        f"{_ADMIN}.describeDelegationToken (LeastLoadedNodeProvider)",
    ),
    ApiRoute(
        42, "DeleteGroups", _GROUP, "admin DeleteConsumerGroupsHandler", keys=(("groups_names",),)
    ),
    ApiRoute(
        43,
        "ElectLeaders",
        Route.CONTROLLER,
        f"{_ADMIN}.electLeaders (ControllerNodeProvider); {_FORWARDED}",
    ),
    ApiRoute(
        44,
        "IncrementalAlterConfigs",
        Route.NAMED_BROKER,
        f"{_ADMIN}.incrementalAlterConfigs "
        "(ConstantNodeIdProvider for BROKER_LOGGER and non-default BROKER resources); "
        f"ConfigAdminManager.preprocess; {_FORWARDED}",
        keys=(("resources", "resource_name"),),
        key_when=(("resources", "resource_type"), BROKER_RESOURCE_TYPES),
        otherwise=Route.CONTROLLER,
        names_nodes=_config_resources(("resources",), ("responses",)),
    ),
    ApiRoute(
        45,
        "AlterPartitionReassignments",
        Route.CONTROLLER,
        f"{_ADMIN}.alterPartitionReassignments (ControllerNodeProvider); {_FORWARDED}",
        names_nodes=(
            NodeField(("topics", "partitions", "replicas"), NodeRole.NODE_IDS, in_request=True),
        ),
    ),
    ApiRoute(
        46,
        "ListPartitionReassignments",
        Route.CONTROLLER,
        f"{_ADMIN}.listPartitionReassignments (ControllerNodeProvider); {_FORWARDED}",
        names_nodes=_replicas(
            ("topics", "partitions"), "replicas", "adding_replicas", "removing_replicas"
        ),
    ),
    ApiRoute(
        47, "OffsetDelete", _GROUP, "admin DeleteConsumerGroupOffsetsHandler", keys=(("group_id",),)
    ),
    ApiRoute(
        48,
        "DescribeClientQuotas",
        Route.ANY_BROKER,
        f"{_ADMIN}.describeClientQuotas (LeastLoadedNodeProvider)",
    ),
    ApiRoute(
        49,
        "AlterClientQuotas",
        Route.CONTROLLER,
        f"{_ADMIN}.alterClientQuotas (LeastLoadedNodeProvider); {_FORWARDED}",
    ),
    ApiRoute(
        50,
        "DescribeUserScramCredentials",
        Route.ANY_BROKER,
        f"{_ADMIN}.describeUserScramCredentials (LeastLoadedNodeProvider)",
    ),
    ApiRoute(
        51,
        "AlterUserScramCredentials",
        Route.CONTROLLER,
        f"{_ADMIN}.alterUserScramCredentials (ControllerNodeProvider); {_FORWARDED}",
    ),
    ApiRoute(
        55,
        "DescribeQuorum",
        Route.CONTROLLER,
        f"{_ADMIN}.describeMetadataQuorum (LeastLoadedBrokerOrActiveKController); {_FORWARDED}",
        names_nodes=(
            NodeField(("topics", "partitions", "leader_id"), NodeRole.NODE_ID, controllers=True),
            NodeField(
                ("topics", "partitions", "current_voters", "replica_id"),
                NodeRole.NODE_ID,
                controllers=True,
            ),
            NodeField(
                ("topics", "partitions", "observers", "replica_id"),
                NodeRole.NODE_ID,
                controllers=True,
            ),
            NodeField(("nodes", "node_id"), NodeRole.NODE_ID, controllers=True),
            NodeField(("nodes", "listeners", "host"), NodeRole.HOST, controllers=True),
            NodeField(("nodes", "listeners", "port"), NodeRole.PORT, controllers=True),
        ),
        note="names KRaft voters and observers (controllers and brokers by node id) and the "
        "controllers' listeners, not a client's brokers",
    ),
    ApiRoute(
        57,
        "UpdateFeatures",
        Route.CONTROLLER,
        f"{_ADMIN}.updateFeatures (ControllerNodeProvider); {_FORWARDED}",
    ),
    ApiRoute(
        60,
        "DescribeCluster",
        Route.ANY_BROKER,
        f"{_ADMIN}.describeCluster (MetadataUpdateNodeIdProvider)",
        names_nodes=(
            *_endpoints(("brokers",), node="broker_id"),
            NodeField(("controller_id",), NodeRole.NODE_ID),
        ),
        note="a KRaft broker answers a random alive broker as controller_id",
    ),
    ApiRoute(
        61,
        "DescribeProducers",
        _LEADER,
        "admin DescribeProducersHandler (PartitionLeaderStrategy)",
        partitions=(PartitionKey(("topics", "name"), ("topics", "partition_indexes")),),
    ),
    ApiRoute(
        64,
        "UnregisterBroker",
        Route.CONTROLLER,
        f"{_ADMIN}.unregisterBroker (LeastLoadedNodeProvider); {_FORWARDED}",
        names_nodes=(NodeField(("broker_id",), NodeRole.NODE_ID, in_request=True),),
    ),
    ApiRoute(
        65,
        "DescribeTransactions",
        _TXN,
        "admin DescribeTransactionsHandler (CoordinatorStrategy TRANSACTION)",
        keys=(("transactional_ids",),),
    ),
    ApiRoute(
        66,
        "ListTransactions",
        Route.EACH_BROKER,
        "admin ListTransactionsHandler (AllBrokersStrategy)",
        note="each broker lists the transactions it coordinates",
    ),
    ApiRoute(
        68,
        "ConsumerGroupHeartbeat",
        _GROUP,
        "consumer ConsumerHeartbeatRequestManager (KIP-848)",
        keys=(("group_id",),),
    ),
    ApiRoute(
        69,
        "ConsumerGroupDescribe",
        _GROUP,
        "admin DescribeConsumerGroupsHandler",
        keys=(("group_ids",),),
    ),
    ApiRoute(
        74,
        "ListClientMetricsResources",
        Route.ANY_BROKER,
        f"{_ADMIN}.listClientMetricsResources (LeastLoadedNodeProvider)",
    ),
    ApiRoute(
        75,
        "DescribeTopicPartitions",
        Route.ANY_BROKER,
        f"{_ADMIN}.describeTopics (LeastLoadedNodeProvider)",
        names_nodes=(
            NodeField(("topics", "partitions", "leader_id"), NodeRole.NODE_ID),
            *_replicas(
                ("topics", "partitions"),
                "replica_nodes",
                "isr_nodes",
                "eligible_leader_replicas",
                "last_known_elr",
                "offline_replicas",
            ),
        ),
    ),
    ApiRoute(
        80,
        "AddRaftVoter",
        Route.CONTROLLER,
        f"{_ADMIN}.addRaftVoter (LeastLoadedBrokerOrActiveKController); {_FORWARDED}",
        names_nodes=(
            NodeField(("voter_id",), NodeRole.NODE_ID, in_request=True, controllers=True),
            NodeField(("listeners", "host"), NodeRole.HOST, in_request=True, controllers=True),
            NodeField(("listeners", "port"), NodeRole.PORT, in_request=True, controllers=True),
        ),
    ),
    ApiRoute(
        81,
        "RemoveRaftVoter",
        Route.CONTROLLER,
        f"{_ADMIN}.removeRaftVoter (LeastLoadedBrokerOrActiveKController); {_FORWARDED}",
        names_nodes=(
            NodeField(("voter_id",), NodeRole.NODE_ID, in_request=True, controllers=True),
        ),
    ),
)

ROUTES: Mapping[int, ApiRoute] = MappingProxyType({route.key: route for route in _TABLE})


def route_of(api_key: int) -> ApiRoute:
    """The routing facts of ``api_key`` (KeyError for an API Kafka 4.0.1's brokers do not serve)."""
    return ROUTES[api_key]
