//! Unclean recovery in the core: the replicas' reports of leaderless
//! partitions are kept here, and after every event each partition that has
//! some is put to [`crate::unclean_recovery::decide`].

use std::collections::BTreeMap;

use super::{ControllerCore, Origin};
use crate::command::{Command, Reply};
use crate::model::{BrokerId, TopicId};
use crate::unclean_recovery::{self, Decision, LogPosition, ReplicaLog, ReplicaStatus};

/// What is known of one leaderless partition's replicas. Not persisted:
/// after a controller restart the brokers register again and, told the
/// partition has no leader, report again (the timeout starts over: a
/// recovery may come later, never earlier).
#[derive(Debug, Clone, Default)]
pub(super) struct Leaderless {
    /// When the first report came: about when it lost its leader, or when
    /// its first replica came back.
    since_ms: u64,
    /// By broker: the broker epoch it reported under, and its log.
    reports: BTreeMap<BrokerId, (u64, LogPosition)>,
}

impl ControllerCore {
    pub(super) fn on_replica_logs_reported(
        &mut self,
        broker: BrokerId,
        broker_epoch: u64,
        logs: Vec<ReplicaLog>,
    ) {
        let result = self.check_broker_epoch(broker, broker_epoch);
        if result.is_ok()
            && self.config.unclean_recovery_strategy
                != unclean_recovery::UncleanRecoveryStrategy::None
        {
            for log in logs {
                let Some(state) = self.partition(&log.topic, log.partition) else {
                    continue;
                };
                if !state.is_offline() || !state.replicas.contains(&broker) {
                    continue;
                }
                let now = self.now_ms;
                let entry = self
                    .leaderless
                    .entry((log.topic, log.partition))
                    .or_insert_with(|| Leaderless {
                        since_ms: now,
                        reports: BTreeMap::new(),
                    });
                entry.reports.insert(
                    broker,
                    (broker_epoch, (log.last_leader_epoch, log.log_end_offset)),
                );
            }
        }
        self.reply(Reply::ReportReplicaLogs { broker, result });
    }

    /// Puts every leaderless partition with reports to the decision, and
    /// elects where it says so; forgets the partitions that have a leader
    /// again (or are gone).
    pub(super) fn recover_leaderless_partitions(&mut self) {
        if self.leaderless.is_empty() {
            return;
        }
        let keys: Vec<(String, u32)> = self.leaderless.keys().cloned().collect();
        for (topic, p) in keys {
            let Some(state) = self.partition(&topic, p).cloned() else {
                self.leaderless.remove(&(topic, p));
                continue;
            };
            if !state.is_offline() {
                self.leaderless.remove(&(topic, p));
                continue;
            }
            let topic_id = self.image.topics[&topic].spec.topic_id;
            let known = &self.leaderless[&(topic.clone(), p)];
            let since = known.since_ms;
            let replicas: Vec<ReplicaStatus> = state
                .replicas
                .iter()
                .map(|b| {
                    let info = self.image.brokers.get(b);
                    // Only the current incarnation's report counts: a broker
                    // that registered again since may have lost its tail.
                    let report = known
                        .reports
                        .get(b)
                        .filter(|(epoch, _)| {
                            info.is_some_and(|i| !i.fenced && i.broker_epoch == *epoch)
                        })
                        .map(|(_, pos)| *pos);
                    ReplicaStatus {
                        broker: *b,
                        eligible: self.is_eligible(*b),
                        empty: self.empty_replicas.contains(&(topic_id, p, *b))
                            && !state.isr.contains(b),
                        report,
                    }
                })
                .collect();
            let decision = unclean_recovery::decide(
                &state,
                &replicas,
                self.config.unclean_recovery_strategy,
                self.now_ms.saturating_sub(since),
                self.config.unclean_recovery_timeout_ms,
            );
            let Decision::Elect(recovery) = decision else {
                continue;
            };
            let mut next = state.clone();
            unclean_recovery::apply(&mut next, recovery.leader);
            let after = self.commit_partition(&topic, p, next, false, Origin::Controller);
            if after.leader != recovery.leader {
                // Not electable after all (the commit's checks): try again later.
                continue;
            }
            self.leaderless.remove(&(topic.clone(), p));
            self.out.notices.push(Command::UncleanRecovery {
                topic,
                topic_id,
                partition: p,
                leader: recovery.leader,
                leader_epoch: after.leader_epoch,
                last_leader_epoch: recovery.last_leader_epoch,
                log_end_offset: recovery.log_end_offset,
                highest_reported_offset: recovery.highest_reported_offset,
                unreported: replicas
                    .iter()
                    .filter(|r| r.report.is_none())
                    .map(|r| r.broker)
                    .collect(),
            });
        }
    }

    /// The replicas a broker's lost directory emptied (every one it holds).
    pub(super) fn note_storage_lost(&mut self, broker: BrokerId) {
        let emptied: Vec<(TopicId, u32, BrokerId)> = self
            .image
            .topics
            .values()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.replicas.contains(&broker))
                    .map(move |(p, _)| (t.spec.topic_id, p as u32, broker))
            })
            .collect();
        self.empty_replicas.extend(emptied);
    }

    /// Members of a partition's ISR hold its data again.
    pub(super) fn note_in_sync(&mut self, topic_id: TopicId, partition: u32, isr: &[BrokerId]) {
        if self.empty_replicas.is_empty() {
            return;
        }
        for b in isr {
            self.empty_replicas.remove(&(topic_id, partition, *b));
        }
    }
}
