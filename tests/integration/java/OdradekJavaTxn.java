// Exactly-once read-process-write with the Apache Kafka Java client (kafka-clients 3.9).
//
// Usage: java OdradekJavaTxn <bootstrap> <input> <output> <records>
//
// Steps (a failing step is reported; any failure makes the exit code 1):
//   setup     Admin creates <input> and <output> (4 partitions each); an idempotent
//             producer writes <records> records to <input>
//   copy      worker A (KafkaConsumer, read_committed, group "eos-<input>", plus a
//             transactional KafkaProducer) copies input to output: poll, send,
//             sendOffsetsToTransaction(offsets, groupMetadata), commitTransaction.
//             After a third of the output, worker B joins the group (rebalance);
//             after two thirds worker A leaves (rebalance again); B finishes.
//             A failed commit (stale generation, fencing) aborts and rewinds to the
//             committed offsets.
//   verify    a read_committed consumer reads <output>: every input value exactly
//             once, nothing else
//   fence     a second producer with worker B's transactional.id fences B's: B's
//             next send/commit fails with ProducerFencedException
//   admin     Admin listTransactions / describeTransactions / describeProducers
// Prints "STEP <name> ok|FAIL: why" lines and finally "PASS" or "FAIL".
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class OdradekJavaTxn {
    static final int PARTITIONS = 4;
    static final long TIMEOUT_MS = 120_000;
    static final List<String> failures = new ArrayList<>();

    interface Step { void run() throws Exception; }

    static void step(String name, Step body) {
        long t0 = System.nanoTime();
        try {
            body.run();
            System.out.printf("STEP %s ok (%d ms)%n", name, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable e) {
            Throwable cause = e;
            while (cause instanceof ExecutionException && cause.getCause() != null)
                cause = cause.getCause();
            failures.add(name);
            System.out.println("STEP " + name + " FAIL: " + cause);
            e.printStackTrace(System.out);
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        }
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        return new KafkaConsumer<>(p);
    }

    /** One read-process-write worker on its own thread. */
    static class Worker implements Runnable {
        final String bootstrap, input, output, group, txnId;
        final AtomicLong copied;
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicInteger aborts = new AtomicInteger();
        final AtomicLong mine = new AtomicLong();
        volatile Throwable error;
        final Thread thread = new Thread(this);

        Worker(String bootstrap, String input, String output, String group, String txnId,
               AtomicLong copied) {
            this.bootstrap = bootstrap; this.input = input; this.output = output;
            this.group = group; this.txnId = txnId; this.copied = copied;
        }

        public void run() {
            try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group);
                 KafkaProducer<byte[], byte[]> p = producer(bootstrap, txnId)) {
                p.initTransactions();
                c.subscribe(List.of(input));
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(200));
                    if (records.isEmpty()) continue;
                    p.beginTransaction();
                    try {
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            p.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value()));
                            offsets.put(new TopicPartition(r.topic(), r.partition()),
                                        new OffsetAndMetadata(r.offset() + 1));
                        }
                        p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                        Thread.sleep(5);
                        p.commitTransaction();
                        copied.addAndGet(records.count());
                        mine.addAndGet(records.count());
                    } catch (ProducerFencedException | InvalidProducerEpochException e) {
                        throw e;
                    } catch (KafkaException e) {
                        // e.g. CommitFailedException after a rebalance: abort, rewind
                        p.abortTransaction();
                        aborts.incrementAndGet();
                        Set<TopicPartition> assigned = c.assignment();
                        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(assigned);
                        for (TopicPartition tp : assigned) {
                            OffsetAndMetadata om = committed.get(tp);
                            if (om != null) c.seek(tp, om.offset()); else c.seekToBeginning(List.of(tp));
                        }
                    }
                }
            } catch (Throwable e) {
                error = e;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], input = args[1], output = args[2];
        int total = Integer.parseInt(args[3]);
        String group = "eos-" + input;
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Admin admin = Admin.create(ap);
        AtomicLong copied = new AtomicLong();
        Worker[] workers = new Worker[2];

        step("setup", () -> {
            admin.createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 1),
                                       new NewTopic(output, PARTITIONS, (short) 1)))
                 .all().get(30, TimeUnit.SECONDS);
            try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, null)) {
                for (int i = 0; i < total; i++) {
                    byte[] v = ("v" + i).getBytes(StandardCharsets.UTF_8);
                    p.send(new ProducerRecord<>(input, i % PARTITIONS, ("k" + i).getBytes(), v));
                }
                p.flush();
            }
        });

        step("copy", () -> {
            workers[0] = new Worker(bootstrap, input, output, group, "eos-" + input + "-A", copied);
            workers[1] = new Worker(bootstrap, input, output, group, "eos-" + input + "-B", copied);
            workers[0].thread.start();
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (copied.get() < total / 3 && System.currentTimeMillis() < deadline) Thread.sleep(20);
            workers[1].thread.start();
            while (copied.get() < 2 * total / 3 && System.currentTimeMillis() < deadline) Thread.sleep(20);
            workers[0].stop.set(true);
            workers[0].thread.join(TIMEOUT_MS);
            while (copied.get() < total && System.currentTimeMillis() < deadline) Thread.sleep(50);
            System.out.println("copied (committed) " + copied.get() + ": A " + workers[0].mine.get()
                               + ", B " + workers[1].mine.get() + "; aborts A=" +
                               workers[0].aborts.get() + " B=" + workers[1].aborts.get());
            check(workers[0].mine.get() > 0 && workers[1].mine.get() > 0,
                  "both workers must have copied records (the group rebalanced between them)");
            check(workers[0].error == null, "worker A failed: " + workers[0].error);
            check(workers[1].error == null, "worker B failed: " + workers[1].error);
            check(copied.get() >= total, "only " + copied.get() + " of " + total + " copied");
        });

        step("verify", () -> {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            Map<String, Integer> seen = new HashMap<>();
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int i = 0; i < PARTITIONS; i++) tps.add(new TopicPartition(output, i));
                c.assign(tps);
                c.seekToBeginning(tps);
                long deadline = System.currentTimeMillis() + 30_000;
                int idle = 0;
                while (System.currentTimeMillis() < deadline && idle < 10) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(300));
                    if (rs.isEmpty()) { if (seen.size() >= total) idle++; continue; }
                    idle = 0;
                    for (ConsumerRecord<byte[], byte[]> r : rs)
                        seen.merge(new String(r.value(), StandardCharsets.UTF_8), 1, Integer::sum);
                }
            }
            int dups = 0;
            for (int n : seen.values()) if (n > 1) dups++;
            check(dups == 0, dups + " values were copied more than once");
            for (int i = 0; i < total; i++)
                check(seen.containsKey("v" + i), "v" + i + " was never copied");
            check(seen.size() == total, seen.size() + " distinct values, expected " + total);
        });

        step("fence", () -> {
            workers[1].stop.set(true);
            workers[1].thread.join(TIMEOUT_MS);
            KafkaProducer<byte[], byte[]> old = producer(bootstrap, "fence-" + input);
            old.initTransactions();
            old.beginTransaction();
            old.send(new ProducerRecord<>(output, 0, null, "zombie".getBytes())).get();
            KafkaProducer<byte[], byte[]> fresh = producer(bootstrap, "fence-" + input);
            fresh.initTransactions();
            boolean fenced = false;
            try {
                old.send(new ProducerRecord<>(output, 0, null, "zombie-2".getBytes())).get();
                old.commitTransaction();
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                fenced = true;
            } catch (ExecutionException e) {
                fenced = e.getCause() instanceof ProducerFencedException
                      || e.getCause() instanceof InvalidProducerEpochException;
            } catch (KafkaException e) {
                fenced = e.getCause() instanceof ProducerFencedException
                      || e.getCause() instanceof InvalidProducerEpochException;
            }
            old.close(Duration.ofSeconds(5));
            fresh.close(Duration.ofSeconds(5));
            check(fenced, "the old producer was not fenced");
        });

        step("admin", () -> {
            Collection<TransactionListing> listed = admin.listTransactions().all().get(30, TimeUnit.SECONDS);
            Set<String> ids = new HashSet<>();
            for (TransactionListing l : listed) ids.add(l.transactionalId());
            check(ids.contains("eos-" + input + "-A"), "listTransactions misses worker A: " + ids);
            TransactionDescription d = admin.describeTransactions(List.of("eos-" + input + "-B"))
                .all().get(30, TimeUnit.SECONDS).get("eos-" + input + "-B");
            check(d.state() == TransactionState.COMPLETE_COMMIT || d.state() == TransactionState.EMPTY,
                  "worker B's transaction is " + d.state());
            DescribeProducersResult r = admin.describeProducers(List.of(new TopicPartition(output, 0)));
            List<ProducerState> ps = r.all().get(30, TimeUnit.SECONDS)
                .get(new TopicPartition(output, 0)).activeProducers();
            check(!ps.isEmpty(), "describeProducers shows no producer on the output");
        });

        admin.close(Duration.ofSeconds(5));
        System.out.println(failures.isEmpty() ? "PASS" : "FAIL " + failures);
        System.exit(failures.isEmpty() ? 0 : 1);
    }
}
