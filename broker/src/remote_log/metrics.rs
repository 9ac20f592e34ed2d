//! Tiered storage's metrics (Kafka's `RemoteLogManager` and
//! `RemoteStorageMetrics` cover the same ground): copy lag, copies, remote
//! reads (rate, bytes, latency), remote bytes per partition, errors, and
//! the read cache.

use prometheus::{
    Counter, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

/// The operations `skein_remote_errors_total` counts failures of.
pub const OPERATIONS: [&str; 5] = ["copy", "read", "delete", "restore", "manifest"];

/// The remote log's metrics, registered in the broker's registry.
#[derive(Clone)]
pub struct RemoteMetrics {
    pub copied_segments: IntCounter,
    pub copied_bytes: IntCounter,
    pub deleted_segments: IntCounter,
    /// Bytes of closed local segments not copied yet, per partition led.
    pub copy_lag_bytes: IntGaugeVec,
    /// Closed local segments not copied yet, per partition led.
    pub copy_lag_segments: IntGaugeVec,
    /// Bytes in remote storage, per partition led.
    pub remote_bytes: IntGaugeVec,
    /// Segments in remote storage, per partition led.
    pub remote_segments: IntGaugeVec,
    pub read_requests: IntCounter,
    pub read_bytes: IntCounter,
    pub read_seconds: Histogram,
    /// By operation: copy, read, delete, restore, manifest.
    pub errors: IntCounterVec,
    pub restores: IntCounter,
    pub cache_bytes: IntGauge,
    pub cache_hits: IntCounter,
    pub cache_misses: IntCounter,
    /// Time copies waited for `remote.log.manager.copy.max.bytes.per.second`.
    pub copy_throttle_seconds: Counter,
    /// Partition reads answered empty by `remote.log.manager.fetch.max.bytes.per.second`.
    pub fetch_throttled: IntCounter,
}

impl RemoteMetrics {
    /// Registers them in `registry` (a fresh registry in tests).
    pub fn new(registry: &Registry) -> Self {
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("metric");
            registry.register(Box::new(c.clone())).expect("register");
            c
        };
        let gauge = |name: &str, help: &str| {
            let g =
                IntGaugeVec::new(Opts::new(name, help), &["topic", "partition"]).expect("metric");
            registry.register(Box::new(g.clone())).expect("register");
            g
        };
        let errors = IntCounterVec::new(
            Opts::new(
                "skein_remote_errors_total",
                "Failed tiered-storage operations, by operation (copy, read, delete, restore, manifest).",
            ),
            &["operation"],
        )
        .expect("metric");
        registry
            .register(Box::new(errors.clone()))
            .expect("register");
        // Every operation from the start, so a rate over them has data
        // before the first error (dashboards and alerts).
        for op in OPERATIONS {
            errors.with_label_values(&[op]);
        }
        let read_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "skein_remote_read_seconds",
                "Time a consumer's read from remote storage took (download included).",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
        )
        .expect("metric");
        registry
            .register(Box::new(read_seconds.clone()))
            .expect("register");
        let cache_bytes = IntGauge::new(
            "skein_remote_cache_bytes",
            "Bytes of remote segments in the read cache.",
        )
        .expect("metric");
        registry
            .register(Box::new(cache_bytes.clone()))
            .expect("register");
        let copy_throttle_seconds = Counter::new(
            "skein_remote_copy_throttle_seconds_total",
            "Time copies to remote storage waited for remote.log.manager.copy.max.bytes.per.second.",
        )
        .expect("metric");
        registry
            .register(Box::new(copy_throttle_seconds.clone()))
            .expect("register");
        RemoteMetrics {
            copied_segments: counter(
                "skein_remote_copy_segments_total",
                "Segments copied to remote storage.",
            ),
            copied_bytes: counter(
                "skein_remote_copy_bytes_total",
                "Bytes of segments copied to remote storage.",
            ),
            deleted_segments: counter(
                "skein_remote_delete_segments_total",
                "Remote segments deleted by retention.",
            ),
            copy_lag_bytes: gauge(
                "skein_remote_copy_lag_bytes",
                "Bytes of closed segments of a tiered partition this broker leads that are not copied yet.",
            ),
            copy_lag_segments: gauge(
                "skein_remote_copy_lag_segments",
                "Closed segments of a tiered partition this broker leads that are not copied yet.",
            ),
            remote_bytes: gauge(
                "skein_remote_log_size_bytes",
                "Bytes in remote storage of a partition this broker leads.",
            ),
            remote_segments: gauge(
                "skein_remote_log_segments",
                "Segments in remote storage of a partition this broker leads.",
            ),
            read_requests: counter(
                "skein_remote_read_requests_total",
                "Consumer reads served from remote storage.",
            ),
            read_bytes: counter(
                "skein_remote_read_bytes_total",
                "Bytes served to consumers from remote storage.",
            ),
            read_seconds,
            errors,
            restores: counter(
                "skein_remote_follower_restores_total",
                "Times a follower built its state from remote storage (behind its leader's local log start, or an empty disk).",
            ),
            cache_bytes,
            cache_hits: counter(
                "skein_remote_cache_hits_total",
                "Remote segment reads found in the read cache.",
            ),
            cache_misses: counter(
                "skein_remote_cache_misses_total",
                "Remote segment reads that had to download the segment.",
            ),
            copy_throttle_seconds,
            fetch_throttled: counter(
                "skein_remote_fetch_throttled_total",
                "Consumer reads of remote data answered without records because remote.log.manager.fetch.max.bytes.per.second was exceeded.",
            ),
        }
    }

    /// Counts a failed operation.
    pub fn error(&self, operation: &str) {
        self.errors.with_label_values(&[operation]).inc();
    }

    /// Drops a partition's gauges (this broker no longer leads it; its new
    /// leader reports it).
    pub fn forget_partition(&self, topic: &str, index: i32) {
        let idx = index.to_string();
        for g in [
            &self.copy_lag_bytes,
            &self.copy_lag_segments,
            &self.remote_bytes,
            &self.remote_segments,
        ] {
            // Absent when the round that led it failed before setting it.
            let _ = g.remove_label_values(&[topic, &idx]);
        }
    }
}
