// The producer and the consumer group of tests/kafka/test_end_to_end_on_kraftkit.py, with Kafka's own
// client library:
//
//   produce <bootstrap> <topic> idempotent|transactional <per second> <stop file> <out>
//     acks=all; the idempotent producer sends keys k0, k1, ... (value "value i"), rate-limited, until the
//     stop file exists (so that the run spans the faults the test injects); the transactional one sends them in transactions of 10,
//     every fifth aborted on purpose. Writes one line a record to <out>, flushed as it goes:
//       ack <i> <partition> <offset>   acknowledged (idempotent) / in a committed transaction
//       aborted <i>                    in a transaction this program aborted (on purpose or after an error)
//       uncertain <i>                  in a transaction whose commit failed: its outcome is the coordinator's
//       error <i> <exception class>    a send (or transaction) error: counted, never hidden
//   consume <bootstrap> <topic> read_committed|read_uncommitted <group.id> <out>
//     subscribes with the group, reads up to the end offsets (the last stable offsets when read_committed)
//     of every partition of its assignment, commits them to the group, and writes one line a record:
//       <partition> <offset> <key> <value>
//     then "committed <sum of the group's committed offsets> <sum of the end offsets>".
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class EndToEndClient {
    static final int TXN = 10;

    public static void main(String[] args) throws Exception {
        if (args[0].equals("produce")) produce(args[1], args[2], args[3], Integer.parseInt(args[4]),
                                                Paths.get(args[5]), args[6]);
        else if (args[0].equals("consume")) consume(args[1], args[2], args[3], args[4], args[5]);
        else throw new IllegalArgumentException("unknown command " + args[0]);
    }

    static synchronized void line(BufferedWriter out, String text) {
        try {
            out.write(text);
            out.write('\n');
            out.flush();
        } catch (java.io.IOException e) {
            throw new RuntimeException(e);
        }
    }

    static KafkaProducer<String, String> producer(String bootstrap, boolean txn) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        if (txn) {
            p.put("transactional.id", "end-to-end");
            p.put("transaction.timeout.ms", "30000");
        }
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        if (txn) producer.initTransactions();
        return producer;
    }

    static void pace(long start, int i, int perSecond) throws InterruptedException {
        long due = start + (long) i * 1000 / perSecond;
        long now = System.currentTimeMillis();
        if (due > now) Thread.sleep(due - now);
    }

    static void produce(String bootstrap, String topic, String mode, int perSecond, Path stop, String outPath)
            throws Exception {
        AtomicLong errors = new AtomicLong();
        try (BufferedWriter out = Files.newBufferedWriter(Paths.get(outPath), StandardCharsets.UTF_8)) {
            long start = System.currentTimeMillis();
            if (mode.equals("idempotent")) {
                try (KafkaProducer<String, String> producer = producer(bootstrap, false)) {
                    for (int i = 0; !Files.exists(stop); i++) {
                        pace(start, i, perSecond);
                        final int idx = i;
                        producer.send(new ProducerRecord<>(topic, "k" + i, "value " + i), (md, e) -> {
                            if (e == null) line(out, "ack " + idx + " " + md.partition() + " " + md.offset());
                            else {
                                errors.incrementAndGet();
                                line(out, "error " + idx + " " + e.getClass().getName());
                            }
                        });
                    }
                    producer.flush();
                }
            } else {
                KafkaProducer<String, String> producer = producer(bootstrap, true);
                try {
                    for (int t = 0; !Files.exists(stop); t++) {
                        int lo = t * TXN, hi = lo + TXN;
                        boolean abort = t % 5 == 4;
                        List<Future<RecordMetadata>> sent = new ArrayList<>();
                        boolean committing = false;
                        try {
                            producer.beginTransaction();
                            for (int i = lo; i < hi; i++) {
                                pace(start, i, perSecond);
                                sent.add(producer.send(new ProducerRecord<>(topic, "k" + i, "value " + i)));
                            }
                            if (abort) {
                                producer.abortTransaction();
                                for (int i = lo; i < hi; i++) line(out, "aborted " + i);
                                continue;
                            }
                            committing = true;
                            while (true) {
                                try {
                                    producer.commitTransaction();
                                    break;
                                } catch (TimeoutException e) {  // retriable: the same commit again
                                    errors.incrementAndGet();
                                    line(out, "error " + lo + " " + e.getClass().getName());
                                }
                            }
                            for (int i = lo; i < hi; i++) {
                                RecordMetadata md = sent.get(i - lo).get();
                                line(out, "ack " + i + " " + md.partition() + " " + md.offset());
                            }
                        } catch (KafkaException e) {
                            errors.incrementAndGet();
                            line(out, "error " + lo + " " + e.getClass().getName());
                            boolean aborted = false;
                            try {
                                producer.abortTransaction();
                                aborted = !committing;
                            } catch (KafkaException again) {  // fatal: a new producer fences the old one
                                errors.incrementAndGet();
                                line(out, "error " + lo + " " + again.getClass().getName());
                                producer.close(Duration.ofSeconds(5));
                                producer = producer(bootstrap, true);
                            }
                            for (int i = lo; i < hi; i++) line(out, (aborted ? "aborted " : "uncertain ") + i);
                        }
                    }
                } finally {
                    producer.close(Duration.ofSeconds(30));
                }
            }
            line(out, "done " + errors.get() + " " + (System.currentTimeMillis() - start));
        }
    }

    static void consume(String bootstrap, String topic, String isolation, String group, String outPath)
            throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
             BufferedWriter out = Files.newBufferedWriter(Paths.get(outPath), StandardCharsets.UTF_8)) {
            int partitions = consumer.partitionsFor(topic, Duration.ofSeconds(60)).size();
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 150_000;
            Map<TopicPartition, Long> end = null;
            while (true) {
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("consume timed out");
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500)))
                    line(out, r.partition() + " " + r.offset() + " " + r.key() + " " + r.value().replace(' ', '_'));
                Set<TopicPartition> assigned = consumer.assignment();
                if (assigned.size() != partitions) continue;
                if (end == null) end = consumer.endOffsets(assigned);
                boolean done = true;
                for (TopicPartition tp : assigned) if (consumer.position(tp) < end.get(tp)) done = false;
                if (done) break;
            }
            consumer.commitSync(Duration.ofSeconds(60));
            long committed = 0, ends = 0;
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                    consumer.committed(consumer.assignment(), Duration.ofSeconds(60)).entrySet())
                committed += e.getValue() == null ? 0 : e.getValue().offset();
            for (long v : end.values()) ends += v;
            line(out, "committed " + committed + " " + ends);
        }
    }
}
