// Kafka's own lz4 writer as the oracle of lazyconv's lz4 frames (tests/kafka/test_lz4_kafka.py,
// tests/records/test_lz4_parity.py). For each input file, writes FILE.L<level>.M<magic>.lz4: the
// stream Kafka's producer and broker write for those bytes (Compression.lz4().level(level), the
// path MemoryRecordsBuilder takes: 64 KiB independent blocks, lz4-java's fast compressor at the
// default level 9, its high compressor otherwise; magic 0 with the broken header checksum).
// LEVELS and MAGICS are comma-separated lists: every combination is written, in one JVM.
//
//   javac -cp "$DIST/libs/*" -d OUT tests/kafka/Lz4Reference.java
//   java -cp "OUT:$DIST/libs/*" Lz4Reference LEVELS MAGICS FILE...
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.utils.ByteBufferOutputStream;

public class Lz4Reference {
    public static void main(String[] args) throws Exception {
        for (String levelText : args[0].split(",")) {
            int level = Integer.parseInt(levelText);
            Compression lz4 = Compression.lz4().level(level).build();
            for (String magicText : args[1].split(",")) {
                byte magic = Byte.parseByte(magicText);
                for (int i = 2; i < args.length; i++) {
                    write(lz4, level, magic, Paths.get(args[i]));
                }
            }
        }
    }

    private static void write(Compression lz4, int level, byte magic, Path input) throws Exception {
        byte[] data = Files.readAllBytes(input);
        ByteBufferOutputStream buffer = new ByteBufferOutputStream(data.length + 1024);
        try (OutputStream out = lz4.wrapForOutput(buffer, magic)) {
            out.write(data);
        }
        ByteBuffer frame = buffer.buffer();
        frame.flip();
        byte[] bytes = new byte[frame.remaining()];
        frame.get(bytes);
        Files.write(Paths.get(input + ".L" + level + ".M" + magic + ".lz4"), bytes);
    }
}
