// Prints, as JSON on stdout, the constants of the Apache Kafka client on the classpath
// (kafka-clients) that are not in its JSON message schemas: the control record types
// (ControlRecordType: name and type id) and the protocol error codes (Errors: code, name and
// default message). ControlRecordType is read by reflection because 4.x moved it to
// org.apache.kafka.common.record.internal.
// Run by scripts/gen_schemas.py: java -cp '<libs>/*' scripts/java/KafkaConstants.java
import java.lang.reflect.Method;
import org.apache.kafka.common.protocol.Errors;

public class KafkaConstants {
    static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static Class<?> controlRecordType() throws ClassNotFoundException {
        for (String name : new String[] {"org.apache.kafka.common.record.internal.ControlRecordType",
                                         "org.apache.kafka.common.record.ControlRecordType"}) {
            try {
                return Class.forName(name);
            } catch (ClassNotFoundException e) {
                // the other layout
            }
        }
        throw new ClassNotFoundException("ControlRecordType");
    }

    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder("{\n\"controlRecordTypes\": [\n");
        Class<?> crt = controlRecordType();
        Method type = crt.getMethod("type");
        boolean first = true;
        for (Object t : (Object[]) crt.getMethod("values").invoke(null)) {
            out.append(first ? "" : ",\n").append("  {\"name\": ").append(q(((Enum<?>) t).name()))
               .append(", \"type\": ").append(type.invoke(t)).append('}');
            first = false;
        }
        out.append("\n],\n\"errors\": [\n");
        first = true;
        for (Errors e : Errors.values()) {
            out.append(first ? "" : ",\n").append("  {\"code\": ").append(e.code())
               .append(", \"name\": ").append(q(e.name()))
               .append(", \"message\": ").append(q(e.message())).append('}');
            first = false;
        }
        out.append("\n]\n}\n");
        System.out.print(out);
    }
}
