package skein.e2e;

import java.time.Duration;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * telemetry-produce --topic T --client-id C --seconds N
 *
 * A producer with client telemetry on (KIP-714; `enable.metrics.push` is the default) sends a
 * record every 20 ms for N seconds, then closes (its last push is a terminating one). Prints
 * {"client_instance_id": ..., "sent": n}: the id the broker handed out, as Kafka's
 * `Uuid.toString()` writes it.
 */
final class Telemetry {
    private Telemetry() {}

    static void produce(String bootstrap, Map<String, String> opt) throws Exception {
        String topic = Client.req(opt, "topic");
        long seconds = Long.parseLong(opt.getOrDefault("seconds", "5"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, Client.req(opt, "client-id"));
        p.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, "true");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        long sent = 0;
        Uuid id;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            long end = System.nanoTime() + Duration.ofSeconds(seconds).toNanos();
            while (System.nanoTime() < end) {
                producer.send(new ProducerRecord<>(topic, ("v" + sent).getBytes())).get();
                sent++;
                Thread.sleep(20);
            }
            id = producer.clientInstanceId(Duration.ofSeconds(30));
        }
        System.out.println("{\"client_instance_id\":" + Client.q(id.toString()) + ",\"sent\":" + sent + "}");
    }
}
