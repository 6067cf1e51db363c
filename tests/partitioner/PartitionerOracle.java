/*
 * Kafka's own producer partitioning code, driven line by line for lazyconv's differential tests
 * (tests/partitioner/test_kafka_partitioner_differential.py compiles and runs it against the
 * kafka-clients jar of LAZYCONV_KAFKA_DIST).
 *
 * It lives in Kafka's producer-internals package because the methods the producer itself calls
 * on BuiltInPartitioner and RecordAccumulator are package-private (peekCurrentPartitionInfo,
 * updatePartitionInfo, randomPartition, createBuiltInPartitioner); nothing of Kafka is changed,
 * only the random draw is taken from a java.util.Random with a known seed.
 *
 * Protocol: one request per stdin line, one answer per stdout line (the same count, in order).
 * Lists are comma-separated, "_" is an empty list, "n" a leaderless partition.
 *
 *   M KEYHEX|- N                    murmur2(key) and BuiltInPartitioner.partitionForKey(key, N)
 *   L SIZES IDS LENGTH              updatePartitionLoadStats -> "CFT|IDS|LENGTH" or "null"
 *   D NALL AVAIL SIZES|none IDS LENGTH DRAWS   the partition nextPartition picks for each draw
 *   S STICKY NALL AVAIL SEED        a new partitioner (draws from Random(SEED)) -> first partition
 *   U BYTES ENABLE                  updatePartitionInfo(current, BYTES, cluster, ENABLE) ->
 *                                   "PARTITION PRODUCED" of the current sticky partition after it
 *   W SIZES IDS LENGTH              updatePartitionLoadStats on that partitioner -> "ok"
 *   A BATCH LINGER MEMORY ADAPTIVE TIMEOUT MAXREQ SEED LEADERS   a new accumulator -> "ok"
 *   P PARTITION KEY VALUE HEADER TS NOW   append (KEY: ~ null, - empty, else hex; VALUE and
 *                                   HEADER: -1 none, else that many zero bytes; PARTITION -1 =
 *                                   the key's partition, or the built-in partitioner's for a null
 *                                   key) -> "PARTITION APPENDED FULL NEW" or "blocked"
 *   R NOW WAITERS                   ready -> "NODES|CFT|IDS|LENGTH" (or "NODES|null")
 *   T NODE NOW CANDRAIN             updateNodeLatencyStats -> "ok"
 *   G NODE NOW                      drain one node -> "P:RECORDS:BYTES,..." or "_"
 *   F INDEX                         deallocate the INDEX-th batch drained so far -> "ok"
 */
package org.apache.kafka.clients.producer.internals;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.MetadataSnapshot;
import org.apache.kafka.clients.producer.BufferExhaustedException;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;

public final class PartitionerOracle {
    private static final String TOPIC = "t";
    private static final LogContext LOG = new LogContext();

    /** A BuiltInPartitioner whose draws come from the oracle instead of ThreadLocalRandom. */
    static final class ScriptedPartitioner extends BuiltInPartitioner {
        private final Supplier<Integer> draws;

        ScriptedPartitioner(String topic, int stickyBatchSize, Supplier<Integer> draws) {
            super(LOG, topic, stickyBatchSize);
            this.draws = draws;
        }

        @Override
        int randomPartition() {
            return draws.get();
        }
    }

    /** The clock the accumulator reads after a buffer allocation: set to each request's time. */
    static final class SetTime implements Time {
        long ms;

        @Override
        public long milliseconds() {
            return ms;
        }

        @Override
        public long nanoseconds() {
            return ms * 1_000_000L;
        }

        @Override
        public void sleep(long sleepMs) {
            ms += sleepMs;
        }

        @Override
        public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {
            throw new UnsupportedOperationException("the oracle never waits");
        }
    }

    /** A buffer pool reporting as many blocked appenders as the simulation had. */
    static final class WaitersPool extends BufferPool {
        int waiters;

        WaitersPool(long memory, int poolableSize, Metrics metrics, Time time) {
            super(memory, poolableSize, metrics, time, "producer-metrics");
        }

        @Override
        public int queued() {
            return waiters;
        }
    }

    private static Field loadStatsField;
    private static Field cftField;
    private static Field idsField;
    private static Field lengthField;
    private static Field producedField;
    private static Method nextPartition;

    // -- switching sequence state
    private ScriptedPartitioner seqPartitioner;
    private Cluster seqCluster;

    // -- accumulator scenario state
    private RecordAccumulator accumulator;
    private WaitersPool pool;
    private SetTime time;
    private Cluster cluster;
    private MetadataSnapshot snapshot;
    private int maxRequestSize;
    private final List<ProducerBatch> drained = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        loadStatsField = BuiltInPartitioner.class.getDeclaredField("partitionLoadStats");
        loadStatsField.setAccessible(true);
        Class<?> stats = Class.forName(BuiltInPartitioner.class.getName() + "$PartitionLoadStats");
        cftField = stats.getDeclaredField("cumulativeFrequencyTable");
        idsField = stats.getDeclaredField("partitionIds");
        lengthField = stats.getDeclaredField("length");
        for (Field f : new Field[]{cftField, idsField, lengthField}) {
            f.setAccessible(true);
        }
        producedField = BuiltInPartitioner.StickyPartitionInfo.class.getDeclaredField("producedBytes");
        producedField.setAccessible(true);
        nextPartition = BuiltInPartitioner.class.getDeclaredMethod("nextPartition", Cluster.class);
        nextPartition.setAccessible(true);

        PartitionerOracle oracle = new PartitionerOracle();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        String line;
        int number = 0;
        while ((line = in.readLine()) != null) {
            number++;
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

    private String handle(String[] f) throws Exception {
        switch (f[0]) {
            case "M": return murmur(f);
            case "L": return loadStats(f);
            case "D": return draws(f);
            case "S": return startSequence(f);
            case "U": return update(f);
            case "W": return sequenceLoadStats(f);
            case "A": return startAccumulator(f);
            case "P": return append(f);
            case "R": return ready(f);
            case "T": return latency(f);
            case "G": return drain(f);
            case "F": return free(f);
            default: throw new IllegalArgumentException("unknown request " + f[0]);
        }
    }

    // -- parsing

    private static int[] ints(String csv) {
        if (csv.equals("_")) {
            return new int[0];
        }
        String[] parts = csv.split(",");
        int[] values = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            values[i] = Integer.parseInt(parts[i]);
        }
        return values;
    }

    private static String csv(int[] values, int length) {
        if (length == 0) {
            return "_";
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < length; i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append(values[i]);
        }
        return b.toString();
    }

    private static byte[] key(String token) {
        if (token.equals("~")) {
            return null;
        }
        if (token.equals("-")) {
            return new byte[0];
        }
        byte[] bytes = new byte[token.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(token.substring(2 * i, 2 * i + 2), 16);
        }
        return bytes;
    }

    /** A one-topic cluster; leaders[i] leads partition i (null: leaderless). */
    private static Cluster clusterOf(Integer[] leaders) {
        Map<Integer, Node> nodes = new HashMap<>();
        List<PartitionInfo> partitions = new ArrayList<>();
        for (int p = 0; p < leaders.length; p++) {
            Node leader = null;
            if (leaders[p] != null) {
                leader = nodes.computeIfAbsent(leaders[p], id -> new Node(id, "localhost", 9000 + id));
            }
            Node[] replicas = leader == null ? new Node[0] : new Node[]{leader};
            partitions.add(new PartitionInfo(TOPIC, p, leader, replicas, replicas));
        }
        return new Cluster("oracle", nodes.values(), partitions, Collections.emptySet(), Collections.emptySet());
    }

    private static Integer[] leadersFromAvailable(int all, int[] available) {
        Integer[] leaders = new Integer[all];
        for (int p : available) {
            leaders[p] = 0;
        }
        return leaders;
    }

    private static String statsOf(BuiltInPartitioner partitioner) throws Exception {
        Object stats = loadStatsField.get(partitioner);
        if (stats == null) {
            return "null";
        }
        int length = lengthField.getInt(stats);
        return csv((int[]) cftField.get(stats), length) + "|" + csv((int[]) idsField.get(stats), length) + "|" + length;
    }

    private static Supplier<Integer> javaRandom(long seed) {
        Random random = new Random(seed);
        return () -> Utils.toPositive(random.nextInt());
    }

    // -- keyed partitioning

    private String murmur(String[] f) {
        byte[] k = key(f[1]);
        return Utils.murmur2(k) + " " + BuiltInPartitioner.partitionForKey(k, Integer.parseInt(f[2]));
    }

    // -- load stats and draws

    private String loadStats(String[] f) throws Exception {
        BuiltInPartitioner partitioner = new BuiltInPartitioner(LOG, TOPIC, 1);
        partitioner.updatePartitionLoadStats(ints(f[1]), ints(f[2]), Integer.parseInt(f[3]));
        return statsOf(partitioner);
    }

    private String draws(String[] f) throws Exception {
        int all = Integer.parseInt(f[1]);
        Cluster c = clusterOf(leadersFromAvailable(all, ints(f[2])));
        int[] values = ints(f[6]);
        int[] next = {0};
        ScriptedPartitioner partitioner = new ScriptedPartitioner(TOPIC, 1, () -> values[next[0]++]);
        if (f[3].equals("none")) {
            partitioner.updatePartitionLoadStats(null, null, 0);
        } else {
            partitioner.updatePartitionLoadStats(ints(f[3]), ints(f[4]), Integer.parseInt(f[5]));
        }
        int[] picks = new int[values.length];
        for (int i = 0; i < values.length; i++) {
            picks[i] = (Integer) nextPartition.invoke(partitioner, c);
        }
        return csv(picks, picks.length);
    }

    // -- switching sequences

    private String startSequence(String[] f) throws Exception {
        seqCluster = clusterOf(leadersFromAvailable(Integer.parseInt(f[2]), ints(f[3])));
        seqPartitioner = new ScriptedPartitioner(TOPIC, Integer.parseInt(f[1]), javaRandom(Long.parseLong(f[4])));
        return String.valueOf(seqPartitioner.peekCurrentPartitionInfo(seqCluster).partition());
    }

    private String update(String[] f) throws Exception {
        BuiltInPartitioner.StickyPartitionInfo info = seqPartitioner.peekCurrentPartitionInfo(seqCluster);
        seqPartitioner.updatePartitionInfo(info, Integer.parseInt(f[1]), seqCluster, f[2].equals("1"));
        BuiltInPartitioner.StickyPartitionInfo now = seqPartitioner.peekCurrentPartitionInfo(seqCluster);
        return now.partition() + " " + producedField.get(now);
    }

    private String sequenceLoadStats(String[] f) {
        seqPartitioner.updatePartitionLoadStats(ints(f[1]), ints(f[2]), Integer.parseInt(f[3]));
        return "ok";
    }

    // -- accumulator scenarios

    private String startAccumulator(String[] f) {
        int batchSize = Integer.parseInt(f[1]);
        int lingerMs = Integer.parseInt(f[2]);
        long memory = Long.parseLong(f[3]);
        boolean adaptive = f[4].equals("1");
        long availabilityTimeoutMs = Long.parseLong(f[5]);
        maxRequestSize = Integer.parseInt(f[6]);
        Supplier<Integer> draws = javaRandom(Long.parseLong(f[7]));
        String[] leaderTokens = f[8].split(",");
        Integer[] leaders = new Integer[leaderTokens.length];
        for (int i = 0; i < leaders.length; i++) {
            leaders[i] = leaderTokens[i].equals("n") ? null : Integer.valueOf(leaderTokens[i]);
        }
        cluster = clusterOf(leaders);
        snapshot = new MetadataSnapshot("oracle", new HashMap<>(), Collections.emptyList(),
            Collections.emptySet(), Collections.emptySet(), Collections.emptySet(), null,
            Collections.emptyMap(), cluster);
        time = new SetTime();
        Metrics metrics = new Metrics(time);
        pool = new WaitersPool(memory, batchSize, metrics, time);
        drained.clear();
        accumulator = new RecordAccumulator(LOG, batchSize, Compression.NONE, lingerMs, 100L, 1000L,
            Integer.MAX_VALUE, new RecordAccumulator.PartitionerConfig(adaptive, availabilityTimeoutMs),
            metrics, "producer-metrics", time, new ApiVersions(), null, pool) {
            @Override
            BuiltInPartitioner createBuiltInPartitioner(LogContext logContext, String topic, int stickyBatchSize) {
                return new ScriptedPartitioner(topic, stickyBatchSize, draws);
            }
        };
        return "ok";
    }

    private String append(String[] f) throws Exception {
        int partition = Integer.parseInt(f[1]);
        byte[] k = key(f[2]);
        int valueSize = Integer.parseInt(f[3]);
        int headerSize = Integer.parseInt(f[4]);
        long timestamp = Long.parseLong(f[5]);
        long now = Long.parseLong(f[6]);
        byte[] value = valueSize < 0 ? null : new byte[valueSize];
        Header[] headers = headerSize < 0 ? new Header[0] : new Header[]{new RecordHeader("h", new byte[headerSize])};
        if (partition < 0 && k != null) {
            partition = BuiltInPartitioner.partitionForKey(k, cluster.partitionsForTopic(TOPIC).size());
        }
        int[] effective = {-1};
        RecordAccumulator.AppendCallbacks callbacks = new RecordAccumulator.AppendCallbacks() {
            @Override
            public void setPartition(int p) {
                effective[0] = p;
            }

            @Override
            public void onCompletion(org.apache.kafka.clients.producer.RecordMetadata metadata, Exception exception) {
            }
        };
        time.ms = now;
        try {
            RecordAccumulator.RecordAppendResult r = accumulator.append(TOPIC, partition, timestamp, k, value,
                headers, callbacks, 0L, now, cluster);
            return effective[0] + " " + r.appendedBytes + " " + b(r.batchIsFull) + " " + b(r.newBatchCreated);
        } catch (BufferExhaustedException e) {
            return "blocked";
        }
    }

    private static String b(boolean value) {
        return value ? "1" : "0";
    }

    private String ready(String[] f) throws Exception {
        long now = Long.parseLong(f[1]);
        pool.waiters = Integer.parseInt(f[2]);
        time.ms = now;
        RecordAccumulator.ReadyCheckResult result = accumulator.ready(snapshot, now);
        Set<Integer> ids = new TreeSet<>();
        for (Node node : result.readyNodes) {
            ids.add(node.id());
        }
        int[] sorted = ids.stream().mapToInt(Integer::intValue).toArray();
        // getBuiltInPartitioner throws before the topic's first deque exists
        BuiltInPartitioner partitioner = accumulator.getDeque(new TopicPartition(TOPIC, 0)) == null
            && !hasTopic() ? null : accumulator.getBuiltInPartitioner(TOPIC);
        return csv(sorted, sorted.length) + "|" + (partitioner == null ? "null" : statsOf(partitioner));
    }

    private boolean hasTopic() {
        for (int p = 0; p < cluster.partitionsForTopic(TOPIC).size(); p++) {
            if (accumulator.getDeque(new TopicPartition(TOPIC, p)) != null) {
                return true;
            }
        }
        return false;
    }

    private String latency(String[] f) {
        time.ms = Long.parseLong(f[2]);
        accumulator.updateNodeLatencyStats(Integer.parseInt(f[1]), Long.parseLong(f[2]), f[3].equals("1"));
        return "ok";
    }

    private String drain(String[] f) {
        Node node = cluster.nodeById(Integer.parseInt(f[1]));
        long now = Long.parseLong(f[2]);
        time.ms = now;
        Set<Node> nodes = new HashSet<>();
        nodes.add(node);
        List<ProducerBatch> batches = accumulator.drain(snapshot, nodes, maxRequestSize, now).get(node.id());
        if (batches == null || batches.isEmpty()) {
            return "_";
        }
        StringBuilder b = new StringBuilder();
        for (ProducerBatch batch : batches) {
            if (b.length() > 0) {
                b.append(',');
            }
            b.append(batch.topicPartition.partition()).append(':').append(batch.recordCount)
                .append(':').append(batch.records().sizeInBytes());
            drained.add(batch);
        }
        return b.toString();
    }

    private String free(String[] f) {
        accumulator.deallocate(drained.get(Integer.parseInt(f[1])));
        return "ok";
    }
}
