//! Partition changes asked for from outside: ISR proposals from leaders,
//! reassignments, leader elections, and the periodic preferred-leader
//! rebalance.

use std::collections::BTreeSet;

use super::{ControllerCore, Origin};
use crate::command::Reply;
use crate::election;
use crate::error::ControllerError;
use crate::event::{AlterPartitionRequest, ElectionType};
use crate::model::{BrokerId, PartitionState, TopicId, TopicPartition};
use crate::reassignment;

impl ControllerCore {
    pub(super) fn on_alter_partition(&mut self, request: AlterPartitionRequest) {
        let result = self.alter_partition(&request);
        self.reply(Reply::AlterPartition {
            broker: request.broker,
            topic: request.topic,
            partition: request.partition,
            result,
        });
    }

    /// A batch of proposals: each is checked and applied in turn (a later
    /// one sees the earlier ones' effects), and their replies come back as
    /// one.
    pub(super) fn on_alter_partitions(&mut self, requests: Vec<AlterPartitionRequest>) {
        let start = self.out.notices.len();
        for request in requests {
            self.on_alter_partition(request);
        }
        let mut replies = Vec::new();
        let mut rest = Vec::new();
        for c in self.out.notices.drain(start..) {
            match c {
                crate::command::Command::Reply(r @ Reply::AlterPartition { .. }) => replies.push(r),
                other => rest.push(other),
            }
        }
        self.out.notices.extend(rest);
        self.reply(Reply::AlterPartitions(replies));
    }

    /// Kafka's AlterPartition checks, in its order: the broker's
    /// registration, the partition, leadership and leader epoch, the
    /// partition epoch, then the proposed ISR.
    fn alter_partition(
        &mut self,
        req: &AlterPartitionRequest,
    ) -> Result<PartitionState, ControllerError> {
        match self.image.brokers.get(&req.broker) {
            None => return Err(ControllerError::BrokerIdNotRegistered(req.broker)),
            Some(info) if info.fenced || info.broker_epoch != req.broker_epoch => {
                return Err(ControllerError::StaleBrokerEpoch)
            }
            Some(_) => {}
        }
        let topic = self
            .image
            .topics
            .get(&req.topic)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        if req.topic_id != TopicId::ZERO && req.topic_id != topic.spec.topic_id {
            return Err(ControllerError::UnknownTopicId);
        }
        let current = topic
            .partitions
            .get(req.partition as usize)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        if current.leader != req.broker {
            return Err(ControllerError::NotLeaderOrFollower);
        }
        if req.leader_epoch < current.leader_epoch {
            return Err(ControllerError::FencedLeaderEpoch {
                request: req.leader_epoch,
                current: current.leader_epoch,
            });
        }
        if req.leader_epoch > current.leader_epoch {
            // The leader knows a newer epoch than ours: not the leader we know.
            return Err(ControllerError::NotLeaderOrFollower);
        }
        if req.partition_epoch != current.partition_epoch {
            return Err(ControllerError::InvalidUpdateVersion {
                request: req.partition_epoch,
                current: current.partition_epoch,
            });
        }
        let proposed: BTreeSet<BrokerId> = req.new_isr.iter().copied().collect();
        if proposed.len() != req.new_isr.len() {
            return Err(ControllerError::InvalidRequest(format!(
                "duplicate broker in ISR {:?}",
                req.new_isr
            )));
        }
        if !proposed.contains(&req.broker) {
            return Err(ControllerError::InvalidRequest(
                "the leader must stay in the ISR".into(),
            ));
        }
        if let Some(b) = proposed.iter().find(|b| !current.replicas.contains(b)) {
            return Err(ControllerError::InvalidRequest(format!(
                "broker {b} is not a replica"
            )));
        }
        if let Some(b) = proposed
            .iter()
            .find(|b| !current.isr.contains(b) && !self.is_eligible(**b))
        {
            return Err(ControllerError::IneligibleReplica(*b));
        }
        // KIP-841: a joining member must still be the incarnation the leader
        // saw catch up; one that registered again since (a restart, perhaps
        // on an empty disk) has to catch up again first.
        if let Some(b) = proposed.iter().find(|b| {
            !current.isr.contains(b)
                && req.new_isr_broker_epochs.get(b).is_some_and(|epoch| {
                    self.image
                        .brokers
                        .get(b)
                        .is_none_or(|info| info.broker_epoch != *epoch)
                })
        }) {
            return Err(ControllerError::IneligibleReplica(*b));
        }
        if proposed == current.isr.iter().copied().collect() {
            return Ok(current.clone());
        }
        let mut next = current.clone();
        next.isr = req.new_isr.clone();
        let unclean = self.unclean_enabled(&req.topic);
        Ok(self.commit_partition(
            &req.topic,
            req.partition,
            next,
            unclean,
            Origin::LeaderProposal,
        ))
    }

    pub(super) fn on_reassign(
        &mut self,
        topic: String,
        partition: u32,
        target: Option<Vec<BrokerId>>,
        throttled: bool,
    ) {
        let result = self.reassign(&topic, partition, target.as_deref());
        if throttled && result.is_ok() {
            let state = self.state(&topic, partition).clone();
            if state.is_reassigning() {
                self.throttle_move(&topic, partition, &state);
            }
        }
        self.reply(Reply::ReassignPartition {
            topic,
            partition,
            result,
        });
    }

    fn reassign(
        &mut self,
        topic: &str,
        partition: u32,
        target: Option<&[BrokerId]>,
    ) -> Result<(), ControllerError> {
        let current = self
            .partition(topic, partition)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        let next = match target {
            Some(target) => {
                reassignment::validate_replica_list(target, |b| self.is_registered(b))?;
                reassignment::start(current, target)?
            }
            None => reassignment::cancel(current)?,
        };
        let unclean = self.unclean_enabled(topic);
        self.commit_partition(topic, partition, next, unclean, Origin::Controller);
        Ok(())
    }

    pub(super) fn on_elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: Vec<TopicPartition>,
    ) {
        let results = partitions
            .into_iter()
            .map(|tp| {
                let result = self.elect(election, &tp);
                Reply::ElectLeader {
                    topic: tp.topic,
                    partition: tp.partition,
                    result,
                }
            })
            .collect();
        self.reply(Reply::ElectLeaders(results));
    }

    fn elect(
        &mut self,
        election: ElectionType,
        tp: &TopicPartition,
    ) -> Result<BrokerId, ControllerError> {
        let current = self
            .partition(&tp.topic, tp.partition)
            .ok_or(ControllerError::UnknownTopicOrPartition)?
            .clone();
        match election {
            ElectionType::Preferred => {
                let mut next = current;
                let leader = election::elect_preferred_leader(&mut next, |b| self.is_eligible(b))?;
                self.commit_partition(&tp.topic, tp.partition, next, false, Origin::Controller);
                Ok(leader)
            }
            ElectionType::Unclean => {
                if !current.is_offline() {
                    return Err(ControllerError::ElectionNotNeeded);
                }
                // An explicit unclean election overrides the topic config.
                let after = self.commit_partition(
                    &tp.topic,
                    tp.partition,
                    current,
                    true,
                    Origin::Controller,
                );
                if after.is_offline() {
                    Err(ControllerError::EligibleLeadersNotAvailable)
                } else {
                    Ok(after.leader)
                }
            }
        }
    }

    /// Moves leadership back to preferred replicas that are in sync.
    pub(super) fn rebalance_leaders(&mut self) {
        for (topic, p) in self.partitions_where(|s| s.leader != s.preferred_leader()) {
            let mut next = self.state(&topic, p).clone();
            if election::elect_preferred_leader(&mut next, |b| self.is_eligible(b)).is_ok() {
                self.commit_partition(&topic, p, next, false, Origin::Controller);
            }
        }
    }
}
