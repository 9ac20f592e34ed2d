//! Self-healing on the controller's tick: the replicas of brokers fenced
//! for longer than the grace period are replaced (planned per partition by
//! [`crate::self_healing::plan_partition`], carried out as reassignments).

use std::collections::{BTreeMap, BTreeSet};

use super::{ControllerCore, Origin};
use crate::command::Command;
use crate::model::{BrokerId, PartitionState};
use crate::placement::BrokerLoad;
use crate::reassignment;
use crate::replication_throttle;
use crate::self_healing::{plan_partition, Heal};

impl ControllerCore {
    /// Tracks since when each fenced broker has been gone and, with
    /// self-healing on, starts the reassignments that replace the replicas
    /// of those gone past the grace period. A partition already being
    /// reassigned (a drain, a replication factor change, an earlier heal) is
    /// left to that reassignment.
    pub(super) fn heal_lost_brokers(&mut self) {
        let now = self.now_ms;
        let fenced: BTreeSet<BrokerId> = self
            .image
            .brokers
            .values()
            .filter(|b| b.fenced)
            .map(|b| b.id)
            .collect();
        self.lost_since.retain(|b, _| fenced.contains(b));
        for b in &fenced {
            self.lost_since.entry(*b).or_insert(now);
        }
        let Some(cfg) = self.config.self_healing.clone() else {
            return;
        };
        let lost: BTreeSet<BrokerId> = self
            .lost_since
            .iter()
            .filter(|(_, since)| now.saturating_sub(**since) >= cfg.broker_loss_grace_ms)
            .map(|(b, _)| *b)
            .collect();
        if lost.is_empty() {
            self.heal_blocked.clear();
            return;
        }
        // On every tick: a cheap pass first (brokers a scale-down removed stay
        // fenced for good, holding nothing), the planning only when some
        // partition not already moving holds a lost broker.
        let affected = self
            .all_partitions()
            .any(|(_, _, s)| !s.is_reassigning() && s.replicas.iter().any(|b| lost.contains(b)));
        if !affected {
            if !self.heal_blocked.is_empty() {
                self.heal_blocked.clear();
                self.out.notices.push(Command::SelfHealing {
                    lost: lost.into_iter().collect(),
                    started: 0,
                    blocked: Vec::new(),
                });
            }
            return;
        }
        let hosts = self.replica_hosts();
        let mut load = BrokerLoad::from_partitions(self.all_partitions().map(|(_, _, s)| s));
        let mut starts: Vec<(String, u32, PartitionState)> = Vec::new();
        let mut blocked: BTreeMap<String, u32> = BTreeMap::new();
        for (topic, p, state) in self.all_partitions() {
            if state.is_reassigning() {
                continue;
            }
            match plan_partition(state, &lost, &cfg.excluded, &hosts, &mut load) {
                Some(Heal::Replace(target)) => match reassignment::start(state, &target) {
                    Ok(next) => starts.push((topic.to_owned(), p, next)),
                    Err(e) => *blocked.entry(e.to_string()).or_default() += 1,
                },
                Some(Heal::Blocked(why)) => *blocked.entry(why.to_string()).or_default() += 1,
                None => {}
            }
        }
        let started = starts.len() as u32;
        for (topic, p, next) in starts {
            let unclean = self.unclean_enabled(&topic);
            self.throttle_move(&topic, p, &next);
            self.commit_partition(&topic, p, next, unclean, Origin::Controller);
        }
        let blocked: Vec<(String, u32)> = blocked.into_iter().collect();
        if started > 0 || blocked != self.heal_blocked {
            self.heal_blocked = blocked.clone();
            self.out.notices.push(Command::SelfHealing {
                lost: lost.into_iter().collect(),
                started,
                blocked,
            });
        }
    }

    /// Names the move's replicas in the topic's throttle lists, as
    /// `kafka-reassign-partitions --throttle` does: the replicas it copies
    /// from under `leader.replication.throttled.replicas`, the ones it adds
    /// under `follower.replication.throttled.replicas`. The rates are the
    /// brokers' `leader/follower.replication.throttled.rate` (unlimited
    /// unless set), and only replicas outside the ISR are ever held back.
    pub(super) fn throttle_move(&mut self, topic: &str, partition: u32, moving: &PartitionState) {
        // The replicas it has now, a leaving one included (it may lead the
        // copy), as the tool lists them.
        let sources: Vec<BrokerId> = moving
            .replicas
            .iter()
            .filter(|b| !moving.adding_replicas.contains(b))
            .copied()
            .collect();
        let Some(t) = self.image.topics.get_mut(topic) else {
            return;
        };
        let mut changed = replication_throttle::add(
            &mut t.spec.configs,
            replication_throttle::LEADER_REPLICAS,
            partition,
            &sources,
        );
        changed |= replication_throttle::add(
            &mut t.spec.configs,
            replication_throttle::FOLLOWER_REPLICAS,
            partition,
            &moving.adding_replicas,
        );
        self.throttled_moves.insert((topic.to_owned(), partition));
        if changed {
            self.out.persist.push(Command::PersistTopic(t.spec.clone()));
            self.out.publish = true;
        }
    }

    /// Takes the entries of the throttled moves that ended (completed,
    /// cancelled, topic deleted) out of their topics' lists.
    pub(super) fn clear_finished_throttles(&mut self) {
        if self.throttled_moves.is_empty() {
            return;
        }
        let finished: Vec<(String, u32)> = self
            .throttled_moves
            .iter()
            .filter(|(topic, p)| {
                self.image
                    .topics
                    .get(topic)
                    .and_then(|t| t.partitions.get(*p as usize))
                    .is_none_or(|s| !s.is_reassigning())
            })
            .cloned()
            .collect();
        for (topic, p) in finished {
            self.throttled_moves.remove(&(topic.clone(), p));
            let Some(t) = self.image.topics.get_mut(&topic) else {
                continue;
            };
            let mut changed = replication_throttle::remove_partition(
                &mut t.spec.configs,
                replication_throttle::LEADER_REPLICAS,
                p,
            );
            changed |= replication_throttle::remove_partition(
                &mut t.spec.configs,
                replication_throttle::FOLLOWER_REPLICAS,
                p,
            );
            if changed {
                self.out.persist.push(Command::PersistTopic(t.spec.clone()));
                self.out.publish = true;
            }
        }
    }

    /// After a restart: the moves still running that the throttle lists
    /// name, so their entries are removed when they end (what `--verify`
    /// would do for a move started by hand).
    pub(super) fn moves_named_in_throttle_lists(&self) -> BTreeSet<(String, u32)> {
        self.all_partitions()
            .filter(|(topic, p, s)| {
                s.is_reassigning()
                    && self.image.topics.get(*topic).is_some_and(|t| {
                        replication_throttle::names_partition(
                            &t.spec.configs,
                            replication_throttle::FOLLOWER_REPLICAS,
                            *p,
                        )
                    })
            })
            .map(|(topic, p, _)| (topic.to_owned(), p))
            .collect()
    }

    /// Since when each fenced broker has been gone (milliseconds of the
    /// events' clock), as self-healing counts it.
    pub fn lost_since(&self) -> &BTreeMap<BrokerId, u64> {
        &self.lost_since
    }

    /// Turns self-healing on or off, or changes its grace period or the
    /// brokers it keeps new replicas off (a running controller: the
    /// cluster's spec changed).
    pub fn set_self_healing(&mut self, config: Option<crate::config::SelfHealingConfig>) {
        self.config.self_healing = config;
    }
}
