package skein.e2e;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * schema-store --topic T --group G --id NAME [--rf 3] [--topic-config k=v,k=v]
 *     [--session-timeout-ms 6000] [--timeout-ms 180000]
 *
 * The storage and leader-election pattern of Confluent's Schema Registry, written with the
 * plain Java clients (Schema Registry itself is not on Maven Central):
 * <ul>
 *   <li>the store is one compacted topic of one partition, created here if it is missing
 *       (cleanup.policy=compact, --rf replicas, the --topic-config settings); an existing one
 *       must have one partition and be compacted, or the instance refuses to start, as Schema
 *       Registry does;</li>
 *   <li>at start-up the instance reads it from the beginning to its end offset into an in-memory
 *       map (a null value deletes the key), then keeps tailing it (manual assignment, no group);</li>
 *   <li>only then does it join group G (subscribe to T, cooperative-sticky, so a member that
 *       joins later does not take the partition away): the member that holds partition 0 is
 *       the single writer. A new leader first reads to the log's end before it takes writes.
 *       Writes are idempotent acks=all; a write is answered once this instance has read it
 *       back (read-your-writes). Each record carries a header "writer" = NAME.</li>
 * </ul>
 * Commands on stdin, one per line: {@code put KEY VALUE | del KEY | dump | quit} (end of input
 * is quit). Events on stdout, one JSON object per line:
 * <pre>
 *   {"ev":"topic","created":bool,"partitions":1,"replicas":R,"cleanup.policy":"compact"}
 *   {"ev":"bootstrapped","offset":N,"records":C,"ms":M,"state":{..}}
 *   {"ev":"role","leader":bool,"parts":[..]}          after every rebalance
 *   {"ev":"put"|"del","key":K,"offset":O}              a write, read back
 *   {"ev":"not_leader","cmd":"put"|"del","key":K}      a write refused (not the leader)
 *   {"ev":"state","offset":N,"state":{..}}             the answer to dump
 *   {"ev":"closed"}                                    after quit: the group was left
 * </pre>
 */
final class SchemaStore {
    private final String bootstrap;
    private final String topic;
    private final TopicPartition tp;
    private final String id;
    private final Map<String, String> opt;
    private final Admin admin;
    private final Object lock = new Object();
    /** Guarded by lock: the store and the reader's position (next offset to read). */
    private final TreeMap<String, String> state = new TreeMap<>();
    private long position = 0;
    private long recordsRead = 0;
    private volatile boolean leader = false;
    private volatile boolean running = true;

    private SchemaStore(String bootstrap, Map<String, String> opt) {
        this.bootstrap = bootstrap;
        this.opt = opt;
        this.topic = Client.req(opt, "topic");
        this.tp = new TopicPartition(topic, 0);
        this.id = Client.req(opt, "id");
        Properties a = new Properties();
        a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        this.admin = Admin.create(a);
    }

    static void run(String bootstrap, Map<String, String> opt) throws Exception {
        long timeout = Long.parseLong(opt.getOrDefault("timeout-ms", "180000"));
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(timeout);
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("schema-store: timed out");
            Runtime.getRuntime().halt(3);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        new SchemaStore(bootstrap, opt).serve();
    }

    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    private static String stateJson(Map<String, String> m) {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<String, String> e : m.entrySet()) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(Client.q(e.getKey())).append(':').append(Client.q(e.getValue()));
        }
        return b.append('}').toString();
    }

    /** Creates the topic as Schema Registry does, or checks that the existing one fits. */
    private void createOrVerifyTopic() throws Exception {
        Map<String, String> configs = new HashMap<>();
        for (String kv : opt.getOrDefault("topic-config", "").split(",")) {
            if (!kv.isBlank()) {
                String[] p = kv.split("=", 2);
                configs.put(p[0], p[1]);
            }
        }
        configs.put("cleanup.policy", "compact");
        short rf = Short.parseShort(opt.getOrDefault("rf", "3"));
        boolean created = false;
        try {
            admin.createTopics(List.of(new NewTopic(topic, 1, rf).configs(configs))).all().get(60, TimeUnit.SECONDS);
            created = true;
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
        TopicDescription d = null;
        Config c = null;
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) { // a topic just created may not be in every broker's metadata yet
            try {
                d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                c = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
                break;
            } catch (ExecutionException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
        String policy = c.get("cleanup.policy").value();
        emit("{\"ev\":\"topic\",\"created\":" + created + ",\"partitions\":" + d.partitions().size()
                + ",\"replicas\":" + d.partitions().get(0).replicas().size()
                + ",\"cleanup.policy\":" + Client.q(policy) + "}");
        if (d.partitions().size() != 1) {
            Client.die("the store topic " + topic + " has " + d.partitions().size() + " partitions, not 1");
        }
        if (!"compact".equals(policy)) {
            Client.die("the store topic " + topic + " has cleanup.policy=" + policy + ", not compact");
        }
    }

    private long endOffset() throws Exception {
        return admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)
                .get(30, TimeUnit.SECONDS).offset();
    }

    /** Blocks until the reader has read everything before `offset`. */
    private void awaitRead(long offset, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        synchronized (lock) {
            while (position < offset) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new IllegalStateException("reader stuck at " + position + ", waiting for " + offset);
                }
                lock.wait(left);
            }
        }
    }

    /** The reader: the whole partition from the beginning, then tailing it, into `state`. */
    private void read() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            while (running) {
                var records = c.poll(Duration.ofMillis(100));
                long pos = c.position(tp);
                synchronized (lock) {
                    for (ConsumerRecord<String, String> r : records) {
                        if (r.value() == null) {
                            state.remove(r.key());
                        } else {
                            state.put(r.key(), r.value());
                        }
                        recordsRead++;
                    }
                    position = pos;
                    lock.notifyAll();
                }
            }
        } catch (Exception e) {
            System.err.println("schema-store reader failed: " + e);
            e.printStackTrace();
            Runtime.getRuntime().halt(4);
        }
    }

    /** The elector: a member of the group; holding partition 0 makes this instance the writer. */
    private void elect() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, Client.req(opt, "group"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "schema-store-" + id);
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, opt.getOrDefault("session-timeout-ms", "6000"));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        Set<Integer> owned = new TreeSet<>();
        c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                parts.forEach(x -> owned.remove(x.partition()));
                leader = false;
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                onPartitionsRevoked(parts);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                parts.forEach(x -> owned.add(x.partition()));
                c.pause(c.assignment()); // the elector only holds the partition; the reader reads it
                boolean lead = owned.contains(0);
                if (lead && !leader) {
                    try { // a new leader first reads everything its predecessor wrote
                        awaitRead(endOffset(), 60_000);
                    } catch (Exception e) {
                        throw new IllegalStateException("new leader could not catch up", e);
                    }
                }
                leader = lead;
                emit("{\"ev\":\"role\",\"leader\":" + lead + ",\"parts\":" + owned + "}");
            }
        });
        try {
            while (running) {
                c.poll(Duration.ofMillis(200));
            }
        } finally {
            c.close(Duration.ofSeconds(10)); // leaves the group: the next member takes over at once
        }
    }

    private void write(KafkaProducer<String, String> producer, String cmd, String key, String value)
            throws Exception {
        if (!leader) {
            emit("{\"ev\":\"not_leader\",\"cmd\":" + Client.q(cmd) + ",\"key\":" + Client.q(key) + "}");
            return;
        }
        ProducerRecord<String, String> r = new ProducerRecord<>(topic, 0, key, value);
        r.headers().add(new RecordHeader("writer", id.getBytes(StandardCharsets.UTF_8)));
        RecordMetadata md = producer.send(r).get(60, TimeUnit.SECONDS);
        awaitRead(md.offset() + 1, 60_000);
        emit("{\"ev\":" + Client.q(cmd) + ",\"key\":" + Client.q(key) + ",\"offset\":" + md.offset() + "}");
    }

    private void serve() throws Exception {
        createOrVerifyTopic();
        long t0 = System.currentTimeMillis();
        long end = endOffset();
        Thread reader = new Thread(this::read, "reader");
        reader.start();
        awaitRead(end, 60_000);
        synchronized (lock) {
            emit("{\"ev\":\"bootstrapped\",\"offset\":" + position + ",\"records\":" + recordsRead + ",\"ms\":"
                    + (System.currentTimeMillis() - t0) + ",\"state\":" + stateJson(state) + "}");
        }
        Thread elector = new Thread(this::elect, "elector");
        elector.start();

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.trim().split(" ", 3);
                switch (w[0]) {
                    case "put" -> write(producer, "put", w[1], w[2]);
                    case "del" -> write(producer, "del", w[1], null);
                    case "dump" -> {
                        synchronized (lock) {
                            emit("{\"ev\":\"state\",\"offset\":" + position + ",\"state\":" + stateJson(state) + "}");
                        }
                    }
                    case "quit" -> {
                        line = null;
                    }
                    default -> Client.die("unknown command " + line);
                }
                if (line == null) {
                    break;
                }
            }
            running = false;
            elector.join(20_000);
            reader.join(5_000);
        }
        admin.close(Duration.ofSeconds(5));
        emit("{\"ev\":\"closed\"}");
    }
}
