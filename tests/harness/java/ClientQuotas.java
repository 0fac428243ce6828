// Prints every client quota a cluster reports through the Admin API (describeClientQuotas with
// the "all" filter), one line per entity: "type:name,type:name<TAB>key=value;key=value", entity
// types and keys sorted, a default entity's name printed as <default>.
// Run with the jars of the Kafka release under test:  java -cp '<libs>/*' ClientQuotas.java BOOTSTRAP
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;

public class ClientQuotas {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("request.timeout.ms", "30000");
        try (Admin admin = Admin.create(props)) {
            Map<ClientQuotaEntity, Map<String, Double>> all = admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
            StringBuilder out = new StringBuilder();
            for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : all.entrySet()) {
                TreeMap<String, String> entity = new TreeMap<>();
                e.getKey().entries().forEach((t, n) -> entity.put(t, n == null ? "<default>" : n));
                StringBuilder ent = new StringBuilder();
                entity.forEach((t, n) -> ent.append(ent.length() == 0 ? "" : ",").append(t).append(':').append(n));
                StringBuilder vals = new StringBuilder();
                new TreeMap<>(e.getValue()).forEach((k, v) -> vals.append(vals.length() == 0 ? "" : ";").append(k).append('=').append(v));
                out.append(ent).append('\t').append(vals).append('\n');
            }
            System.out.print(out);
        }
    }
}
