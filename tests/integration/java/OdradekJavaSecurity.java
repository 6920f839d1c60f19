// The Apache Kafka Java client (kafka-clients 3.9) over a secured listener.
//
// Usage: java OdradekJavaSecurity <bootstrap> <topic> <client.properties> roundtrip <records>
//        java OdradekJavaSecurity <bootstrap> <topic> <client.properties> refused
//
// The properties file holds the client's security keys (security.protocol,
// sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ssl.keystore.*), as users
// write them. roundtrip:
//   create    AdminClient.createTopics: <topic>, 2 partitions
//   produce   an idempotent producer (acks=all) sends <records> records with keys
//   consume   a KafkaConsumer in a group (subscribe, commitSync) reads them all back
//   committed the group's committed offsets add up to <records>
// refused: a producer's send fails; prints the exception class of the cause
// ("STEP refused ok: org.apache.kafka.common.errors.SaslAuthenticationException: ...").
// Prints "STEP <name> ok|FAIL: why" lines and finally "PASS" or "FAIL".
import java.io.FileReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class OdradekJavaSecurity {
    static final long TIMEOUT_S = 30;
    static boolean failed = false;

    interface Step { void run() throws Exception; }

    static void step(String name, Step body) {
        long t0 = System.nanoTime();
        try {
            body.run();
            System.out.printf("STEP %s ok (%d ms)%n", name, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable e) {
            failed = true;
            System.out.println("STEP " + name + " FAIL: " + root(e));
            e.printStackTrace(System.err);
        }
    }

    static Throwable root(Throwable e) {
        Throwable cause = e;
        while ((cause instanceof ExecutionException || cause instanceof org.apache.kafka.common.KafkaException
                && !(cause instanceof org.apache.kafka.common.errors.AuthenticationException))
               && cause.getCause() != null)
            cause = cause.getCause();
        return cause;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], mode = args[3];
        Properties base = new Properties();
        try (FileReader r = new FileReader(args[2], StandardCharsets.UTF_8)) { base.load(r); }
        base.put("bootstrap.servers", bootstrap);
        if (mode.equals("refused")) {
            refused(base, topic);
        } else {
            roundtrip(base, topic, Integer.parseInt(args[4]));
        }
        System.out.println(failed ? "FAIL" : "PASS");
        System.exit(failed ? 1 : 0);
    }

    static Properties producerProps(Properties base) {
        Properties p = new Properties();
        p.putAll(base);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("max.block.ms", "20000");
        p.put("delivery.timeout.ms", "20000");
        p.put("request.timeout.ms", "10000");
        return p;
    }

    static void roundtrip(Properties base, String topic, int records) {
        step("create", () -> {
            try (Admin admin = Admin.create(base)) {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)))
                     .all().get(TIMEOUT_S, TimeUnit.SECONDS);
            }
        });
        step("produce", () -> {
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(base))) {
                List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < records; i++)
                    sent.add(producer.send(new ProducerRecord<>(topic, ("k" + i).getBytes(),
                                                                ("v" + i).getBytes())));
                producer.flush();
                for (var f : sent) f.get(TIMEOUT_S, TimeUnit.SECONDS);
            }
        });
        step("consume", () -> {
            Properties c = new Properties();
            c.putAll(base);
            c.put("key.deserializer", ByteArrayDeserializer.class.getName());
            c.put("value.deserializer", ByteArrayDeserializer.class.getName());
            c.put("group.id", "java-sec-" + topic);
            c.put("auto.offset.reset", "earliest");
            c.put("enable.auto.commit", "false");
            Set<String> seen = new HashSet<>();
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (seen.size() < records && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                        String k = new String(r.key()), v = new String(r.value());
                        if (!v.equals("v" + k.substring(1)))
                            throw new AssertionError("record " + k + " has value " + v);
                        seen.add(k);
                    }
                }
                if (seen.size() != records)
                    throw new AssertionError("read " + seen.size() + " of " + records + " records");
                consumer.commitSync(Duration.ofSeconds(TIMEOUT_S));
                long total = 0;
                for (var e : consumer.committed(Set.of(new TopicPartition(topic, 0),
                        new TopicPartition(topic, 1)), Duration.ofSeconds(TIMEOUT_S)).entrySet())
                    total += e.getValue() == null ? 0 : e.getValue().offset();
                if (total != records)
                    throw new AssertionError("committed offsets add up to " + total);
            }
        });
    }

    static void refused(Properties base, String topic) {
        long t0 = System.nanoTime();
        Throwable got = null;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(base))) {
            producer.send(new ProducerRecord<>(topic, "v".getBytes())).get(TIMEOUT_S, TimeUnit.SECONDS);
        } catch (Throwable e) {
            got = root(e);
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        if (got == null) {
            failed = true;
            System.out.println("STEP refused FAIL: the send succeeded");
        } else {
            System.out.println("STEP refused ok (" + ms + " ms): " + got.getClass().getName() + ": "
                               + got.getMessage());
        }
    }
}
