// Prints, one a line, Java's Double.toString of each double argument after "--doubles" and Kafka's
// Sanitizer.sanitize of each argument after "--names" (the texts Kafka writes in ZooKeeper's
// config znodes), for tests/migration/test_zk_writer.py.
import org.apache.kafka.common.utils.Sanitizer;

public class ZkTexts {
    public static void main(String[] args) {
        boolean names = false;
        for (String a : args) {
            if (a.equals("--doubles")) { names = false; continue; }
            if (a.equals("--names")) { names = true; continue; }
            System.out.println(names ? Sanitizer.sanitize(a) : Double.toString(Double.parseDouble(a)));
        }
    }
}
