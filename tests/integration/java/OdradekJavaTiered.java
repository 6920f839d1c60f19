// Reads a tiered topic's partition 0 from offset 0 with the Apache Kafka Java client and
// prints one "offset key value" line per record, then the AdminClient's earliest,
// earliest-local (KIP-405, ListOffsets v8) and latest-tiered (KIP-1005, v9) offsets.
// Usage: OdradekJavaTiered <bootstrap> <topic> <count>
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class OdradekJavaTiered {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println("REC " + r.offset() + " " + new String(r.key()) + " "
                            + new String(r.value()));
                    seen++;
                }
            }
        }
        try (Admin admin = Admin.create(p)) {
            Map<String, OffsetSpec> specs = new LinkedHashMap<>();
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("earliest-local", OffsetSpec.earliestLocal());
            specs.put("latest-tiered", OffsetSpec.latestTiered());
            for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
                long offset = admin.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp)
                        .get().offset();
                System.out.println("OFFSET " + e.getKey() + " " + offset);
            }
        }
    }
}
