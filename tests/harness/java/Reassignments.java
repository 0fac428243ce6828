// Runs Kafka's own reassignment logic on cases read from the file args[0], one JSON object a line: for
// a target ("target" a list) what ReplicationControlManager.changePartitionReassignment gives the
// PartitionChangeBuilder (PartitionReassignmentReplicas of the current and target assignments; the
// replicas when they change, removing and adding when not empty); for a cancellation ("target" null)
// what cancelPartitionReassignment gives it (PartitionReassignmentRevert; the UNCLEAN election when
// the topic allows one). Prints for each the PartitionChangeRecord built (Kafka's JSON converter and
// the record version), "null" when none, "none-in-progress" or "unclean-refused" for the refusals.
// PartitionReassignmentReplicas and PartitionReassignmentRevert are package-private: reached by
// reflection. The oracle of tests/kafka/test_reassignments_kafka.py.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
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
import org.apache.kafka.metadata.placement.PartitionAssignment;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

public class Reassignments {
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

    static Method method(Class<?> c, String name, Class<?>... params) throws Exception {
        Method m = c.getDeclaredMethod(name, params);
        m.setAccessible(true);
        return m;
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        Class<?> replicasClass = Class.forName("org.apache.kafka.controller.PartitionReassignmentReplicas");
        Constructor<?> newReplicas = replicasClass.getDeclaredConstructor(PartitionAssignment.class,
            PartitionAssignment.class);
        newReplicas.setAccessible(true);
        Method inProgress = method(replicasClass, "isReassignmentInProgress", PartitionRegistration.class);
        Method replicasOf = method(replicasClass, "replicas");
        Method removingOf = method(replicasClass, "removing");
        Method addingOf = method(replicasClass, "adding");
        Class<?> revertClass = Class.forName("org.apache.kafka.controller.PartitionReassignmentRevert");
        Constructor<?> newRevert = revertClass.getDeclaredConstructor(PartitionRegistration.class);
        newRevert.setAccessible(true);
        Method revertReplicas = method(revertClass, "replicas");
        Method revertIsr = method(revertClass, "isr");
        Method revertUnclean = method(revertClass, "unclean");

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
            boolean uncleanAllowed = c.get("uncleanAllowed").asBoolean();
            PartitionChangeBuilder b = new PartitionChangeBuilder(p, Uuid.fromString(c.get("topicId").asText()),
                c.get("partitionId").asInt(), acceptable::contains, mv, c.get("minIsr").asInt(),
                c.get("elrEnabled").asBoolean());
            b.setDefaultDirProvider(id -> defaultDir);
            if (c.get("target").isNull()) {
                if (!(Boolean) inProgress.invoke(null, p)) {
                    out.append("none-in-progress\n");
                    continue;
                }
                Object revert = newRevert.newInstance(p);
                if ((Boolean) revertUnclean.invoke(revert) && !uncleanAllowed) {
                    out.append("unclean-refused\n");
                    continue;
                }
                if (uncleanAllowed) b.setElection(PartitionChangeBuilder.Election.UNCLEAN);
                b.setTargetIsr((List<Integer>) revertIsr.invoke(revert))
                    .setTargetReplicas((List<Integer>) revertReplicas.invoke(revert))
                    .setTargetRemoving(List.of())
                    .setTargetAdding(List.of());
            } else {
                PartitionAssignment current = new PartitionAssignment(list(c.get("replicas")), p::directory);
                PartitionAssignment target = new PartitionAssignment(list(c.get("target")), id -> defaultDir);
                Object r = newReplicas.newInstance(current, target);
                List<Integer> replicas = (List<Integer>) replicasOf.invoke(r);
                List<Integer> removing = (List<Integer>) removingOf.invoke(r);
                List<Integer> adding = (List<Integer>) addingOf.invoke(r);
                if (!replicas.equals(list(c.get("replicas")))) b.setTargetReplicas(replicas);
                if (!removing.isEmpty()) b.setTargetRemoving(removing);
                if (!adding.isEmpty()) b.setTargetAdding(adding);
            }
            Optional<ApiMessageAndVersion> rec = b.build();
            if (rec.isPresent()) {
                PartitionChangeRecord change = (PartitionChangeRecord) rec.get().message();
                out.append(PartitionChangeRecordJsonConverter.write(change, rec.get().version()).toString());
                out.append(" ").append(rec.get().version());
            } else {
                out.append("null");
            }
            out.append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }
}
