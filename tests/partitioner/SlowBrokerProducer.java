/*
 * Kafka's own Java producer (kafka-clients of LAZYCONV_KAFKA_DIST) for the slow-broker test
 * (tests/partitioner/test_slow_broker_kafka.py): keyless records of VALUE bytes offered at RATE
 * records/s in the bursts Kafka's ThroughputThrottler makes (but no catch-up burst after a stall of
 * the process over 100 ms), batch.size BATCH, linger.ms LINGER, the
 * built-in partitioner with its
 * defaults (adaptive, no availability timeout) unless ADAPTIVE is false. Prints one line per
 * partition, "PARTITION RECORDS", once every record is acknowledged, then "elapsed MS".
 *
 *   java SlowBrokerProducer BOOTSTRAP TOPIC RECORDS RATE VALUE BATCH LINGER ADAPTIVE
 */
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

public final class SlowBrokerProducer {
    /** Behind schedule by more than this (the process did not run): restart the schedule. */
    private static final long STALL_NS = 100_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int records = Integer.parseInt(args[2]);
        double rate = Double.parseDouble(args[3]);
        byte[] value = new byte[Integer.parseInt(args[4])];
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "1");
        props.put(ProducerConfig.LINGER_MS_CONFIG, args[6]);
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, args[5]);
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        props.put(ProducerConfig.PARTITIONER_ADPATIVE_PARTITIONING_ENABLE_CONFIG, args[7]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Map<Integer, AtomicInteger> counts = new ConcurrentHashMap<>();
        AtomicReference<Exception> failure = new AtomicReference<>();
        long start;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.partitionsFor(topic); // metadata first: the clock starts with a warm producer
            start = System.nanoTime();
            long next = start;
            long intervalNs = (long) (1e9 / rate);
            for (int i = 0; i < records; i++) {
                long now = System.nanoTime();
                if (next - now >= 2_000_000L) { // ahead: sleep, in >= 2 ms steps (ThroughputThrottler)
                    Thread.sleep((next - now) / 1_000_000L, (int) ((next - now) % 1_000_000L));
                } else if (now - next > STALL_NS) {
                    next = now; // after a stall (a busy machine), no burst to catch up
                }
                next += intervalNs;
                producer.send(new ProducerRecord<>(topic, null, value), (metadata, exception) -> {
                    if (exception != null) {
                        failure.compareAndSet(null, exception);
                    } else {
                        counts.computeIfAbsent(metadata.partition(), p -> new AtomicInteger()).incrementAndGet();
                    }
                });
            }
            producer.flush();
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        for (Map.Entry<Integer, AtomicInteger> e : new TreeMap<>(counts).entrySet()) {
            System.out.println(e.getKey() + " " + e.getValue().get());
        }
        System.out.println("elapsed " + (System.nanoTime() - start) / 1_000_000L);
    }
}
