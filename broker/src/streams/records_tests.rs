//! Tests of `records.rs`. The golden bytes were produced by Kafka 4.4.0's
//! own `StreamsCoordinatorRecordHelpers` and `GroupCoordinatorRecordSerde`
//! (`serializeKey`/`serializeValue`), from the same data as the models
//! below.

use super::*;

fn unhex(s: &str) -> Bytes {
    let s = s.replace(' ', "");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect::<Vec<u8>>()
        .into()
}

fn task(s: &str, p: i32) -> Task {
    (s.to_string(), p)
}

fn set(ts: &[(&str, i32)]) -> BTreeSet<Task> {
    ts.iter().map(|(s, p)| task(s, *p)).collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn kvs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Decodes a whole record (key with its type, value).
fn decode_record(k: &Bytes, v: Option<&Bytes>) -> Result<(String, StreamsRecord), FormatError> {
    let mut k = k.clone();
    let version = get_i16(&mut k)?;
    decode(version, &mut k, v)
}

/// Asserts `key`/`value` are Kafka's bytes and decode back to `rec`.
fn check_golden(key: Bytes, value: Bytes, kafka_key: &str, kafka_value: &str, rec: StreamsRecord) {
    assert_eq!(key, unhex(kafka_key), "key of {rec:?}");
    assert_eq!(value, unhex(kafka_value), "value of {rec:?}");
    let (group, back) = decode_record(&unhex(kafka_key), Some(&unhex(kafka_value))).unwrap();
    assert_eq!(group, "grp");
    assert_eq!(back, rec);
}

fn golden_metadata() -> GroupMetadata {
    GroupMetadata {
        epoch: 7,
        metadata_hash: 0x0102030405060708,
        validated_topology_epoch: 3,
        last_assignment_configs: kvs(&[
            ("num.standby.replicas", "1"),
            ("rack.aware.assignment.tags", "zone"),
        ])
        .into_iter()
        .collect(),
    }
}

fn golden_member() -> MemberMetadata {
    MemberMetadata {
        instance_id: Some("i1".into()),
        rack_id: Some("r1".into()),
        client_id: "cid".into(),
        client_host: "/10.0.0.1".into(),
        rebalance_timeout_ms: 30_000,
        topology_epoch: 2,
        process_id: "p1".into(),
        user_endpoint: Some(Endpoint {
            host: "h".into(),
            port: 65000,
        }),
        client_tags: kvs(&[("zone", "a"), ("az", "b"), ("k", "")])
            .into_iter()
            .collect(),
    }
}

fn golden_current() -> Member {
    Member {
        epoch: 6,
        previous_epoch: 5,
        state: MemberState::UnrevokedTasks,
        process_id: String::new(),
        assigned: Tasks {
            active: BTreeMap::from([(task("0", 0), 6), (task("0", 1), 4), (task("1", 2), 5)]),
            standby: set(&[("2", 1)]),
            warmup: set(&[("3", 0)]),
        },
        pending_revocation: Tasks {
            active: BTreeMap::from([(task("1", 0), 3)]),
            standby: set(&[("0", 5)]),
            warmup: set(&[("4", 7)]),
        },
    }
}

fn golden_target() -> Target {
    Target {
        active: set(&[("1", 2), ("1", 0), ("0", 1)]),
        standby: set(&[("0", 3)]),
        warmup: set(&[("10", 0)]),
    }
}

/// One subtopology with a changelog (with a config) and a copartition
/// group.
fn golden_topology() -> Topology {
    Topology {
        epoch: 2,
        subtopologies: vec![Subtopology {
            id: "0".into(),
            source_topics: strs(&["in"]),
            state_changelog_topics: vec![TopicInfo {
                name: "app-store-changelog".into(),
                partitions: 0,
                replication_factor: 0,
                configs: kvs(&[("cleanup.policy", "compact")]),
            }],
            copartition_groups: vec![CopartitionGroup {
                source_topics: vec![0],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Every list non-empty, in an order that is not sorted (kept as sent).
fn full_topology() -> Topology {
    Topology {
        epoch: 3,
        subtopologies: vec![
            Subtopology {
                id: "1".into(),
                source_topics: strs(&["z-in", "a-in"]),
                source_topic_regex: strs(&["re.*"]),
                state_changelog_topics: vec![TopicInfo {
                    name: "c1".into(),
                    partitions: 0,
                    replication_factor: 3,
                    configs: kvs(&[("z", "1"), ("a", "2")]),
                }],
                repartition_sink_topics: strs(&["rs"]),
                repartition_source_topics: vec![TopicInfo {
                    name: "rp".into(),
                    partitions: 4,
                    replication_factor: -1,
                    configs: vec![],
                }],
                copartition_groups: vec![CopartitionGroup {
                    source_topics: vec![1, 0],
                    source_topic_regex: vec![0],
                    repartition_source_topics: vec![0],
                }],
            },
            Subtopology {
                id: "0".into(),
                source_topics: strs(&["rs"]),
                ..Default::default()
            },
        ],
    }
}

#[test]
fn golden_metadata_bytes_match_kafka() {
    check_golden(
        group_record_key(METADATA_KEY, "grp", None),
        metadata_value(&golden_metadata()),
        "00110003677270",
        "000000000007010203040506070802000400000003013a03156e756d2e7374616e6462792e72\
         65706c696361730231001b7261636b2e61776172652e61737369676e6d656e742e7461677305\
         7a6f6e6500",
        StreamsRecord::Metadata(Some(golden_metadata())),
    );
    // Defaults: no tagged field at all (Kafka's empty config list included).
    check_golden(
        group_record_key(METADATA_KEY, "grp", None),
        metadata_value(&GroupMetadata::default()),
        "00110003677270",
        "000000000001000000000000000000",
        StreamsRecord::Metadata(Some(GroupMetadata::default())),
    );
}

#[test]
fn golden_member_bytes_match_kafka() {
    check_golden(
        group_record_key(MEMBER_KEY, "grp", Some("m1")),
        member_value(&golden_member()),
        "0013000367727000026d31",
        "0000036931037231046369640a2f31302e302e302e310000753000000002037031010268fde8\
         000403617a026200026b0100057a6f6e6502610000",
        StreamsRecord::Member("m1".into(), Some(golden_member())),
    );
    check_golden(
        group_record_key(MEMBER_KEY, "grp", Some("m2")),
        member_value(&MemberMetadata::joining()),
        "0013000367727000026d32",
        "000000000101ffffffffffffffff01ff0100",
        StreamsRecord::Member("m2".into(), Some(MemberMetadata::joining())),
    );
}

#[test]
fn golden_target_bytes_match_kafka() {
    check_golden(
        group_record_key(TARGET_METADATA_KEY, "grp", None),
        target_metadata_value(6, 1_700_000_000_123),
        "00140003677270",
        "0000000000060100080000018bcfe5687b",
        StreamsRecord::TargetMetadata(Some((6, 1_700_000_000_123))),
    );
    check_golden(
        group_record_key(TARGET_METADATA_KEY, "grp", None),
        target_metadata_value(1, 0),
        "00140003677270",
        "00000000000100",
        StreamsRecord::TargetMetadata(Some((1, 0))),
    );
    check_golden(
        group_record_key(TARGET_MEMBER_KEY, "grp", Some("m1")),
        target_value(&golden_target()),
        "0015000367727000026d31",
        "00000302300200000001000231030000000000000002000202300200000003000203313002000000000000",
        StreamsRecord::TargetMember("m1".into(), Some(golden_target())),
    );
}

#[test]
fn golden_current_assignment_bytes_match_kafka() {
    check_golden(
        group_record_key(CURRENT_KEY, "grp", Some("m1")),
        current_value(&golden_current()),
        "0016000367727000026d31",
        "00000000000600000005020302300300000000000000010100090300000006000000040231020000\
         000201000502000000050202320200000001000202330200000000000202310200000000010005\
         020000000302023002000000050002023402000000070000",
        StreamsRecord::Current("m1".into(), Some(golden_current())),
    );
    let fresh = StreamsMember::new().current;
    check_golden(
        group_record_key(CURRENT_KEY, "grp", Some("m2")),
        current_value(&fresh),
        "0016000367727000026d32",
        "000000000000000000000101010101010100",
        StreamsRecord::Current("m2".into(), Some(fresh)),
    );
}

#[test]
fn golden_topology_bytes_match_kafka() {
    check_golden(
        group_record_key(TOPOLOGY_KEY, "grp", None),
        topology_value(&golden_topology()),
        "00170003677270",
        "0000000000020202300203696e0102146170702d73746f72652d6368616e67656c6f670000000000\
         00020f636c65616e75702e706f6c69637908636f6d7061637400000101020200000101000000",
        StreamsRecord::Topology(Some(golden_topology())),
    );
    check_golden(
        group_record_key(TOPOLOGY_KEY, "grp", None),
        topology_value(&full_topology()),
        "00170003677270",
        "00000000000303023103057a2d696e05612d696e020572652e2a0203633100000000000303027a02\
         3100026102320000020372730203727000000004ffff010002030001000002000002000000000230\
         0203727301010101010000",
        StreamsRecord::Topology(Some(full_topology())),
    );
}

/// A group with every record and field in use; memory-only fields set to
/// something a load does not bring back.
fn full_group() -> StreamsGroup {
    let mut g = StreamsGroup::new("app");
    g.meta = golden_metadata();
    g.assignment_epoch = 6;
    g.assignment_timestamp_ms = 1_700_000_000_123;
    g.topology = Some(full_topology());
    let mut m1 = StreamsMember::new();
    m1.meta = golden_member();
    m1.current = golden_current();
    m1.current.process_id = "p1".into();
    m1.task_offsets.insert(task("0", 0), 10);
    m1.task_end_offsets.insert(task("0", 0), 12);
    m1.session_deadline_ms = 1;
    m1.rebalance_deadline_ms = Some(2);
    let mut m2 = StreamsMember::new();
    m2.meta = MemberMetadata {
        client_id: "c2".into(),
        rebalance_timeout_ms: 1000,
        process_id: "p2".into(),
        ..MemberMetadata::joining()
    };
    m2.current.epoch = 6;
    m2.current.previous_epoch = 6;
    m2.current.process_id = "p2".into();
    m2.current.assigned.active.insert(task("10", 1), 2);
    m2.current.assigned.active.insert(task("9", 0), 6);
    let mut m3 = m2.clone();
    m3.current.state = MemberState::UnreleasedTasks;
    m3.current.assigned = Tasks::default();
    m3.current.pending_revocation.standby = set(&[("1", 1)]);
    g.members.insert("m1".into(), m1);
    g.members.insert("m2".into(), m2);
    g.members.insert("m3".into(), m3);
    g.targets.insert("m1".into(), golden_target());
    g.targets.insert("m2".into(), Target::default());
    g.endpoint_epoch = 4;
    g.shutdown_requester = Some("m2".into());
    g.initial_delay_until = Some(99);
    g
}

fn load(recs: impl IntoIterator<Item = (Bytes, Option<Bytes>)>) -> StoredStreamsGroup {
    let mut stored = StoredStreamsGroup::default();
    for (k, v) in recs {
        let (group, rec) = decode_record(&k, v.as_ref()).unwrap();
        assert_eq!(group, "app");
        stored.apply(rec);
    }
    stored
}

#[test]
fn full_group_round_trips_through_records() {
    let g = full_group();
    let recs = group_records(&g);
    // 17, 20, 23; 19 and 22 per member; 21 per target.
    assert_eq!(recs.len(), 3 + 2 * 3 + 2);
    // Keys are Kafka's: type, group id, member id.
    assert!(recs.contains_key(&Bytes::from_static(b"\x00\x13\x00\x03app\x00\x02m1")));
    assert!(recs.contains_key(&Bytes::from_static(b"\x00\x17\x00\x03app")));
    let back = load(recs.clone().into_iter().map(|(k, v)| (k, Some(v))))
        .build("app", 1000, 45_000)
        .unwrap();
    let mut expected = g.clone();
    expected.endpoint_epoch = 0;
    expected.shutdown_requester = None;
    expected.initial_delay_until = None;
    for (id, m) in expected.members.iter_mut() {
        m.task_offsets.clear();
        m.task_end_offsets.clear();
        m.session_deadline_ms = 46_000;
        m.rebalance_deadline_ms = (id == "m1").then_some(31_000);
    }
    assert_eq!(back, expected);
    // The pending revocations and their epochs came back as written.
    assert_eq!(
        back.members["m1"].current.pending_revocation.active[&task("1", 0)],
        3
    );
    assert_eq!(
        back.members["m2"].current.assigned.active[&task("10", 1)],
        2
    );
    assert_eq!(group_records(&back), recs);
}

#[test]
fn tombstones_remove_members_and_the_group() {
    let g = full_group();
    let recs: Vec<_> = group_records(&g)
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect();
    // m2 leaves: tombstones of its 22, 21 and 19.
    let leave = [CURRENT_KEY, TARGET_MEMBER_KEY, MEMBER_KEY]
        .map(|t| (group_record_key(t, "app", Some("m2")), None));
    let mut stored = load(recs.iter().cloned().chain(leave));
    let back = stored.clone().build("app", 0, 10).unwrap();
    assert_eq!(back.members.keys().collect::<Vec<_>>(), ["m1", "m3"]);
    assert_eq!(back.targets.keys().collect::<Vec<_>>(), ["m1"]);

    // Deleting the group: Kafka's order, then nothing is rebuilt.
    let tombstones = group_tombstones(&g);
    let types: Vec<i16> = tombstones
        .iter()
        .map(|(k, v)| {
            assert!(v.is_none());
            i16::from_be_bytes([k[0], k[1]])
        })
        .collect();
    assert_eq!(
        types,
        [22, 22, 22, 21, 21, 21, 20, 19, 19, 19, 17, 23],
        "22 of every member, 21, 20, 19 of every member, 17, 23"
    );
    for (k, v) in tombstones {
        stored.apply(decode_record(&k, v.as_ref()).unwrap().1);
    }
    assert!(stored.build("app", 0, 10).is_none());

    // Without key 17 there is no group, whatever else is there.
    let mut stored = load(recs);
    stored.apply(StreamsRecord::Metadata(None));
    assert!(stored.build("app", 0, 10).is_none());
}

/// A key 22 value (Kafka's layout) of member epoch 9 with active tasks
/// 0_0, 0_1 and 1_3, 1_4 pending revocation, whose entries carry the given
/// `AssignmentEpochs`: `None` writes no tag, `Some(None)` a null array.
fn current_with_epochs(epochs: Option<Option<&[i32]>>) -> Bytes {
    let active = |b: &mut BytesMut, subtopology: &str, partitions: [i32; 2]| {
        put_len(b, 1);
        put_compact_str(b, subtopology);
        put_i32s(b, partitions.into_iter());
        match epochs {
            None => put_no_tags(b),
            Some(None) => put_tags(b, &[(0, Bytes::from_static(&[0]))]),
            Some(Some(e)) => put_tags(b, &[(0, encoded(|t| put_i32s(t, e.iter().copied())))]),
        }
    };
    value(
        |b| {
            b.put_i32(9);
            b.put_i32(8);
            b.put_i8(MemberState::Stable.code());
            active(b, "0", [0, 1]);
            put_len(b, 0); // standby
            put_len(b, 0); // warm-up
            active(b, "1", [3, 4]);
            put_len(b, 0);
            put_len(b, 0);
        },
        &[],
    )
}

#[test]
fn active_tasks_without_assignment_epochs_get_the_member_epoch() {
    let key = group_record_key(CURRENT_KEY, "grp", Some("m"));
    let active = |v: Bytes| {
        let Ok((_, StreamsRecord::Current(_, Some(m)))) = decode_record(&key, Some(&v)) else {
            panic!("not decoded")
        };
        (m.assigned.active, m.pending_revocation.active)
    };
    let all_nine = (
        BTreeMap::from([(task("0", 0), 9), (task("0", 1), 9)]),
        BTreeMap::from([(task("1", 3), 9), (task("1", 4), 9)]),
    );
    // Missing, null, or of the wrong length: the member epoch.
    assert_eq!(active(current_with_epochs(None)), all_nine);
    assert_eq!(active(current_with_epochs(Some(None))), all_nine);
    assert_eq!(active(current_with_epochs(Some(Some(&[2])))), all_nine);
    assert_eq!(
        active(current_with_epochs(Some(Some(&[2, 3, 4])))),
        all_nine
    );
    // One per partition: taken, in partition order.
    assert_eq!(
        active(current_with_epochs(Some(Some(&[2, 3])))),
        (
            BTreeMap::from([(task("0", 0), 2), (task("0", 1), 3)]),
            BTreeMap::from([(task("1", 3), 2), (task("1", 4), 3)]),
        )
    );
}

#[test]
fn malformed_records_are_errors_not_panics() {
    for (k, v) in group_records(&full_group()) {
        assert!(decode_record(&k, Some(&v)).is_ok());
        // Every truncation of a value or key fails.
        for n in 0..v.len() {
            assert!(decode_record(&k, Some(&v.slice(..n))).is_err(), "{k:?} {n}");
        }
        for n in 2..k.len() {
            assert!(decode_record(&k.slice(..n), Some(&v)).is_err(), "{k:?} {n}");
        }
        // Garbage in every byte: whatever comes out, no panic.
        for i in 2..v.len() {
            for x in [0x00, 0x7f, 0x80, 0xff] {
                let mut bad = v.to_vec();
                bad[i] = x;
                let _ = decode_record(&k, Some(&Bytes::from(bad)));
            }
        }
    }
    // Pseudo-random values for every type.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for t in [17, 19, 20, 21, 22, 23] {
        let key = group_record_key(t, "g", Some("m"));
        for len in 0..300 {
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let _ = decode_record(&key, Some(&Bytes::from(v)));
        }
    }
    // Huge counts and sizes announced by a few bytes.
    for (t, v) in [
        (17, "000000000001000000000000000001 01 ffffffff0f"),
        (19, "0000ffffffff0f"),
        (20, "0000 00000001 01 00 ffffffff0f"),
        (21, "0000ffffffff0f"),
        (
            22,
            "0000 00000001 00000001 01 02 0230 0200000000 01 00 ffffffff0f",
        ),
        (
            22,
            "0000 00000001 00000001 01 02 0230 0200000000 01 00 05 ffffffff0f",
        ),
        (23, "000000000001ffffffff0f"),
    ] {
        let key = group_record_key(t, "g", Some("m"));
        assert!(decode_record(&key, Some(&unhex(v))).is_err(), "{t}");
    }
    // Not UTF-8, a negative value version, a type that is not ours.
    let key = group_record_key(METADATA_KEY, "g", None);
    let mut bad = group_record_key(METADATA_KEY, "g", None).to_vec();
    bad[4] = 0xff;
    assert!(decode_record(&Bytes::from(bad), None).is_err());
    assert!(decode_record(&key, Some(&unhex("ffff00000001"))).is_err());
    assert!(decode(18, &mut Bytes::from_static(b"\x00\x01g"), None).is_err());
    assert!(!is_streams_key(18) && !is_streams_key(8) && !is_streams_key(24));
    assert!([17, 19, 20, 21, 22, 23].into_iter().all(is_streams_key));
}

#[test]
fn later_value_versions_read_their_version_0_prefix() {
    let later = |v: Bytes| {
        let mut b = v.to_vec();
        b[1] = 1;
        b.extend_from_slice(b"\x07\x00\x01trailing");
        Bytes::from(b)
    };
    let key = group_record_key(MEMBER_KEY, "grp", Some("m1"));
    let (_, rec) = decode_record(&key, Some(&later(member_value(&golden_member())))).unwrap();
    assert_eq!(
        rec,
        StreamsRecord::Member("m1".into(), Some(golden_member()))
    );
    let key = group_record_key(TARGET_METADATA_KEY, "grp", None);
    let (_, rec) = decode_record(&key, Some(&later(target_metadata_value(4, 0)))).unwrap();
    assert_eq!(rec, StreamsRecord::TargetMetadata(Some((4, 0))));
    let key = group_record_key(TOPOLOGY_KEY, "grp", None);
    let (_, rec) = decode_record(&key, Some(&later(topology_value(&full_topology())))).unwrap();
    assert_eq!(rec, StreamsRecord::Topology(Some(full_topology())));
}

#[test]
fn build_takes_members_from_key_19_and_defaults_the_rest() {
    let mut stored = StoredStreamsGroup::default();
    stored.apply(StreamsRecord::Metadata(Some(GroupMetadata::default())));
    // A member without key 22 starts from a fresh member's position.
    stored.apply(StreamsRecord::Member("a".into(), Some(golden_member())));
    // Key 22 without key 19 makes no member.
    stored.apply(StreamsRecord::Current("b".into(), Some(golden_current())));
    // Last value wins.
    let mut c = golden_current();
    c.state = MemberState::Stable;
    stored.apply(StreamsRecord::Member(
        "c".into(),
        Some(MemberMetadata::joining()),
    ));
    stored.apply(StreamsRecord::Current("c".into(), Some(golden_current())));
    stored.apply(StreamsRecord::Current("c".into(), Some(c.clone())));
    let g = stored.build("grp", 500, 45_000).unwrap();
    // No key 20: the new group's assignment epoch and timestamp.
    let fresh = StreamsGroup::new("grp");
    assert_eq!(
        (g.assignment_epoch, g.assignment_timestamp_ms),
        (fresh.assignment_epoch, fresh.assignment_timestamp_ms)
    );
    assert_eq!(g.members.keys().collect::<Vec<_>>(), ["a", "c"]);
    let a = &g.members["a"];
    let mut expected = StreamsMember::new().current;
    expected.process_id = "p1".into();
    assert_eq!(a.current, expected);
    assert_eq!(
        (a.session_deadline_ms, a.rebalance_deadline_ms),
        (45_500, None)
    );
    assert_eq!(g.members["c"].current, c);
    assert_eq!(g.members["c"].rebalance_deadline_ms, None);
}
