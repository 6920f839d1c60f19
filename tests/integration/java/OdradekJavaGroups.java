// Consumer groups with the Apache Kafka Java client (kafka-clients 3.9).
//
// Usage: java OdradekJavaGroups <bootstrap> <topic>
//
// Steps, in order (a failing step is reported; any failure makes the exit code 1):
//   setup      AdminClient creates <topic> with 6 partitions; 60 records, 10 per partition
//   share      three classic KafkaConsumers of one group (polled in turn from this
//              thread) own 2+2+2 disjoint partitions and read all 60 records
//   commit     commitSync with metadata; committed() shows offset and metadata
//   leave      one member closes: the two others own 3+3
//   describe   Admin describeConsumerGroups: Stable, 2 members, 6 partitions;
//              listConsumerGroupOffsets shows the commits
//   delete     after every member closed, deleteConsumerGroups succeeds
//   kip848     two group.protocol=consumer members of a new group own 3+3, then one
//              leaves and the other owns all 6 (server-side assignment)
// Prints "STEP <name> ok|FAIL: why" lines and finally "PASS" or "FAIL".
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class OdradekJavaGroups {
    static final int PARTITIONS = 6;
    static final long TIMEOUT_MS = 30_000;

    interface Step { void run() throws Exception; }

    static final List<String> failures = new ArrayList<>();

    static void step(String name, Step body) {
        long t0 = System.nanoTime();
        try {
            body.run();
            System.out.printf("STEP %s ok (%d ms)%n", name, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable e) {
            Throwable cause = e;
            while (cause instanceof java.util.concurrent.ExecutionException && cause.getCause() != null)
                cause = cause.getCause();
            failures.add(name);
            System.out.println("STEP " + name + " FAIL: " + cause);
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static KafkaConsumer<byte[], byte[]> member(String bootstrap, String group) {
        return member(bootstrap, group, false);
    }

    static KafkaConsumer<byte[], byte[]> member(String bootstrap, String group, boolean kip848) {
        Properties p = new Properties();
        if (kip848) p.put("group.protocol", "consumer");
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (!kip848) {  // the consumer protocol takes these from the broker
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    interface Cond { boolean ok(); }

    static void pollUntil(List<KafkaConsumer<byte[], byte[]>> members, Set<String> seen, Cond cond,
                          String what) {
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (!cond.ok()) {
            if (System.currentTimeMillis() > deadline) throw new AssertionError("timed out: " + what);
            for (KafkaConsumer<byte[], byte[]> c : members)
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(50)))
                    seen.add(new String(r.value(), StandardCharsets.UTF_8));
        }
    }

    static boolean split(List<KafkaConsumer<byte[], byte[]>> members, int each) {
        Set<Integer> all = new HashSet<>();
        int total = 0;
        for (KafkaConsumer<byte[], byte[]> c : members) {
            Set<TopicPartition> a = c.assignment();
            if (a.size() != each) return false;
            for (TopicPartition tp : a) all.add(tp.partition());
            total += a.size();
        }
        return total == PARTITIONS && all.size() == PARTITIONS;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        String group = "java-group-" + UUID.randomUUID().toString().substring(0, 8);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Admin admin = Admin.create(ap);
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        Set<String> seen = new HashSet<>();

        step("setup", () -> {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all()
                .get(30, TimeUnit.SECONDS);
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 60; i++)
                    producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null,
                        ("v" + i).getBytes(StandardCharsets.UTF_8))).get(30, TimeUnit.SECONDS);
            }
        });
        step("share", () -> {
            for (int i = 0; i < 3; i++) {
                KafkaConsumer<byte[], byte[]> c = member(bootstrap, group);
                c.subscribe(List.of(topic));
                members.add(c);
            }
            pollUntil(members, seen, () -> split(members, 2) && seen.size() == 60, "2+2+2 and 60 records");
        });
        step("commit", () -> {
            for (KafkaConsumer<byte[], byte[]> c : members) {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : c.assignment())
                    offsets.put(tp, new OffsetAndMetadata(10, "java-" + tp.partition()));
                c.commitSync(offsets);
            }
            Set<TopicPartition> tps = new HashSet<>();
            for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
            Map<TopicPartition, OffsetAndMetadata> got = members.get(0).committed(tps);
            for (int p = 0; p < PARTITIONS; p++) {
                OffsetAndMetadata om = got.get(new TopicPartition(topic, p));
                check(om != null && om.offset() == 10 && om.metadata().equals("java-" + p),
                      "committed " + p + " = " + om);
            }
        });
        step("leave", () -> {
            members.remove(2).close();
            pollUntil(members, seen, () -> split(members, 3), "3+3");
        });
        step("describe", () -> {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                .get(30, TimeUnit.SECONDS).get(group);
            check(d.state() == ConsumerGroupState.STABLE, "state " + d.state());
            check(d.members().size() == 2, "members " + d.members());
            int owned = 0;
            for (MemberDescription m : d.members()) owned += m.assignment().topicPartitions().size();
            check(owned == PARTITIONS, "owned " + owned);
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            check(offsets.size() == PARTITIONS, "offsets " + offsets);
        });
        step("delete", () -> {
            for (KafkaConsumer<byte[], byte[]> c : members) c.close();
            members.clear();
            admin.deleteConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
            Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all()
                .get(30, TimeUnit.SECONDS);
            for (ConsumerGroupListing l : listed) check(!l.groupId().equals(group), "still listed");
        });
        step("kip848", () -> {
            String group848 = group + "-848";
            for (int i = 0; i < 2; i++) {
                KafkaConsumer<byte[], byte[]> c = member(bootstrap, group848, true);
                c.subscribe(List.of(topic));
                members.add(c);
            }
            pollUntil(members, seen, () -> split(members, 3), "3+3 (KIP-848)");
            members.remove(1).close();
            pollUntil(members, seen, () -> split(members, 6), "6 (KIP-848)");
        });
        for (KafkaConsumer<byte[], byte[]> c : members) c.close();
        admin.close();
        System.out.println(failures.isEmpty() ? "PASS" : "FAIL");
        System.exit(failures.isEmpty() ? 0 : 1);
    }
}
