// kraftkit test harness client: drives a real Kafka cluster with Kafka's own Java
// client library (the most authentic writer/reader).  Launched by tests/harness/tools.py
// as a single-file source program:  java -cp '<kafka libs>/*' HarnessClient.java CMD ...
//
//   topics  BOOTSTRAP SPEC.json              create topics: [{"name", "partitions", "configs"}]
//   produce BOOTSTRAP SPEC.jsonl OUT.jsonl    run producer jobs, write one ack line per record
//   consume BOOTSTRAP TOPIC ISOLATION OUT.jsonl   read every record from the beginning
//
// JSON lines in SPEC (one job per line):
//   {"topic": T, "props": {producer props}, "transactional_id": null|S,
//    "transactions": [{"commit": bool, "records": [REC...]}] | "records": [REC...]}
//   REC = {"k": b64|null, "v": b64|null, "h": [[key, b64|null]...], "p": int|null, "ts": long|null}
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class HarnessClient {
    static final ObjectMapper M = new ObjectMapper();
    static final Base64.Encoder B64E = Base64.getEncoder();
    static final Base64.Decoder B64D = Base64.getDecoder();

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "topics": topics(args[1], args[2]); break;
            case "produce": produce(args[1], args[2], args[3]); break;
            case "consume": consume(args[1], args[2], args[3], args[4]); break;
            default: throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static byte[] bytes(JsonNode n) {
        return (n == null || n.isNull()) ? null : B64D.decode(n.asText());
    }

    static String b64(byte[] b) {
        return b == null ? null : B64E.encodeToString(b);
    }

    static void topics(String bootstrap, String specPath) throws Exception {
        JsonNode spec = M.readTree(Files.readAllBytes(Paths.get(specPath)));
        List<NewTopic> topics = new ArrayList<>();
        for (JsonNode t : spec) {
            NewTopic nt = new NewTopic(t.get("name").asText(), t.path("partitions").asInt(1), (short) 1);
            Map<String, String> configs = new HashMap<>();
            Iterator<Map.Entry<String, JsonNode>> it = t.path("configs").fields();
            while (it.hasNext()) {
                Map.Entry<String, JsonNode> e = it.next();
                configs.put(e.getKey(), e.getValue().asText());
            }
            nt.configs(configs);
            topics.add(nt);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(topics).all().get();
            // wait until every partition has a leader visible to clients
            for (int i = 0; i < 200; i++) {
                boolean ok = true;
                for (NewTopic t : topics) {
                    try {
                        var d = admin.describeTopics(Collections.singleton(t.name())).allTopicNames().get().get(t.name());
                        for (var pi : d.partitions()) if (pi.leader() == null) ok = false;
                    } catch (Exception e) {
                        ok = false;
                    }
                }
                if (ok) break;
                Thread.sleep(100);
            }
        }
        System.out.println("created " + topics.size() + " topics");
    }

    static void produce(String bootstrap, String specPath, String outPath) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(specPath), StandardCharsets.UTF_8);
        try (BufferedWriter out = Files.newBufferedWriter(Paths.get(outPath), StandardCharsets.UTF_8)) {
            for (String line : lines) {
                if (line.isBlank()) continue;
                JsonNode job = M.readTree(line);
                runJob(bootstrap, job, out);
            }
        }
    }

    static void runJob(String bootstrap, JsonNode job, BufferedWriter out) throws Exception {
        String topic = job.get("topic").asText();
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        Iterator<Map.Entry<String, JsonNode>> it = job.path("props").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            p.put(e.getKey(), e.getValue().asText());
        }
        boolean txn = job.hasNonNull("transactional_id");
        if (txn) p.put("transactional.id", job.get("transactional_id").asText());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            if (txn) {
                producer.initTransactions();
                int txIndex = 0;
                for (JsonNode tx : job.get("transactions")) {
                    producer.beginTransaction();
                    List<Future<RecordMetadata>> futs = sendAll(producer, topic, tx.get("records"));
                    producer.flush();
                    boolean commit = tx.get("commit").asBoolean();
                    if (commit) producer.commitTransaction(); else producer.abortTransaction();
                    writeAcks(out, topic, tx.get("records"), futs, txIndex, commit);
                    txIndex++;
                }
            } else {
                List<Future<RecordMetadata>> futs = sendAll(producer, topic, job.get("records"));
                producer.flush();
                writeAcks(out, topic, job.get("records"), futs, -1, true);
            }
        }
    }

    static List<Future<RecordMetadata>> sendAll(KafkaProducer<byte[], byte[]> producer, String topic, JsonNode recs) {
        List<Future<RecordMetadata>> futs = new ArrayList<>();
        for (JsonNode r : recs) {
            List<Header> headers = new ArrayList<>();
            for (JsonNode h : r.path("h")) headers.add(new RecordHeader(h.get(0).asText(), bytes(h.get(1))));
            Integer part = r.hasNonNull("p") ? r.get("p").asInt() : null;
            Long ts = r.hasNonNull("ts") ? r.get("ts").asLong() : null;
            futs.add(producer.send(new ProducerRecord<>(topic, part, ts, bytes(r.get("k")), bytes(r.get("v")), headers)));
        }
        return futs;
    }

    static void writeAcks(BufferedWriter out, String topic, JsonNode recs, List<Future<RecordMetadata>> futs,
                          int txIndex, boolean committed) throws Exception {
        for (int i = 0; i < futs.size(); i++) {
            RecordMetadata md = futs.get(i).get();
            ObjectNode o = M.createObjectNode();
            o.put("topic", topic);
            o.put("partition", md.partition());
            o.put("offset", md.offset());
            o.put("timestamp", md.timestamp());
            o.put("txn", txIndex);
            o.put("committed", committed);
            o.put("index", i);
            out.write(M.writeValueAsString(o));
            out.write('\n');
        }
    }

    static void consume(String bootstrap, String topic, String isolation, String outPath) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        long n = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
             BufferedWriter out = Files.newBufferedWriter(Paths.get(outPath), StandardCharsets.UTF_8)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : consumer.partitionsFor(topic, Duration.ofSeconds(30)))
                tps.add(new TopicPartition(topic, pi.partition()));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 120_000;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) if (consumer.position(tp) < end.get(tp)) done = false;
                if (done) break;
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("consume timed out");
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    ObjectNode o = M.createObjectNode();
                    o.put("topic", r.topic());
                    o.put("partition", r.partition());
                    o.put("offset", r.offset());
                    o.put("timestamp", r.timestamp());
                    o.put("timestamp_type", r.timestampType().name);
                    o.put("k", b64(r.key()));
                    o.put("v", b64(r.value()));
                    ArrayNode hs = o.putArray("h");
                    for (Header h : r.headers()) {
                        ArrayNode pair = hs.addArray();
                        pair.add(h.key());
                        pair.add(b64(h.value()));
                    }
                    out.write(M.writeValueAsString(o));
                    out.write('\n');
                    n++;
                }
            }
        }
        System.out.println("consumed " + n + " records from " + topic);
    }
}
