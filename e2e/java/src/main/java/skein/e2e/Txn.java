package skein.e2e;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactional subcommands of the e2e Java driver (see Client):
 *
 *   txn-produce --topic T --tid ID --txns N --per-txn M [--abort-every K]
 *       N transactions of M records ("tX-rY"), every K-th aborted. Prints
 *       {"committed":C,"aborted":A}.
 *   txn-copy --in T1 --out T2 --group G --tid ID --count N [--timeout-ms 120000] [--idle-ms M]
 *       consume-transform-produce: as a member of G (read_committed), each polled batch is
 *       written to T2 as "copy:<value>" and its offsets sent with sendOffsetsToTransaction, in
 *       one transaction. Stops after N input records were committed, when fenced, or (with
 *       --idle-ms) when nothing arrived for M ms after the first copy. Prints
 *       {"copied":C,"fenced":bool,"aborts":A}.
 *   txn-hold --topic T --tid ID --per-txn M
 *       commits one transaction of M records ("a-rY"), then begins a second ("b-rY"), sends and
 *       flushes it and prints {"held":true}; then reads a line from stdin, "commit" or "abort",
 *       ends the second transaction so and prints {"second":"committed"|"aborted"|"<error>"}. A
 *       test changes the transaction from outside meanwhile (a late EndTxn, KAFKA-17754).
 */
final class Txn {
    private Txn() {}

    static KafkaProducer<String, String> producer(String bootstrap, String tid) {
        return producer(bootstrap, tid, new Properties());
    }

    /** As above, with `overrides` put last. */
    static KafkaProducer<String, String> producer(String bootstrap, String tid, Properties overrides) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.putAll(overrides);
        return new KafkaProducer<>(p);
    }

    static void produce(String bootstrap, Map<String, String> opt) {
        String topic = Client.req(opt, "topic");
        int txns = Integer.parseInt(Client.req(opt, "txns"));
        int perTxn = Integer.parseInt(Client.req(opt, "per-txn"));
        int abortEvery = Integer.parseInt(opt.getOrDefault("abort-every", "0"));
        int committed = 0;
        int aborted = 0;
        try (KafkaProducer<String, String> prod = producer(bootstrap, Client.req(opt, "tid"))) {
            prod.initTransactions();
            for (int t = 0; t < txns; t++) {
                prod.beginTransaction();
                for (int r = 0; r < perTxn; r++) {
                    prod.send(new ProducerRecord<>(topic, "k" + r, "t" + t + "-r" + r));
                }
                if (abortEvery > 0 && (t + 1) % abortEvery == 0) {
                    prod.flush();
                    prod.abortTransaction();
                    aborted++;
                } else {
                    prod.commitTransaction();
                    committed++;
                }
            }
        }
        System.out.println("{\"committed\":" + committed + ",\"aborted\":" + aborted + "}");
    }

    static void hold(String bootstrap, Map<String, String> opt) throws java.io.IOException {
        String topic = Client.req(opt, "topic");
        int perTxn = Integer.parseInt(Client.req(opt, "per-txn"));
        java.io.BufferedReader stdin = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        try (KafkaProducer<String, String> prod = producer(bootstrap, Client.req(opt, "tid"))) {
            prod.initTransactions();
            prod.beginTransaction();
            for (int r = 0; r < perTxn; r++) {
                prod.send(new ProducerRecord<>(topic, "k" + r, "a-r" + r));
            }
            prod.commitTransaction();
            prod.beginTransaction();
            for (int r = 0; r < perTxn; r++) {
                prod.send(new ProducerRecord<>(topic, "k" + r, "b-r" + r));
            }
            prod.flush();
            System.out.println("{\"held\":true}");
            System.out.flush();
            String how = stdin.readLine();
            String second;
            try {
                if ("commit".equals(how)) {
                    prod.commitTransaction();
                    second = "committed";
                } else {
                    prod.abortTransaction();
                    second = "aborted";
                }
            } catch (KafkaException e) {
                second = e.getClass().getSimpleName();
            }
            System.out.println("{\"second\":\"" + second + "\"}");
        }
    }

    static void copy(String bootstrap, Map<String, String> opt) {
        String in = Client.req(opt, "in");
        String out = Client.req(opt, "out");
        int count = Integer.parseInt(Client.req(opt, "count"));
        long deadline = System.currentTimeMillis() + Long.parseLong(opt.getOrDefault("timeout-ms", "120000"));
        long idleMs = Long.parseLong(opt.getOrDefault("idle-ms", "0"));
        long lastRecord = System.currentTimeMillis();
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, Client.req(opt, "group"));
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        int copied = 0;
        int aborts = 0;
        boolean fenced = false;
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(c);
             KafkaProducer<String, String> prod = producer(bootstrap, Client.req(opt, "tid"))) {
            prod.initTransactions();
            cons.subscribe(List.of(in));
            while (copied < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = cons.poll(Duration.ofMillis(500));
                if (recs.isEmpty()) {
                    if (idleMs > 0 && copied > 0 && System.currentTimeMillis() - lastRecord > idleMs) {
                        break;
                    }
                    continue;
                }
                lastRecord = System.currentTimeMillis();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                List<ConsumerRecord<String, String>> batch = new ArrayList<>();
                recs.forEach(batch::add);
                try {
                    prod.beginTransaction();
                    for (ConsumerRecord<String, String> r : batch) {
                        prod.send(new ProducerRecord<>(out, r.key(), "copy:" + r.value()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    prod.sendOffsetsToTransaction(offsets, cons.groupMetadata());
                    prod.commitTransaction();
                    copied += batch.size();
                } catch (ProducerFencedException e) {
                    fenced = true;
                    break;
                } catch (KafkaException e) {
                    // Abortable: roll back and re-read from the last committed offsets.
                    System.err.println("transaction failed, aborting: " + e);
                    try {
                        prod.abortTransaction();
                    } catch (ProducerFencedException f) {
                        fenced = true;
                        break;
                    }
                    aborts++;
                    for (TopicPartition tp : cons.assignment()) {
                        OffsetAndMetadata committed = cons.committed(java.util.Set.of(tp)).get(tp);
                        cons.seek(tp, committed == null ? 0 : committed.offset());
                    }
                }
            }
        }
        System.out.println("{\"copied\":" + copied + ",\"fenced\":" + fenced + ",\"aborts\":" + aborts + "}");
    }
}
