//! `status.storage` of Topic resources: each topic's bytes on the brokers'
//! disks and in remote (tiered) storage, read from the brokers' metrics
//! every [`EVERY`]. A value is rewritten only when it moved by more than a
//! percent (or a segment was copied or deleted), so a busy topic's status is
//! not patched on every sample.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::Api;
use kube::Client;
use skein_controller::ClusterView;
use skein_crds::{KafkaCluster, TopicStorageStatus};
use tracing::debug;

use crate::broker_metrics::{self, PartitionGauge};
use crate::manifests::ClusterNames;

/// How often the brokers are asked (the brokers' remote gauges change every
/// `remote.log.manager.task.interval.ms`, 30 s by default).
pub const EVERY: Duration = Duration::from_secs(30);

/// The last values shown per Kafka topic, and when the brokers were last asked.
#[derive(Default)]
pub struct TopicStorage {
    shown: BTreeMap<String, TopicStorageStatus>,
    asked: Option<Instant>,
}

impl TopicStorage {
    /// What to show for `topic` (none until the brokers answered once).
    pub fn get(&self, topic: &str) -> Option<&TopicStorageStatus> {
        self.shown.get(topic)
    }

    /// Asks the cluster's live brokers when [`EVERY`] has passed. A round in
    /// which a live broker does not answer changes nothing: its replicas
    /// would be missing from the sums.
    pub async fn refresh(&mut self, client: &Client, names: &ClusterNames, view: &ClusterView) {
        if self.asked.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        self.asked = Some(Instant::now());
        let clusters: Api<KafkaCluster> = Api::namespaced(client.clone(), &names.namespace);
        let port = match clusters.get(&names.cluster).await {
            Ok(kc) => kc.spec.listeners.metrics_port,
            Err(e) => {
                debug!(error = %e, "reading the KafkaCluster for its metrics port");
                return;
            }
        };
        let (mut local, mut remote, mut segments) = Default::default();
        for b in view.brokers.values().filter(|b| b.alive) {
            let addr = names.broker_host_port(b.id, port);
            debug!(broker = b.id, %addr, "topic storage: reading a broker's metrics");
            let text = match broker_metrics::get_metrics(&addr, Duration::from_secs(5)).await {
                Ok(t) => t,
                Err(e) => {
                    debug!(broker = b.id, error = %e, "topic storage: a broker's metrics");
                    return;
                }
            };
            let gauge = |m| broker_metrics::partition_gauge(&text, m);
            broker_metrics::merge_max(&mut local, gauge(broker_metrics::LOG_SIZE));
            broker_metrics::merge_max(&mut remote, gauge(broker_metrics::REMOTE_SIZE));
            broker_metrics::merge_max(&mut segments, gauge(broker_metrics::REMOTE_SEGMENTS));
        }
        let sampled = per_topic(&local, &remote, &segments);
        debug!(cluster = %names.cluster, topics = sampled.len(), "topic storage sampled");
        self.shown.retain(|t, _| view.topics.contains_key(t));
        for (topic, now) in sampled {
            match self.shown.get(&topic) {
                Some(old) if !significant(old, &now) => {}
                _ => {
                    self.shown.insert(topic, now);
                }
            }
        }
    }
}

/// Sums the per-partition samples by topic.
pub fn per_topic(
    local: &PartitionGauge,
    remote: &PartitionGauge,
    segments: &PartitionGauge,
) -> BTreeMap<String, TopicStorageStatus> {
    let mut out: BTreeMap<String, TopicStorageStatus> = BTreeMap::new();
    let mut add = |g: &PartitionGauge, field: fn(&mut TopicStorageStatus) -> &mut i64| {
        for ((topic, _), v) in g {
            *field(out.entry(topic.clone()).or_default()) += *v as i64;
        }
    };
    add(local, |s| &mut s.local_bytes);
    add(remote, |s| &mut s.remote_bytes);
    add(segments, |s| &mut s.remote_segments);
    out
}

/// Worth a status patch: the remote segment count changed, or a byte count
/// moved by more than 1% (or left or reached zero).
pub fn significant(old: &TopicStorageStatus, new: &TopicStorageStatus) -> bool {
    let moved = |a: i64, b: i64| (a == 0) != (b == 0) || (a - b).abs() * 100 > a.max(b);
    old.remote_segments != new.remote_segments
        || moved(old.local_bytes, new.local_bytes)
        || moved(old.remote_bytes, new.remote_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(local: i64, remote: i64, segments: i64) -> TopicStorageStatus {
        TopicStorageStatus {
            local_bytes: local,
            remote_bytes: remote,
            remote_segments: segments,
        }
    }

    #[test]
    fn partitions_are_summed_by_topic() {
        let k = |t: &str, p| (t.to_string(), p);
        let local = BTreeMap::from([(k("a", 0), 10), (k("a", 1), 20), (k("b", 0), 5)]);
        let remote = BTreeMap::from([(k("a", 0), 100), (k("a", 1), 50)]);
        let segments = BTreeMap::from([(k("a", 0), 2), (k("a", 1), 1)]);
        let t = per_topic(&local, &remote, &segments);
        assert_eq!(t["a"], s(30, 150, 3));
        assert_eq!(t["b"], s(5, 0, 0));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn small_moves_are_not_worth_a_patch() {
        let old = s(1_000_000, 5_000_000, 5);
        assert!(!significant(&old, &s(1_005_000, 5_000_000, 5)));
        assert!(significant(&old, &s(1_020_000, 5_000_000, 5)));
        assert!(significant(&old, &s(1_000_000, 4_000_000, 5)));
        assert!(significant(&old, &s(1_000_000, 5_000_000, 6)));
        assert!(significant(&s(0, 0, 0), &s(1, 0, 0)));
        assert!(significant(&s(5, 0, 0), &s(0, 0, 0)));
        assert!(!significant(&s(0, 0, 0), &s(0, 0, 0)));
    }
}
