package skein.e2e;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

/**
 * The client telemetry exporter the e2e suite gives Apache Kafka (whose broker exports pushed
 * client metrics only through a plugin; Skein's exports them on /metrics): a metrics reporter
 * (`metric.reporters`) that writes, for every push, one line per metric to the file
 * `skein.e2e.telemetry.file`: the client instance id and the metric's name, tab-separated.
 */
public class TelemetryFileExporter implements MetricsReporter, ClientTelemetryExporterProvider {
    private Path file;

    @Override
    public void configure(Map<String, ?> configs) {
        file = Path.of(String.valueOf(configs.get("skein.e2e.telemetry.file")));
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::export;
    }

    private synchronized void export(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        StringBuilder out = new StringBuilder();
        try {
            ByteBuffer data = payload.data();
            MetricsData md = MetricsData.parseFrom(data);
            for (ResourceMetrics rm : md.getResourceMetricsList()) {
                for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                    for (Metric m : sm.getMetricsList()) {
                        out.append(payload.clientInstanceId()).append('\t').append(m.getName()).append('\n');
                    }
                }
            }
            Files.writeString(file, out.toString(), StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }
}
