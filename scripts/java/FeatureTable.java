// Prints, as JSON on stdout, the metadata.version table and the finalized-feature table of the
// Apache Kafka release on the classpath (kafka-server-common). Everything is read by reflection
// so that one program serves the 3.x (Features) and 4.x (Feature) class layouts.
// Run by scripts/gen_features.py: java -cp '<libs>/*' scripts/java/FeatureTable.java
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public class FeatureTable {
    static final String PKG = "org.apache.kafka.server.common.";

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\');
            b.append(c);
        }
        return b.append('"').toString();
    }

    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof String) return q((String) v);
        if (v instanceof Boolean || v instanceof Number) return v.toString();
        if (v instanceof Enum) return q(((Enum<?>) v).name());
        return q(v.toString());
    }

    /** Public instance getters without parameters returning a boolean, short or String. */
    static List<Method> getters(Class<?> c) {
        List<Method> out = new ArrayList<>();
        for (Method m : c.getDeclaredMethods()) {
            if (!Modifier.isPublic(m.getModifiers()) || Modifier.isStatic(m.getModifiers())) continue;
            if (m.getParameterCount() != 0) continue;
            Class<?> r = m.getReturnType();
            if (r != boolean.class && r != short.class && r != String.class) continue;
            if (m.getName().equals("toString") || m.getName().equals("name")) continue;
            out.add(m);
        }
        out.sort((a, b) -> a.getName().compareTo(b.getName()));
        return out;
    }

    static Object call(Method m, Object o) throws Exception {
        try {
            return m.invoke(o);
        } catch (InvocationTargetException e) {
            return null; // e.g. registerControllerRecordVersion() throws below 3.7-IV0
        }
    }

    public static void main(String[] args) throws Exception {
        Class<?> mv = Class.forName(PKG + "MetadataVersion");
        StringBuilder out = new StringBuilder("{\n\"metadata_versions\": [\n");
        List<Method> ms = getters(mv);
        boolean first = true;
        for (Object v : (Object[]) mv.getMethod("values").invoke(null)) {
            short level = (Short) mv.getMethod("featureLevel").invoke(v);
            if (level <= 0) continue; // pre-KRaft inter.broker.protocol versions
            out.append(first ? "" : ",\n").append("  {\"constant\": ").append(q(((Enum<?>) v).name()));
            first = false;
            for (Method m : ms) {
                out.append(", ").append(q(m.getName())).append(": ").append(json(call(m, v)));
            }
            out.append('}');
        }
        out.append("\n],\n\"metadata_version_constants\": {");
        first = true;
        for (var f : mv.getDeclaredFields()) {
            if (f.getType() != mv || !Modifier.isStatic(f.getModifiers()) || f.isEnumConstant()) continue;
            Object v = f.get(null);
            out.append(first ? "" : ", ").append(q(f.getName())).append(": ")
               .append(mv.getMethod("featureLevel").invoke(v));
            first = false;
        }
        Object[] all = (Object[]) mv.getMethod("values").invoke(null);
        out.append(", \"latestTesting\": ").append(mv.getMethod("featureLevel").invoke(all[all.length - 1]));
        out.append("},\n\"features\": [\n");

        Class<?> fc = null;
        for (String name : new String[] {"Feature", "Features"}) {
            try {
                fc = Class.forName(PKG + name);
                break;
            } catch (ClassNotFoundException e) {
                // 3.5 and older: metadata.version is the only feature
            }
        }
        if (fc == null) {
            System.out.print(out.append("]\n}\n"));
            return;
        }
        @SuppressWarnings("unchecked")
        List<Object> production = (List<Object>) fc.getField("PRODUCTION_FEATURES").get(null);
        first = true;
        for (Object f : (Object[]) fc.getMethod("values").invoke(null)) {
            String name = (String) fc.getMethod("featureName").invoke(f);
            out.append(first ? "" : ",\n").append("  {\"name\": ").append(q(name))
               .append(", \"constant\": ").append(q(((Enum<?>) f).name()))
               .append(", \"production\": ").append(production.contains(f))
               .append(", \"minimumProduction\": ").append(fc.getMethod("minimumProduction").invoke(f))
               .append(", \"latestProduction\": ").append(fc.getMethod("latestProduction").invoke(f))
               .append(", \"latestTesting\": ").append(fc.getMethod("latestTesting").invoke(f))
               .append(", \"levels\": [");
            first = false;
            boolean firstLevel = true;
            for (Object fv : (Object[]) fc.getMethod("featureVersions").invoke(f)) {
                Class<?> fvc = Class.forName(PKG + "FeatureVersion");
                Object boot = fvc.getMethod("bootstrapMetadataVersion").invoke(fv);
                @SuppressWarnings("unchecked")
                Map<String, Short> deps = new TreeMap<>((Map<String, Short>) fvc.getMethod("dependencies").invoke(fv));
                out.append(firstLevel ? "" : ", ").append("{\"level\": ")
                   .append(fvc.getMethod("featureLevel").invoke(fv))
                   .append(", \"constant\": ").append(q(((Enum<?>) fv).name()))
                   .append(", \"bootstrapMetadataVersion\": ")
                   .append(boot == null ? "null" : mv.getMethod("featureLevel").invoke(boot))
                   .append(", \"dependencies\": {");
                firstLevel = false;
                boolean firstDep = true;
                for (var e : deps.entrySet()) {
                    out.append(firstDep ? "" : ", ").append(q(e.getKey())).append(": ").append(e.getValue());
                    firstDep = false;
                }
                out.append("}}");
            }
            out.append("]}");
        }
        out.append("\n]\n}\n");
        System.out.print(out);
    }
}
