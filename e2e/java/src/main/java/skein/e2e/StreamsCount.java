package skein.e2e;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * streams-count --in T1 --out T2 --app-id ID --state-dir DIR --stop-file F [--timeout-ms 300000]
 *     [--replication 3] [--guarantee exactly_once_v2] [--group-protocol classic|streams]
 *
 * A Kafka Streams application: counts the records of each key of T1 (a stateful count in an
 * in-memory store, backed by its changelog topic) and writes every new count to T2 (value: the
 * count as a big-endian long). Runs until the stop file exists or the timeout; prints
 * {"state":"...","error":...} when it stops. Killed with SIGKILL, a new instance with the same
 * application id takes over from the committed state. With --group-protocol streams the
 * application runs on the KIP-1071 streams rebalance protocol (StreamsGroupHeartbeat): the broker
 * assigns its tasks and creates its changelog topic.
 */
final class StreamsCount {
    private StreamsCount() {}

    static void run(String bootstrap, Map<String, String> opt) throws Exception {
        String in = Client.req(opt, "in");
        String out = Client.req(opt, "out");
        Path stop = Path.of(Client.req(opt, "stop-file"));
        long deadline = System.currentTimeMillis() + Long.parseLong(opt.getOrDefault("timeout-ms", "300000"));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, Client.req(opt, "app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.STATE_DIR_CONFIG, Client.req(opt, "state-dir"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opt.getOrDefault("guarantee", StreamsConfig.EXACTLY_ONCE_V2));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, Integer.parseInt(opt.getOrDefault("replication", "3")));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);
        p.put(StreamsConfig.producerPrefix("delivery.timeout.ms"), 120000);
        p.put("group.protocol", opt.getOrDefault("group-protocol", "classic"));

        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        AtomicReference<Throwable> failure = new AtomicReference<>();
        try (KafkaStreams streams = new KafkaStreams(b.build(), p)) {
            streams.setUncaughtExceptionHandler(e -> {
                // A lost broker or coordinator: the thread is replaced and carries on.
                System.err.println("stream thread failed, replacing it: " + e);
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                        .StreamThreadExceptionResponse.REPLACE_THREAD;
            });
            streams.start();
            while (!Files.exists(stop) && System.currentTimeMillis() < deadline) {
                if (streams.state() == KafkaStreams.State.ERROR || streams.state() == KafkaStreams.State.NOT_RUNNING) {
                    failure.compareAndSet(null, new IllegalStateException("streams " + streams.state()));
                    break;
                }
                Thread.sleep(200);
            }
            String state = streams.state().toString();
            System.out.println("{\"state\":" + Client.q(state) + ",\"error\":"
                    + (failure.get() == null ? "null" : Client.q(failure.get().toString())) + "}");
        }
    }
}
