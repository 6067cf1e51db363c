/*
 * Kafka's own Java clients (kafka-clients of LAZYCONV_KAFKA_DIST, with their defaults) for
 * tests/gateway/test_gateway_modern_clients.py: the same program runs straight against Kafka
 * and through the gateway, and the test compares what it prints. One JSON object per line.
 *
 *   java ModernClients produce BOOTSTRAP TOPIC COUNT CLIENT_ID
 *       the producer with its defaults (acks=all, enable.idempotence=true): COUNT records, keys
 *       "k<i>", values "v<i>"; {"ev":"sent","p":P,"o":O,"k":K} each, then {"ev":"done"}
 *   java ModernClients transact BOOTSTRAP TOPIC COUNT CLIENT_ID TRANSACTIONAL_ID
 *       a transactional producer (Kafka 4's transaction protocol where the cluster finalized it):
 *       COUNT records "t<i>" and the offsets of group TRANSACTIONAL_ID-group (partition p at
 *       10 * (p + 1)) committed in one transaction, then 5 records "x<i>" in an aborted one
 *   java ModernClients consume BOOTSTRAP TOPIC GROUP COUNT CLIENT_ID
 *       the consumer with group.protocol=consumer (KIP-848), subscribed, until COUNT records;
 *       commitSync; {"ev":"record",...} each, {"ev":"committed","offsets":{...}}, {"ev":"done"}
 *   java ModernClients admin BOOTSTRAP TOPIC GROUP CLIENT_ID
 *       the Admin client: create TOPIC (3 partitions), alter its retention.ms (incremental),
 *       describe its configs, describe it, describe the cluster and the first broker's configs,
 *       list the groups, describe GROUP (a consumer group), list its offsets; one
 *       {"step":NAME,...} per step, then {"ev":"done"}
 */
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

public final class ModernClients {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long TIMEOUT_S = 60;

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]), args[4]);
            case "transact" -> transact(args[1], args[2], Integer.parseInt(args[3]), args[4], args[5]);
            case "consume" -> consume(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5]);
            case "admin" -> admin(args[1], args[2], args[3], args[4]);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        emit(Map.of("ev", "done"));
    }

    private static void emit(Map<String, ?> event) throws Exception {
        System.out.println(JSON.writeValueAsString(new TreeMap<>(event)));
        System.out.flush();
    }

    private static void produce(String bootstrap, String topic, int count, String clientId)
            throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata md = sent.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
                emit(Map.of("ev", "sent", "p", md.partition(), "o", md.offset(), "k", "k" + i));
            }
        }
    }

    private static void transact(String bootstrap, String topic, int count, String clientId,
                                 String transactionalId) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            producer.beginTransaction();
            int partitions = producer.partitionsFor(topic).size();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, "t" + i, "t" + i));
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = new TreeMap<>(
                java.util.Comparator.comparingInt(TopicPartition::partition));
            for (int p = 0; p < partitions; p++) {
                offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(10L * (p + 1)));
            }
            producer.sendOffsetsToTransaction(offsets,
                new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(transactionalId + "-group"));
            producer.commitTransaction();
            emit(Map.of("ev", "committed", "records", count));
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, "x" + i, "x" + i));
            }
            producer.flush();
            producer.abortTransaction();
            emit(Map.of("ev", "aborted", "records", 5));
        }
    }

    private static void consume(String bootstrap, String topic, String group, int count,
                                String clientId) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            int seen = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
            while (seen < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    emit(Map.of("ev", "record", "p", r.partition(), "o", r.offset(), "k", r.key(),
                                "v", r.value()));
                    seen++;
                }
            }
            consumer.commitSync(Duration.ofSeconds(TIMEOUT_S));
            Map<String, Long> committed = new TreeMap<>();
            Map<TopicPartition, OffsetAndMetadata> back =
                consumer.committed(consumer.assignment(), Duration.ofSeconds(TIMEOUT_S));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : back.entrySet()) {
                if (e.getValue() != null) {
                    committed.put(Integer.toString(e.getKey().partition()), e.getValue().offset());
                }
            }
            emit(Map.of("ev", "committed", "offsets", committed));
        }
    }

    private static void admin(String bootstrap, String topic, String group, String clientId)
            throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)))
                .all().get(TIMEOUT_S, TimeUnit.SECONDS);
            emit(Map.of("step", "create"));

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "123456789"), AlterConfigOp.OpType.SET))))
                .all().get(TIMEOUT_S, TimeUnit.SECONDS);
            // a broker learns the change from the controller a moment later (KRaft): ask again
            Config config = admin.describeConfigs(List.of(resource)).all()
                .get(TIMEOUT_S, TimeUnit.SECONDS).get(resource);
            for (int i = 0; i < 100 && !"123456789".equals(config.get("retention.ms").value()); i++) {
                Thread.sleep(100);
                config = admin.describeConfigs(List.of(resource)).all()
                    .get(TIMEOUT_S, TimeUnit.SECONDS).get(resource);
            }
            emit(Map.of("step", "topic configs", "retention.ms",
                        config.get("retention.ms").value(),
                        "cleanup.policy", config.get("cleanup.policy").value()));

            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
            List<Map<String, Object>> partitions = new ArrayList<>();
            for (TopicPartitionInfo p : described.partitions()) {
                partitions.add(Map.of("partition", p.partition(), "leader", p.leader().id(),
                                      "replicas", p.replicas().size(), "isr", p.isr().size()));
            }
            emit(Map.of("step", "describe topic", "partitions", partitions));

            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get(TIMEOUT_S, TimeUnit.SECONDS);
            Node controller = cluster.controller().get(TIMEOUT_S, TimeUnit.SECONDS);
            List<Map<String, Object>> brokers = new ArrayList<>();
            for (Node n : nodes) {
                brokers.add(Map.of("id", n.id(), "host", n.host(), "port", n.port()));
            }
            emit(Map.of("step", "describe cluster", "brokers", brokers, "controller", controller.id(),
                        "cluster id", cluster.clusterId().get(TIMEOUT_S, TimeUnit.SECONDS)));

            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER,
                                                       Integer.toString(nodes.iterator().next().id()));
            Config brokerConfig = admin.describeConfigs(List.of(broker)).all()
                .get(TIMEOUT_S, TimeUnit.SECONDS).get(broker);
            emit(Map.of("step", "broker configs", "num.partitions",
                        brokerConfig.get("num.partitions").value(),
                        "count", brokerConfig.entries().size()));

            List<String> groups = new ArrayList<>();
            for (GroupListing g : admin.listGroups().all().get(TIMEOUT_S, TimeUnit.SECONDS)) {
                groups.add(g.groupId() + "/" + g.type().map(Object::toString).orElse("?"));
            }
            groups.sort(null);
            emit(Map.of("step", "list groups", "groups", groups));

            ConsumerGroupDescription group_ = admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group).get(TIMEOUT_S, TimeUnit.SECONDS);
            List<String> members = new ArrayList<>();
            for (MemberDescription m : group_.members()) {
                members.add(m.clientId() + " " + m.assignment().topicPartitions().size());
            }
            members.sort(null);
            emit(Map.of("step", "describe group", "state", group_.groupState().toString(),
                        "type", group_.type().toString(), "members", members,
                        "coordinator", group_.coordinator().id()));

            Map<String, Long> offsets = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : admin
                    .listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(TIMEOUT_S, TimeUnit.SECONDS).entrySet()) {
                offsets.put(e.getKey().topic() + "/" + e.getKey().partition(), e.getValue().offset());
            }
            emit(Map.of("step", "group offsets", "offsets", offsets));
        }
    }
}
