//! Conversions between the controller's types and the control-plane
//! protobuf messages (`control.proto`), used by both ends of a session.

use uuid::Uuid;

use super::field_wire::Wire;
use super::pb::{self, reply, request};
use super::request_wire as rw;
use super::security_wire as sw;
use super::view_wire::uuid_from;
pub use super::view_wire::{apply_view_pb, view_delta_to_pb, view_from_pb, view_to_pb};
use crate::plane::PartitionChange;
use crate::{
    AlterPartitionRequest, ControllerError, ElectionType, Event, NewTopic, PartitionState, Reply,
    TopicId, TopicPartition,
};

fn topic_id_from(bytes: &[u8]) -> TopicId {
    TopicId(uuid_from(bytes).as_u128())
}

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

pub fn state_to_pb(p: &PartitionState) -> pb::PartitionView {
    pb::PartitionView {
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        adding_replicas: p.adding_replicas.clone(),
        removing_replicas: p.removing_replicas.clone(),
        elr: p.elr.clone(),
    }
}

pub fn state_from_pb(p: pb::PartitionView) -> PartitionState {
    PartitionState {
        replicas: p.replicas,
        isr: p.isr,
        elr: p.elr,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        adding_replicas: p.adding_replicas,
        removing_replicas: p.removing_replicas,
    }
}

/// The request kind for a broker's event (`None`: not carried over the wire).
fn alter_to_pb(a: &AlterPartitionRequest) -> pb::AlterPartition {
    pb::AlterPartition {
        broker_epoch: a.broker_epoch,
        topic: a.topic.clone(),
        topic_id: Uuid::from_u128(a.topic_id.0).as_bytes().to_vec(),
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

fn alter_from_pb(broker: i32, a: pb::AlterPartition) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker,
        broker_epoch: a.broker_epoch,
        topic: a.topic,
        topic_id: topic_id_from(&a.topic_id),
        partition: a.partition,
        leader_epoch: a.leader_epoch,
        partition_epoch: a.partition_epoch,
        new_isr: a.new_isr,
        new_isr_broker_epochs: a.new_isr_broker_epochs.into_iter().collect(),
    }
}

/// The wire form of a broker's request event (`None`: not carried): the
/// `derived` requests of the table from their entries, the others here.
pub fn event_to_pb(event: &Event) -> Option<request::Kind> {
    if let Some(kind) = rw::derived_event_to_pb(event) {
        return Some(kind);
    }
    Some(match event {
        Event::CreateTopic(t) => request::Kind::CreateTopic(pb::CreateTopic {
            name: t.name.clone(),
            topic_id: Uuid::from_u128(t.topic_id.0).as_bytes().to_vec(),
            partitions: t.partitions,
            replication_factor: t.replication_factor as u32,
            configs: t.configs.clone().into_iter().collect(),
            validate_only: t.validate_only,
            assignment: t.assignment.to_pb(),
        }),
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
        Event::AlterScramCredentials {
            upsertions,
            deletions,
        } => sw::alter_scram_to_pb(upsertions, deletions),
        _ => return None,
    })
}

/// The controller's event for a request from broker `broker`.
///
/// # Panics
///
/// For a kind no conversion reads (see [`request_from_pb`]).
pub fn event_from_pb(broker: i32, kind: request::Kind) -> Event {
    request_from_pb(broker, kind).expect("every request kind is read")
}

/// The controller's event for a request from broker `broker`: the
/// `derived` requests of the table from their entries, the others here.
/// `None` for a kind neither reads (a session answers it as unsupported).
pub fn request_from_pb(broker: i32, kind: request::Kind) -> Option<Event> {
    let kind = match rw::derived_event_from_pb(broker, kind) {
        Ok(event) => return Some(event),
        Err(kind) => kind,
    };
    Some(match kind {
        request::Kind::CreateTopic(t) => Event::CreateTopic(NewTopic {
            name: t.name,
            topic_id: topic_id_from(&t.topic_id),
            partitions: t.partitions,
            replication_factor: t.replication_factor as u16,
            configs: t.configs.into_iter().collect(),
            assignment: Wire::from_pb(t.assignment),
            validate_only: t.validate_only,
        }),
        request::Kind::AlterPartition(a) => Event::AlterPartition(alter_from_pb(broker, a)),
        request::Kind::AlterPartitions(a) => Event::AlterPartitions(
            a.items
                .into_iter()
                .map(|a| alter_from_pb(broker, a))
                .collect(),
        ),
        request::Kind::ElectLeaders(e) => Event::ElectLeaders {
            election: if e.items.first().is_some_and(|i| i.unclean) {
                ElectionType::Unclean
            } else {
                ElectionType::Preferred
            },
            partitions: e
                .items
                .into_iter()
                .map(|i| TopicPartition::new(i.topic, i.partition))
                .collect(),
        },
        // A broker of the previous version asks for one partition at a time.
        request::Kind::ElectLeader(e) => Event::ElectLeaders {
            election: if e.unclean {
                ElectionType::Unclean
            } else {
                ElectionType::Preferred
            },
            partitions: vec![TopicPartition::new(e.topic, e.partition)],
        },
        request::Kind::AlterScramCredentials(a) => sw::alter_scram_from_pb(a),
        // The derived ones, read above.
        _ => return None,
    })
}

fn error_parts(e: &ControllerError) -> (i32, String) {
    (e.kafka_code() as i32, e.to_string())
}

/// The wire reply for the controller's answer to one request: the replies
/// of the table's requests from their output types, the others here.
pub fn reply_to_pb(id: u64, reply: Option<Reply>) -> pb::Reply {
    let mut out = pb::Reply {
        id,
        ..Default::default()
    };
    let mut fail = |e: &ControllerError| {
        let (code, message) = error_parts(e);
        out.error_code = code;
        out.error_message = message;
    };
    let result = match reply.map(rw::table_reply_to_pb) {
        None => {
            out.error_code = -1; // UNKNOWN_SERVER_ERROR
            out.error_message = "the controller gave no answer".into();
            None
        }
        Some(Ok(Ok(result))) => result,
        Some(Ok(Err(e))) => {
            fail(&e);
            None
        }
        Some(Err(reply)) => match reply {
            Reply::CreateTopic { result, .. } => {
                if let Err(e) = result {
                    fail(&e);
                }
                None
            }
            Reply::AlterPartition { result, .. } => match result {
                Ok(state) => Some(reply::Result::Partition(state_to_pb(&state))),
                Err(e) => {
                    fail(&e);
                    None
                }
            },
            Reply::AlterPartitions(replies) => {
                Some(reply::Result::AlterPartitions(pb::AlterPartitionResults {
                    results: replies
                        .into_iter()
                        .map(|r| match r {
                            Reply::AlterPartition { result: Ok(s), .. } => {
                                pb::AlterPartitionResult {
                                    error_code: 0,
                                    error_message: String::new(),
                                    partition: Some(state_to_pb(&s)),
                                }
                            }
                            Reply::AlterPartition { result: Err(e), .. } => {
                                pb::AlterPartitionResult {
                                    error_code: e.kafka_code() as i32,
                                    error_message: e.to_string(),
                                    partition: None,
                                }
                            }
                            _ => pb::AlterPartitionResult {
                                error_code: -1,
                                error_message: "no answer for this partition".into(),
                                partition: None,
                            },
                        })
                        .collect(),
                }))
            }
            Reply::ElectLeader { result, .. } => match result {
                Ok(leader) => Some(reply::Result::Leader(leader)),
                Err(e) => {
                    fail(&e);
                    None
                }
            },
            Reply::ElectLeaders(replies) => {
                Some(reply::Result::ElectLeaders(pb::ElectLeaderResults {
                    results: replies
                        .into_iter()
                        .map(|r| match r {
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
                        })
                        .collect(),
                }))
            }
            other => unreachable!("{other:?} is a reply of the table"),
        },
    };
    out.result = result;
    out
}

/// The controller-core reply a wire reply stands for, given the event it
/// answers: the table's requests by their output types, the others here.
pub fn reply_from_pb(event: &Event, r: pb::Reply) -> Reply {
    if let Some(reply) = rw::table_reply_from_pb(event, &r) {
        return reply;
    }
    let err = || rw::remote_error(&r);
    let unit = || {
        if r.error_code == 0 {
            Ok(())
        } else {
            Err(err())
        }
    };
    match event {
        Event::CreateTopic(t) => Reply::CreateTopic {
            topic: t.name.clone(),
            result: unit().map(|_| t.topic_id),
        },
        Event::AlterPartitions(items) => {
            let results = match (&r.result, r.error_code) {
                (Some(reply::Result::AlterPartitions(res)), 0) => res.results.clone(),
                _ => Vec::new(),
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
                            }) => Ok(state_from_pb(p.clone())),
                            Some(x) => Err(ControllerError::Remote {
                                code: x.error_code as i16,
                                message: x.error_message.clone(),
                            }),
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
            result: match (r.result.clone(), r.error_code) {
                (Some(reply::Result::Partition(p)), 0) => Ok(state_from_pb(p)),
                _ => Err(err()),
            },
        },
        Event::ElectLeaders { partitions, .. } => {
            let results = match (&r.result, r.error_code) {
                (Some(reply::Result::ElectLeaders(res)), 0) => res.results.clone(),
                _ => Vec::new(),
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
                            Some(x) => Err(ControllerError::Remote {
                                code: x.error_code as i16,
                                message: x.error_message.clone(),
                            }),
                            None => Err(err()),
                        },
                    })
                    .collect(),
            )
        }
        // Not sent by brokers (see `event_to_pb`).
        _ => Reply::Heartbeat {
            broker: -1,
            result: Err(err()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{BrokerView, ClusterView};
    use crate::Endpoint;

    fn broker(endpoints: Vec<Endpoint>) -> BrokerView {
        BrokerView {
            id: 1,
            host: "10.0.0.1".into(),
            port: 9092,
            rack: None,
            alive: true,
            storage_lost: false,
            storage_losses: 0,
            endpoints,
            broker_epoch: 7,
            in_controlled_shutdown: true,
            software_version: Some("0.2.0".into()),
        }
    }

    fn ep(name: &str, host: &str, port: u16) -> Endpoint {
        Endpoint {
            name: name.into(),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn registrations_and_views_carry_every_listener() {
        let endpoints = vec![
            ep("INTERNAL", "10.0.0.1", 9092),
            ep("EXTERNAL", "kafka.example.com", 30094),
        ];
        let reg = Event::BrokerRegistered {
            broker: 1,
            host: "10.0.0.1".into(),
            port: 9092,
            rack: None,
            directory_id: None,
            previous_broker_epoch: None,
            endpoints: endpoints.clone(),
            software: Default::default(),
        };
        let Some(request::Kind::Register(r)) = event_to_pb(&reg) else {
            panic!("a registration goes over the wire");
        };
        assert_eq!(
            event_from_pb(1, request::Kind::Register(r)),
            reg,
            "registration round trip"
        );

        let mut view = ClusterView::default();
        view.brokers.insert(1, broker(endpoints.clone()));
        let back = view_from_pb(view_to_pb(&view));
        assert_eq!(back.brokers[&1], view.brokers[&1], "the whole broker");
    }

    #[test]
    fn a_broker_is_reached_through_the_listener_asked_on() {
        let b = broker(vec![
            ep("INTERNAL", "10.0.0.1", 9092),
            ep("EXTERNAL", "kafka.example.com", 30094),
        ]);
        assert_eq!(
            b.endpoint(Some("EXTERNAL")),
            Some(("kafka.example.com", 30094))
        );
        assert_eq!(b.endpoint(Some("INTERNAL")), Some(("10.0.0.1", 9092)));
        // Kafka leaves a broker without the listener out of the answer.
        assert_eq!(b.endpoint(Some("SSL")), None);
        // No listener given, or a broker that registered no names: host/port.
        assert_eq!(b.endpoint(None), Some(("10.0.0.1", 9092)));
        assert_eq!(
            broker(vec![]).endpoint(Some("SSL")),
            Some(("10.0.0.1", 9092))
        );
    }

    #[test]
    fn explicit_replica_assignments_cross_the_wire() {
        let mut t = NewTopic::new("t", TopicId(7), 2, 2);
        t.assignment = Some(vec![vec![3, 1], vec![2, 3]]);
        t.validate_only = true;
        let create = Event::CreateTopic(t);
        let kind = event_to_pb(&create).expect("sent by brokers");
        assert_eq!(event_from_pb(1, kind), create);
        let grow = Event::CreatePartitions {
            topic: "t".into(),
            count: 3,
            assignment: Some(vec![vec![1, 2]]),
        };
        assert_eq!(event_from_pb(1, event_to_pb(&grow).unwrap()), grow);
        let placed = Event::CreatePartitions {
            topic: "t".into(),
            count: 3,
            assignment: None,
        };
        assert_eq!(event_from_pb(1, event_to_pb(&placed).unwrap()), placed);
    }

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
