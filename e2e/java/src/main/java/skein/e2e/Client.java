package skein.e2e;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Small driver around the Java kafka-clients used by the e2e pytest suite.
 *
 * Usage: Client SUBCOMMAND --bootstrap HOST:PORT [--option value ...]
 *
 * Subcommands (all print one JSON object on stdout, exit 0 on success):
 *   create-topic  --topic T --partitions N [--rf 1]
 *   delete-topic  --topic T
 *   list-topics
 *   describe-topic --topic T
 *   produce   --topic T --input FILE --out FILE [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0]
 *             [--idempotence true|false]
 *             FILE lines: keyHex \t valueHex \t headers \t timestamp   (headers: name=hex;name=hex, "-" for none;
 *             timestamp "-" for none). OUT gets one JSON line per record: {"i":..,"p":..,"o":..}
 *   consume   --topic T --out FILE [--timeout-ms 60000]
 *             manual assignment of every partition, from the beginning up to the end offsets read at start.
 *             OUT gets one JSON line per record: {"p","o","k","v","h":[[name,hex]],"ts"}
 *   offsets   --topic T --partition P --ts T1,T2,...
 *             earliest, latest and offsetsForTimes for each timestamp (null when none).
 *   group-consume --topic T --group G --out FILE [--protocol classic|consumer]
 *             [--assignor range|roundrobin|cooperative-sticky] (classic) [--remote-assignor uniform|range] (consumer)
 *             [--session-timeout-ms 6000] [--heartbeat-interval-ms 1000] (classic)
 *             [--stop-file F] [--max-records N] [--timeout-ms 120000]
 *             subscribe() as a group member; after each poll the records are "processed" (written to OUT), then
 *             their offsets are committed with commitSync. OUT gets one JSON event per line, flushed at once (the
 *             member may be SIGKILLed at any time):
 *               {"t":ms,"ev":"assigned","parts":[..]}    the member's whole assignment, whenever it changes
 *               {"t":ms,"ev":"rec","p":p,"o":o,"i":index}  one processed record (index from its value "vNNNNNNN|")
 *               {"t":ms,"ev":"commit","offsets":{"p":next offset,..}}   after a successful commit
 *               {"t":ms,"ev":"commit_failed","error":".."}
 *             Runs until the stop file exists, N records were processed, or the timeout; then closes (leaves the group).
 *   txn-produce, txn-copy, txn-hold: transactions (see Txn).
 *   streams-count: a Kafka Streams exactly-once application (see StreamsCount).
 *   schema-store: Schema Registry's storage and single-writer election pattern (see SchemaStore).
 *   consume also takes [--isolation read_committed|read_uncommitted].
 *   share-consume, share-admin: KIP-932 share groups (KafkaShareConsumer, Admin; see Share).
 */
public final class Client {
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            die("usage: Client SUBCOMMAND --bootstrap HOST:PORT ...");
        }
        String cmd = args[0];
        Map<String, String> opt = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                die("bad argument: " + args[i]);
            }
            opt.put(args[i].substring(2), args[i + 1]);
        }
        String bootstrap = req(opt, "bootstrap");
        switch (cmd) {
            case "create-topic" -> createTopic(bootstrap, opt);
            case "delete-topic" -> deleteTopic(bootstrap, opt);
            case "list-topics" -> listTopics(bootstrap);
            case "describe-topic" -> describeTopic(bootstrap, opt);
            case "produce" -> produce(bootstrap, opt);
            case "consume" -> consume(bootstrap, opt);
            case "offsets" -> offsets(bootstrap, opt);
            case "group-consume" -> groupConsume(bootstrap, opt);
            case "txn-produce" -> Txn.produce(bootstrap, opt);
            case "txn-copy" -> Txn.copy(bootstrap, opt);
            case "txn-hold" -> Txn.hold(bootstrap, opt);
            case "chaos-txn" -> ChaosTxn.run(bootstrap, opt);
            case "streams-count" -> StreamsCount.run(bootstrap, opt);
            case "schema-store" -> SchemaStore.run(bootstrap, opt);
            case "telemetry-produce" -> Telemetry.produce(bootstrap, opt);
            case "share-consume" -> Share.consume(bootstrap, opt, args);
            case "share-admin" -> Share.admin(bootstrap, opt);
            default -> die("unknown subcommand " + cmd);
        }
        System.out.flush();
        System.exit(0);
    }

    static void die(String msg) {
        System.err.println("error: " + msg);
        System.exit(2);
    }

    static String req(Map<String, String> opt, String k) {
        String v = opt.get(k);
        if (v == null) {
            die("missing --" + k);
        }
        return v;
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    static String hex(byte[] b) {
        return b == null ? "null" : q(HEX.formatHex(b));
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static void createTopic(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = req(opt, "topic");
        int partitions = Integer.parseInt(opt.getOrDefault("partitions", "3"));
        short rf = Short.parseShort(opt.getOrDefault("rf", "1"));
        try (Admin a = admin(bootstrap)) {
            a.createTopics(List.of(new NewTopic(topic, partitions, rf))).all().get(30, TimeUnit.SECONDS);
        }
        System.out.println("{\"created\":" + q(topic) + "}");
    }

    static void deleteTopic(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = req(opt, "topic");
        try (Admin a = admin(bootstrap)) {
            a.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
        }
        System.out.println("{\"deleted\":" + q(topic) + "}");
    }

    static void listTopics(String bootstrap) throws Exception {
        Set<String> names;
        try (Admin a = admin(bootstrap)) {
            names = new TreeSet<>(a.listTopics().names().get(30, TimeUnit.SECONDS));
        }
        List<String> qs = new ArrayList<>();
        for (String n : names) {
            qs.add(q(n));
        }
        System.out.println("{\"topics\":[" + String.join(",", qs) + "]}");
    }

    static void describeTopic(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = req(opt, "topic");
        TopicDescription d;
        try (Admin a = admin(bootstrap)) {
            d = a.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        }
        List<String> parts = new ArrayList<>();
        d.partitions().forEach(pi -> parts.add("{\"partition\":" + pi.partition() + ",\"leader\":"
                + (pi.leader() == null ? "null" : pi.leader().id()) + ",\"replicas\":" + pi.replicas().size() + "}"));
        System.out.println("{\"topic\":" + q(topic) + ",\"partitions\":[" + String.join(",", parts) + "]}");
    }

    static void produce(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = req(opt, "topic");
        Path input = Path.of(req(opt, "input"));
        Path out = Path.of(req(opt, "out"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opt.getOrDefault("compression", "none"));
        p.put(ProducerConfig.ACKS_CONFIG, opt.getOrDefault("acks", "all"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, opt.getOrDefault("idempotence", "true"));
        // --linger-ms: a long linger keeps a few records in one batch (tests of batch-level answers).
        p.put(ProducerConfig.LINGER_MS_CONFIG, opt.getOrDefault("linger-ms", "5"));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        // --rate N: at most N records a second (spreads the run over time);
        // --allow-errors true: record failed sends as p=-1 and still exit 0.
        double rate = Double.parseDouble(opt.getOrDefault("rate", "0"));
        boolean allowErrors = Boolean.parseBoolean(opt.getOrDefault("allow-errors", "false"));
        long started = System.nanoTime();
        List<String> lines = Files.readAllLines(input, StandardCharsets.UTF_8);
        long[] parts = new long[lines.size()];
        long[] offs = new long[lines.size()];
        String[] errs = new String[lines.size()];
        AtomicReference<Exception> firstError = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < lines.size(); i++) {
                if (rate > 0) {
                    long due = started + (long) (i * 1e9 / rate);
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    }
                }
                String[] f = lines.get(i).split("\t", -1);
                byte[] key = f[0].equals("-") ? null : HEX.parseHex(f[0]);
                byte[] val = f[1].equals("-") ? null : HEX.parseHex(f[1]);
                List<Header> headers = new ArrayList<>();
                if (f.length > 2 && !f[2].equals("-") && !f[2].isEmpty()) {
                    for (String h : f[2].split(";")) {
                        int eq = h.indexOf('=');
                        headers.add(new RecordHeader(h.substring(0, eq), HEX.parseHex(h.substring(eq + 1))));
                    }
                }
                Long ts = (f.length > 3 && !f[3].equals("-")) ? Long.parseLong(f[3]) : null;
                final int idx = i;
                prod.send(new ProducerRecord<>(topic, null, ts, key, val, headers), (RecordMetadata md, Exception e) -> {
                    if (e != null) {
                        firstError.compareAndSet(null, e);
                        parts[idx] = -1;
                        offs[idx] = -1;
                        errs[idx] = e.getClass().getSimpleName() + ": " + e.getMessage();
                    } else {
                        parts[idx] = md.partition();
                        offs[idx] = md.offset();
                    }
                });
            }
            prod.flush();
        }
        if (firstError.get() != null && !allowErrors) {
            System.err.println("produce failed: " + firstError.get());
            firstError.get().printStackTrace();
            System.exit(1);
        }
        try (BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            for (int i = 0; i < lines.size(); i++) {
                w.write("{\"i\":" + i + ",\"p\":" + parts[i] + ",\"o\":" + offs[i]
                        + (errs[i] == null ? "" : ",\"e\":" + q(errs[i])) + "}\n");
            }
        }
        System.out.println("{\"produced\":" + lines.size() + "}");
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        return consumer(bootstrap, "read_uncommitted");
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return new KafkaConsumer<>(p);
    }

    static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> c, String topic) {
        List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofSeconds(30));
        if (infos == null || infos.isEmpty()) {
            die("no partitions for topic " + topic);
        }
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : infos) {
            tps.add(new TopicPartition(topic, pi.partition()));
        }
        return tps;
    }

    static void consume(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = req(opt, "topic");
        Path out = Path.of(req(opt, "out"));
        long timeoutMs = Long.parseLong(opt.getOrDefault("timeout-ms", "60000"));
        long deadline = System.currentTimeMillis() + timeoutMs;
        long count = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, opt.getOrDefault("isolation", "read_uncommitted"));
             BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            List<TopicPartition> tps = partitionsOf(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    Map<Integer, Long> pos = new TreeMap<>();
                    for (TopicPartition tp : tps) {
                        pos.put(tp.partition(), c.position(tp));
                    }
                    System.err.println("timeout: positions " + pos + " end offsets " + end);
                    System.exit(1);
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    StringBuilder hs = new StringBuilder("[");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        if (!first) {
                            hs.append(',');
                        }
                        first = false;
                        hs.append('[').append(q(h.key())).append(',').append(hex(h.value())).append(']');
                    }
                    hs.append(']');
                    w.write("{\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"k\":" + hex(r.key()) + ",\"v\":"
                            + hex(r.value()) + ",\"h\":" + hs + ",\"ts\":" + r.timestamp() + "}\n");
                    count++;
                }
            }
        }
        System.out.println("{\"consumed\":" + count + "}");
    }

    static void offsets(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = req(opt, "topic");
        int partition = Integer.parseInt(req(opt, "partition"));
        TopicPartition tp = new TopicPartition(topic, partition);
        StringBuilder sb = new StringBuilder("{");
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            long earliest = c.beginningOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
            long latest = c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
            sb.append("\"earliest\":").append(earliest).append(",\"latest\":").append(latest).append(",\"times\":{");
            String[] tss = opt.getOrDefault("ts", "").split(",");
            boolean first = true;
            for (String t : tss) {
                if (t.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndTimestamp> r =
                        c.offsetsForTimes(Map.of(tp, Long.parseLong(t)), Duration.ofSeconds(30));
                OffsetAndTimestamp oat = r.get(tp);
                if (!first) {
                    sb.append(',');
                }
                first = false;
                sb.append(q(t)).append(':').append(oat == null ? "null" : Long.toString(oat.offset()));
            }
            sb.append('}');
        }
        // The Admin client's special specs: ListOffsets -4 (v8), -5 (v9) and -6 (v11).
        try (Admin a = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            long local = a.listOffsets(Map.of(tp, OffsetSpec.earliestLocal())).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).offset();
            long tiered = a.listOffsets(Map.of(tp, OffsetSpec.latestTiered())).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).offset();
            long pending = a.listOffsets(Map.of(tp, OffsetSpec.earliestPendingUpload())).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).offset();
            sb.append(",\"earliest_local\":").append(local).append(",\"latest_tiered\":").append(tiered)
                    .append(",\"earliest_pending_upload\":").append(pending);
        }
        sb.append('}');
        System.out.println(sb);
    }

    static void groupConsume(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = req(opt, "topic");
        Path out = Path.of(req(opt, "out"));
        String protocol = opt.getOrDefault("protocol", "classic");
        long timeoutMs = Long.parseLong(opt.getOrDefault("timeout-ms", "120000"));
        long maxRecords = Long.parseLong(opt.getOrDefault("max-records", "-1"));
        Path stopFile = opt.containsKey("stop-file") ? Path.of(opt.get("stop-file")) : null;
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, req(opt, "group"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("consumer")) {
            if (opt.containsKey("remote-assignor")) {
                p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, opt.get("remote-assignor"));
            }
        } else {
            String a = opt.getOrDefault("assignor", "range");
            String cls = switch (a) {
                case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
                case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
                case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
                case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
                default -> throw new IllegalArgumentException("unknown assignor " + a);
            };
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, cls);
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, opt.getOrDefault("session-timeout-ms", "6000"));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, opt.getOrDefault("heartbeat-interval-ms", "1000"));
        }
        long deadline = System.currentTimeMillis() + timeoutMs;
        long count = 0;
        long commitFailures = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
             BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            c.subscribe(List.of(topic));
            TreeSet<Integer> last = null;
            while (true) {
                if (stopFile != null && Files.exists(stopFile)) {
                    break;
                }
                if (maxRecords >= 0 && count >= maxRecords) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("group-consume: timeout after " + timeoutMs + " ms, " + count + " records");
                    break;
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                TreeSet<Integer> now = new TreeSet<>();
                for (TopicPartition tp : c.assignment()) {
                    now.add(tp.partition());
                }
                if (!now.equals(last)) {
                    last = now;
                    w.write("{\"t\":" + System.currentTimeMillis() + ",\"ev\":\"assigned\",\"parts\":"
                            + now.toString().replace(" ", "") + "}\n");
                    w.flush();
                }
                if (recs.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> commit = new HashMap<>();
                StringBuilder sb = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String idx = r.value() != null && r.value().length >= 9
                            ? Integer.toString(Integer.parseInt(new String(r.value(), 1, 7, StandardCharsets.US_ASCII)))
                            : "null";
                    sb.append("{\"t\":").append(System.currentTimeMillis()).append(",\"ev\":\"rec\",\"p\":")
                            .append(r.partition()).append(",\"o\":").append(r.offset()).append(",\"i\":")
                            .append(idx).append("}\n");
                    commit.put(new TopicPartition(r.topic(), r.partition()),
                            new org.apache.kafka.clients.consumer.OffsetAndMetadata(r.offset() + 1));
                    count++;
                }
                w.write(sb.toString());
                w.flush();
                try {
                    c.commitSync(commit, Duration.ofSeconds(30));
                    List<String> parts = new ArrayList<>();
                    for (var e : new TreeMap<>(toPartitionMap(commit)).entrySet()) {
                        parts.add("\"" + e.getKey() + "\":" + e.getValue());
                    }
                    w.write("{\"t\":" + System.currentTimeMillis() + ",\"ev\":\"commit\",\"offsets\":{"
                            + String.join(",", parts) + "}}\n");
                } catch (Exception e) {
                    commitFailures++;
                    w.write("{\"t\":" + System.currentTimeMillis() + ",\"ev\":\"commit_failed\",\"error\":"
                            + q(e.toString()) + "}\n");
                }
                w.flush();
            }
        }
        System.out.println("{\"consumed\":" + count + ",\"commit_failures\":" + commitFailures + "}");
    }

    static Map<Integer, Long> toPartitionMap(
            Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> m) {
        Map<Integer, Long> r = new HashMap<>();
        m.forEach((tp, om) -> r.put(tp.partition(), om.offset()));
        return r;
    }
}
