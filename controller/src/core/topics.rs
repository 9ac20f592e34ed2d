//! Topic lifecycle: create, grow, change the replication factor,
//! reconfigure, delete.

use std::collections::BTreeMap;

use super::{ControllerCore, Origin};
use crate::command::{Command, Reply};
use crate::election::{self, UNCLEAN_LEADER_ELECTION_ENABLE};
use crate::error::ControllerError;
use crate::event::NewTopic;
use crate::model::{BrokerId, PartitionState, TopicDefinition, TopicId, TopicImage};
use crate::placement::{self, BrokerLoad, PlacementBroker};
use crate::reassignment;
use crate::replication_factor;

/// Most partitions one topic may have; guards against requests that would
/// exhaust memory.
pub const MAX_PARTITIONS_PER_TOPIC: u32 = 100_000;

/// Kafka's topic name rules: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    let invalid = |why: &str| Err(ControllerError::InvalidTopic(format!("'{name}': {why}")));
    if name.is_empty() {
        return invalid("empty name");
    }
    if name == "." || name == ".." {
        return invalid("'.' and '..' are not allowed");
    }
    if name.len() > 249 {
        return invalid("longer than 249 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

fn validate_configs(configs: &BTreeMap<String, String>) -> Result<(), ControllerError> {
    if let Some(v) = configs.get(UNCLEAN_LEADER_ELECTION_ENABLE) {
        let v = v.trim();
        if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
            return Err(ControllerError::InvalidConfig(format!(
                "{UNCLEAN_LEADER_ELECTION_ENABLE} must be true or false, got '{v}'"
            )));
        }
    }
    Ok(())
}

impl ControllerCore {
    pub(super) fn on_create_topic(&mut self, request: NewTopic) {
        let topic = request.name.clone();
        let result = self.create_topic(request);
        self.reply(Reply::CreateTopic { topic, result });
    }

    fn create_topic(&mut self, request: NewTopic) -> Result<TopicId, ControllerError> {
        validate_topic_name(&request.name)?;
        if self.image.topics.contains_key(&request.name) {
            return Err(ControllerError::TopicAlreadyExists(request.name));
        }
        if request.topic_id == TopicId::ZERO {
            return Err(ControllerError::InvalidRequest(
                "topic id must not be zero".into(),
            ));
        }
        if self
            .image
            .topics
            .values()
            .any(|t| t.spec.topic_id == request.topic_id)
        {
            return Err(ControllerError::InvalidRequest(format!(
                "topic id {} is already in use",
                request.topic_id
            )));
        }
        validate_configs(&request.configs)?;
        let assignment = match request.assignment {
            Some(assignment) => {
                self.validate_assignment(&assignment, None)?;
                assignment
            }
            None => self.place(request.partitions, request.replication_factor)?,
        };
        let states = assignment
            .iter()
            .map(|replicas| self.new_partition(replicas))
            .collect::<Result<Vec<_>, _>>()?;
        if request.validate_only {
            return Ok(request.topic_id);
        }
        let spec = TopicDefinition {
            name: request.name.clone(),
            topic_id: request.topic_id,
            partitions: states.len() as u32,
            replication_factor: assignment[0].len() as u16,
            configs: request.configs,
        };
        self.out.persist.push(Command::PersistTopic(spec.clone()));
        self.image.topics.insert(
            request.name.clone(),
            TopicImage {
                spec,
                partitions: Vec::new(),
            },
        );
        self.add_partitions(&request.name, states);
        Ok(request.topic_id)
    }

    pub(super) fn on_create_partitions(
        &mut self,
        topic: String,
        count: u32,
        assignment: Option<Vec<Vec<BrokerId>>>,
    ) {
        let result = self.create_partitions(&topic, count, assignment);
        self.reply(Reply::CreatePartitions { topic, result });
    }

    fn create_partitions(
        &mut self,
        topic: &str,
        count: u32,
        assignment: Option<Vec<Vec<BrokerId>>>,
    ) -> Result<(), ControllerError> {
        let t = self
            .image
            .topics
            .get(topic)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        let current = t.partitions.len() as u32;
        let rf = t.spec.replication_factor;
        if count <= current {
            return Err(ControllerError::InvalidPartitions(format!(
                "topic has {current} partitions; {count} would not add any"
            )));
        }
        if count > MAX_PARTITIONS_PER_TOPIC {
            return Err(ControllerError::InvalidPartitions(format!(
                "at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic"
            )));
        }
        let new_count = count - current;
        let assignment = match assignment {
            Some(assignment) => {
                if assignment.len() != new_count as usize {
                    return Err(ControllerError::InvalidReplicaAssignment(format!(
                        "{} replica lists for {new_count} new partitions",
                        assignment.len()
                    )));
                }
                self.validate_assignment(&assignment, Some(usize::from(rf)))?;
                assignment
            }
            None => self.place(new_count, rf)?,
        };
        let states = assignment
            .iter()
            .map(|replicas| self.new_partition(replicas))
            .collect::<Result<Vec<_>, _>>()?;
        let t = self.image.topics.get_mut(topic).expect("checked above");
        t.spec.partitions = count;
        self.out.persist.push(Command::PersistTopic(t.spec.clone()));
        self.add_partitions(topic, states);
        Ok(())
    }

    pub(super) fn on_alter_replication_factor(&mut self, topic: String, replication_factor: u16) {
        let result = self.alter_replication_factor(&topic, replication_factor);
        self.reply(Reply::AlterReplicationFactor { topic, result });
    }

    /// Starts the reassignments that give every partition of `topic`
    /// `rf` replicas (planned by [`replication_factor::plan`]) and makes
    /// `rf` the topic's replication factor for partitions added later.
    /// Every partition's reassignment is checked before any starts, so a
    /// refusal (too few live brokers, a partition without an in-sync
    /// replica) changes nothing. Returns how many partitions it started.
    fn alter_replication_factor(&mut self, topic: &str, rf: u16) -> Result<u32, ControllerError> {
        let t = self
            .image
            .topics
            .get(topic)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        let hosts = self.replica_hosts();
        let mut load = BrokerLoad::from_partitions(self.all_partitions().map(|(_, _, s)| s));
        let targets = replication_factor::plan(&t.partitions, rf, &hosts, &mut load)?;
        let mut starts = Vec::new();
        for (p, target) in targets.into_iter().enumerate() {
            let Some(target) = target else { continue };
            let refused = |e: ControllerError| {
                ControllerError::InvalidReplicationFactor(format!(
                    "partition {p} cannot move to {target:?}: {e}"
                ))
            };
            reassignment::validate_replica_list(&target, |b| self.is_registered(b))
                .map_err(refused)?;
            let next = reassignment::start(&t.partitions[p], &target).map_err(refused)?;
            starts.push((p as u32, next));
        }
        if t.spec.replication_factor != rf {
            let t = self.image.topics.get_mut(topic).expect("checked above");
            t.spec.replication_factor = rf;
            self.out.persist.push(Command::PersistTopic(t.spec.clone()));
            self.out.publish = true;
        }
        let unclean = self.unclean_enabled(topic);
        let started = starts.len() as u32;
        for (p, next) in starts {
            self.commit_partition(topic, p, next, unclean, Origin::Controller);
        }
        Ok(started)
    }

    /// Appends new partitions to a topic, persists them and tells their
    /// replicas.
    fn add_partitions(&mut self, topic: &str, states: Vec<PartitionState>) {
        let t = self.image.topics.get_mut(topic).expect("topic exists");
        let topic_id = t.spec.topic_id;
        let first = t.partitions.len() as u32;
        t.partitions.extend(states.iter().cloned());
        for (i, state) in states.into_iter().enumerate() {
            let partition = first + i as u32;
            self.out.persist.push(Command::PersistPartition {
                topic: topic.to_owned(),
                topic_id,
                partition,
                state,
            });
            self.notify_replicas(topic, partition);
        }
        self.out.publish = true;
    }

    /// Places `count` partitions on the brokers that may take replicas now.
    fn place(
        &self,
        count: u32,
        replication_factor: u16,
    ) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
        if count == 0 {
            return Err(ControllerError::InvalidPartitions(
                "number of partitions must be at least 1".into(),
            ));
        }
        if count > MAX_PARTITIONS_PER_TOPIC {
            return Err(ControllerError::InvalidPartitions(format!(
                "at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic"
            )));
        }
        let brokers: Vec<PlacementBroker> = self
            .image
            .brokers
            .values()
            .filter(|b| b.is_eligible())
            .map(|b| PlacementBroker {
                id: b.id,
                rack: b.rack.clone(),
            })
            .collect();
        let mut load = BrokerLoad::from_partitions(self.all_partitions().map(|(_, _, s)| s));
        placement::place_partitions(&brokers, &mut load, count, replication_factor)
    }

    /// Checks explicit replica lists: each valid, all the same length.
    fn validate_assignment(
        &self,
        assignment: &[Vec<BrokerId>],
        replication_factor: Option<usize>,
    ) -> Result<(), ControllerError> {
        if assignment.is_empty() {
            return Err(ControllerError::InvalidPartitions(
                "assignment has no partitions".into(),
            ));
        }
        if assignment.len() > MAX_PARTITIONS_PER_TOPIC as usize {
            return Err(ControllerError::InvalidPartitions(format!(
                "at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic"
            )));
        }
        let rf = replication_factor.unwrap_or(assignment[0].len());
        for replicas in assignment {
            reassignment::validate_replica_list(replicas, |b| self.is_registered(b))?;
            if replicas.len() != rf {
                return Err(ControllerError::InvalidReplicaAssignment(format!(
                    "{replicas:?} does not have {rf} replicas"
                )));
            }
        }
        Ok(())
    }

    /// A new partition's state: eligible replicas in sync, the first leading.
    fn new_partition(&self, replicas: &[BrokerId]) -> Result<PartitionState, ControllerError> {
        let isr: Vec<BrokerId> = replicas
            .iter()
            .copied()
            .filter(|b| self.is_eligible(*b))
            .collect();
        let Some(&leader) = isr.first() else {
            return Err(ControllerError::InvalidReplicationFactor(format!(
                "no live broker among replicas {replicas:?}"
            )));
        };
        Ok(PartitionState::new(replicas.to_vec(), isr, leader))
    }

    pub(super) fn on_config_changed(&mut self, topic: String, configs: BTreeMap<String, String>) {
        let result = self.change_configs(&topic, configs);
        self.reply(Reply::AlterConfigs { topic, result });
    }

    fn change_configs(
        &mut self,
        topic: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        validate_configs(&configs)?;
        let t = self
            .image
            .topics
            .get_mut(topic)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        if t.spec.configs == configs {
            return Ok(());
        }
        t.spec.configs = configs;
        let spec = t.spec.clone();
        self.out.persist.push(Command::PersistTopic(spec));
        self.out.publish = true;
        // Enabling unclean election brings offline partitions back now.
        if election::unclean_enabled(
            &self.image.topics[topic].spec.configs,
            self.config.unclean_leader_election_enable,
        ) {
            let offline: Vec<u32> = self.image.topics[topic]
                .partitions
                .iter()
                .enumerate()
                .filter(|(_, s)| s.is_offline())
                .map(|(p, _)| p as u32)
                .collect();
            for p in offline {
                let current = self.state(topic, p).clone();
                self.commit_partition(topic, p, current, true, Origin::Controller);
            }
        }
        Ok(())
    }

    pub(super) fn on_delete_topic(&mut self, topic: String) {
        let result = match self.image.topics.remove(&topic) {
            None => Err(ControllerError::UnknownTopicOrPartition),
            Some(t) => {
                let topic_id = t.spec.topic_id;
                self.out.persist.push(Command::DeleteTopic {
                    topic: topic.clone(),
                    topic_id,
                });
                for (p, state) in t.partitions.iter().enumerate() {
                    for b in &state.replicas {
                        if self.is_alive(*b) {
                            self.out.brokers.push(Command::StopReplica {
                                broker: *b,
                                topic: topic.clone(),
                                topic_id,
                                partition: p as u32,
                                delete: true,
                            });
                        }
                    }
                }
                self.out.publish = true;
                Ok(())
            }
        };
        self.reply(Reply::DeleteTopic { topic, result });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert_eq!(
                validate_topic_name(bad).unwrap_err().kafka_code(),
                17,
                "{bad:?}"
            );
        }
    }
}
