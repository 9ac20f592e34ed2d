// Two measurements the kafka-tools classes do not make, run identically against
// both brokers with the Apache Kafka Java client (kafka-clients from the same
// pinned Kafka version):
//
//   consume  BOOTSTRAP TOPIC RECORDS TIMEOUT_MS
//       Reads a topic from the start with assign() (no consumer group, so it
//       works on a broker without a group coordinator), counting key+value
//       bytes like ConsumerPerformance. Client settings as ConsumerPerformance's
//       defaults: 1 MiB per-partition fetch size, 2 MiB socket receive buffer.
//
//   latency  BOOTSTRAP TOPIC RATE COUNT SIZE
//       End-to-end latency at a fixed rate: a producer (acks=1, linger.ms=0)
//       sends COUNT records of SIZE bytes at RATE records/s into partition 0,
//       each carrying its send time (System.nanoTime) in its first 8 bytes; a
//       consumer assigned to the end of partition 0 in the same JVM records
//       receive - send. The first 10% are warm-up and not counted.
//
// Each mode prints one JSON object on stdout as its last line.
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class BenchClient {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        switch (args[0]) {
            case "consume" -> {
                if (args.length != 5) usage();
                consume(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]));
            }
            case "latency" -> {
                if (args.length != 6) usage();
                latency(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        Integer.parseInt(args[5]));
            }
            default -> usage();
        }
    }

    static void usage() {
        System.err.println("usage: BenchClient consume BOOTSTRAP TOPIC RECORDS TIMEOUT_MS\n"
                + "       BenchClient latency BOOTSTRAP TOPIC RATE COUNT SIZE");
        System.exit(2);
    }

    static Properties consumerProps(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("max.partition.fetch.bytes", "1048576");
        p.put("receive.buffer.bytes", "2097152");
        p.put("client.id", "bench-client");
        return p;
    }

    static List<TopicPartition> partitionsOf(KafkaConsumer<byte[], byte[]> c, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) {
            tps.add(new TopicPartition(topic, pi.partition()));
        }
        return tps;
    }

    static void consume(String bootstrap, String topic, long want, long timeoutMs) {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap))) {
            List<TopicPartition> tps = partitionsOf(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            long records = 0, bytes = 0;
            long start = System.nanoTime();
            long lastProgress = start;
            while (records < want) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                long now = System.nanoTime();
                if (rs.isEmpty()) {
                    if ((now - lastProgress) / 1_000_000 > timeoutMs) break;
                    continue;
                }
                lastProgress = now;
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    records++;
                    if (r.key() != null) bytes += r.key().length;
                    if (r.value() != null) bytes += r.value().length;
                }
            }
            double secs = (lastProgress - start) / 1e9;
            System.out.printf("{\"records\": %d, \"bytes\": %d, \"seconds\": %.4f, \"mb_per_s\": %.3f, \"records_per_s\": %.1f, \"partitions\": %d}%n",
                    records, bytes, secs, bytes / 1048576.0 / secs, records / secs, tps.size());
        }
    }

    static void latency(String bootstrap, String topic, int rate, int count, int size) throws Exception {
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        pp.put("acks", "1");
        pp.put("linger.ms", "0");
        pp.put("client.id", "bench-latency-producer");
        Properties cp = consumerProps(bootstrap);
        cp.put("fetch.max.wait.ms", "500");
        long[] lat = new long[count];
        AtomicLong received = new AtomicLong();
        AtomicReference<Exception> failure = new AtomicReference<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            c.assign(List.of(tp));
            c.seekToEnd(List.of(tp));
            c.position(tp);
            // Warm the producer's metadata before the clock starts.
            p.partitionsFor(topic);
            byte[] payload = new byte[size];
            Arrays.fill(payload, (byte) 'x');
            ScheduledExecutorService sched = Executors.newSingleThreadScheduledExecutor();
            AtomicLong sent = new AtomicLong();
            long periodNs = 1_000_000_000L / rate;
            sched.scheduleAtFixedRate(() -> {
                long i = sent.getAndIncrement();
                if (i >= count) return;
                byte[] v = payload.clone();
                ByteBuffer.wrap(v).putLong(0, System.nanoTime());
                p.send(new ProducerRecord<>(topic, 0, null, v), (md, e) -> {
                    if (e != null) failure.compareAndSet(null, e);
                });
            }, 0, periodNs, TimeUnit.NANOSECONDS);
            long deadline = System.nanoTime() + (long) count * periodNs + 30_000_000_000L;
            int n = 0;
            while (n < count && System.nanoTime() < deadline && failure.get() == null) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    long now = System.nanoTime();
                    if (n < count) lat[n++] = now - ByteBuffer.wrap(r.value()).getLong(0);
                }
            }
            sched.shutdownNow();
            received.set(n);
        }
        if (failure.get() != null) {
            System.err.println("send failed: " + failure.get());
            System.exit(1);
        }
        int n = (int) received.get();
        int skip = n / 10;
        long[] s = Arrays.copyOfRange(lat, skip, n);
        Arrays.sort(s);
        if (s.length == 0) {
            System.err.println("no records received");
            System.exit(1);
        }
        double sum = 0;
        for (long v : s) sum += v;
        System.out.printf("{\"received\": %d, \"counted\": %d, \"rate\": %d, \"avg_ms\": %.4f, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"p999_ms\": %.4f, \"max_ms\": %.4f}%n",
                n, s.length, rate, sum / s.length / 1e6, pct(s, 50) / 1e6, pct(s, 99) / 1e6, pct(s, 99.9) / 1e6,
                s[s.length - 1] / 1e6);
    }

    static long pct(long[] sorted, double p) {
        int i = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }
}
