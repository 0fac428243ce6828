// kraftkit test harness: drives the metadata oracle scenario (tests/harness/metadata_scenario.py)
// with Kafka's own tools and Admin client, and captures what the admin APIs report.
//
//   tools SPEC.json                 run Kafka CLI tools in this JVM, in order:
//                                   [{"class": "kafka.admin.ConfigCommand", "args": [...]}, ...]
//                                   (Exit.exit is trapped: a nonzero status fails the run)
//   logdirs BOOTSTRAP SPEC.json     move replicas of broker 1 to another of its log dirs
//                                   (alterReplicaLogDirs), wait until done: [{"topic", "partition"}]
//   token SASL_BOOTSTRAP USER PASSWORD RENEWER OUT.json
//                                   create a delegation token as USER (SCRAM-SHA-256 over SASL)
//   capture BOOTSTRAP SASL_BOOTSTRAP USER PASSWORD OUT.json
//                                   describe everything (topics, configs, quotas, ACLs, SCRAM
//                                   users, features, cluster, quorum, log dirs, tokens)
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.security.token.delegation.TokenInformation;
import org.apache.kafka.common.utils.Exit;

public class MetadataClient {
    static final ObjectMapper M = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "tools": tools(args[1]); break;
            case "logdirs": logdirs(args[1], args[2]); break;
            case "token": token(args[1], args[2], args[3], args[4], args[5]); break;
            case "capture": capture(args[1], args[2], args[3], args[4], args[5]); break;
            default: throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static void write(String path, Object o) throws Exception {
        Files.write(Paths.get(path), M.writeValueAsBytes(o));
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "30000");
        return Admin.create(p);
    }

    static Admin saslAdmin(String bootstrap, String user, String password) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "SCRAM-SHA-256");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        return Admin.create(p);
    }

    // ------------------------------------------------------------------ tools

    static final class ExitTrap extends RuntimeException {
        final int status;
        ExitTrap(int status, String msg) {
            super("exit " + status + (msg == null ? "" : ": " + msg));
            this.status = status;
        }
    }

    static volatile int lastExit = 0;

    static void tools(String specPath) throws Exception {
        JsonNode spec = M.readTree(Files.readAllBytes(Paths.get(specPath)));
        // A tool that exits 0 carries on (some call Exit.exit(0) on success and then return);
        // any other status ends the step.
        Exit.Procedure trap = (status, msg) -> {
            lastExit = status;
            if (status != 0) throw new ExitTrap(status, msg);
        };
        Exit.setExitProcedure(trap);
        Exit.setHaltProcedure(trap);
        PrintStream out = System.out;
        int i = 0;
        for (JsonNode step : spec) {
            String cls = step.get("class").asText();
            List<String> a = new ArrayList<>();
            for (JsonNode x : step.get("args")) a.add(x.asText());
            out.println("=== step " + i + ": " + cls + " " + a);
            if (cls.equals("wait-topics")) {  // args: BOOTSTRAP {+NAME:PARTITIONS | -NAME}...
                waitTopics(a.get(0), a.subList(1, a.size()));
                i++;
                continue;
            }
            Method main = Class.forName(cls).getMethod("main", String[].class);
            // ConfigCommand --delete-config checks the config exists in the broker's metadata, which
            // applies the earlier alter a little after the controller committed it (seconds on a
            // loaded machine): such a step is retried until the broker has caught up. A refused
            // delete changes nothing, so a retry is safe.
            boolean waitsForMetadata = a.contains("--delete-config");
            long deadline = System.currentTimeMillis() + 30_000;
            int status;
            while (true) {
                lastExit = 0;
                status = 0;
                try {
                    main.invoke(null, (Object) a.toArray(new String[0]));
                } catch (InvocationTargetException e) {
                    Throwable t = e.getCause();
                    if (t instanceof ExitTrap) status = ((ExitTrap) t).status;
                    else throw new RuntimeException("step " + i + " (" + cls + " " + a + ") failed", t);
                }
                if (status == 0) status = lastExit;
                if (status == 0 || !waitsForMetadata || System.currentTimeMillis() > deadline) break;
                out.println("(the broker has not applied the earlier change yet; retrying)");
                Thread.sleep(200);
            }
            if (status != 0) throw new RuntimeException("step " + i + " (" + cls + " " + a + ") exited " + status);
            out.flush();
            i++;
        }
        out.println("ran " + i + " tool steps");
    }

    /** Wait until the broker's metadata shows each +NAME:PARTITIONS with leaders and no -NAME. */
    static void waitTopics(String bootstrap, List<String> want) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                Set<String> names = admin.listTopics().names().get();
                boolean ok = true;
                for (String w : want) {
                    if (w.startsWith("-")) {
                        if (names.contains(w.substring(1))) ok = false;
                        continue;
                    }
                    String name = w.substring(1, w.lastIndexOf(':'));
                    int n = Integer.parseInt(w.substring(w.lastIndexOf(':') + 1));
                    if (!names.contains(name)) { ok = false; continue; }
                    TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
                    if (d.partitions().size() != n) ok = false;
                    for (TopicPartitionInfo p : d.partitions()) if (p.leader() == null) ok = false;
                }
                if (ok) return;
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("topics not as expected: " + want);
                Thread.sleep(100);
            }
        }
    }

    // ------------------------------------------------------------------ log dirs

    static void logdirs(String bootstrap, String specPath) throws Exception {
        // SPEC: [{"topic", "partition"}]; each replica moves to a log dir it is not in
        JsonNode spec = M.readTree(Files.readAllBytes(Paths.get(specPath)));
        List<TopicPartitionReplica> replicas = new ArrayList<>();
        for (JsonNode m : spec) replicas.add(new TopicPartitionReplica(m.get("topic").asText(), m.get("partition").asInt(), 1));
        try (Admin admin = admin(bootstrap)) {
            Set<String> dirs = new TreeSet<>(admin.describeLogDirs(List.of(1)).allDescriptions().get().get(1).keySet());
            Map<TopicPartitionReplica, ReplicaLogDirInfo> now = admin.describeReplicaLogDirs(replicas).all().get();
            Map<TopicPartitionReplica, String> moves = new HashMap<>();
            for (TopicPartitionReplica r : replicas) {
                String cur = now.get(r).getCurrentReplicaLogDir();
                for (String d : dirs) if (!d.equals(cur)) { moves.put(r, d); break; }
                if (!moves.containsKey(r)) throw new RuntimeException("no other log dir for " + r + " in " + dirs);
            }
            admin.alterReplicaLogDirs(moves).all().get();
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                Map<TopicPartitionReplica, ReplicaLogDirInfo> info = admin.describeReplicaLogDirs(replicas).all().get();
                boolean done = true;
                for (Map.Entry<TopicPartitionReplica, String> m : moves.entrySet()) {
                    ReplicaLogDirInfo ri = info.get(m.getKey());
                    if (ri.getFutureReplicaLogDir() != null || !m.getValue().equals(ri.getCurrentReplicaLogDir())) done = false;
                }
                if (done) break;
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("log dir moves did not finish: " + info);
                Thread.sleep(200);
            }
            System.out.println("moved " + moves.size() + " replicas");
        }
    }

    // ------------------------------------------------------------------ delegation tokens

    static void token(String saslBootstrap, String user, String password, String renewer, String outPath) throws Exception {
        try (Admin admin = saslAdmin(saslBootstrap, user, password)) {
            DelegationToken t = admin.createDelegationToken(new CreateDelegationTokenOptions()
                    .renewers(List.of(new KafkaPrincipal(KafkaPrincipal.USER_TYPE, renewer)))).delegationToken().get();
            write(outPath, tokenJson(t.tokenInfo()));
        }
    }

    static ObjectNode tokenJson(TokenInformation ti) {
        ObjectNode o = M.createObjectNode();
        o.put("token_id", ti.tokenId());
        o.put("owner", ti.ownerAsString());
        o.put("requester", ti.tokenRequesterAsString());
        ArrayNode r = o.putArray("renewers");
        for (String s : new TreeSet<>(ti.renewersAsString())) r.add(s);
        o.put("issue_timestamp", ti.issueTimestamp());
        o.put("max_timestamp", ti.maxTimestamp());
        o.put("expiry_timestamp", ti.expiryTimestamp());
        return o;
    }

    // ------------------------------------------------------------------ capture

    static ArrayNode ids(List<Node> nodes) {
        ArrayNode a = M.createArrayNode();
        if (nodes != null) for (Node n : nodes) a.add(n.id());
        return a;
    }

    static ObjectNode configs(Admin admin, Collection<ConfigResource> resources) throws Exception {
        ObjectNode out = M.createObjectNode();
        Map<ConfigResource, Config> got = admin.describeConfigs(resources).all().get();
        for (ConfigResource r : resources) {
            ObjectNode entries = M.createObjectNode();
            List<ConfigEntry> list = new ArrayList<>(got.get(r).entries());
            list.sort((a, b) -> a.name().compareTo(b.name()));
            for (ConfigEntry e : list) {
                ObjectNode en = entries.putObject(e.name());
                en.put("value", e.value());
                en.put("source", e.source().name());
                en.put("sensitive", e.isSensitive());
                en.put("read_only", e.isReadOnly());
            }
            out.set(r.type().name() + ":" + r.name(), entries);
        }
        return out;
    }

    static void capture(String bootstrap, String saslBootstrap, String user, String password, String outPath) throws Exception {
        ObjectNode root = M.createObjectNode();
        try (Admin admin = admin(bootstrap); Admin sasl = saslAdmin(saslBootstrap, user, password)) {
            root.put("quorum_before", admin.describeMetadataQuorum().quorumInfo().get().highWatermark());

            // topics (internal ones too)
            Set<String> names = new TreeSet<>(admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get());
            Map<String, TopicDescription> descs = admin.describeTopics(names).allTopicNames().get();
            ObjectNode topics = root.putObject("topics");
            for (String name : names) {
                TopicDescription d = descs.get(name);
                ObjectNode t = topics.putObject(name);
                t.put("id", d.topicId().toString());
                t.put("internal", d.isInternal());
                ObjectNode parts = t.putObject("partitions");
                for (TopicPartitionInfo p : d.partitions()) {
                    ObjectNode po = parts.putObject(Integer.toString(p.partition()));
                    po.put("leader", p.leader() == null ? -1 : p.leader().id());
                    po.set("replicas", ids(p.replicas()));
                    po.set("isr", ids(p.isr()));
                    po.set("elr", ids(p.elr()));
                    po.set("last_known_elr", ids(p.lastKnownElr()));
                }
            }

            // configs: every topic, broker 1, the cluster default, client-metrics and group resources
            List<ConfigResource> res = new ArrayList<>();
            for (String name : names) res.add(new ConfigResource(ConfigResource.Type.TOPIC, name));
            res.add(new ConfigResource(ConfigResource.Type.BROKER, "1"));
            res.add(new ConfigResource(ConfigResource.Type.BROKER, ""));
            Collection<ConfigResource> listed = admin.listConfigResources(
                    EnumSet.of(ConfigResource.Type.CLIENT_METRICS, ConfigResource.Type.GROUP),
                    new ListConfigResourcesOptions()).all().get();
            ArrayNode listedJson = root.putArray("config_resources_listed");
            for (ConfigResource r : listed) {
                listedJson.add(r.type().name() + ":" + r.name());
                res.add(r);
            }
            root.set("configs", configs(admin, res));

            // client quotas
            ArrayNode quotas = root.putArray("client_quotas");
            Map<ClientQuotaEntity, Map<String, Double>> q = admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
            for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : q.entrySet()) {
                ObjectNode qo = quotas.addObject();
                ObjectNode ent = qo.putObject("entity");
                for (Map.Entry<String, String> x : new TreeMap<>(e.getKey().entries()).entrySet()) ent.put(x.getKey(), x.getValue());
                ObjectNode vals = qo.putObject("values");
                for (Map.Entry<String, Double> x : new TreeMap<>(e.getValue()).entrySet()) vals.put(x.getKey(), x.getValue());
            }

            // ACLs
            ArrayNode acls = root.putArray("acls");
            for (AclBinding b : admin.describeAcls(AclBindingFilter.ANY).values().get()) {
                ObjectNode a = acls.addObject();
                a.put("resource_type", b.pattern().resourceType().name());
                a.put("resource_type_code", b.pattern().resourceType().code());
                a.put("resource_name", b.pattern().name());
                a.put("pattern_type", b.pattern().patternType().name());
                a.put("pattern_type_code", b.pattern().patternType().code());
                a.put("principal", b.entry().principal());
                a.put("host", b.entry().host());
                a.put("operation", b.entry().operation().name());
                a.put("operation_code", b.entry().operation().code());
                a.put("permission", b.entry().permissionType().name());
                a.put("permission_code", b.entry().permissionType().code());
            }

            // SCRAM users
            ArrayNode scram = root.putArray("scram");
            Map<String, UserScramCredentialsDescription> users = admin.describeUserScramCredentials().all().get();
            for (Map.Entry<String, UserScramCredentialsDescription> u : new TreeMap<>(users).entrySet())
                for (ScramCredentialInfo ci : u.getValue().credentialInfos()) {
                    ObjectNode so = scram.addObject();
                    so.put("user", u.getKey());
                    so.put("mechanism", ci.mechanism().mechanismName());
                    so.put("mechanism_code", ci.mechanism().type());
                    so.put("iterations", ci.iterations());
                }

            // features
            FeatureMetadata fm = admin.describeFeatures().featureMetadata().get();
            ObjectNode feats = root.putObject("features");
            ObjectNode fin = feats.putObject("finalized");
            for (Map.Entry<String, FinalizedVersionRange> f : new TreeMap<>(fm.finalizedFeatures()).entrySet()) {
                ObjectNode fo = fin.putObject(f.getKey());
                fo.put("min", f.getValue().minVersionLevel());
                fo.put("max", f.getValue().maxVersionLevel());
            }
            // the broker's metadata offset when it answered (changes with every NoOpRecord)
            root.put("features_epoch", fm.finalizedFeaturesEpoch().orElse(-1L));

            // cluster
            DescribeClusterResult dc = admin.describeCluster(new DescribeClusterOptions().includeFencedBrokers(true));
            ObjectNode cluster = root.putObject("cluster");
            cluster.put("cluster_id", dc.clusterId().get());
            cluster.put("controller", dc.controller().get().id());
            ArrayNode nodes = cluster.putArray("brokers");
            for (Node n : dc.nodes().get()) {
                ObjectNode no = nodes.addObject();
                no.put("id", n.id());
                no.put("host", n.host());
                no.put("port", n.port());
                no.put("rack", n.rack());
                no.put("fenced", n.isFenced());
            }

            // quorum
            QuorumInfo qi = admin.describeMetadataQuorum().quorumInfo().get();
            ObjectNode quorum = root.putObject("quorum");
            quorum.put("leader_id", qi.leaderId());
            quorum.put("leader_epoch", qi.leaderEpoch());
            ArrayNode voters = quorum.putArray("voters");
            for (QuorumInfo.ReplicaState v : qi.voters()) {
                ObjectNode vo = voters.addObject();
                vo.put("id", v.replicaId());
                vo.put("directory_id", v.replicaDirectoryId().toString());
            }

            // log dirs of broker 1: where each replica lives
            ObjectNode dirs = root.putObject("log_dirs");
            Map<String, LogDirDescription> ld = admin.describeLogDirs(List.of(1)).allDescriptions().get().get(1);
            for (Map.Entry<String, LogDirDescription> d : new TreeMap<>(ld).entrySet()) {
                ArrayNode reps = dirs.putArray(d.getKey());
                Set<String> tps = new TreeSet<>();
                for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet())
                    tps.add(r.getKey().toString() + (r.getValue().isFuture() ? ".future" : ""));
                for (String s : tps) reps.add(s);
            }

            // delegation tokens (only over SASL, as their owner)
            ArrayNode tokens = root.putArray("delegation_tokens");
            for (DelegationToken t : sasl.describeDelegationToken().delegationTokens().get())
                tokens.add(tokenJson(t.tokenInfo()));

            root.put("quorum_after", admin.describeMetadataQuorum().quorumInfo().get().highWatermark());
        }
        write(outPath, root);
        System.out.println("captured");
    }
}
