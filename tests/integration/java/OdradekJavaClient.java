// The Apache Kafka Java client (kafka-clients 3.9) against one broker.
//
// Usage: java OdradekJavaClient <bootstrap> <topic> [records-per-codec] [--skip=step,step]
//
// One run, in order (a step that fails is reported and the run goes on where
// it can; any failure makes the exit code 1):
//   create       AdminClient.createTopics: <topic> with 3 partitions, RF 1
//   describe     describeTopics (3 partitions, a leader each) and describeCluster
//   configs      incrementalAlterConfigs SET retention.ms / max.message.bytes, then
//                describeConfigs shows the new values
//   config-sources  ... as DYNAMIC_TOPIC_CONFIG; cleanup.policy is delete, by default
//   produce      per codec (none, gzip, snappy, lz4, zstd) a default (idempotent,
//                acks=all) producer sends N records with keys, headers (incl. a
//                repeated key and a null value) and explicit CreateTime timestamps
//   consume      a group-less KafkaConsumer, assign() + seekToBeginning(), reads
//                everything back and checks key, value, headers, timestamp,
//                timestamp type and offset of every record; offsets are dense
//   list-offsets beginningOffsets / endOffsets match what was produced
//   offsets-for-times  offsetsForTimes: before all, exact, between codecs, past the end
//   delete       deleteTopics, and the topic disappears from listTopics
// Prints "STEP <name> ok|FAIL: why" lines and finally "PASS" or "FAIL".
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class OdradekJavaClient {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PARTITIONS = 3;
    static final long TIMEOUT_S = 30;

    interface Step { void run() throws Exception; }

    static final List<String> failures = new ArrayList<>();
    static Set<String> skip = new HashSet<>();

    static void step(String name, Step body) {
        if (skip.contains(name)) {
            System.out.println("STEP " + name + " skipped");
            return;
        }
        long t0 = System.nanoTime();
        try {
            body.run();
            System.out.printf("STEP %s ok (%d ms)%n", name, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable e) {
            Throwable cause = e;
            while (cause instanceof java.util.concurrent.ExecutionException && cause.getCause() != null)
                cause = cause.getCause();
            String why = cause.getClass().getSimpleName() + ": " + cause.getMessage();
            System.out.println("STEP " + name + " FAIL: " + why);
            failures.add(name + ": " + why);
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static byte[] b(String s) { return s == null ? null : s.getBytes(StandardCharsets.UTF_8); }
    static String s(byte[] b) { return b == null ? null : new String(b, StandardCharsets.UTF_8); }

    /** What we sent, and where the producer was told it landed. */
    static final class Sent {
        final String key; final String value; final List<Header> headers; final long timestamp;
        int partition = -1; long offset = -1;
        Sent(String key, String value, List<Header> headers, long timestamp) {
            this.key = key; this.value = value; this.headers = headers; this.timestamp = timestamp;
        }
    }

    static String headersToString(Iterable<Header> hs) {
        StringBuilder sb = new StringBuilder("[");
        for (Header h : hs) sb.append(h.key()).append('=').append(s(h.value())).append(';');
        return sb.append(']').toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: OdradekJavaClient <bootstrap> <topic> [records-per-codec] [--skip=a,b]");
            System.exit(2);
        }
        final String bootstrap = args[0];
        final String topic = args[1];
        int n = 200;
        for (int i = 2; i < args.length; i++) {
            if (args[i].startsWith("--skip=")) {
                for (String x : args[i].substring(7).split(",")) if (!x.isEmpty()) skip.add(x);
            } else {
                n = Integer.parseInt(args[i]);
            }
        }
        final int perCodec = n;

        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        common.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        common.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");

        final List<Sent> sent = new ArrayList<>();
        final long baseTs = System.currentTimeMillis() - 30 * 60 * 1000L;  // half an hour ago

        try (Admin admin = Admin.create(common)) {
            step("create", () -> {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
                     .all().get(TIMEOUT_S, TimeUnit.SECONDS);
            });

            step("describe", () -> {
                // Metadata can trail the create for a moment: retry briefly.
                TopicDescription d = null;
                long deadline = System.currentTimeMillis() + 10_000;
                while (true) {
                    try {
                        d = admin.describeTopics(List.of(topic)).allTopicNames()
                                 .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
                        if (d.partitions().size() == PARTITIONS
                                && d.partitions().stream().allMatch(p -> p.leader() != null)) break;
                    } catch (Exception e) {
                        if (System.currentTimeMillis() > deadline) throw e;
                    }
                    if (System.currentTimeMillis() > deadline) break;
                    Thread.sleep(200);
                }
                check(d != null && d.name().equals(topic), "describeTopics name");
                check(!d.isInternal(), "topic is not internal");
                check(d.partitions().size() == PARTITIONS, "partitions: " + d.partitions().size());
                for (TopicPartitionInfo p : d.partitions()) {
                    check(p.leader() != null && p.leader().id() >= 0, "leader of partition " + p.partition());
                    check(p.replicas().size() == 1, "replicas of partition " + p.partition() + ": " + p.replicas());
                    check(p.isr().size() == 1, "isr of partition " + p.partition() + ": " + p.isr());
                }
                DescribeClusterResult c = admin.describeCluster();
                Collection<Node> nodes = c.nodes().get(TIMEOUT_S, TimeUnit.SECONDS);
                String clusterId = c.clusterId().get(TIMEOUT_S, TimeUnit.SECONDS);
                Node controller = c.controller().get(TIMEOUT_S, TimeUnit.SECONDS);
                System.out.println("  cluster " + clusterId + " nodes " + nodes + " controller " + controller);
                check(nodes.size() >= 1, "describeCluster nodes");
                check(clusterId != null && !clusterId.isEmpty(), "clusterId");
                Set<String> names = admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS);
                check(names.contains(topic), "listTopics contains " + topic + ": " + names);
            });

            final ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            step("configs", () -> {
                Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "123456789"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET)));
                admin.incrementalAlterConfigs(ops).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                Config cfg = admin.describeConfigs(List.of(res)).all().get(TIMEOUT_S, TimeUnit.SECONDS).get(res);
                ConfigEntry retention = cfg.get("retention.ms");
                ConfigEntry maxBytes = cfg.get("max.message.bytes");
                check(retention != null && "123456789".equals(retention.value()),
                      "retention.ms after alter: " + retention);
                check(maxBytes != null && "2000000".equals(maxBytes.value()),
                      "max.message.bytes after alter: " + maxBytes);
            });

            step("config-sources", () -> {
                Config cfg = admin.describeConfigs(List.of(res)).all().get(TIMEOUT_S, TimeUnit.SECONDS).get(res);
                ConfigEntry retention = cfg.get("retention.ms");
                check(retention != null && retention.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                      "retention.ms source: " + retention);
                ConfigEntry cleanup = cfg.get("cleanup.policy");
                check(cleanup != null && "delete".equals(cleanup.value()), "cleanup.policy default: " + cleanup);
                check(cleanup.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                      "cleanup.policy was never set on the topic: " + cleanup);
                check(cleanup.isDefault() || cleanup.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG
                      || cleanup.source() == ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG,
                      "cleanup.policy source: " + cleanup);
            });
        }

        step("produce", () -> {
            for (int c = 0; c < CODECS.length; c++) {
                String codec = CODECS[c];
                Properties pp = new Properties();
                pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
                pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
                pp.put(ProducerConfig.CLIENT_ID_CONFIG, "odradek-java-" + codec);
                // defaults kept on purpose: enable.idempotence=true, acks=all
                List<Sent> mine = new ArrayList<>();
                List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
                try (KafkaProducer<byte[], byte[]> producer =
                             new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
                    for (int i = 0; i < perCodec; i++) {
                        String key = codec + "-" + i;
                        // compressible, of varying size (up to ~1.5 KB)
                        String value = ("value " + codec + " " + i + " ").repeat(1 + (i * 7) % 60);
                        List<Header> headers = new ArrayList<>();
                        headers.add(new RecordHeader("codec", b(codec)));
                        headers.add(new RecordHeader("idx", b(Integer.toString(i))));
                        headers.add(new RecordHeader("dup", b("first")));
                        headers.add(new RecordHeader("dup", b("second")));
                        headers.add(new RecordHeader("nullvalue", (byte[]) null));
                        long ts = baseTs + c * 1_000_000L + i;
                        Sent x = new Sent(key, value, headers, ts);
                        mine.add(x);
                        futures.add(producer.send(new ProducerRecord<>(topic, null, ts, b(key), b(value), headers)));
                    }
                    producer.flush();
                    for (int i = 0; i < perCodec; i++) {
                        RecordMetadata md = futures.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
                        Sent x = mine.get(i);
                        x.partition = md.partition();
                        x.offset = md.offset();
                        check(md.hasOffset() && md.offset() >= 0, codec + " offset of " + x.key);
                        check(md.timestamp() == x.timestamp,
                              codec + " timestamp of " + x.key + ": " + md.timestamp() + " != " + x.timestamp);
                    }
                }
                sent.addAll(mine);
            }
            check(sent.size() == perCodec * CODECS.length, "sent " + sent.size());
        });

        final Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "odradek-java-consumer");
        final List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));

        step("consume", () -> {
            check(!sent.isEmpty(), "nothing was produced");
            Map<String, Sent> byKey = new HashMap<>();
            for (Sent x : sent) byKey.put(x.key, x);
            Map<String, ConsumerRecord<byte[], byte[]>> got = new HashMap<>();
            Map<Integer, Long> lastOffset = new HashMap<>();
            try (KafkaConsumer<byte[], byte[]> consumer =
                         new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                long deadline = System.currentTimeMillis() + TIMEOUT_S * 1000;
                while (got.size() < sent.size() && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                        String key = s(r.key());
                        check(!got.containsKey(key), "duplicate record " + key + " at offset " + r.offset());
                        Long prev = lastOffset.get(r.partition());
                        check(prev == null ? r.offset() == 0 : r.offset() == prev + 1,
                              "offsets not dense in partition " + r.partition() + ": " + prev + " then " + r.offset());
                        lastOffset.put(r.partition(), r.offset());
                        got.put(key, r);
                    }
                }
            }
            check(got.size() == sent.size(), "consumed " + got.size() + " of " + sent.size());
            for (Sent x : sent) {
                ConsumerRecord<byte[], byte[]> r = got.get(x.key);
                check(r != null, "missing " + x.key);
                check(x.value.equals(s(r.value())), "value of " + x.key);
                check(r.partition() == x.partition && r.offset() == x.offset,
                      "position of " + x.key + ": " + r.partition() + "/" + r.offset()
                      + " but producer said " + x.partition + "/" + x.offset);
                check(r.timestamp() == x.timestamp, "timestamp of " + x.key + ": " + r.timestamp() + " != " + x.timestamp);
                check(r.timestampType() == TimestampType.CREATE_TIME, "timestamp type of " + x.key + ": " + r.timestampType());
                List<Header> hs = new ArrayList<>();
                r.headers().forEach(hs::add);
                check(hs.size() == x.headers.size(), "header count of " + x.key + ": " + headersToString(hs));
                for (int i = 0; i < hs.size(); i++) {
                    Header want = x.headers.get(i), have = hs.get(i);
                    check(want.key().equals(have.key()) && Arrays.equals(want.value(), have.value()),
                          "headers of " + x.key + ": " + headersToString(hs) + " != " + headersToString(x.headers));
                }
            }
        });

        step("list-offsets", () -> {
            check(!sent.isEmpty(), "nothing was produced");
            Map<Integer, Integer> counts = new HashMap<>();
            for (Sent x : sent) counts.merge(x.partition, 1, Integer::sum);
            try (KafkaConsumer<byte[], byte[]> consumer =
                         new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps, Duration.ofSeconds(TIMEOUT_S));
                Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(TIMEOUT_S));
                for (TopicPartition tp : tps) {
                    int count = counts.getOrDefault(tp.partition(), 0);
                    System.out.printf("  %s begin %d end %d sent %d%n", tp, begin.get(tp), end.get(tp), count);
                    check(begin.get(tp) == 0L, "beginning offset of " + tp + ": " + begin.get(tp));
                    check(end.get(tp) == (long) count, "end offset of " + tp + ": " + end.get(tp) + " != " + count);
                }
            }
        });

        step("offsets-for-times", () -> {
            check(!sent.isEmpty(), "nothing was produced");
            // Per partition, what we sent sorted by offset: timestamps increase with offset
            // because codecs were produced one after another with increasing timestamps.
            Map<Integer, List<Sent>> byPartition = new HashMap<>();
            for (Sent x : sent) byPartition.computeIfAbsent(x.partition, k -> new ArrayList<>()).add(x);
            for (List<Sent> l : byPartition.values()) l.sort(Comparator.comparingLong(x -> x.offset));
            try (KafkaConsumer<byte[], byte[]> consumer =
                         new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                for (Map.Entry<Integer, List<Sent>> e : byPartition.entrySet()) {
                    TopicPartition tp = new TopicPartition(topic, e.getKey());
                    List<Sent> l = e.getValue();
                    Sent mid = l.get(l.size() / 2);
                    Sent last = l.get(l.size() - 1);
                    long[][] cases = {
                            {l.get(0).timestamp - 1000, l.get(0).offset},  // before all -> first
                            {mid.timestamp, mid.offset},                     // exact
                            {last.timestamp, last.offset},                   // exact, last one
                            {last.timestamp + 1, -1},                        // past the end -> null
                    };
                    // between two records of different codecs -> the later one
                    for (int i = 1; i < l.size(); i++) {
                        if (l.get(i).timestamp - l.get(i - 1).timestamp > 1) {
                            cases = Arrays.copyOf(cases, cases.length + 1);
                            cases[cases.length - 1] = new long[]{l.get(i - 1).timestamp + 1, l.get(i).offset};
                            break;
                        }
                    }
                    for (long[] c : cases) {
                        OffsetAndTimestamp ot = consumer.offsetsForTimes(Map.of(tp, c[0]),
                                Duration.ofSeconds(TIMEOUT_S)).get(tp);
                        if (c[1] < 0) {
                            check(ot == null, "offsetsForTimes(" + tp + ", " + c[0] + ") past the end: " + ot);
                        } else {
                            long wantTs = -1;
                            for (Sent x : l) if (x.offset == c[1]) wantTs = x.timestamp;
                            check(ot != null && ot.offset() == c[1] && ot.timestamp() == wantTs,
                                  "offsetsForTimes(" + tp + ", " + c[0] + ") = " + ot + ", want offset "
                                  + c[1] + " timestamp " + wantTs);
                        }
                    }
                }
            }
        });

        try (Admin admin = Admin.create(common)) {
            step("delete", () -> {
                admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                long deadline = System.currentTimeMillis() + 10_000;
                Set<String> names;
                do {
                    names = admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS);
                    if (!names.contains(topic)) break;
                    Thread.sleep(200);
                } while (System.currentTimeMillis() < deadline);
                check(!names.contains(topic), "topic still listed after delete: " + names);
            });
        }

        if (failures.isEmpty()) {
            System.out.println("PASS");
            System.exit(0);
        }
        System.out.println("FAIL (" + failures.size() + " step(s)): " + String.join(" | ", failures));
        System.exit(1);
    }
}
