// Prints, as JSON on stdout, the topic configuration definitions of the Apache Kafka release on the
// classpath: every key of LogConfig's ConfigDef (LogConfig.configDefCopy(), in its definition order,
// which is the order ConfigDef.parse checks values in) with its type, its default as Kafka renders it
// (ConfigDef.convertToString), its validator's bounds or allowed values, whether it is internal, and
// the broker synonyms ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS gives it (each with the
// factor its converter multiplies a value by: 1, or 60000 for minutes, 3600000 for hours).
// Read only, by reflection where a field is private. Run by scripts/gen_topic_configs.py:
//   java -cp '<libs>/*' scripts/java/TopicConfigTable.java
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Function;

import org.apache.kafka.common.config.ConfigDef;

public class TopicConfigTable {
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
        if (v instanceof Number) return q(v.toString());
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
    static Map<String, Object> validator(ConfigDef.Validator v) throws Exception {
        if (v == null) return null;
        Map<String, Object> out = new TreeMap<>();
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

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        Class<?> lc = Class.forName("org.apache.kafka.storage.internals.log.LogConfig");
        ConfigDef def = (ConfigDef) lc.getMethod("configDefCopy").invoke(null);
        Map<String, List<Object>> synonyms = (Map<String, List<Object>>)
                Class.forName("org.apache.kafka.server.config.ServerTopicConfigSynonyms")
                        .getField("ALL_TOPIC_CONFIG_SYNONYMS").get(null);
        Class<?> cs = Class.forName("org.apache.kafka.server.config.ConfigSynonym");
        StringBuilder out = new StringBuilder("{\n\"configs\": [\n");
        boolean first = true;
        int order = 0;
        for (ConfigDef.ConfigKey k : def.configKeys().values()) {
            Map<String, Object> row = new TreeMap<>();
            row.put("name", k.name);
            row.put("order", order++);
            row.put("type", k.type.name());
            boolean hasDefault = k.defaultValue != ConfigDef.NO_DEFAULT_VALUE;
            row.put("hasDefault", hasDefault);
            row.put("default", hasDefault && k.defaultValue != null ? ConfigDef.convertToString(k.defaultValue, k.type) : null);
            if (k.internalConfig) row.put("internal", true);
            row.put("validator", validator(k.validator));
            List<Object> syns = new ArrayList<>();
            for (Object s : synonyms.getOrDefault(k.name, List.of())) {
                Map<String, Object> sr = new TreeMap<>();
                sr.put("name", cs.getMethod("name").invoke(s));
                Function<String, String> conv = (Function<String, String>) cs.getMethod("converter").invoke(s);
                sr.put("factor", conv.apply("1"));
                syns.add(sr);
            }
            row.put("synonyms", syns);
            out.append(first ? "" : ",\n").append(json(row));
            first = false;
        }
        out.append("\n]\n}\n");
        System.out.print(out);
    }
}
