// Prints, as JSON on stdout, the broker configuration definitions of the Apache Kafka release on the
// classpath: every key of KafkaConfig's ConfigDef (AbstractKafkaConfig.CONFIG_DEF) with its type,
// its default as Kafka renders it (ConfigDef.convertToString) and, for the dynamically updatable ones
// (DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS), the validator's bounds or allowed values; and the sets of
// DynamicBrokerConfig (per-broker only, cluster-level listener configs, security configs that need a
// listener prefix, listener mechanism configs) and the synonyms brokerConfigSynonyms gives.
// Read only, by reflection where a field is private. Run by scripts/gen_broker_configs.py:
//   java -cp '<libs>/*' scripts/java/BrokerConfigTable.java
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.common.config.ConfigDef;

public class BrokerConfigTable {
    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c == '\n') b.append("\\n");
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof String) return q((String) v);
        if (v instanceof Boolean) return v.toString();
        if (v instanceof Number) return q(v.toString()); // as text: a long or a double, exactly
        if (v instanceof Collection) {
            List<String> parts = new ArrayList<>();
            for (Object o : (Collection<?>) v) parts.add(json(o));
            return "[" + String.join(", ", parts) + "]";
        }
        if (v instanceof Map) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<?, ?> e : new TreeMap<>((Map<?, ?>) v).entrySet())
                parts.add(q(e.getKey().toString()) + ": " + json(e.getValue()));
            return "{" + String.join(", ", parts) + "}";
        }
        return q(v.toString());
    }

    static Object field(Class<?> c, Object o, String name) throws Exception {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
    }

    @SuppressWarnings("unchecked")
    static Set<String> set(String name) throws Exception {
        Class<?> c = Class.forName("org.apache.kafka.server.config.DynamicBrokerConfig");
        return new TreeSet<>((Set<String>) field(c, null, name));
    }

    /** What kraftkit checks of a value beyond its type: a range, or the allowed strings. */
    static Map<String, Object> validator(ConfigDef.Validator v) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        if (v == null) return null;
        if (v instanceof ConfigDef.Range) {
            out.put("kind", "range");
            out.put("min", field(ConfigDef.Range.class, v, "min"));
            out.put("max", field(ConfigDef.Range.class, v, "max"));
        } else if (v instanceof ConfigDef.ValidString) {
            out.put("kind", "string");
            out.put("values", field(ConfigDef.ValidString.class, v, "validStrings"));
        } else if (v instanceof ConfigDef.CaseInsensitiveValidString) {
            out.put("kind", "string_ci");
            out.put("values", new TreeSet<>((Set<String>) field(ConfigDef.CaseInsensitiveValidString.class, v, "validStrings")));
        } else if (v instanceof ConfigDef.ValidList) {
            out.put("kind", "list");
            ConfigDef.ValidString in = (ConfigDef.ValidString) field(ConfigDef.ValidList.class, v, "validString");
            out.put("values", field(ConfigDef.ValidString.class, in, "validStrings"));
            out.put("emptyAllowed", field(ConfigDef.ValidList.class, v, "isEmptyAllowed"));
        } else {
            out.put("kind", "other");
            out.put("class", v.getClass().getName());
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        Class<?> akc = Class.forName("org.apache.kafka.server.config.AbstractKafkaConfig");
        ConfigDef def = (ConfigDef) akc.getField("CONFIG_DEF").get(null);
        Set<String> dynamic = set("ALL_DYNAMIC_CONFIGS");
        Class<?> dbc = Class.forName("org.apache.kafka.server.config.DynamicBrokerConfig");
        java.lang.reflect.Method synonyms = dbc.getMethod("brokerConfigSynonyms", String.class, boolean.class);

        // the dynamic keys as DynamicConfig.Broker validates them (it adds the quota rates KafkaConfig lacks)
        @SuppressWarnings("unchecked")
        Map<String, ConfigDef.ConfigKey> dynamicKeys = (Map<String, ConfigDef.ConfigKey>)
                Class.forName("org.apache.kafka.server.config.DynamicConfig$Broker").getMethod("configKeys").invoke(null);
        Map<String, ConfigDef.ConfigKey> keys = new TreeMap<>(def.configKeys());
        keys.putAll(dynamicKeys);

        StringBuilder out = new StringBuilder("{\n\"configs\": [\n");
        boolean first = true;
        for (Map.Entry<String, ConfigDef.ConfigKey> e : keys.entrySet()) {
            ConfigDef.ConfigKey k = e.getValue();
            Map<String, Object> row = new TreeMap<>();
            row.put("name", k.name);
            row.put("type", k.type.name());
            boolean hasDefault = k.defaultValue != ConfigDef.NO_DEFAULT_VALUE;
            // DynamicBrokerConfig's staticDefaultConfigs: the defaults that are not null, as strings
            row.put("default", hasDefault && k.defaultValue != null
                    ? ConfigDef.convertToString(k.defaultValue, k.type) : null);
            row.put("dynamic", dynamicKeys.containsKey(k.name));
            row.put("kafkaConfig", def.configKeys().containsKey(k.name));
            if (k.internalConfig) row.put("internal", true); // not in a describe of all configs
            if (dynamicKeys.containsKey(k.name)) row.put("validator", validator(k.validator));
            @SuppressWarnings("unchecked")
            List<String> syn = (List<String>) synonyms.invoke(null, k.name, false);
            if (!(syn.size() == 1 && syn.get(0).equals(k.name))) row.put("synonyms", syn);
            out.append(first ? "" : ",\n").append(json(row));
            first = false;
        }
        out.append("\n],\n");
        out.append("\"allDynamic\": ").append(json(dynamic)).append(",\n");
        out.append("\"perBroker\": ").append(json(set("PER_BROKER_CONFIGS"))).append(",\n");
        out.append("\"clusterLevelListener\": ").append(json(set("CLUSTER_LEVEL_LISTENER_CONFIGS"))).append(",\n");
        out.append("\"dynamicSecurity\": ").append(json(set("DYNAMIC_SECURITY_CONFIGS"))).append(",\n");
        out.append("\"listenerMechanism\": ").append(json(set("LISTENER_MECHANISM_CONFIGS"))).append(",\n");
        out.append("\"listenerConfigRegex\": ").append(json(field(dbc, null, "LISTENER_CONFIG_REGEX").toString())).append("\n}\n");
        System.out.print(out);
    }
}
