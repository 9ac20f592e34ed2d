package skein.e2e;

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.TimeoutException;

/**
 * The chaos workload's transactional producer on the Java client (e2e/chaos, `--producer-client
 * java`): the same transactions and the same log lines as workload.py's librdkafka one, so the
 * same checker judges both. The Java 4.x client uses transaction version 2 (KIP-890 part 2) when
 * the cluster finalizes it, which librdkafka 2.16 does not (it sends EndTxn v1).
 *
 *   chaos-txn --bootstrap B --topic T --partitions P --id N --dir LOGS --stop FILE
 *             [--rate R] [--abort-every K] [--max-seconds S]
 *
 * Each transaction writes 2-6 records "p{id}-{seq}" to random partitions; 1 in K is aborted
 * after its records were flushed. Log lines (logs/producer-N.log): B txn t seq:part,... (begun),
 * A seq part offset t (acknowledged), E seq part error t (failed), O txn outcome t_end t [error]
 * (committed: commitTransaction returned; aborted: abortTransaction returned or commit was never
 * asked for; unknown: commit was asked for and neither it nor an abort answered), F error t
 * new-instance, X t what:error, S sent acked t unresolved=0 transactions=N.
 */
final class ChaosTxn {
    private ChaosTxn() {}

    private static final class Log implements AutoCloseable {
        private final BufferedWriter w;
        private long lastFlush = System.nanoTime();

        Log(Path path) throws IOException {
            w = new BufferedWriter(new FileWriter(path.toFile(), true), 1 << 16);
            Thread t = new Thread(() -> {
                while (true) {
                    try {
                        Thread.sleep(500);
                        flush();
                    } catch (InterruptedException | UncheckedIOException e) {
                        return;
                    }
                }
            });
            t.setDaemon(true);
            t.start();
        }

        synchronized void w(String line) {
            try {
                w.write(line);
                w.write('\n');
                if (System.nanoTime() - lastFlush > 500_000_000L) {
                    w.flush();
                    lastFlush = System.nanoTime();
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        synchronized void flush() {
            try {
                w.flush();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public synchronized void close() throws IOException {
            w.close();
        }
    }

    static String now() {
        return String.format(Locale.ROOT, "%.3f", System.currentTimeMillis() / 1000.0);
    }

    static String name(Throwable e) {
        Throwable c = e;
        while (c instanceof KafkaException && c.getCause() instanceof KafkaException) {
            c = c.getCause();
        }
        return c.getClass().getSimpleName();
    }

    static void run(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = Client.req(opt, "topic");
        int partitions = Integer.parseInt(Client.req(opt, "partitions"));
        int id = Integer.parseInt(Client.req(opt, "id"));
        Path stop = Path.of(Client.req(opt, "stop"));
        double rate = Double.parseDouble(opt.getOrDefault("rate", "250"));
        int abortEvery = Integer.parseInt(opt.getOrDefault("abort-every", "5"));
        double maxSeconds = Double.parseDouble(opt.getOrDefault("max-seconds", "14400"));
        String tid = "chaos-txn-" + id;
        Random rnd = new Random(id * 7919L + System.currentTimeMillis() / 1000);
        AtomicLong acked = new AtomicLong();
        try (Log log = new Log(Path.of(Client.req(opt, "dir"), "producer-" + id + ".log"))) {
            KafkaProducer<String, String> p = newProducer(bootstrap, tid, log, stop);
            long seq = 0;
            long txn = 0;
            long start = System.nanoTime();
            double nextAt = 0;
            while (!Files.exists(stop) && (System.nanoTime() - start) / 1e9 < maxSeconds) {
                double t = (System.nanoTime() - start) / 1e9;
                if (t < nextAt) {
                    Thread.sleep(Math.max(1, (long) ((nextAt - t) * 1000)));
                    continue;
                }
                int n = 2 + rnd.nextInt(5);
                List<long[]> writes = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    writes.add(new long[] {seq + i, rnd.nextInt(partitions)});
                }
                seq += n;
                boolean abort = rnd.nextInt(abortEvery) == 0;
                try {
                    p.beginTransaction();
                } catch (KafkaException e) {
                    log.w("F " + name(e) + " " + now() + " begin_transaction");
                    p.close(Duration.ofSeconds(5));
                    p = newProducer(bootstrap, tid, log, stop);
                    continue;
                }
                StringBuilder b = new StringBuilder("B " + txn + " " + now() + " ");
                for (int i = 0; i < writes.size(); i++) {
                    b.append(i == 0 ? "" : ",").append(writes.get(i)[0]).append(':').append(writes.get(i)[1]);
                }
                log.w(b.toString());
                String outcome = "aborted";
                String error = "";
                try {
                    for (long[] wr : writes) {
                        long s = wr[0];
                        int part = (int) wr[1];
                        p.send(new ProducerRecord<>(topic, part, null, "p" + id + "-" + s), (md, ex) -> {
                            if (ex == null) {
                                acked.incrementAndGet();
                                log.w("A " + s + " " + md.partition() + " " + md.offset() + " " + now());
                            } else {
                                log.w("E " + s + " " + part + " " + name(ex) + " " + now());
                            }
                        });
                    }
                    if (abort) {
                        p.flush(); // the records reach the log before the abort marker
                    }
                } catch (KafkaException e) {
                    error = "produce:" + name(e);
                    abort = true;
                }
                String tEnd = now();
                if (abort) {
                    String bad = end(p, false, log);
                    if (bad != null) { // commit was never asked for: it cannot commit
                        error = (error.isEmpty() ? "" : error + ",") + "abort:" + bad;
                    }
                } else {
                    String bad = end(p, true, log);
                    if (bad == null) {
                        outcome = "committed";
                    } else {
                        // aborted only if an abort is answered (a commit already prepared
                        // refuses it); a producer in a fatal state refuses to try
                        String bad2 = end(p, false, log);
                        if (bad2 == null) {
                            error = "commit:" + bad;
                        } else {
                            outcome = "unknown";
                            error = "commit:" + bad + ",abort:" + bad2;
                        }
                    }
                }
                log.w("O " + txn + " " + outcome + " " + tEnd + " " + now() + (error.isEmpty() ? "" : " " + error));
                txn++;
                if (!error.isEmpty() && (outcome.equals("unknown") || error.contains("abort:"))) {
                    // a new instance: InitProducerId fences this one and ends its open transaction
                    log.w("F " + error.split(",")[0] + " " + now() + " new-instance");
                    p.close(Duration.ofSeconds(5));
                    p = newProducer(bootstrap, tid, log, stop);
                }
                nextAt += n / rate;
                double behind = (System.nanoTime() - start) / 1e9 - 1.0;
                if (nextAt < behind) {
                    nextAt = behind + 1.0;
                }
            }
            p.flush();
            p.close(Duration.ofSeconds(30));
            log.w("S " + seq + " " + acked.get() + " " + now() + " unresolved=0 transactions=" + txn);
            System.out.println("{\"sent\":" + seq + ",\"transactions\":" + txn + ",\"acked\":" + acked.get() + "}");
        }
    }

    /** Commits or aborts, retrying what may be retried; null when it returned, else the error. */
    static String end(KafkaProducer<String, String> p, boolean commit, Log log) {
        for (int i = 0; i < 10; i++) {
            try {
                if (commit) {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
                return null;
            } catch (TimeoutException e) { // the same call may be made again and waits for the result
                log.w("X " + now() + " " + (commit ? "commit" : "abort") + ":" + name(e) + ":retrying");
            } catch (KafkaException e) {
                return name(e);
            }
        }
        return "retries-exhausted";
    }

    static KafkaProducer<String, String> newProducer(String bootstrap, String tid, Log log, Path stop)
            throws InterruptedException {
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (true) {
            // as the librdkafka producer: a transaction left open is aborted after 30 s
            Properties c = new Properties();
            c.put(ProducerConfig.ACKS_CONFIG, "all");
            c.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
            c.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
            c.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
            c.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
            KafkaProducer<String, String> p = Txn.producer(bootstrap, tid, c);
            try {
                p.initTransactions();
                return p;
            } catch (KafkaException e) {
                log.w("X " + now() + " init_transactions:" + name(e));
                p.close(Duration.ofSeconds(5));
                if (System.nanoTime() > deadline || Files.exists(stop)) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }
}
