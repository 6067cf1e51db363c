// Apache Kafka's own Java client (0.10.2 to 2.x) as a test driver: the job (JSON, args[0]) and
// the JSON-lines events it prints are those of tests/interop/drivers/common.py:
//
// - "consume", mode "assign" (from offset 0, or "start": "earliest" for seekToBeginning, which
//   asks ListOffsets) or "subscribe" (with "group"), "last", "commit" (commitSync of last + 1
//   for each assigned partition once done), "expect_partitions", "hold" (stay in the group,
//   polling, until stdin closes);
// - "produce": acks=all, every send waited for, a "produced" event per record.
//
// client: {"client_id": str, "compression": null, "gzip", "snappy" or "lz4" (produce),
// "config": {extra client properties}}. Compiled with javac --release 8 against one version's
// jars (tests/oldclients/clients.py): it uses only API that 0.10.2 has (poll(long),
// seekToBeginning(Collection)); headers (0.11+) through reflection, so that one source serves
// every version. No JSON library: the small parser below reads the job.
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

public class JavaClientDriver {
    private static final String BYTES_IN = "org.apache.kafka.common.serialization.ByteArrayDeserializer";
    private static final String BYTES_OUT = "org.apache.kafka.common.serialization.ByteArraySerializer";

    public static void main(String[] args) {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        int status = 0;
        try {
            Map<String, Object> job = Json.object(new Json(args[0]).value());
            startWatchdog(number(job.get("timeout")));
            String action = (String) job.get("action");
            if ("consume".equals(action)) {
                status = consume(job);
            } else if ("produce".equals(action)) {
                produce(job);
            } else {
                throw new IllegalArgumentException("Java client driver: action " + action
                                                   + " is not supported");
            }
        } catch (Throwable exc) {
            emit("error", "message", exc.getClass().getSimpleName() + ": " + exc.getMessage());
            exc.printStackTrace();
            status = 1;
        }
        System.out.flush();
        System.exit(status);  // the client's threads are not all daemons
    }

    // -- events -----------------------------------------------------------------------------

    static synchronized void emit(String event, Object... fields) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("ev", event);
        for (int i = 0; i < fields.length; i += 2) {
            out.put((String) fields[i], fields[i + 1]);
        }
        StringBuilder line = new StringBuilder();
        Json.write(line, out);
        System.out.println(line);
        System.out.flush();
    }

    /** The job's timeout, plus a little: the old consumers' poll() can block for ever (in
     * finding the coordinator or joining), so the process ends itself. */
    static void startWatchdog(double timeoutSeconds) {
        final long millis = (long) (timeoutSeconds * 1000) + 5000;
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(millis);
            } catch (InterruptedException exc) {
                return;
            }
            emit("error", "message", "timed out after " + timeoutSeconds + " s");
            Runtime.getRuntime().halt(1);
        }, "driver-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    static String b64(byte[] data) {
        return data == null ? null : Base64.getEncoder().encodeToString(data);
    }

    static byte[] unb64(Object text) {
        return text == null ? null : Base64.getDecoder().decode((String) text);
    }

    static double number(Object value) {
        return ((Number) value).doubleValue();
    }

    static String key(String topic, int partition) {
        return topic + "/" + partition;
    }

    static List<Object> sortedPartitions(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                                                          : a.topic().compareTo(b.topic()));
        List<Object> out = new ArrayList<>();
        for (TopicPartition tp : sorted) {
            out.add(Arrays.asList(tp.topic(), (long) tp.partition()));
        }
        return out;
    }

    static Properties common(Map<String, Object> job) {
        Map<String, Object> client = Json.object(job.containsKey("client") ? job.get("client")
                                                                           : new HashMap<>());
        Properties props = new Properties();
        props.put("bootstrap.servers", job.get("bootstrap"));
        Object clientId = client.get("client_id");
        props.put("client.id", clientId == null ? "java-client-driver" : clientId);
        props.put("request.timeout.ms", "15000");
        Object config = client.get("config");
        if (config != null) {
            for (Map.Entry<String, Object> e : Json.object(config).entrySet()) {
                props.put(e.getKey(), String.valueOf(e.getValue()));
            }
        }
        return props;
    }

    // -- consume ----------------------------------------------------------------------------

    /** Which partitions delivered their last wanted record ("last": "topic/p" -> offset). */
    static final class Progress {
        final Map<String, Object> last;
        final Map<String, Long> seen = new HashMap<>();

        Progress(Map<String, Object> last) {
            this.last = last;
        }

        long last(String topic, int partition) {
            Object value = last.get(key(topic, partition));
            if (value == null) {
                throw new IllegalStateException("no \"last\" for " + key(topic, partition));
            }
            return (long) number(value);
        }

        boolean wanted(String topic, int partition, long offset) {
            String k = key(topic, partition);
            Long seenOffset = seen.get(k);
            if (offset > last(topic, partition) || (seenOffset != null && offset <= seenOffset)) {
                return false;
            }
            seen.put(k, offset);
            return true;
        }

        boolean done(TopicPartition tp) {
            long want = last(tp.topic(), tp.partition());
            Long seenOffset = seen.get(key(tp.topic(), tp.partition()));
            return want < 0 || (seenOffset != null && seenOffset >= want);
        }

        boolean allDone(Collection<TopicPartition> partitions) {
            for (TopicPartition tp : partitions) {
                if (!done(tp)) {
                    return false;
                }
            }
            return true;
        }
    }

    /** ConsumerRecord.headers() and Header.key()/value() where the client has them (0.11+). */
    static final Method HEADERS = method("org.apache.kafka.clients.consumer.ConsumerRecord", "headers");
    static final Method HEADER_KEY = method("org.apache.kafka.common.header.Header", "key");
    static final Method HEADER_VALUE = method("org.apache.kafka.common.header.Header", "value");

    static Method method(String className, String name) {
        try {
            return Class.forName(className).getMethod(name);
        } catch (ReflectiveOperationException exc) {
            return null;
        }
    }

    static List<Object> headers(ConsumerRecord<byte[], byte[]> record) throws ReflectiveOperationException {
        List<Object> out = new ArrayList<>();
        if (HEADERS == null) {
            return out;
        }
        for (Object header : (Iterable<?>) HEADERS.invoke(record)) {
            out.add(Arrays.asList(HEADER_KEY.invoke(header), b64((byte[]) HEADER_VALUE.invoke(header))));
        }
        return out;
    }

    static int consume(Map<String, Object> job) throws Exception {
        String mode = (String) job.get("mode");
        boolean subscribe = "subscribe".equals(mode);
        if (!subscribe && !"assign".equals(mode)) {
            throw new IllegalArgumentException("unknown consume mode " + mode);
        }
        Progress progress = new Progress(Json.object(job.get("last")));
        Properties props = common(job);
        props.put("key.deserializer", BYTES_IN);
        props.put("value.deserializer", BYTES_IN);
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("max.partition.fetch.bytes", String.valueOf(8 << 20));
        props.put("fetch.max.wait.ms", "100");
        props.put("session.timeout.ms", "10000");
        props.put("heartbeat.interval.ms", "500");
        props.put("max.poll.interval.ms", "10000");
        if (subscribe) {
            props.put("group.id", job.get("group"));
        }
        String isolation = (String) job.get("isolation");
        if ("read_committed".equals(isolation)) {
            props.put("isolation.level", "read_committed");  // 0.11+
        }
        final Object expectValue = job.get("expect_partitions");
        final Integer expect = expectValue == null ? null : (int) number(expectValue);
        long deadline = System.nanoTime() + (long) (number(job.get("timeout")) * 1e9);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        try {
            if (subscribe) {
                List<String> topics = new ArrayList<>();
                for (Object t : (List<?>) job.get("topics")) {
                    topics.add((String) t);
                }
                consumer.subscribe(topics, new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                        // Pause a new assignment before anything is fetched unless it has the
                        // size the job waits for.
                        if (expect != null && assigned.size() != expect) {
                            consumer.pause(assigned);
                        }
                    }
                });
            } else {
                List<TopicPartition> tps = new ArrayList<>();
                for (Object item : (List<?>) job.get("partitions")) {
                    List<?> pair = (List<?>) item;
                    tps.add(new TopicPartition((String) pair.get(0), (int) number(pair.get(1))));
                }
                consumer.assign(tps);
                if ("earliest".equals(job.get("start"))) {
                    consumer.seekToBeginning(tps);
                } else {
                    for (TopicPartition tp : tps) {
                        consumer.seek(tp, 0);
                    }
                }
            }
            Set<TopicPartition> reported = new HashSet<>();
            Set<TopicPartition> owned = Collections.emptySet();
            boolean finished = false;
            while (System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> polled = consumer.poll(100);
                owned = new HashSet<>(consumer.assignment());
                if (!owned.isEmpty() && !owned.equals(reported)) {
                    emit("assigned", "partitions", sortedPartitions(owned));
                    reported = owned;
                }
                if (expect != null && owned.size() != expect) {
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> r : polled) {
                    if (progress.wanted(r.topic(), r.partition(), r.offset())) {
                        emit("record", "t", r.topic(), "p", (long) r.partition(), "o", r.offset(),
                             "ts", r.timestamp(), "k", b64(r.key()), "v", b64(r.value()),
                             "h", headers(r));
                    }
                }
                List<TopicPartition> done = new ArrayList<>();
                for (TopicPartition tp : owned) {
                    if (progress.done(tp)) {
                        done.add(tp);
                    }
                }
                consumer.pause(done);
                if (!owned.isEmpty() && done.size() == owned.size()) {
                    finished = true;
                    break;
                }
            }
            if (!finished) {
                emit("error", "message", "timed out before every partition was read");
                return 1;
            }
            if (Boolean.TRUE.equals(job.get("commit"))) {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                List<Object> committed = new ArrayList<>();
                for (Object item : sortedPartitions(owned)) {
                    List<?> pair = (List<?>) item;
                    String topic = (String) pair.get(0);
                    int partition = (int) (long) (Long) pair.get(1);
                    long offset = progress.last(topic, partition) + 1;
                    offsets.put(new TopicPartition(topic, partition), new OffsetAndMetadata(offset, ""));
                    committed.add(Arrays.asList(topic, (long) partition, offset));
                }
                consumer.commitSync(offsets);
                emit("committed", "offsets", committed);
            }
            emit("done");
            if (Boolean.TRUE.equals(job.get("hold"))) {
                AtomicBoolean closed = stdinClosed();
                while (!closed.get() && System.nanoTime() < deadline) {
                    consumer.poll(100);  // records are not read here (nor reported)
                    owned = new HashSet<>(consumer.assignment());
                    if (!owned.isEmpty() && !owned.equals(reported)) {  // a later rebalance
                        emit("assigned", "partitions", sortedPartitions(owned));
                        reported = owned;
                    }
                    consumer.pause(owned);
                }
            }
        } finally {
            consumer.close();
        }
        return 0;
    }

    /** Set once the test closes our stdin (the signal to leave the group). */
    static AtomicBoolean stdinClosed() {
        AtomicBoolean closed = new AtomicBoolean(false);
        Thread reader = new Thread(() -> {
            byte[] buffer = new byte[4096];
            InputStream in = System.in;
            try {
                while (in.read(buffer) >= 0) {
                    // discard
                }
            } catch (IOException exc) {
                // closed all the same
            }
            closed.set(true);
        }, "stdin-watch");
        reader.setDaemon(true);
        reader.start();
        return closed;
    }

    // -- produce ----------------------------------------------------------------------------

    static void produce(Map<String, Object> job) throws Exception {
        Map<String, Object> client = Json.object(job.get("client"));
        Properties props = common(job);
        props.put("key.serializer", BYTES_OUT);
        props.put("value.serializer", BYTES_OUT);
        props.put("acks", "all");
        props.put("linger.ms", "5");
        props.put("retries", "0");
        props.put("max.block.ms", String.valueOf((long) (number(job.get("timeout")) * 1000)));
        if (client.get("compression") != null) {
            props.put("compression.type", client.get("compression"));
        }
        String topic = (String) job.get("topic");
        long timeoutMs = (long) (number(job.get("timeout")) * 1000);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        try {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (Object item : (List<?>) job.get("records")) {
                Map<String, Object> r = Json.object(item);
                Integer partition = r.get("partition") == null ? null : (int) number(r.get("partition"));
                futures.add(producer.send(record(topic, partition, unb64(r.get("key")),
                                                 unb64(r.get("value")), (List<?>) r.get("headers"))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get(timeoutMs, TimeUnit.MILLISECONDS);
                emit("produced", "t", md.topic(), "p", (long) md.partition(), "o", md.offset());
            }
            emit("done");
        } finally {
            producer.close(5, TimeUnit.SECONDS);
        }
    }

    /** A ProducerRecord, with headers through the 0.11+ constructor when there are any. */
    static ProducerRecord<byte[], byte[]> record(String topic, Integer partition, byte[] key,
                                                 byte[] value, List<?> headers) throws Exception {
        if (headers == null || headers.isEmpty()) {
            return new ProducerRecord<>(topic, partition, key, value);
        }
        Class<?> headerClass;
        try {
            headerClass = Class.forName("org.apache.kafka.common.header.internals.RecordHeader");
        } catch (ClassNotFoundException exc) {
            throw new IllegalArgumentException("this client writes magic v1 messages, which have no headers");
        }
        Constructor<?> newHeader = headerClass.getConstructor(String.class, byte[].class);
        List<Object> built = new ArrayList<>();
        for (Object item : headers) {
            List<?> pair = (List<?>) item;
            built.add(newHeader.newInstance((String) pair.get(0), unb64(pair.get(1))));
        }
        @SuppressWarnings("unchecked")
        Constructor<ProducerRecord<byte[], byte[]>> withHeaders = (Constructor<ProducerRecord<byte[], byte[]>>)
            (Constructor<?>) ProducerRecord.class.getConstructor(String.class, Integer.class, Long.class,
                                                                 Object.class, Object.class, Iterable.class);
        return withHeaders.newInstance(topic, partition, null, key, value, built);
    }

    // -- JSON -------------------------------------------------------------------------------

    /** Just enough JSON: objects (LinkedHashMap), arrays (ArrayList), strings, numbers (Long,
     * or Double with a fraction or exponent), true, false, null. */
    static final class Json {
        private final String text;
        private int at;

        Json(String text) {
            this.text = text;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(Object value) {
            return (Map<String, Object>) value;
        }

        Object value() {
            Object out = parse();
            skipSpace();
            if (at != text.length()) {
                throw error("trailing characters");
            }
            return out;
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("job JSON: " + what + " at character " + at);
        }

        private void skipSpace() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
        }

        private Object parse() {
            skipSpace();
            if (at >= text.length()) {
                throw error("unexpected end");
            }
            char c = text.charAt(at);
            if (c == '{') {
                Map<String, Object> out = new LinkedHashMap<>();
                at++;
                skipSpace();
                if (text.charAt(at) == '}') {
                    at++;
                    return out;
                }
                while (true) {
                    skipSpace();
                    if (text.charAt(at) != '"') {
                        throw error("expected a key");
                    }
                    String k = string();
                    skipSpace();
                    expect(':');
                    out.put(k, parse());
                    skipSpace();
                    if (text.charAt(at) == ',') {
                        at++;
                    } else {
                        expect('}');
                        return out;
                    }
                }
            }
            if (c == '[') {
                List<Object> out = new ArrayList<>();
                at++;
                skipSpace();
                if (text.charAt(at) == ']') {
                    at++;
                    return out;
                }
                while (true) {
                    out.add(parse());
                    skipSpace();
                    if (text.charAt(at) == ',') {
                        at++;
                    } else {
                        expect(']');
                        return out;
                    }
                }
            }
            if (c == '"') {
                return string();
            }
            if (text.startsWith("true", at)) {
                at += 4;
                return Boolean.TRUE;
            }
            if (text.startsWith("false", at)) {
                at += 5;
                return Boolean.FALSE;
            }
            if (text.startsWith("null", at)) {
                at += 4;
                return null;
            }
            int start = at;
            while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
                at++;
            }
            String number = text.substring(start, at);
            if (number.isEmpty()) {
                throw error("unexpected character '" + c + "'");
            }
            if (number.contains(".") || number.contains("e") || number.contains("E")) {
                return Double.valueOf(number);
            }
            return Long.valueOf(number);
        }

        private void expect(char c) {
            if (at >= text.length() || text.charAt(at) != c) {
                throw error("expected '" + c + "'");
            }
            at++;
        }

        private String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                if (at >= text.length()) {
                    throw error("unterminated string");
                }
                char c = text.charAt(at++);
                if (c == '"') {
                    return out.toString();
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char e = text.charAt(at++);
                switch (e) {
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'n': out.append('\n'); break;
                    case 'r': out.append('\r'); break;
                    case 't': out.append('\t'); break;
                    case 'u':
                        out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        at += 4;
                        break;
                    default: out.append(e);  // \" \\ \/
                }
            }
        }

        static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof String) {
                out.append('"');
                String s = (String) value;
                for (int i = 0; i < s.length(); i++) {
                    char c = s.charAt(i);
                    if (c == '"' || c == '\\') {
                        out.append('\\').append(c);
                    } else if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
                out.append('"');
            } else if (value instanceof Map) {
                out.append('{');
                Iterator<? extends Map.Entry<?, ?>> it = ((Map<?, ?>) value).entrySet().iterator();
                while (it.hasNext()) {
                    Map.Entry<?, ?> e = it.next();
                    write(out, String.valueOf(e.getKey()));
                    out.append(':');
                    write(out, e.getValue());
                    if (it.hasNext()) {
                        out.append(',');
                    }
                }
                out.append('}');
            } else if (value instanceof Collection) {
                out.append('[');
                Iterator<?> it = ((Collection<?>) value).iterator();
                while (it.hasNext()) {
                    write(out, it.next());
                    if (it.hasNext()) {
                        out.append(',');
                    }
                }
                out.append(']');
            } else {
                out.append(value);  // Long, Integer, Double, Boolean
            }
        }
    }
}
