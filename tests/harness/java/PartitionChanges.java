// Runs Kafka's own PartitionChangeBuilder on cases read from the file args[0], one JSON object a line, and
// prints for each the PartitionChangeRecord it builds (Kafka's JSON converter at the version the
// case's metadata.version writes), or null when it builds none. The oracle of
// tests/kafka/test_partition_change_kafka.py.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.common.metadata.PartitionChangeRecordJsonConverter;
import org.apache.kafka.controller.PartitionChangeBuilder;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

public class PartitionChanges {
    static int[] ints(JsonNode n) {
        int[] out = new int[n.size()];
        for (int i = 0; i < out.length; i++) out[i] = n.get(i).asInt();
        return out;
    }

    static List<Integer> list(JsonNode n) {
        List<Integer> out = new ArrayList<>();
        for (JsonNode x : n) out.add(x.asInt());
        return out;
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8);
        String line;
        StringBuilder out = new StringBuilder();
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            JsonNode c = mapper.readTree(line);
            Uuid[] dirs = new Uuid[c.get("dirs").size()];
            for (int i = 0; i < dirs.length; i++) dirs[i] = Uuid.fromString(c.get("dirs").get(i).asText());
            PartitionRegistration p = new PartitionRegistration.Builder()
                .setReplicas(ints(c.get("replicas")))
                .setDirectories(dirs)
                .setIsr(ints(c.get("isr")))
                .setRemovingReplicas(ints(c.get("removing")))
                .setAddingReplicas(ints(c.get("adding")))
                .setElr(ints(c.get("elr")))
                .setLastKnownElr(ints(c.get("lastKnownElr")))
                .setLeader(c.get("leader").asInt())
                .setLeaderRecoveryState(LeaderRecoveryState.of((byte) c.get("recovery").asInt()))
                .setLeaderEpoch(c.get("leaderEpoch").asInt())
                .setPartitionEpoch(c.get("partitionEpoch").asInt())
                .build();
            Set<Integer> acceptable = new HashSet<>(list(c.get("acceptable")));
            MetadataVersion mv = MetadataVersion.fromFeatureLevel((short) c.get("mv").asInt());
            Uuid defaultDir = Uuid.fromString(c.get("defaultDir").asText());
            PartitionChangeBuilder b = new PartitionChangeBuilder(p, Uuid.fromString(c.get("topicId").asText()),
                c.get("partitionId").asInt(), acceptable::contains, mv, c.get("minIsr").asInt(),
                c.get("elrEnabled").asBoolean());
            b.setElection(PartitionChangeBuilder.Election.valueOf(c.get("election").asText()));
            b.setDefaultDirProvider(id -> defaultDir);
            if (!c.get("targetIsr").isNull()) b.setTargetIsr(list(c.get("targetIsr")));
            if (!c.get("targetReplicas").isNull()) b.setTargetReplicas(list(c.get("targetReplicas")));
            if (!c.get("targetRemoving").isNull()) b.setTargetRemoving(list(c.get("targetRemoving")));
            if (!c.get("targetAdding").isNull()) b.setTargetAdding(list(c.get("targetAdding")));
            if (!c.get("uncleanShutdown").isNull()) b.setUncleanShutdownReplicas(list(c.get("uncleanShutdown")));
            if (!c.get("targetRecovery").isNull()) {
                b.setTargetLeaderRecoveryState(LeaderRecoveryState.of((byte) c.get("targetRecovery").asInt()));
            }
            Optional<ApiMessageAndVersion> r = b.build();
            if (r.isPresent()) {
                PartitionChangeRecord rec = (PartitionChangeRecord) r.get().message();
                out.append(PartitionChangeRecordJsonConverter.write(rec, r.get().version()).toString());
                out.append(" ").append(r.get().version());
            } else {
                out.append("null");
            }
            out.append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }
}
