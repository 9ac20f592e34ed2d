//! Partitions on the control plane: the roles a broker is given
//! (`PartitionChanges`), a partition's state, and the requests about
//! partitions that are not in the table of requests (`requests/table.rs`)
//! because they are answered item by item: ISR proposals (`AlterPartitions`,
//! and `AlterPartition`, one proposal, which older brokers send)
//! and elections (`ElectLeaders`, and `ElectLeader`, one partition, from
//! brokers of 0.1.0).

use super::field_wire::Wire;
use super::pb::{self, reply, request};
use super::request_wire::remote_error;
use crate::plane::PartitionChange;
use crate::{
    AlterPartitionRequest, BrokerId, ControllerError, ElectionType, Event, PartitionState, Reply,
    TopicPartition,
};

pub fn changes_to_pb(changes: Vec<PartitionChange>) -> pb::PartitionChanges {
    use pb::partition_change::Role;
    let changes = changes
        .into_iter()
        .map(|c| match c {
            PartitionChange::Leader {
                topic,
                partition,
                leader_epoch,
                partition_epoch,
                replicas,
                isr,
            } => pb::PartitionChange {
                topic,
                partition,
                role: Some(Role::Leader(pb::BecomeLeader {
                    leader_epoch,
                    partition_epoch,
                    replicas,
                    isr,
                })),
            },
            PartitionChange::Follower {
                topic,
                partition,
                leader,
                leader_epoch,
                partition_epoch,
                replicas,
            } => pb::PartitionChange {
                topic,
                partition,
                role: Some(Role::Follower(pb::BecomeFollower {
                    leader,
                    leader_epoch,
                    partition_epoch,
                    replicas,
                })),
            },
            PartitionChange::Stop {
                topic,
                partition,
                delete,
            } => pb::PartitionChange {
                topic,
                partition,
                role: Some(Role::Stop(pb::StopReplica { delete })),
            },
        })
        .collect();
    pb::PartitionChanges { changes }
}

pub fn changes_from_pb(changes: pb::PartitionChanges) -> Vec<PartitionChange> {
    use pb::partition_change::Role;
    changes
        .changes
        .into_iter()
        .filter_map(|c| {
            Some(match c.role? {
                Role::Leader(l) => PartitionChange::Leader {
                    topic: c.topic,
                    partition: c.partition,
                    leader_epoch: l.leader_epoch,
                    partition_epoch: l.partition_epoch,
                    replicas: l.replicas,
                    isr: l.isr,
                },
                Role::Follower(f) => PartitionChange::Follower {
                    topic: c.topic,
                    partition: c.partition,
                    leader: f.leader,
                    leader_epoch: f.leader_epoch,
                    partition_epoch: f.partition_epoch,
                    replicas: f.replicas,
                },
                Role::Stop(s) => PartitionChange::Stop {
                    topic: c.topic,
                    partition: c.partition,
                    delete: s.delete,
                },
            })
        })
        .collect()
}

/// A partition's state, as a leader adopts it after its ISR proposal.
impl Wire for PartitionState {
    type Pb = pb::PartitionView;
    fn to_pb(&self) -> pb::PartitionView {
        pb::PartitionView {
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            adding_replicas: self.adding_replicas.clone(),
            removing_replicas: self.removing_replicas.clone(),
            elr: self.elr.clone(),
            last_known_elr: self.last_known_elr.clone(),
        }
    }
    fn from_pb(p: pb::PartitionView) -> Self {
        PartitionState {
            replicas: p.replicas,
            isr: p.isr,
            elr: p.elr,
            last_known_elr: p.last_known_elr,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            adding_replicas: p.adding_replicas,
            removing_replicas: p.removing_replicas,
        }
    }
}

fn alter_to_pb(a: &AlterPartitionRequest) -> pb::AlterPartition {
    pb::AlterPartition {
        broker_epoch: a.broker_epoch,
        topic: a.topic.clone(),
        topic_id: a.topic_id.to_pb(),
        partition: a.partition,
        leader_epoch: a.leader_epoch,
        partition_epoch: a.partition_epoch,
        new_isr: a.new_isr.clone(),
        new_isr_broker_epochs: a
            .new_isr_broker_epochs
            .iter()
            .map(|(b, e)| (*b, *e))
            .collect(),
    }
}

fn alter_from_pb(broker: BrokerId, a: pb::AlterPartition) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker,
        broker_epoch: a.broker_epoch,
        topic: a.topic,
        topic_id: Wire::from_pb(a.topic_id),
        partition: a.partition,
        leader_epoch: a.leader_epoch,
        partition_epoch: a.partition_epoch,
        new_isr: a.new_isr,
        new_isr_broker_epochs: a.new_isr_broker_epochs.into_iter().collect(),
    }
}

fn election(unclean: bool) -> ElectionType {
    if unclean {
        ElectionType::Unclean
    } else {
        ElectionType::Preferred
    }
}

/// The wire form of an ISR proposal or an election (`None`: another event).
pub(super) fn request_to_pb(event: &Event) -> Option<request::Kind> {
    Some(match event {
        Event::AlterPartition(a) => request::Kind::AlterPartition(alter_to_pb(a)),
        Event::AlterPartitions(items) => request::Kind::AlterPartitions(pb::AlterPartitions {
            items: items.iter().map(alter_to_pb).collect(),
        }),
        Event::ElectLeaders {
            election,
            partitions,
        } => request::Kind::ElectLeaders(pb::ElectLeaders {
            items: partitions
                .iter()
                .map(|tp| pb::ElectLeader {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    unclean: *election == ElectionType::Unclean,
                })
                .collect(),
        }),
        _ => return None,
    })
}

/// The event of an ISR proposal or an election from `broker`, or the kind
/// back (moved back whole, as `request_wire` does).
#[allow(clippy::result_large_err)]
pub(super) fn request_from_pb(
    broker: BrokerId,
    kind: request::Kind,
) -> Result<Event, request::Kind> {
    Ok(match kind {
        request::Kind::AlterPartition(a) => Event::AlterPartition(alter_from_pb(broker, a)),
        request::Kind::AlterPartitions(a) => Event::AlterPartitions(
            a.items
                .into_iter()
                .map(|a| alter_from_pb(broker, a))
                .collect(),
        ),
        request::Kind::ElectLeaders(e) => Event::ElectLeaders {
            election: election(e.items.first().is_some_and(|i| i.unclean)),
            partitions: e
                .items
                .into_iter()
                .map(|i| TopicPartition::new(i.topic, i.partition))
                .collect(),
        },
        // A broker of 0.1.0 asks for one partition at a time.
        request::Kind::ElectLeader(e) => Event::ElectLeaders {
            election: election(e.unclean),
            partitions: vec![TopicPartition::new(e.topic, e.partition)],
        },
        other => return Err(other),
    })
}

/// For the answer to an ISR proposal or an election, `Ok` with its place
/// in the wire reply or its error; `Err(reply)`: another reply, moved back.
#[allow(clippy::type_complexity, clippy::result_large_err)]
pub(super) fn reply_to_pb(
    reply: Reply,
) -> Result<Result<Option<reply::Result>, ControllerError>, Reply> {
    Ok(match reply {
        Reply::AlterPartition { result, .. } => {
            result.map(|state| Some(reply::Result::Partition(state.to_pb())))
        }
        Reply::AlterPartitions(replies) => Ok(Some(reply::Result::AlterPartitions(
            pb::AlterPartitionResults {
                results: replies.into_iter().map(alter_result_to_pb).collect(),
            },
        ))),
        // The answer of a 0.1.0 controller to `ElectLeader`.
        Reply::ElectLeader { result, .. } => {
            result.map(|leader| Some(reply::Result::Leader(leader)))
        }
        Reply::ElectLeaders(replies) => {
            Ok(Some(reply::Result::ElectLeaders(pb::ElectLeaderResults {
                results: replies.into_iter().map(elect_result_to_pb).collect(),
            })))
        }
        other => return Err(other),
    })
}

fn alter_result_to_pb(r: Reply) -> pb::AlterPartitionResult {
    match r {
        Reply::AlterPartition { result: Ok(s), .. } => pb::AlterPartitionResult {
            error_code: 0,
            error_message: String::new(),
            partition: Some(s.to_pb()),
        },
        Reply::AlterPartition { result: Err(e), .. } => pb::AlterPartitionResult {
            error_code: e.kafka_code() as i32,
            error_message: e.to_string(),
            partition: None,
        },
        _ => pb::AlterPartitionResult {
            error_code: -1,
            error_message: "no answer for this partition".into(),
            partition: None,
        },
    }
}

fn elect_result_to_pb(r: Reply) -> pb::ElectLeaderResult {
    match r {
        Reply::ElectLeader { result: Ok(l), .. } => pb::ElectLeaderResult {
            error_code: 0,
            error_message: String::new(),
            leader: l,
        },
        Reply::ElectLeader { result: Err(e), .. } => pb::ElectLeaderResult {
            error_code: e.kafka_code() as i32,
            error_message: e.to_string(),
            leader: -1,
        },
        _ => pb::ElectLeaderResult {
            error_code: -1,
            error_message: "no answer for this partition".into(),
            leader: -1,
        },
    }
}

/// The reply `r` stands for, when `event` is an ISR proposal or an
/// election: a result per item, in order; an item the reply lacks has the
/// reply's error.
pub(super) fn reply_from_pb(event: &Event, r: &pb::Reply) -> Option<Reply> {
    let err = || remote_error(r);
    let item_error = |code: i32, message: &str| ControllerError::Remote {
        code: code as i16,
        message: message.to_owned(),
    };
    Some(match event {
        Event::AlterPartitions(items) => {
            let results = match (&r.result, r.error_code) {
                (Some(reply::Result::AlterPartitions(res)), 0) => res.results.as_slice(),
                _ => &[],
            };
            Reply::AlterPartitions(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, a)| Reply::AlterPartition {
                        broker: a.broker,
                        topic: a.topic.clone(),
                        partition: a.partition,
                        result: match results.get(i) {
                            Some(pb::AlterPartitionResult {
                                error_code: 0,
                                partition: Some(p),
                                ..
                            }) => Ok(Wire::from_pb(p.clone())),
                            Some(x) => Err(item_error(x.error_code, &x.error_message)),
                            None => Err(err()),
                        },
                    })
                    .collect(),
            )
        }
        Event::AlterPartition(a) => Reply::AlterPartition {
            broker: a.broker,
            topic: a.topic.clone(),
            partition: a.partition,
            result: match (&r.result, r.error_code) {
                (Some(reply::Result::Partition(p)), 0) => Ok(Wire::from_pb(p.clone())),
                _ => Err(err()),
            },
        },
        Event::ElectLeaders { partitions, .. } => {
            let results = match (&r.result, r.error_code) {
                (Some(reply::Result::ElectLeaders(res)), 0) => res.results.as_slice(),
                _ => &[],
            };
            Reply::ElectLeaders(
                partitions
                    .iter()
                    .enumerate()
                    .map(|(i, tp)| Reply::ElectLeader {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                        result: match results.get(i) {
                            Some(pb::ElectLeaderResult {
                                error_code: 0,
                                leader,
                                ..
                            }) => Ok(*leader),
                            Some(x) => Err(item_error(x.error_code, &x.error_message)),
                            None => Err(err()),
                        },
                    })
                    .collect(),
            )
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::wire::{event_from_pb, event_to_pb, reply_from_pb, reply_to_pb};

    #[test]
    fn elect_leaders_cross_the_wire_as_one_request_and_one_reply() {
        let tps = vec![TopicPartition::new("a", 0), TopicPartition::new("b", 3)];
        let elect = Event::ElectLeaders {
            election: ElectionType::Unclean,
            partitions: tps.clone(),
        };
        let kind = event_to_pb(&elect).expect("sent by brokers");
        assert!(matches!(&kind, request::Kind::ElectLeaders(e) if e.items.len() == 2));
        assert_eq!(event_from_pb(1, kind), elect);
        let answer = Reply::ElectLeaders(vec![
            Reply::ElectLeader {
                topic: "a".into(),
                partition: 0,
                result: Ok(2),
            },
            Reply::ElectLeader {
                topic: "b".into(),
                partition: 3,
                result: Err(ControllerError::ElectionNotNeeded),
            },
        ]);
        let Reply::ElectLeaders(back) = reply_from_pb(&elect, reply_to_pb(9, Some(answer))) else {
            panic!("one batch reply");
        };
        assert!(matches!(back[0], Reply::ElectLeader { result: Ok(2), .. }));
        let Reply::ElectLeader {
            result: Err(ControllerError::Remote { code, .. }),
            ..
        } = &back[1]
        else {
            panic!("{:?}", back[1]);
        };
        assert_eq!(*code, ControllerError::ElectionNotNeeded.kafka_code());
        // A broker of the previous version sends one partition per request.
        let old = request::Kind::ElectLeader(pb::ElectLeader {
            topic: "a".into(),
            partition: 0,
            unclean: false,
        });
        assert_eq!(
            event_from_pb(1, old),
            Event::ElectLeaders {
                election: ElectionType::Preferred,
                partitions: vec![TopicPartition::new("a", 0)],
            }
        );
    }
}
