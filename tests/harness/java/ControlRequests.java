// Kafka 3.9's own message classes for the ZooKeeper-mode controller RPCs (LeaderAndIsr, StopReplica,
// UpdateMetadata), run on cases read from the file args[0], one a line:
//   read API KIND VERSION HEX    the body bytes HEX parsed by Kafka's *Data class; prints Kafka's
//                                JSON converter's form of it, a space, and the bytes Kafka writes for
//                                it again (hex)
//   write API KIND VERSION JSON  Kafka's JSON converter's form read back; prints the bytes Kafka
//                                writes for it (hex)
// API is 4, 5 or 6; KIND is request or response. The oracle of
// tests/migration/test_control_requests_kafka.py.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.kafka.common.message.LeaderAndIsrRequestData;
import org.apache.kafka.common.message.LeaderAndIsrRequestDataJsonConverter;
import org.apache.kafka.common.message.LeaderAndIsrResponseData;
import org.apache.kafka.common.message.LeaderAndIsrResponseDataJsonConverter;
import org.apache.kafka.common.message.StopReplicaRequestData;
import org.apache.kafka.common.message.StopReplicaRequestDataJsonConverter;
import org.apache.kafka.common.message.StopReplicaResponseData;
import org.apache.kafka.common.message.StopReplicaResponseDataJsonConverter;
import org.apache.kafka.common.message.UpdateMetadataRequestData;
import org.apache.kafka.common.message.UpdateMetadataRequestDataJsonConverter;
import org.apache.kafka.common.message.UpdateMetadataResponseData;
import org.apache.kafka.common.message.UpdateMetadataResponseDataJsonConverter;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;

public class ControlRequests {
    static ApiMessage parse(int api, String kind, ByteBufferAccessor in, short v) {
        boolean req = kind.equals("request");
        switch (api) {
            case 4: return req ? new LeaderAndIsrRequestData(in, v) : new LeaderAndIsrResponseData(in, v);
            case 5: return req ? new StopReplicaRequestData(in, v) : new StopReplicaResponseData(in, v);
            case 6: return req ? new UpdateMetadataRequestData(in, v) : new UpdateMetadataResponseData(in, v);
            default: throw new IllegalArgumentException("api " + api);
        }
    }

    static JsonNode toJson(int api, String kind, ApiMessage m, short v) {
        boolean req = kind.equals("request");
        switch (api) {
            case 4: return req ? LeaderAndIsrRequestDataJsonConverter.write((LeaderAndIsrRequestData) m, v)
                               : LeaderAndIsrResponseDataJsonConverter.write((LeaderAndIsrResponseData) m, v);
            case 5: return req ? StopReplicaRequestDataJsonConverter.write((StopReplicaRequestData) m, v)
                               : StopReplicaResponseDataJsonConverter.write((StopReplicaResponseData) m, v);
            default: return req ? UpdateMetadataRequestDataJsonConverter.write((UpdateMetadataRequestData) m, v)
                                : UpdateMetadataResponseDataJsonConverter.write((UpdateMetadataResponseData) m, v);
        }
    }

    static ApiMessage fromJson(int api, String kind, JsonNode n, short v) {
        boolean req = kind.equals("request");
        switch (api) {
            case 4: return req ? LeaderAndIsrRequestDataJsonConverter.read(n, v) : LeaderAndIsrResponseDataJsonConverter.read(n, v);
            case 5: return req ? StopReplicaRequestDataJsonConverter.read(n, v) : StopReplicaResponseDataJsonConverter.read(n, v);
            default: return req ? UpdateMetadataRequestDataJsonConverter.read(n, v) : UpdateMetadataResponseDataJsonConverter.read(n, v);
        }
    }

    static String hex(ByteBuffer b) {
        StringBuilder s = new StringBuilder();
        while (b.hasRemaining()) s.append(String.format("%02x", b.get() & 0xff));
        return s.toString();
    }

    static byte[] unhex(String h) {
        byte[] out = new byte[h.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split(" ", 5);
            int api = Integer.parseInt(f[1]);
            short v = Short.parseShort(f[3]);
            if (f[0].equals("read")) {
                ByteBuffer buf = ByteBuffer.wrap(unhex(f[4]));
                ApiMessage m = parse(api, f[2], new ByteBufferAccessor(buf), v);
                if (buf.hasRemaining()) throw new IllegalStateException(buf.remaining() + " bytes left over: " + line);
                out.append(toJson(api, f[2], m, v).toString()).append(' ').append(hex(MessageUtil.toByteBuffer(m, v)));
            } else {
                ApiMessage m = fromJson(api, f[2], mapper.readTree(f[4]), v);
                out.append(hex(MessageUtil.toByteBuffer(m, v)));
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
