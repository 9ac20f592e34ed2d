//! The operator's Prometheus metrics: reconciles, failures and durations per
//! resource kind, whether this replica holds the leader Lease, and the
//! progress of rolling restarts.

use prometheus::{
    HistogramOpts, HistogramTimer, HistogramVec, IntCounterVec, IntGauge, Opts, Registry,
};

/// Metrics shared by the reconcilers.
#[derive(Clone)]
pub struct Metrics {
    pub reconciles: IntCounterVec,
    pub failures: IntCounterVec,
    pub duration: HistogramVec,
    pub leader: IntGauge,
    /// Broker pods of a cluster not yet on its StatefulSet's newest revision.
    pub rolling_pending: prometheus::IntGaugeVec,
    /// Per cluster, from its controller (kubernetes platform).
    pub elections: IntCounterVec,
    pub reassigning: prometheus::IntGaugeVec,
    pub offline: prometheus::IntGaugeVec,
    pub under_replicated: prometheus::IntGaugeVec,
    pub below_replication_factor: prometheus::IntGaugeVec,
    pub brokers_alive: prometheus::IntGaugeVec,
}

impl Metrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &Registry) -> prometheus::Result<Self> {
        let reconciles = IntCounterVec::new(
            Opts::new(
                "skein_operator_reconciles_total",
                "Reconciles started, by resource kind",
            ),
            &["kind"],
        )?;
        let failures = IntCounterVec::new(
            Opts::new(
                "skein_operator_reconcile_failures_total",
                "Reconciles that failed, by resource kind and pipeline step",
            ),
            &["kind", "error"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "skein_operator_reconcile_duration_seconds",
                "Time a reconcile took, by resource kind",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
            &["kind"],
        )?;
        let leader = IntGauge::new(
            "skein_operator_leader",
            "1 while this replica holds the leader Lease",
        )?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(failures.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        let rolling_pending = prometheus::IntGaugeVec::new(
            Opts::new(
                "skein_operator_rolling_restart_pods_pending",
                "Broker pods of a KafkaCluster not yet running its newest StatefulSet revision (0: no rolling restart in progress)",
            ),
            &["namespace", "cluster"],
        )?;
        registry.register(Box::new(rolling_pending.clone()))?;
        let cluster = ["namespace", "cluster"];
        let elections = IntCounterVec::new(
            Opts::new(
                "skein_operator_leader_elections_total",
                "Partition leaders a cluster's controller elected after the first, by kind: clean, unclean, preferred",
            ),
            &["namespace", "cluster", "kind"],
        )?;
        let gauge =
            |name: &str, help: &str| prometheus::IntGaugeVec::new(Opts::new(name, help), &cluster);
        let reassigning = gauge(
            "skein_operator_partitions_reassigning",
            "Partitions of a cluster whose replicas are being moved",
        )?;
        let offline = gauge(
            "skein_operator_partitions_offline",
            "Partitions of a cluster without a leader",
        )?;
        let under_replicated = gauge(
            "skein_operator_partitions_under_replicated",
            "Partitions of a cluster whose ISR is smaller than their replica set",
        )?;
        let below_replication_factor = gauge(
            "skein_operator_partitions_below_replication_factor",
            "Partitions of a cluster with fewer in-sync replicas on live brokers than their replication factor",
        )?;
        let brokers_alive = gauge(
            "skein_operator_brokers_alive",
            "Brokers of a cluster in session with its controller",
        )?;
        registry.register(Box::new(elections.clone()))?;
        registry.register(Box::new(reassigning.clone()))?;
        registry.register(Box::new(offline.clone()))?;
        registry.register(Box::new(under_replicated.clone()))?;
        registry.register(Box::new(below_replication_factor.clone()))?;
        registry.register(Box::new(brokers_alive.clone()))?;
        Ok(Metrics {
            elections,
            reassigning,
            offline,
            under_replicated,
            below_replication_factor,
            brokers_alive,
            reconciles,
            failures,
            duration,
            leader,
            rolling_pending,
        })
    }

    /// Counts a reconcile of `kind` and times it until the timer drops.
    pub fn reconcile_started(&self, kind: &str) -> HistogramTimer {
        self.reconciles.with_label_values(&[kind]).inc();
        self.duration.with_label_values(&[kind]).start_timer()
    }

    /// Counts a failed reconcile.
    pub fn reconcile_failed(&self, kind: &str, error: &crate::Error) {
        self.failures
            .with_label_values(&[kind, error.metric_label()])
            .inc();
    }
}
