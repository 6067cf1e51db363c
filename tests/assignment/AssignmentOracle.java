/*
 * Kafka Streams' own rack-aware optimizers, driven instance by instance for lazyconv's
 * differential tests (tests/assignment/test_kafka_assignment_differential.py compiles and runs it
 * against the kafka-streams and kafka-clients jars of LAZYCONV_KAFKA_DIST).
 *
 * Two optimizers, the same pipeline around each (lazyconv.assignment.assign's): stateful actives,
 * stateless actives (weights 1/0), the input's standbys put back (a standby whose client now runs
 * the task as active goes to the client that active left), then the standbys:
 *
 *   internal  RackAwareTaskAssignor (canEnableRackAwareAssignor, optimizeActiveTasks,
 *             optimizeStandbyTasks), as the HighAvailabilityTaskAssignor runs it: when the
 *             enable check fails nothing is optimized.
 *   kip924    TaskAssignmentUtils.optimizeRackAwareActiveTasks (forStatefulTasks, then
 *             forStatelessTasks with overrides 1/0) and optimizeRackAwareStandbyTasks over an
 *             ApplicationState implemented here.
 *
 * Protocol: one request per stdin line, one answer per stdout line ("ok" but for E).
 *   I SEMANTICS STRATEGY TRAFFIC|- NONOVERLAP|- STANDBYS     a new instance (- = unset)
 *   C UUID RACK|~                                             a client (~ = no rack)
 *   K TASK STATEFUL INPUTS CHANGELOGS                         a task; partitions are
 *       TOPIC:PARTITION:RACK/RACK/~ joined by ';' ('_' none; an empty rack list is no replicas)
 *   A UUID ACTIVES STANDBYS                                   the current assignment (csv, '_')
 *   E                                                         -> UUID=ACTIVES/STANDBYS;... (clients
 *       in ProcessId order, tasks in TaskId order; "error ..." when Kafka throws)
 * TASK is SUBTOPOLOGY_PARTITION or TOPOLOGY_SUBTOPOLOGY_PARTITION.
 */
package org.apache.kafka.streams.processor.internals.assignment;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignmentUtils;
import org.apache.kafka.streams.processor.assignment.TaskAssignmentUtils.RackAwareOptimizationParams;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.TaskTopicPartition;
import org.apache.kafka.streams.processor.internals.InternalTopicManager;
import org.apache.kafka.streams.processor.internals.TopologyMetadata.Subtopology;
import org.apache.kafka.streams.state.HostInfo;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Properties;
import java.util.Set;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;

public final class AssignmentOracle {

    /** A partition of a task and the rack of each replica (null: a broker without rack). */
    record Part(TopicPartition tp, List<String> racks) { }

    record Task(TaskId id, boolean stateful, List<Part> inputs, List<Part> changelogs) { }

    record StreamsState(ProcessId processId, Optional<String> rackId) implements KafkaStreamsState {
        public int numProcessingThreads() {
            return 1;
        }

        public SortedSet<String> consumerClientIds() {
            return new TreeSet<>(Set.of("consumer"));
        }

        public SortedSet<TaskId> previousActiveTasks() {
            return new TreeSet<>();
        }

        public SortedSet<TaskId> previousStandbyTasks() {
            return new TreeSet<>();
        }

        public long lagFor(TaskId task) {
            return 0L;
        }

        public SortedSet<TaskId> prevTasksByLag(String consumerClientId) {
            return new TreeSet<>();
        }

        public Map<TaskId, Long> statefulTasksToLagSums() {
            return Collections.emptyMap();
        }

        public Optional<HostInfo> hostInfo() {
            return Optional.empty();
        }

        public Map<String, String> clientTags() {
            return Collections.emptyMap();
        }
    }

    record Partition(TopicPartition topicPartition, boolean isSource, boolean isChangelog,
                     Optional<Set<String>> rackIds) implements TaskTopicPartition { }

    record Info(TaskId id, boolean isStateful, Set<String> stateStoreNames,
                Set<TaskTopicPartition> topicPartitions) implements TaskInfo { }

    record State(Map<ProcessId, KafkaStreamsState> states, AssignmentConfigs configs,
                 Map<TaskId, TaskInfo> tasks) implements ApplicationState {
        public Map<ProcessId, KafkaStreamsState> kafkaStreamsStates(boolean computeTaskLags) {
            return states;
        }

        public AssignmentConfigs assignmentConfigs() {
            return configs;
        }

        public Map<TaskId, TaskInfo> allTasks() {
            return tasks;
        }
    }

    /** Describes topics from the instance's own partitions (the changelogs are not in metadata). */
    static final class Describer extends InternalTopicManager {
        private final Map<String, List<TopicPartitionInfo>> topics;

        Describer(StreamsConfig config, Map<String, List<TopicPartitionInfo>> topics) {
            super(Time.SYSTEM, null, config);
            this.topics = topics;
        }

        @Override
        public Map<String, List<TopicPartitionInfo>> getTopicPartitionInfo(Set<String> names) {
            Map<String, List<TopicPartitionInfo>> found = new HashMap<>();
            for (String name : names) {
                if (topics.containsKey(name)) {
                    found.put(name, topics.get(name));
                }
            }
            return found;
        }
    }

    private static StreamsConfig streamsConfig;

    // -- the instance being read
    private String semantics;
    private String strategy;
    private Integer traffic;
    private Integer nonOverlap;
    private int standbys;
    private final Map<ProcessId, String> racks = new LinkedHashMap<>();
    private final Map<TaskId, Task> tasks = new LinkedHashMap<>();
    private final Map<ProcessId, List<TaskId>> actives = new HashMap<>();
    private final Map<ProcessId, List<TaskId>> standbyTasks = new HashMap<>();

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "oracle");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9");
        streamsConfig = new StreamsConfig(props);
        AssignmentOracle oracle = new AssignmentOracle();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = oracle.handle(line.trim().split(" "));
            } catch (Exception e) {
                answer = "error " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' ');
            }
            out.write(answer);
            out.write('\n');
        }
        out.flush();
    }

    private String handle(String[] f) {
        switch (f[0]) {
            case "I":
                semantics = f[1];
                strategy = f[2];
                traffic = f[3].equals("-") ? null : Integer.valueOf(f[3]);
                nonOverlap = f[4].equals("-") ? null : Integer.valueOf(f[4]);
                standbys = Integer.parseInt(f[5]);
                racks.clear();
                tasks.clear();
                actives.clear();
                standbyTasks.clear();
                return "ok";
            case "C":
                racks.put(new ProcessId(UUID.fromString(f[1])), f[2].equals("~") ? null : f[2]);
                return "ok";
            case "K":
                TaskId id = taskId(f[1]);
                tasks.put(id, new Task(id, f[2].equals("1"), parts(f[3]), parts(f[4])));
                return "ok";
            case "A":
                ProcessId pid = new ProcessId(UUID.fromString(f[1]));
                actives.put(pid, taskIds(f[2]));
                standbyTasks.put(pid, taskIds(f[3]));
                return "ok";
            case "E":
                return semantics.equals("internal") ? runInternal() : runKip924();
            default:
                throw new IllegalArgumentException("unknown request " + f[0]);
        }
    }

    // -- parsing

    private static TaskId taskId(String text) {
        String[] p = text.split("_");
        if (p.length == 3) {
            return new TaskId(Integer.parseInt(p[1]), Integer.parseInt(p[2]), p[0]);
        }
        return new TaskId(Integer.parseInt(p[0]), Integer.parseInt(p[1]));
    }

    private static List<TaskId> taskIds(String csv) {
        List<TaskId> ids = new ArrayList<>();
        if (!csv.equals("_")) {
            for (String t : csv.split(",")) {
                ids.add(taskId(t));
            }
        }
        return ids;
    }

    private static List<Part> parts(String text) {
        List<Part> parts = new ArrayList<>();
        if (text.equals("_")) {
            return parts;
        }
        for (String item : text.split(";")) {
            String[] p = item.split(":", -1);
            List<String> racks = new ArrayList<>();
            if (!p[2].isEmpty()) {
                for (String r : p[2].split("/")) {
                    racks.add(r.equals("~") ? null : r);
                }
            }
            parts.add(new Part(new TopicPartition(p[0], Integer.parseInt(p[1])), racks));
        }
        return parts;
    }

    private static String name(TaskId id) {
        String base = id.subtopology() + "_" + id.partition();
        return id.topologyName() == null ? base : id.topologyName() + "_" + base;
    }

    // -- the internal assignor

    private static Node[] nodes(List<String> racks, int[] nextId) {
        Node[] nodes = new Node[racks.size()];
        for (int i = 0; i < nodes.length; i++) {
            int id = nextId[0]++;
            nodes[i] = new Node(id, "host" + id, 9092, racks.get(i));
        }
        return nodes;
    }

    private String runInternal() {
        int[] nextId = {0};
        Map<TopicPartition, PartitionInfo> metadata = new LinkedHashMap<>();
        Map<String, List<TopicPartitionInfo>> described = new HashMap<>();
        Map<TaskId, Set<TopicPartition>> inputs = new HashMap<>();
        Map<TaskId, Set<TopicPartition>> changelogs = new HashMap<>();
        Map<Subtopology, Set<TaskId>> groups = new HashMap<>();
        Set<TopicPartition> describedAlready = new HashSet<>();
        for (Task task : tasks.values()) {
            Set<TopicPartition> in = new HashSet<>();
            for (Part part : task.inputs()) {
                in.add(part.tp());
                Node[] replicas = nodes(part.racks(), nextId);
                metadata.put(part.tp(), new PartitionInfo(part.tp().topic(), part.tp().partition(),
                    replicas.length > 0 ? replicas[0] : null, replicas, replicas));
            }
            inputs.put(task.id(), in);
            Set<TopicPartition> ch = new HashSet<>();
            for (Part part : task.changelogs()) {
                ch.add(part.tp());
            }
            changelogs.put(task.id(), ch);
            for (Part part : concat(task.inputs(), task.changelogs())) {
                if (describedAlready.add(part.tp())) {
                    Node[] replicas = nodes(part.racks(), nextId);
                    List<Node> list = List.of(replicas);
                    described.computeIfAbsent(part.tp().topic(), k -> new ArrayList<>()).add(
                        new TopicPartitionInfo(part.tp().partition(), list.isEmpty() ? null : list.get(0), list, list));
                }
            }
            groups.computeIfAbsent(new Subtopology(task.id().subtopology(), task.id().topologyName()),
                k -> new HashSet<>()).add(task.id());
        }
        Set<Node> allNodes = new HashSet<>();
        for (PartitionInfo info : metadata.values()) {
            allNodes.addAll(List.of(info.replicas()));
        }
        Cluster cluster = new Cluster("oracle", allNodes, metadata.values(), Collections.emptySet(), Collections.emptySet());
        Map<ProcessId, Map<String, Optional<String>>> consumerRacks = new HashMap<>();
        for (Map.Entry<ProcessId, String> e : racks.entrySet()) {
            consumerRacks.put(e.getKey(), Map.of("consumer", Optional.ofNullable(e.getValue())));
        }
        AssignmentConfigs configs = new AssignmentConfigs(0L, 1, standbys, 60_000L, Collections.emptyList(),
            traffic == null ? OptionalInt.empty() : OptionalInt.of(traffic),
            nonOverlap == null ? OptionalInt.empty() : OptionalInt.of(nonOverlap), strategy);
        RackAwareTaskAssignor assignor = new RackAwareTaskAssignor(cluster, inputs, changelogs, groups, consumerRacks,
            new Describer(streamsConfig, described), configs, Time.SYSTEM);

        SortedMap<ProcessId, ClientState> clients = new TreeMap<>();
        for (ProcessId pid : racks.keySet()) {
            ClientState state = new ClientState(pid, Collections.emptyMap());
            for (TaskId t : actives.getOrDefault(pid, List.of())) {
                state.assignActive(t);
            }
            clients.put(pid, state);
        }
        Map<TaskId, ProcessId> previousOwner = previousOwners();
        if (!assignor.canEnableRackAwareAssignor()) {
            putBackStandbys(clients, previousOwner);
            return answer(clients);
        }
        SortedSet<TaskId> stateful = new TreeSet<>();
        SortedSet<TaskId> stateless = new TreeSet<>();
        for (Task task : tasks.values()) {
            (task.stateful() ? stateful : stateless).add(task.id());
        }
        // the high-availability assignor's defaults for unset costs
        int trafficCost = traffic == null ? 10 : traffic;
        int nonOverlapCost = nonOverlap == null ? 1 : nonOverlap;
        assignor.optimizeActiveTasks(stateful, clients, trafficCost, nonOverlapCost);
        assignor.optimizeActiveTasks(stateless, clients, RackAwareTaskAssignor.STATELESS_TRAFFIC_COST,
            RackAwareTaskAssignor.STATELESS_NON_OVERLAP_COST);
        putBackStandbys(clients, previousOwner);
        if (standbys > 0) {
            assignor.optimizeStandbyTasks(clients, trafficCost, nonOverlapCost, (source, destination, task, all) -> true);
        }
        return answer(clients);
    }

    private static List<Part> concat(List<Part> a, List<Part> b) {
        List<Part> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    private Map<TaskId, ProcessId> previousOwners() {
        Map<TaskId, ProcessId> owners = new HashMap<>();
        actives.forEach((pid, ids) -> ids.forEach(t -> owners.put(t, pid)));
        return owners;
    }

    private void putBackStandbys(SortedMap<ProcessId, ClientState> clients, Map<TaskId, ProcessId> previousOwner) {
        for (Map.Entry<ProcessId, ClientState> e : clients.entrySet()) {
            for (TaskId t : new TreeSet<>(standbyTasks.getOrDefault(e.getKey(), List.of()))) {
                ClientState owner = e.getValue().activeTasks().contains(t) ? clients.get(previousOwner.get(t)) : e.getValue();
                owner.assignStandby(t);
            }
        }
    }

    private static String answer(SortedMap<ProcessId, ClientState> clients) {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<ProcessId, ClientState> e : clients.entrySet()) {
            append(b, e.getKey(), new TreeSet<>(e.getValue().activeTasks()), new TreeSet<>(e.getValue().standbyTasks()));
        }
        return b.toString();
    }

    private static void append(StringBuilder b, ProcessId pid, SortedSet<TaskId> active, SortedSet<TaskId> standby) {
        if (b.length() > 0) {
            b.append(';');
        }
        b.append(pid.id()).append('=').append(join(active)).append('/').append(join(standby));
    }

    private static String join(SortedSet<TaskId> ids) {
        List<String> names = new ArrayList<>();
        for (TaskId t : ids) {
            names.add(name(t));
        }
        return names.isEmpty() ? "_" : String.join(",", names);
    }

    // -- KIP-924's public optimizers

    private static Optional<Set<String>> rackIds(Part part) {
        if (part.racks().isEmpty()) {
            return Optional.empty();
        }
        Set<String> known = new HashSet<>();
        for (String r : part.racks()) {
            if (r != null) {
                known.add(r);
            }
        }
        return Optional.of(known);
    }

    private String runKip924() {
        Map<ProcessId, KafkaStreamsState> states = new TreeMap<>();
        racks.forEach((pid, rack) -> states.put(pid, new StreamsState(pid, Optional.ofNullable(rack))));
        Map<TaskId, TaskInfo> infos = new HashMap<>();
        for (Task task : tasks.values()) {
            Map<TopicPartition, Partition> byTp = new LinkedHashMap<>();
            for (Part part : task.inputs()) {
                byTp.put(part.tp(), new Partition(part.tp(), true, false, rackIds(part)));
            }
            for (Part part : task.changelogs()) {
                Partition source = byTp.get(part.tp());
                byTp.put(part.tp(), new Partition(part.tp(), source != null, true, rackIds(part)));
            }
            infos.put(task.id(), new Info(task.id(), task.stateful(), Collections.emptySet(), new HashSet<>(byTp.values())));
        }
        AssignmentConfigs configs = new AssignmentConfigs(0L, 1, standbys, 60_000L, Collections.emptyList(),
            traffic == null ? OptionalInt.empty() : OptionalInt.of(traffic),
            nonOverlap == null ? OptionalInt.empty() : OptionalInt.of(nonOverlap), strategy);
        State state = new State(states, configs, infos);

        Map<ProcessId, KafkaStreamsAssignment> assignments = new TreeMap<>();
        for (ProcessId pid : states.keySet()) {
            Set<AssignedTask> held = new HashSet<>();
            for (TaskId t : actives.getOrDefault(pid, List.of())) {
                held.add(new AssignedTask(t, AssignedTask.Type.ACTIVE));
            }
            assignments.put(pid, KafkaStreamsAssignment.of(pid, held));
        }
        RackAwareOptimizationParams params = RackAwareOptimizationParams.of(state);
        TaskAssignmentUtils.optimizeRackAwareActiveTasks(params.forStatefulTasks(), assignments);
        TaskAssignmentUtils.optimizeRackAwareActiveTasks(
            params.forStatelessTasks().withTrafficCostOverride(1).withNonOverlapCostOverride(0), assignments);
        Map<TaskId, ProcessId> previousOwner = previousOwners();
        for (Map.Entry<ProcessId, KafkaStreamsAssignment> e : assignments.entrySet()) {
            for (TaskId t : new TreeSet<>(standbyTasks.getOrDefault(e.getKey(), List.of()))) {
                AssignedTask held = e.getValue().tasks().get(t);
                ProcessId owner = held != null && held.type() == AssignedTask.Type.ACTIVE ? previousOwner.get(t) : e.getKey();
                assignments.get(owner).assignTask(new AssignedTask(t, AssignedTask.Type.STANDBY));
            }
        }
        if (standbys > 0) {
            TaskAssignmentUtils.optimizeRackAwareStandbyTasks(params, assignments);
        }
        StringBuilder b = new StringBuilder();
        for (Map.Entry<ProcessId, KafkaStreamsAssignment> e : assignments.entrySet()) {
            SortedSet<TaskId> active = new TreeSet<>();
            SortedSet<TaskId> standby = new TreeSet<>();
            for (AssignedTask t : e.getValue().tasks().values()) {
                (t.type() == AssignedTask.Type.ACTIVE ? active : standby).add(t.id());
            }
            append(b, e.getKey(), active, standby);
        }
        return b.toString();
    }
}
