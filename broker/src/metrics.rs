//! Prometheus metrics of the broker and the `/metrics` HTTP endpoint.
//!
//! Names follow one scheme: `skein_<area>_<what>_<unit>`, counters end in
//! `_total`. Per-partition log gauges are filled at scrape time from the logs
//! themselves, so a deleted partition disappears from the next scrape.

use prometheus::{
    GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use skein_controller::metrics_endpoint::render_registry;

use crate::quotas::QuotaManager;
use crate::replica_manager::ReplicaManager;

/// Every metric the broker exports.
pub struct Metrics {
    pub registry: Registry,
    pub bytes_in: IntCounterVec,
    pub records_in: IntCounterVec,
    pub bytes_out: IntCounterVec,
    pub records_out: IntCounterVec,
    pub requests: IntCounterVec,
    pub request_errors: IntCounterVec,
    pub request_latency: HistogramVec,
    pub connections: IntGauge,
    /// New connections not served, by listener and reason.
    pub connections_refused: IntCounterVec,
    /// SASL authentications by listener, mechanism and result
    /// (`success`, `failure`).
    pub sasl_authentications: IntCounterVec,
    /// TLS clients turned away (failed handshake, certificate refused) by listener
    pub ssl_authentication_failures: IntCounterVec,
    pub log_size: IntGaugeVec,
    pub log_segments: IntGaugeVec,
    pub log_start_offset: IntGaugeVec,
    pub log_end_offset: IntGaugeVec,
    /// As leader: high watermark minus last stable offset (records open
    /// transactions hold back from read_committed consumers).
    pub lso_lag: IntGaugeVec,
    pub partitions: IntGauge,
    pub partition_leaders: IntGauge,
    pub under_replicated: IntGauge,
    pub under_min_isr: IntGauge,
    pub bytes_to_copy: IntGauge,
    pub isr_shrinks: prometheus::IntCounter,
    pub isr_expands: prometheus::IntCounter,
    pub purgatory: IntGaugeVec,
    pub log_dir_free: IntGauge,
    pub log_dir_total: IntGauge,
    /// Log files (segments, indexes being written) open now, and the bound.
    pub log_files_open: IntGauge,
    pub log_files_open_max: IntGauge,
    /// Log files closed to stay under the bound (reopened on their next use).
    pub log_file_evictions: prometheus::IntCounter,
    /// Record bytes fetches sent from their segment files (`sendfile`).
    pub fetch_sendfile_bytes: prometheus::IntCounter,
    /// Each quota entity's measured rate (filled at scrape time).
    pub quota_rate: GaugeVec,
    /// Where the logs live (for the free-space gauges).
    pub data_dir: std::sync::OnceLock<std::path::PathBuf>,
}

/// Counts a request parked in a purgatory while it lives.
pub struct Parked(IntGauge);

impl Drop for Parked {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("metric");
            registry.register(Box::new(c.clone())).expect("register");
            c
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("metric");
            registry.register(Box::new(g.clone())).expect("register");
            g
        };
        let bytes_in = counter(
            "skein_topic_bytes_in_total",
            "Record-batch bytes appended by producers, per topic.",
            &["topic"],
        );
        let records_in = counter(
            "skein_topic_records_in_total",
            "Records appended by producers, per topic.",
            &["topic"],
        );
        let bytes_out = counter(
            "skein_topic_bytes_out_total",
            "Record-batch bytes returned to fetchers, per topic.",
            &["topic"],
        );
        let records_out = counter(
            "skein_topic_records_out_total",
            "Records returned to fetchers, per topic.",
            &["topic"],
        );
        let requests = counter(
            "skein_requests_total",
            "Kafka API requests handled, per API.",
            &["api"],
        );
        let request_errors = counter(
            "skein_request_errors_total",
            "Error codes returned in responses, per API and error.",
            &["api", "error"],
        );
        let request_latency = HistogramVec::new(
            HistogramOpts::new(
                "skein_request_duration_seconds",
                "Time from a request's arrival to its response, per API.",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0,
            ]),
            &["api"],
        )
        .expect("metric");
        registry
            .register(Box::new(request_latency.clone()))
            .expect("register");
        let connections =
            IntGauge::new("skein_connections", "Open client connections.").expect("metric");
        registry
            .register(Box::new(connections.clone()))
            .expect("register");
        let connections_refused = counter(
            "skein_connections_refused_total",
            "New connections not served, by listener and reason: max_connections_per_ip (closed at once), connection_creation_rate (an ips quota: held for the throttle time, then closed).",
            &["listener", "reason"],
        );
        let sasl_authentications = counter(
            "skein_sasl_authentications_total",
            "SASL authentications by listener, mechanism and result (success, failure).",
            &["listener", "mechanism", "result"],
        );
        let ssl_authentication_failures = counter(
            "skein_ssl_authentication_failures_total",
            "TLS clients turned away by listener: a failed handshake (untrusted, expired or missing certificate, a plaintext client) or a certificate subject no ssl.principal.mapping.rules rule applies to.",
            &["listener"],
        );
        let pl = &["topic", "partition"];
        let log_size = gauge(
            "skein_log_size_bytes",
            "Bytes on disk of a partition's log.",
            pl,
        );
        let log_segments = gauge("skein_log_segments", "Segments in a partition's log.", pl);
        let log_start_offset = gauge(
            "skein_log_start_offset",
            "First offset still in a partition's log.",
            pl,
        );
        let log_end_offset = gauge(
            "skein_log_end_offset",
            "Next offset to be written in a partition's log.",
            pl,
        );
        let lso_lag = gauge(
            "skein_partition_lso_lag",
            "Records between the last stable offset and the high watermark of a partition this broker leads: what open transactions hold back from read_committed consumers.",
            pl,
        );
        let simple = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("metric");
            registry.register(Box::new(g.clone())).expect("register");
            g
        };
        let partitions = simple("skein_partitions", "Partition replicas this broker hosts.");
        let partition_leaders = simple("skein_partition_leaders", "Partitions this broker leads.");
        let under_replicated = simple(
            "skein_partitions_under_replicated",
            "Partitions this broker leads whose ISR is smaller than their replica set.",
        );
        let under_min_isr = simple(
            "skein_partitions_under_min_isr",
            "Partitions this broker leads whose ISR is smaller than min.insync.replicas.",
        );
        let bytes_to_copy = simple(
            "skein_replication_bytes_to_copy",
            "Bytes the replicas outside the ISR of the partitions this broker leads still have to copy to catch up (a broker back on an empty disk starts from the whole log).",
        );
        let count = |name: &str, help: &str| {
            let c = prometheus::IntCounter::new(name, help).expect("metric");
            registry.register(Box::new(c.clone())).expect("register");
            c
        };
        let isr_shrinks = count(
            "skein_isr_shrinks_total",
            "ISR shrinks of partitions this broker leads, accepted by the controller.",
        );
        let isr_expands = count(
            "skein_isr_expands_total",
            "ISR expansions of partitions this broker leads, accepted by the controller.",
        );
        let purgatory = gauge(
            "skein_purgatory_size",
            "Requests waiting: produce (acks=all until the ISR has the records), fetch (long polls).",
            &["kind"],
        );
        let log_dir_free = simple(
            "skein_log_dir_free_bytes",
            "Bytes available to the broker on the filesystem of its data directory.",
        );
        let log_dir_total = simple(
            "skein_log_dir_total_bytes",
            "Size of the filesystem of the broker's data directory.",
        );
        let log_files_open = simple(
            "skein_log_files_open",
            "Log files (segments, indexes being written) the broker holds open.",
        );
        let log_files_open_max = simple(
            "skein_log_files_open_max",
            "Log files the broker keeps open at most (half its open-files limit); the least recently used close first.",
        );
        let fetch_sendfile_bytes = count(
            "skein_fetch_sendfile_bytes_total",
            "Record bytes fetch responses sent from their segment files with sendfile (socket.sendfile.enable), not copied.",
        );
        let log_file_evictions = count(
            "skein_log_file_evictions_total",
            "Log files closed to stay under skein_log_files_open_max since the broker started (opened again on use).",
        );
        let float_gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = GaugeVec::new(Opts::new(name, help), labels).expect("metric");
            registry.register(Box::new(g.clone())).expect("register");
            g
        };
        let quota_labels = &["quota", "user", "client_id"];
        let quota_rate = float_gauge(
            "skein_client_quota_rate",
            "Measured rate of each client-quota entity over the quota window: bytes/s for producer_byte_rate and consumer_byte_rate, percent of one thread for request_percentage. user / client_id are empty when the quota is not per user / per client id.",
            quota_labels,
        );
        #[cfg(target_os = "linux")]
        registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .expect("register");
        Self {
            registry,
            partitions,
            partition_leaders,
            under_replicated,
            under_min_isr,
            bytes_to_copy,
            isr_shrinks,
            isr_expands,
            purgatory,
            log_dir_free,
            log_dir_total,
            log_files_open,
            log_files_open_max,
            log_file_evictions,
            fetch_sendfile_bytes,
            data_dir: std::sync::OnceLock::new(),
            quota_rate,
            bytes_in,
            records_in,
            bytes_out,
            records_out,
            requests,
            request_errors,
            request_latency,
            connections,
            connections_refused,
            sasl_authentications,
            ssl_authentication_failures,
            log_size,
            log_segments,
            log_start_offset,
            log_end_offset,
            lso_lag,
        }
    }

    /// Parks one request of `kind` (`produce`, `fetch`) until the guard drops.
    pub fn park(&self, kind: &str) -> Parked {
        let g = self.purgatory.with_label_values(&[kind]);
        g.inc();
        Parked(g)
    }

    /// Refreshes the per-partition gauges and renders the text exposition.
    pub fn render(&self, replicas: &ReplicaManager, quotas: &QuotaManager) -> String {
        let (mut hosted, mut leaders, mut under, mut under_min) = (0, 0, 0, 0);
        let mut to_copy = 0u64;
        for p in replicas.all() {
            hosted += 1;
            let (leader, isr, replicas, min_isr) = p.replication_summary();
            if leader {
                leaders += 1;
                under += (isr < replicas) as i64;
                under_min += (isr < min_isr) as i64;
                if isr < replicas {
                    to_copy += p.bytes_to_copy();
                }
            }
        }
        self.bytes_to_copy.set(to_copy as i64);
        self.partitions.set(hosted);
        self.partition_leaders.set(leaders);
        self.under_replicated.set(under);
        self.under_min_isr.set(under_min);
        self.log_files_open
            .set(skein_storage::open_files::open_count() as i64);
        self.log_files_open_max
            .set(skein_storage::open_files::limit() as i64);
        let evicted = skein_storage::open_files::evictions();
        self.log_file_evictions
            .inc_by(evicted.saturating_sub(self.log_file_evictions.get()));
        if let Some(dir) = self.data_dir.get() {
            let (total, free) = crate::system::disk_space(dir);
            self.log_dir_total.set(total);
            self.log_dir_free.set(free);
        }
        self.log_size.reset();
        self.log_segments.reset();
        self.log_start_offset.reset();
        self.log_end_offset.reset();
        self.lso_lag.reset();
        for p in replicas.all() {
            let idx = p.index.to_string();
            let labels = [p.topic.as_str(), idx.as_str()];
            if p.is_leader() {
                let lag = p.high_watermark() - p.last_stable_offset();
                self.lso_lag.with_label_values(&labels).set(lag.max(0));
            }
            p.with_log(|l| {
                self.log_size
                    .with_label_values(&labels)
                    .set(l.size_bytes() as i64);
                self.log_segments
                    .with_label_values(&labels)
                    .set(l.num_segments() as i64);
                self.log_start_offset
                    .with_label_values(&labels)
                    .set(l.log_start_offset());
                self.log_end_offset
                    .with_label_values(&labels)
                    .set(l.log_end_offset());
            });
        }
        self.quota_rate.reset();
        for u in quotas.usage(std::time::Instant::now()) {
            let labels = [
                u.kind.key(),
                u.user.as_deref().unwrap_or(""),
                u.client_id.as_deref().unwrap_or(""),
            ];
            self.quota_rate.with_label_values(&labels).set(u.rate);
        }
        render_registry(&self.registry)
    }
}
