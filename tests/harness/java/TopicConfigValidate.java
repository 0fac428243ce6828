// The oracle for kraftkit's topic config validation: for each line of stdin (a case: tab-separated
// fields, the first "existing" key=value pairs joined by '\u0001', the second the new configs the same
// way, the third "remote" when tiered storage is enabled), prints one line: "OK", or the error Kafka
// 4.4's controller answers (ConfigException and InvalidConfigurationException are INVALID_CONFIG) and
// its message. Kafka's controller validates with LogConfig.validate(existing, new, its KafkaConfig's
// extractLogConfigMap, remote storage enabled): so does this, with a controller's KafkaConfig.
//   java -cp '<libs>/*' tests/harness/java/TopicConfigValidate.java < cases
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import kafka.server.KafkaConfig;
import org.apache.kafka.storage.internals.log.LogConfig;

public class TopicConfigValidate {
    static Map<String, String> pairs(String field) {
        Map<String, String> out = new HashMap<>();
        if (field.isEmpty()) return out;
        for (String kv : field.split("\u0001")) {
            int eq = kv.indexOf('=');
            out.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> props = new HashMap<>();
        props.put("process.roles", "controller");
        props.put("node.id", "1");
        props.put("controller.quorum.voters", "1@127.0.0.1:9093");
        props.put("controller.listener.names", "CONTROLLER");
        props.put("listeners", "CONTROLLER://127.0.0.1:9093");
        KafkaConfig config = KafkaConfig.fromProps(new java.util.Properties() {{ putAll(props); }});
        Map<String, Object> node = config.extractLogConfigMap();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        StringBuilder out = new StringBuilder();
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            try {
                LogConfig.validate(pairs(f[0]), pairs(f[1]), node, f.length > 2 && f[2].equals("remote"));
                out.append("OK\n");
            } catch (Exception e) {
                out.append(e.getClass().getSimpleName()).append('\t').append(e.getMessage()).append('\n');
            }
        }
        System.out.print(out);
    }
}
