// Runs Kafka's own AclControlManager (how its controller decides CreateAcls and DeleteAcls) on cases read
// from the file args[0], one JSON object a line:
//   {"level": metadata.version feature level, "acls": [creation...], "create": [creation...], "delete": [filter...]}
// with a creation {"rt", "name", "pt", "principal", "host", "op", "perm"} (CreateAclsRequest's codes) and a
// filter {"rt", "name", "pt", "principal", "host", "op", "perm"} (DeleteAclsRequest's; name, principal and
// host may be null). The "acls" are created first (their records replayed), then "create", then "delete".
// Prints one JSON line per case: {"create": [result...], "created": [acl...], "delete": [[acl...] or result...],
// "removed": n, "left": n}, a result "NONE" or "ERROR_NAME: message", an acl [rt, name, pt, principal, host,
// op, perm]; a request that fails whole is {"abort": result}. As Kafka's AclApis, a creation that cannot be an
// AclBinding (ANY in it) fails the whole CreateAcls. The oracle of tests/kafka/test_acls_kafka.py.
// AclControlManager's builder and methods are package-private: they are reached by reflection.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.message.CreateAclsRequestData.AclCreation;
import org.apache.kafka.common.message.DeleteAclsRequestData;
import org.apache.kafka.common.message.DeleteAclsRequestData.DeleteAclsFilter;
import org.apache.kafka.common.metadata.AccessControlEntryRecord;
import org.apache.kafka.common.metadata.RemoveAccessControlEntryRecord;
import org.apache.kafka.common.requests.ApiError;
import org.apache.kafka.common.requests.CreateAclsRequest;
import org.apache.kafka.common.requests.DeleteAclsRequest;
import org.apache.kafka.controller.AclControlManager;
import org.apache.kafka.server.authorizer.AclCreateResult;
import org.apache.kafka.server.authorizer.AclDeleteResult;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

public class AclDecisions {
    static final ObjectMapper MAPPER = new ObjectMapper();

    static Method method(Class<?> c, String name, Class<?>... types) throws Exception {
        Method m = c.getDeclaredMethod(name, types);
        m.setAccessible(true);
        return m;
    }

    static String text(JsonNode n, String field) {
        JsonNode v = n.get(field);
        return v == null || v.isNull() ? null : v.asText();
    }

    static List<AclBinding> bindings(JsonNode list) {
        List<AclBinding> out = new ArrayList<>();
        for (JsonNode c : list) {
            out.add(CreateAclsRequest.aclBinding(new AclCreation()
                .setResourceType((byte) c.get("rt").asInt()).setResourceName(text(c, "name"))
                .setResourcePatternType((byte) c.get("pt").asInt()).setPrincipal(text(c, "principal"))
                .setHost(text(c, "host")).setOperation((byte) c.get("op").asInt())
                .setPermissionType((byte) c.get("perm").asInt())));
        }
        return out;
    }

    static List<AclBindingFilter> filters(JsonNode list) {
        List<DeleteAclsFilter> fs = new ArrayList<>();
        for (JsonNode f : list) {
            fs.add(new DeleteAclsFilter()
                .setResourceTypeFilter((byte) f.get("rt").asInt()).setResourceNameFilter(text(f, "name"))
                .setPatternTypeFilter((byte) f.get("pt").asInt()).setPrincipalFilter(text(f, "principal"))
                .setHostFilter(text(f, "host")).setOperation((byte) f.get("op").asInt())
                .setPermissionType((byte) f.get("perm").asInt()));
        }
        return new DeleteAclsRequest.Builder(new DeleteAclsRequestData().setFilters(fs)).build((short) 3).filters();
    }

    /** A result as the response carries it (ApiError.fromThrowable: the error's name and message). */
    static String result(Throwable e) {
        if (e == null) return "NONE";
        ApiError error = ApiError.fromThrowable(e);
        return error.error().name() + ": " + error.message();
    }

    static ArrayNode acl(AclBinding b) {
        ArrayNode a = MAPPER.createArrayNode();
        a.add(b.pattern().resourceType().code()).add(b.pattern().name()).add(b.pattern().patternType().code())
            .add(b.entry().principal()).add(b.entry().host()).add(b.entry().operation().code())
            .add(b.entry().permissionType().code());
        return a;
    }

    static ArrayNode acl(AccessControlEntryRecord r) {
        ArrayNode a = MAPPER.createArrayNode();
        a.add(r.resourceType()).add(r.resourceName()).add(r.patternType()).add(r.principal()).add(r.host())
            .add(r.operation()).add(r.permissionType());
        return a;
    }

    public static void main(String[] args) throws Exception {
        Class<?> builderClass = Class.forName("org.apache.kafka.controller.AclControlManager$Builder");
        Constructor<?> newBuilder = builderClass.getDeclaredConstructor();
        newBuilder.setAccessible(true);
        Method build = method(builderClass, "build");
        Method create = method(AclControlManager.class, "createAcls", List.class, MetadataVersion.class);
        Method delete = method(AclControlManager.class, "deleteAcls", List.class);
        Method idToAcl = method(AclControlManager.class, "idToAcl");
        Class<?> resultClass = Class.forName("org.apache.kafka.controller.ControllerResult");
        Method records = method(resultClass, "records");
        Method response = method(resultClass, "response");

        BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            JsonNode c = MAPPER.readTree(line);
            MetadataVersion mv = MetadataVersion.fromFeatureLevel((short) c.get("level").asInt());
            AclControlManager m = (AclControlManager) build.invoke(newBuilder.newInstance());
            ObjectNode o = MAPPER.createObjectNode();
            try {
                for (String step : new String[] {"acls", "create"}) {
                    List<AclBinding> acls;
                    try {
                        acls = bindings(c.get(step));
                    } catch (IllegalArgumentException e) {
                        // AclApis makes the bindings before asking the controller: the request's error
                        // response (every creation) and nothing created
                        ArrayNode results = MAPPER.createArrayNode();
                        for (int i = 0; i < c.get(step).size(); i++) results.add(result(e));
                        o.set("create", results);
                        o.set("created", MAPPER.createArrayNode());
                        continue;
                    }
                    Object r = create.invoke(m, acls, mv);
                    ArrayNode created = MAPPER.createArrayNode();
                    for (Object rec : (List<?>) records.invoke(r)) {
                        AccessControlEntryRecord acl = (AccessControlEntryRecord) ((ApiMessageAndVersion) rec).message();
                        m.replay(acl);
                        created.add(acl(acl));
                    }
                    if (step.equals("create")) {
                        ArrayNode results = MAPPER.createArrayNode();
                        for (Object x : (List<?>) response.invoke(r)) {
                            results.add(result(((AclCreateResult) x).exception().orElse(null)));
                        }
                        o.set("create", results);
                        o.set("created", created);
                    }
                }
                Object r = delete.invoke(m, filters(c.get("delete")));
                ArrayNode results = MAPPER.createArrayNode();
                for (Object x : (List<?>) response.invoke(r)) {
                    AclDeleteResult d = (AclDeleteResult) x;
                    if (d.exception().isPresent()) {
                        results.add(result(d.exception().get()));
                        continue;
                    }
                    ArrayNode matched = MAPPER.createArrayNode();
                    for (AclDeleteResult.AclBindingDeleteResult b : d.aclBindingDeleteResults()) {
                        matched.add(acl(b.aclBinding()));
                    }
                    results.add(matched);
                }
                List<?> removed = (List<?>) records.invoke(r);
                for (Object rec : removed) m.replay((RemoveAccessControlEntryRecord) ((ApiMessageAndVersion) rec).message());
                o.set("delete", results);
                o.put("removed", removed.size());
                o.put("left", ((java.util.Map<?, ?>) idToAcl.invoke(m)).size());
            } catch (InvocationTargetException e) {
                o = MAPPER.createObjectNode();
                o.put("abort", result(e.getCause()));
            }
            out.append(MAPPER.writeValueAsString(o)).append('\n');
        }
        System.out.print(out);
    }
}
