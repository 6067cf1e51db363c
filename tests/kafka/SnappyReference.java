// Kafka's own snappy writer as the oracle of lazyconv's snappy streams (tests/kafka/
// test_snappy_kafka.py, tests/records/test_snappy.py). For each input file, writes FILE.snappy:
// the stream Kafka's producer and broker write for those bytes (Compression.snappy(), the path
// MemoryRecordsBuilder takes: snappy-java's SnappyOutputStream, xerial framing, 32 KiB blocks
// compressed by the snappy C++ library snappy-java bundles). The framing does not depend on the
// magic; magic 2 is used.
//
//   javac -cp "$DIST/libs/*" -d OUT tests/kafka/SnappyReference.java
//   java -cp "OUT:$DIST/libs/*" SnappyReference FILE...
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.utils.ByteBufferOutputStream;

public class SnappyReference {
    public static void main(String[] args) throws Exception {
        Compression snappy = Compression.snappy().build();
        for (String input : args) {
            byte[] data = Files.readAllBytes(Paths.get(input));
            ByteBufferOutputStream buffer = new ByteBufferOutputStream(data.length + 1024);
            try (OutputStream out = snappy.wrapForOutput(buffer, RecordBatch.MAGIC_VALUE_V2)) {
                out.write(data);
            }
            ByteBuffer stream = buffer.buffer();
            stream.flip();
            byte[] bytes = new byte[stream.remaining()];
            stream.get(bytes);
            Files.write(Paths.get(input + ".snappy"), bytes);
        }
    }
}
