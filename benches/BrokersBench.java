// The client side of benches/brokers.py, run against real brokers with Kafka's own Admin client:
//   create BOOTSTRAP PREFIX TOPICS PARTITIONS RF BATCH  creates PREFIX0..PREFIX{TOPICS-1} in requests of
//                                                       BATCH topics, one after the other; prints the
//                                                       milliseconds from the first request to the last answer
//   watch BOOTSTRAP PREFIX BROKER                       describes the PREFIX topics every 20 ms; prints
//                                                       "ready N" once BROKER leads N > 0 of their partitions,
//                                                       then the wall-clock millisecond at which it leads none
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartitionInfo;

public class BrokersBench {
    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "60000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "120000");
        return Admin.create(p);
    }

    public static void main(String[] args) throws Exception {
        try (Admin admin = admin(args[1])) {
            String prefix = args[2];
            if (args[0].equals("create")) {
                int topics = Integer.parseInt(args[3]);
                int partitions = Integer.parseInt(args[4]);
                short rf = Short.parseShort(args[5]);
                int batch = Integer.parseInt(args[6]);
                long t0 = System.nanoTime();
                for (int i = 0; i < topics; i += batch) {
                    List<NewTopic> news = new ArrayList<>();
                    for (int j = i; j < Math.min(topics, i + batch); j++) news.add(new NewTopic(prefix + j, partitions, rf));
                    admin.createTopics(news).all().get();
                }
                System.out.println((System.nanoTime() - t0) / 1_000_000.0);
            } else {
                int broker = Integer.parseInt(args[3]);
                boolean ready = false;
                while (true) {
                    Set<String> names = admin.listTopics().names().get().stream()
                        .filter(n -> n.startsWith(prefix)).collect(Collectors.toSet());
                    Map<String, TopicDescription> d = admin.describeTopics(names).allTopicNames().get();
                    int led = 0;
                    for (TopicDescription t : d.values()) {
                        for (TopicPartitionInfo p : t.partitions()) {
                            if (p.leader() != null && p.leader().id() == broker) led++;
                        }
                    }
                    if (!ready && led > 0) {
                        System.out.println("ready " + led);
                        System.out.flush();
                        ready = true;
                    } else if (ready && led == 0) {
                        System.out.println(System.currentTimeMillis());
                        System.out.flush();
                        return;
                    }
                    Thread.sleep(20);
                }
            }
        }
    }
}
