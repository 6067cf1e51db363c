// Kafka's own getErrorResponse as the oracle of lazyconv's error_response
// (tests/kafka/test_error_response_kafka.py). Each input file is the API key, version and error
// code (three big-endian int16) then a request body; the program parses the body as a broker does
// (AbstractRequest.parseRequest), asks the request for its answer to an exception of the error
// with that code and the error's own message (Errors.forCode(CODE).exception(), what a refusal
// without words of its own is) and writes the answer's body at that version to FILE.out. A
// version the distribution does not serve is FILE.unsupported; a request Kafka cannot answer
// (its getErrorResponse throws, or has no answer: Produce with acks=0) is FILE.err, the
// exception's text.
//
//   javac -cp "$DIST/libs/*" -d OUT tests/kafka/ErrorResponseReference.java
//   java -cp "OUT:$DIST/libs/*" ErrorResponseReference FILE...
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;

public class ErrorResponseReference {
    public static void main(String[] args) throws Exception {
        for (String name : args) {
            answer(Paths.get(name));
        }
    }

    private static void answer(Path input) throws Exception {
        ByteBuffer file = ByteBuffer.wrap(Files.readAllBytes(input));
        ApiKeys api = ApiKeys.forId(file.getShort());
        short version = file.getShort();
        Errors error = Errors.forCode(file.getShort());
        if (!api.isVersionSupported(version)) {
            Files.write(Paths.get(input + ".unsupported"), new byte[0]);
            return;
        }
        try {
            AbstractRequest request = AbstractRequest.parseRequest(api, version, file.slice()).request;
            AbstractResponse response = request.getErrorResponse(0, error.exception());
            if (response == null) {
                throw new IllegalStateException("no answer");
            }
            ByteBuffer body = MessageUtil.toByteBuffer(response.data(), version);
            byte[] bytes = new byte[body.remaining()];
            body.get(bytes);
            Files.write(Paths.get(input + ".out"), bytes);
        } catch (RuntimeException e) {
            Files.write(Paths.get(input + ".err"), e.toString().getBytes(StandardCharsets.UTF_8));
        }
    }
}
