//! The control plane's bytes, pinned: every request a broker sends and every
//! reply the controller answers with, encoded as `pb::Request`/`pb::Reply`
//! and compared with bytes recorded from the hand-written conversions of
//! release 0.2.0, before the requests were declared in one table (#42).
//! Brokers and controllers of other releases read these bytes, so a change
//! to how a request is built must leave them as they are; and the recorded
//! bytes must still decode to the same event or reply. Includes the kinds
//! only older brokers send (`AlterPartition` = 6, one proposal per
//! request; `ElectLeader` = 12, one partition per request).
//!
//! Maps hold one entry at most: prost encodes a `HashMap` in no fixed order.

use std::collections::BTreeMap;

use prost::Message;
use skein_controller::acls::{
    AclOperation, AclPermission, PatternFilter, PatternType, ResourceType,
};
use skein_controller::broker_configs::BrokerConfigChange;
use skein_controller::quotas::QuotaChange;
use skein_controller::rpc::pb::{self, request};
use skein_controller::rpc::wire::{event_from_pb, event_to_pb, reply_from_pb, reply_to_pb};
use skein_controller::{
    AclBinding, AclFilter, AlterPartitionRequest, BrokerSoftware, ControllerError, DirectoryId,
    ElectionType, Endpoint, Event, FeatureRange, NewTopic, PartitionState, ProducerIdBlock,
    QuotaEntityType, Reply, ScramCredential, ScramMechanism, ScramUpsertion, TopicId,
    TopicPartition,
};

/// The broker every request comes from.
const BROKER: i32 = 3;
/// The request id every message carries.
const ID: u64 = 7;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn binding() -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "orders".into(),
        pattern_type: PatternType::Prefixed,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    }
}

fn state() -> PartitionState {
    PartitionState {
        replicas: vec![3, 1, 2],
        isr: vec![3, 1],
        elr: vec![2],
        last_known_elr: vec![],
        leader: 3,
        leader_epoch: 4,
        partition_epoch: 9,
        adding_replicas: vec![2],
        removing_replicas: vec![5],
    }
}

fn alter(partition: u32) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker: BROKER,
        broker_epoch: 11,
        topic: "t".into(),
        topic_id: TopicId(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10),
        partition,
        leader_epoch: 4,
        partition_epoch: 9,
        new_isr: vec![3, 1],
        new_isr_broker_epochs: BTreeMap::from([(1, 12)]),
    }
}

fn one_config() -> BTreeMap<String, String> {
    BTreeMap::from([("retention.ms".to_string(), "1000".to_string())])
}

/// One event of every kind a broker sends, with its recorded bytes.
fn requests() -> Vec<(&'static str, Event, &'static str)> {
    let mut create = NewTopic::new("t", TopicId(0x42), 2, 3);
    create.configs = one_config();
    create.assignment = Some(vec![vec![3, 1], vec![1, 2]]);
    create.validate_only = true;
    vec![
        (
            "Register",
            Event::BrokerRegistered {
                broker: BROKER,
                host: "10.0.0.3".into(),
                port: 9092,
                rack: Some("a".into()),
                directory_id: Some(DirectoryId(0xabcd)),
                previous_broker_epoch: Some(5),
                endpoints: vec![Endpoint {
                    name: "EXTERNAL".into(),
                    host: "kafka.example.com".into(),
                    port: 30094,
                }],
                software: BrokerSoftware {
                    version: Some("0.2.0".into()),
                    features: vec![FeatureRange {
                        name: "skein.version".into(),
                        min: 1,
                        max: 2,
                    }],
                },
            },
            "080752650803120831302e302e302e331884472201612a100000000000000000000000000000abcd380542210a0845585445524e414c12116b61666b612e6578616d706c652e636f6d188eeb014a05302e322e3052130a0d736b65696e2e76657273696f6e10011802",
        ),
        (
            "Register (nothing optional)",
            Event::BrokerRegistered {
                broker: BROKER,
                host: "10.0.0.3".into(),
                port: 9092,
                rack: None,
                directory_id: None,
                previous_broker_epoch: None,
                endpoints: vec![],
                software: BrokerSoftware::default(),
            },
            "0807520f0803120831302e302e302e33188447",
        ),
        (
            "Heartbeat",
            Event::BrokerHeartbeat {
                broker: BROKER,
                broker_epoch: 11,
            },
            "08074a02080b",
        ),
        (
            "ControlledShutdown",
            Event::ControlledShutdownRequested {
                broker: BROKER,
                broker_epoch: 11,
            },
            "08074202080b",
        ),
        ("CreateTopic", Event::CreateTopic(create), "0807123d0a0174121000000000000000000000000000000042180220032a140a0c726574656e74696f6e2e6d7312043130303030013a040a0203013a040a020102"),
        ("DeleteTopic", Event::DeleteTopic { topic: "t".into() }, "08071a030a0174"),
        (
            "CreatePartitions",
            Event::CreatePartitions {
                topic: "t".into(),
                count: 4,
                assignment: Some(vec![vec![2, 3]]),
            },
            "0807220b0a017410041a040a020203",
        ),
        (
            "CreatePartitions (placed)",
            Event::CreatePartitions {
                topic: "t".into(),
                count: 4,
                assignment: None,
            },
            "080722050a01741004",
        ),
        (
            "AlterConfigs",
            Event::TopicConfigChanged {
                topic: "t".into(),
                configs: one_config(),
            },
            "08072a190a017412140a0c726574656e74696f6e2e6d73120431303030",
        ),
        ("AlterPartition", Event::AlterPartition(alter(0)), "08073225080b1201741a100102030405060708090a0b0c0d0e0f10280430093a02030142040801100c"),
        (
            "AllocateProducerIds",
            Event::AllocateProducerIds {
                broker: BROKER,
                broker_epoch: 11,
            },
            "08073a02080b",
        ),
        (
            "ReassignPartition",
            Event::ReassignPartition {
                topic: "t".into(),
                partition: 1,
                target: Some(vec![2, 3]),
                throttled: true,
            },
            "08075a0b0a017410011a0202032801",
        ),
        (
            "ReassignPartition (cancel)",
            Event::ReassignPartition {
                topic: "t".into(),
                partition: 1,
                target: None,
                throttled: false,
            },
            "08075a070a017410012001",
        ),
        (
            "AlterScramCredentials",
            Event::AlterScramCredentials {
                upsertions: vec![ScramUpsertion {
                    user: "alice".into(),
                    mechanism: ScramMechanism::Sha512,
                    credential: ScramCredential {
                        salt: vec![1, 2],
                        stored_key: vec![3, 4],
                        server_key: vec![5, 6],
                        iterations: 4096,
                    },
                }],
                deletions: vec![("bob".into(), ScramMechanism::Sha256)],
            },
            "08076a230a180a05616c69636510021a020102220203042a02050630802012070a03626f621001",
        ),
        (
            "AlterClientQuotas",
            Event::AlterClientQuotas {
                changes: vec![
                    QuotaChange {
                        entity: BTreeMap::from([
                            (QuotaEntityType::User, Some("alice".into())),
                            (QuotaEntityType::ClientId, None),
                        ]),
                        key: "producer_byte_rate".into(),
                        value: Some(1024.0),
                    },
                    QuotaChange {
                        entity: BTreeMap::from([(QuotaEntityType::Ip, None)]),
                        key: "connection_creation_rate".into(),
                        value: None,
                    },
                ],
            },
            "0807725d0a390a0d0a04757365721205616c6963650a0b0a09636c69656e742d6964121270726f64756365725f627974655f726174651900000000000090400a200a040a0269701218636f6e6e656374696f6e5f6372656174696f6e5f72617465",
        ),
        (
            "CreateAcls",
            Event::CreateAcls {
                bindings: vec![binding()],
            },
            "08077a210a1f080212066f72646572731804220a557365723a616c6963652a012a30033803",
        ),
        (
            "DeleteAcls",
            Event::DeleteAcls {
                filters: vec![
                    AclFilter {
                        resource_type: Some(ResourceType::Topic),
                        resource_name: Some("orders".into()),
                        pattern: PatternFilter::Match,
                        principal: None,
                        host: Some("*".into()),
                        operation: Some(AclOperation::Write),
                        permission: None,
                    },
                    AclFilter {
                        pattern: PatternFilter::Is(PatternType::Literal),
                        ..AclFilter::any()
                    },
                ],
            },
            "080782011f0a13080212066f726465727318022a012a300438010a080801180330013801",
        ),
        (
            "AlterBrokerConfigs",
            Event::AlterBrokerConfigs {
                changes: vec![
                    BrokerConfigChange {
                        resource: "".into(),
                        key: "leader.replication.throttled.rate".into(),
                        value: Some("1000".into()),
                    },
                    BrokerConfigChange {
                        resource: "3".into(),
                        key: "follower.replication.throttled.rate".into(),
                        value: None,
                    },
                ],
            },
            "08078a01550a2912216c65616465722e7265706c69636174696f6e2e7468726f74746c65642e726174651a04313030300a280a01331223666f6c6c6f7765722e7265706c69636174696f6e2e7468726f74746c65642e72617465",
        ),
        (
            "AlterPartitions",
            Event::AlterPartitions(vec![alter(0), alter(1)]),
            "08079201500a25080b1201741a100102030405060708090a0b0c0d0e0f10280430093a02030142040801100c0a27080b1201741a100102030405060708090a0b0c0d0e0f102001280430093a02030142040801100c",
        ),
        (
            "ElectLeaders",
            Event::ElectLeaders {
                election: ElectionType::Unclean,
                partitions: vec![TopicPartition::new("a", 0), TopicPartition::new("b", 3)],
            },
            "08079a01100a050a016118010a070a016210031801",
        ),
        (
            "ElectLeaders (preferred)",
            Event::ElectLeaders {
                election: ElectionType::Preferred,
                partitions: vec![TopicPartition::new("a", 0)],
            },
            "08079a01050a030a0161",
        ),
        (
            "UpdateFeature",
            Event::UpdateFeature {
                feature: "skein.version".into(),
                level: 2,
                validate_only: true,
            },
            "0807a201130a0d736b65696e2e76657273696f6e10021801",
        ),
    ]
}

/// Collects every case whose bytes differ, so one run shows them all.
#[derive(Default)]
struct Mismatches(Vec<String>);

impl Mismatches {
    fn check(&mut self, name: &str, actual: &[u8], recorded: &str) {
        if hex(actual) != recorded {
            self.0.push(format!("{name}: \"{}\"", hex(actual)));
        }
    }

    fn assert_none(self) {
        assert!(self.0.is_empty(), "bytes changed:\n{}", self.0.join("\n"));
    }
}

#[test]
fn every_request_kind_keeps_its_bytes_and_reads_back_as_its_event() {
    let mut changed = Mismatches::default();
    for (name, event, recorded) in requests() {
        let kind = event_to_pb(&event).unwrap_or_else(|| panic!("{name} is sent by brokers"));
        let message = pb::Request {
            id: ID,
            kind: Some(kind),
        };
        changed.check(name, &message.encode_to_vec(), recorded);
    }
    changed.assert_none();
    for (name, event, recorded) in requests() {
        let read = pb::Request::decode(unhex(recorded).as_slice()).expect("recorded bytes decode");
        assert_eq!(read.id, ID, "{name}");
        assert_eq!(
            event_from_pb(BROKER, read.kind.expect("a kind")),
            event,
            "{name}: the recorded bytes read back as the event"
        );
    }
}

/// `ElectLeader` (12): a 0.1.0 broker asks for one partition at a time.
#[test]
fn an_old_brokers_single_elect_leader_still_reads() {
    let recorded = "080762070a016110021801";
    let old = pb::Request {
        id: ID,
        kind: Some(request::Kind::ElectLeader(pb::ElectLeader {
            topic: "a".into(),
            partition: 2,
            unclean: true,
        })),
    };
    let mut changed = Mismatches::default();
    changed.check("ElectLeader", &old.encode_to_vec(), recorded);
    changed.assert_none();
    let read = pb::Request::decode(unhex(recorded).as_slice()).expect("decodes");
    assert_eq!(
        event_from_pb(BROKER, read.kind.expect("a kind")),
        Event::ElectLeaders {
            election: ElectionType::Unclean,
            partitions: vec![TopicPartition::new("a", 2)],
        }
    );
}

/// Messages no broker of ours sends (unknown codes, out-of-range numbers,
/// fields the controller does not read), the bytes they encode to, and the
/// event release 0.2.0 read from them: a peer's odd input still reads as it
/// did. `Register.broker_id` is not read: the session knows its broker.
fn odd_requests() -> Vec<(&'static str, request::Kind, &'static str, Event)> {
    let acl_codes = pb::AclBinding {
        resource_type: 2,
        resource_name: "orders".into(),
        pattern_type: 3,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: 99,
        permission: 3,
    };
    vec![
        (
            "Register (another id, a short directory id, ports and levels out of range)",
            request::Kind::Register(pb::Register {
                broker_id: 9,
                host: "h".into(),
                port: 9092,
                rack: None,
                directory_id: vec![1, 2, 3],
                cluster_id: Some("c".into()),
                previous_broker_epoch: None,
                endpoints: vec![
                    pb::Endpoint {
                        name: "BIG".into(),
                        host: "h".into(),
                        port: 70_000,
                    },
                    pb::Endpoint {
                        name: "OK".into(),
                        host: "h".into(),
                        port: 9093,
                    },
                ],
                software_version: None,
                supported_features: vec![pb::FeatureRange {
                    name: "skein.version".into(),
                    min_level: -5,
                    max_level: 40_000,
                }],
            }),
            "0807524a08091201681884472a03010203320163420c0a0342494712016818f0a204420a0a024f4b120168188547521e0a0d736b65696e2e76657273696f6e10fbffffffffffffffff0118c0b802",
            Event::BrokerRegistered {
                broker: BROKER,
                host: "h".into(),
                port: 9092,
                rack: None,
                directory_id: None,
                previous_broker_epoch: None,
                endpoints: vec![Endpoint {
                    name: "OK".into(),
                    host: "h".into(),
                    port: 9093,
                }],
                software: BrokerSoftware {
                    version: None,
                    features: vec![FeatureRange {
                        name: "skein.version".into(),
                        min: 0,
                        max: i16::MAX,
                    }],
                },
            },
        ),
        (
            "CreatePartitions (an empty assignment)",
            request::Kind::CreatePartitions(pb::CreatePartitions {
                topic: "t".into(),
                count: 2,
                assignment: vec![],
            }),
            "080722050a01741002",
            Event::CreatePartitions {
                topic: "t".into(),
                count: 2,
                assignment: None,
            },
        ),
        (
            "ReassignPartition (cancel with a target)",
            request::Kind::ReassignPartition(pb::ReassignPartition {
                topic: "t".into(),
                partition: 1,
                target: vec![2],
                cancel: true,
                throttled: true,
            }),
            "08075a0c0a017410011a010220012801",
            Event::ReassignPartition {
                topic: "t".into(),
                partition: 1,
                target: None,
                throttled: true,
            },
        ),
        (
            "UpdateFeature (a negative level)",
            request::Kind::UpdateFeature(pb::UpdateFeature {
                name: "skein.version".into(),
                level: -1,
                validate_only: false,
            }),
            "0807a2011a0a0d736b65696e2e76657273696f6e10ffffffffffffffffff01",
            Event::UpdateFeature {
                feature: "skein.version".into(),
                level: 0,
                validate_only: false,
            },
        ),
        (
            "UpdateFeature (a level out of range)",
            request::Kind::UpdateFeature(pb::UpdateFeature {
                name: "skein.version".into(),
                level: 40_000,
                validate_only: false,
            }),
            "0807a201130a0d736b65696e2e76657273696f6e10c0b802",
            Event::UpdateFeature {
                feature: "skein.version".into(),
                level: i16::MAX,
                validate_only: false,
            },
        ),
        (
            "CreateAcls (an unknown operation)",
            request::Kind::CreateAcls(pb::CreateAcls {
                bindings: vec![acl_codes.clone()],
            }),
            "08077a210a1f080212066f72646572731803220a557365723a616c6963652a012a30633803",
            Event::CreateAcls {
                bindings: vec![AclBinding {
                    resource_type: ResourceType::Topic,
                    resource_name: String::new(),
                    pattern_type: PatternType::Literal,
                    principal: String::new(),
                    host: String::new(),
                    operation: AclOperation::All,
                    permission: AclPermission::Deny,
                }],
            },
        ),
        (
            "DeleteAcls (an unknown pattern)",
            request::Kind::DeleteAcls(pb::DeleteAcls {
                filters: vec![pb::AclFilter {
                    resource_type: 1,
                    resource_name: None,
                    pattern_type: 9,
                    principal: None,
                    host: None,
                    operation: 1,
                    permission: 1,
                }],
            }),
            "080782010a0a080801180930013801",
            Event::DeleteAcls {
                filters: vec![AclFilter {
                    resource_name: Some(String::new()),
                    pattern: PatternFilter::Is(PatternType::Literal),
                    ..AclFilter::any()
                }],
            },
        ),
        (
            "AlterClientQuotas (an unknown entity type)",
            request::Kind::AlterClientQuotas(pb::AlterClientQuotas {
                changes: vec![pb::QuotaChange {
                    entity: vec![pb::QuotaEntityPart {
                        entity_type: "group".into(),
                        name: Some("g".into()),
                    }],
                    key: "producer_byte_rate".into(),
                    value: Some(1.0),
                }],
            }),
            "0807722b0a290a0a0a0567726f7570120167121270726f64756365725f627974655f7261746519000000000000f03f",
            Event::AlterClientQuotas {
                changes: vec![QuotaChange {
                    entity: BTreeMap::new(),
                    key: "producer_byte_rate".into(),
                    value: Some(1.0),
                }],
            },
        ),
        (
            "AlterScramCredentials (an unknown mechanism)",
            request::Kind::AlterScramCredentials(pb::AlterScramCredentials {
                upsertions: vec![pb::ScramCredential {
                    user: "alice".into(),
                    mechanism: 7,
                    salt: vec![1],
                    stored_key: vec![2],
                    server_key: vec![3],
                    iterations: 4096,
                }],
                deletions: vec![pb::ScramDeletion {
                    user: "bob".into(),
                    mechanism: 1,
                }],
            }),
            "08076a200a150a05616c69636510071a01012201022a010330802012070a03626f621001",
            Event::AlterScramCredentials {
                upsertions: vec![],
                deletions: vec![
                    ("bob".into(), ScramMechanism::Sha256),
                    (String::new(), ScramMechanism::Sha256),
                ],
            },
        ),
    ]
}

#[test]
fn odd_requests_keep_their_bytes_and_read_as_release_0_2_0_read_them() {
    let mut changed = Mismatches::default();
    for (name, kind, recorded, _) in odd_requests() {
        let message = pb::Request {
            id: ID,
            kind: Some(kind),
        };
        changed.check(name, &message.encode_to_vec(), recorded);
    }
    changed.assert_none();
    for (name, _, recorded, event) in odd_requests() {
        let read = pb::Request::decode(unhex(recorded).as_slice()).expect("recorded bytes decode");
        assert_eq!(
            event_from_pb(BROKER, read.kind.expect("a kind")),
            event,
            "{name}"
        );
    }
}

#[test]
fn events_that_are_not_requests_are_not_carried() {
    for event in [
        Event::Tick,
        Event::BrokerLost { broker: BROKER },
        Event::AlterReplicationFactor {
            topic: "t".into(),
            replication_factor: 3,
        },
    ] {
        assert_eq!(event_to_pb(&event), None, "{}", event.name());
    }
}

/// How a controller error reads at the broker's end.
fn remote(e: &ControllerError) -> ControllerError {
    ControllerError::Remote {
        code: e.kafka_code(),
        message: e.to_string(),
    }
}

/// Each request with a reply the controller may give, the recorded bytes,
/// and the reply the broker reads from them.
fn replies() -> Vec<(&'static str, Event, Option<Reply>, &'static str, Reply)> {
    let by_name = |name: &str| -> Event {
        requests()
            .into_iter()
            .find(|(n, _, _)| *n == name)
            .unwrap_or_else(|| panic!("no request {name}"))
            .1
    };
    let refused = ControllerError::StaleBrokerEpoch;
    let unknown = ControllerError::UnknownTopicOrPartition;
    let elect_results = |r: Vec<Result<i32, ControllerError>>| {
        Reply::ElectLeaders(
            [("a", 0), ("b", 3)]
                .into_iter()
                .zip(r)
                .map(|((t, p), result)| Reply::ElectLeader {
                    topic: t.into(),
                    partition: p,
                    result,
                })
                .collect(),
        )
    };
    let alter_results = |r: Vec<Result<PartitionState, ControllerError>>| {
        Reply::AlterPartitions(
            r.into_iter()
                .enumerate()
                .map(|(i, result)| Reply::AlterPartition {
                    broker: BROKER,
                    topic: "t".into(),
                    partition: i as u32,
                    result,
                })
                .collect(),
        )
    };
    let same = |r: &Reply| Some(r.clone());
    let registered = Reply::BrokerRegistered {
        broker: BROKER,
        result: Ok(12),
    };
    let heartbeat_refused = Reply::Heartbeat {
        broker: BROKER,
        result: Err(refused.clone()),
    };
    let shutdown = Reply::ControlledShutdown {
        broker: BROKER,
        result: Ok(()),
    };
    let created = Reply::CreateTopic {
        topic: "t".into(),
        result: Ok(TopicId(0x42)),
    };
    let altered = Reply::AlterPartition {
        broker: BROKER,
        topic: "t".into(),
        partition: 0,
        result: Ok(state()),
    };
    let ids = Reply::AllocateProducerIds {
        broker: BROKER,
        result: Ok(ProducerIdBlock {
            first_producer_id: 1000,
            size: 1000,
        }),
    };
    let feature = Reply::UpdateFeature {
        feature: "skein.version".into(),
        result: Ok(1),
    };
    let deleted = Reply::DeleteAcls {
        result: Ok(vec![vec![binding()], vec![]]),
    };
    vec![
        (
            "Register",
            by_name("Register"),
            same(&registered),
            "0807200c",
            registered,
        ),
        (
            "Heartbeat (refused)",
            by_name("Heartbeat"),
            same(&heartbeat_refused),
            "0807104d1a3462726f6b65722065706f636820646f6573206e6f74206d61746368207468652063757272656e7420726567697374726174696f6e",
            Reply::Heartbeat {
                broker: BROKER,
                result: Err(remote(&refused)),
            },
        ),
        (
            "ControlledShutdown",
            by_name("ControlledShutdown"),
            same(&shutdown),
            "0807",
            shutdown,
        ),
        (
            "CreateTopic",
            by_name("CreateTopic"),
            same(&created),
            "0807",
            created,
        ),
        (
            "CreateTopic (exists)",
            by_name("CreateTopic"),
            Some(Reply::CreateTopic {
                topic: "t".into(),
                result: Err(ControllerError::TopicAlreadyExists("t".into())),
            }),
            "080710241a18746f7069632027742720616c726561647920657869737473",
            Reply::CreateTopic {
                topic: "t".into(),
                result: Err(remote(&ControllerError::TopicAlreadyExists("t".into()))),
            },
        ),
        (
            "DeleteTopic (unknown)",
            by_name("DeleteTopic"),
            Some(Reply::DeleteTopic {
                topic: "t".into(),
                result: Err(unknown.clone()),
            }),
            "080710031a1a756e6b6e6f776e20746f706963206f7220706172746974696f6e",
            Reply::DeleteTopic {
                topic: "t".into(),
                result: Err(remote(&unknown)),
            },
        ),
        (
            "CreatePartitions",
            by_name("CreatePartitions"),
            Some(Reply::CreatePartitions {
                topic: "t".into(),
                result: Ok(()),
            }),
            "0807",
            Reply::CreatePartitions {
                topic: "t".into(),
                result: Ok(()),
            },
        ),
        (
            "AlterConfigs",
            by_name("AlterConfigs"),
            Some(Reply::AlterConfigs {
                topic: "t".into(),
                result: Ok(()),
            }),
            "0807",
            Reply::AlterConfigs {
                topic: "t".into(),
                result: Ok(()),
            },
        ),
        (
            "AlterPartition",
            by_name("AlterPartition"),
            same(&altered),
            "08072a180a03030102120203011803200428093201023a0105420102",
            altered,
        ),
        (
            "AllocateProducerIds",
            by_name("AllocateProducerIds"),
            same(&ids),
            "0807320608e80710e807",
            ids,
        ),
        (
            "ReassignPartition",
            by_name("ReassignPartition"),
            Some(Reply::ReassignPartition {
                topic: "t".into(),
                partition: 1,
                result: Ok(()),
            }),
            "0807",
            Reply::ReassignPartition {
                topic: "t".into(),
                partition: 1,
                result: Ok(()),
            },
        ),
        (
            "AlterScramCredentials",
            by_name("AlterScramCredentials"),
            Some(Reply::AlterScramCredentials { result: Ok(()) }),
            "0807",
            Reply::AlterScramCredentials { result: Ok(()) },
        ),
        (
            "AlterClientQuotas",
            by_name("AlterClientQuotas"),
            Some(Reply::AlterClientQuotas { result: Ok(()) }),
            "0807",
            Reply::AlterClientQuotas { result: Ok(()) },
        ),
        (
            "CreateAcls",
            by_name("CreateAcls"),
            Some(Reply::CreateAcls { result: Ok(()) }),
            "0807",
            Reply::CreateAcls { result: Ok(()) },
        ),
        (
            "DeleteAcls",
            by_name("DeleteAcls"),
            same(&deleted),
            "080742250a210a1f080212066f72646572731804220a557365723a616c6963652a012a300338030a00",
            deleted,
        ),
        (
            "AlterBrokerConfigs",
            by_name("AlterBrokerConfigs"),
            Some(Reply::AlterBrokerConfigs { result: Ok(()) }),
            "0807",
            Reply::AlterBrokerConfigs { result: Ok(()) },
        ),
        (
            "AlterPartitions",
            by_name("AlterPartitions"),
            Some(alter_results(vec![Ok(state()), Err(refused.clone())])),
            "08074a560a1a1a180a03030102120203011803200428093201023a01054201020a38084d123462726f6b65722065706f636820646f6573206e6f74206d61746368207468652063757272656e7420726567697374726174696f6e",
            alter_results(vec![Ok(state()), Err(remote(&refused))]),
        ),
        (
            "ElectLeaders",
            by_name("ElectLeaders"),
            Some(elect_results(vec![
                Ok(2),
                Err(ControllerError::ElectionNotNeeded),
            ])),
            "0807522f0a0218020a290854121a6c656164657220656c656374696f6e206e6f74206e656564656418ffffffffffffffffff01",
            elect_results(vec![
                Ok(2),
                Err(remote(&ControllerError::ElectionNotNeeded)),
            ]),
        ),
        (
            "UpdateFeature",
            by_name("UpdateFeature"),
            same(&feature),
            "08075801",
            feature,
        ),
        (
            "no answer",
            by_name("Heartbeat"),
            None,
            "080710ffffffffffffffffff011a1d74686520636f6e74726f6c6c65722067617665206e6f20616e73776572",
            Reply::Heartbeat {
                broker: BROKER,
                result: Err(ControllerError::Remote {
                    code: -1,
                    message: "the controller gave no answer".into(),
                }),
            },
        ),
    ]
}

#[test]
fn every_reply_kind_keeps_its_bytes_and_reads_back_as_its_reply() {
    let mut changed = Mismatches::default();
    for (name, _, reply, recorded, _) in replies() {
        changed.check(name, &reply_to_pb(ID, reply).encode_to_vec(), recorded);
    }
    changed.assert_none();
    for (name, event, _, recorded, read_back) in replies() {
        let read = pb::Reply::decode(unhex(recorded).as_slice()).expect("recorded bytes decode");
        assert_eq!(read.id, ID, "{name}");
        assert_eq!(reply_from_pb(&event, read), read_back, "{name}");
    }
}

/// A 0.1.0 controller answers `ElectLeader` (12) with the leader alone.
#[test]
fn an_old_single_leader_reply_keeps_its_bytes() {
    let mut changed = Mismatches::default();
    changed.check(
        "ElectLeader reply",
        &reply_to_pb(
            ID,
            Some(Reply::ElectLeader {
                topic: "a".into(),
                partition: 2,
                result: Ok(3),
            }),
        )
        .encode_to_vec(),
        "08073803",
    );
    changed.assert_none();
}
