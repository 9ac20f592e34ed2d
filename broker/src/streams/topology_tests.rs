use uuid::Uuid;

use super::*;
use crate::streams::model::CopartitionGroup;

fn id(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn cluster(topics: &[(&str, i32)]) -> Topics {
    topics
        .iter()
        .enumerate()
        .map(|(i, (name, n))| (name.to_string(), (id(i as u8 + 1), *n)))
        .collect()
}

fn info(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo {
        name: name.to_string(),
        partitions,
        ..Default::default()
    }
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn sub(id: &str, sources: &[&str], sinks: &[&str], repartition: &[TopicInfo]) -> Subtopology {
    Subtopology {
        id: id.to_string(),
        source_topics: strings(sources),
        repartition_sink_topics: strings(sinks),
        repartition_source_topics: repartition.to_vec(),
        ..Default::default()
    }
}

fn with_changelog(mut s: Subtopology, name: &str) -> Subtopology {
    s.state_changelog_topics.push(info(name, 0));
    s
}

fn topology(subtopologies: Vec<Subtopology>) -> Topology {
    Topology {
        epoch: 0,
        subtopologies,
    }
}

fn changelog_configs() -> Vec<(String, String)> {
    vec![
        ("cleanup.policy".to_string(), "compact".to_string()),
        (
            "message.timestamp.type".to_string(),
            "CreateTime".to_string(),
        ),
    ]
}

/// The e2e `streams-count` application: one subtopology reading `eos-in`
/// with one counting store.
fn e2e(replication_factor: i16) -> Topology {
    let mut s = sub("0", &["eos-in"], &[], &[]);
    s.state_changelog_topics.push(TopicInfo {
        name: "app-counts-changelog".to_string(),
        partitions: 0,
        replication_factor,
        configs: changelog_configs(),
    });
    Topology {
        epoch: 7,
        subtopologies: vec![s],
    }
}

fn problem(c: &Configured) -> (i8, &str) {
    let (code, message) = c.problem.as_ref().expect("a problem");
    (*code, message.as_str())
}

fn assert_not_ready(c: &Configured, code: i8, message: &str) {
    assert_eq!(problem(c), (code, message));
    assert!(!c.ready());
    assert!(c.subtopologies.is_empty());
    assert!(c.to_create.is_empty());
}

fn invalid(t: &Topology, topics: &Topics) -> String {
    configure(t, topics).expect_err("an invalid topology").0
}

#[test]
fn e2e_application_first_needs_its_changelog() {
    let c = configure(&e2e(-1), &cluster(&[("eos-in", 3)])).unwrap();
    assert_eq!(c.topology_epoch, 7);
    assert_eq!(
        problem(&c),
        (
            MISSING_INTERNAL_TOPICS,
            "Internal topics are missing: app-counts-changelog"
        )
    );
    assert_eq!(
        c.to_create,
        vec![CreatableTopic {
            name: "app-counts-changelog".to_string(),
            partitions: 3,
            replication_factor: -1,
            configs: changelog_configs(),
        }]
    );
    let s = &c.subtopologies["0"];
    assert_eq!(s.tasks, 3);
    assert!(s.stateful());
    assert_eq!(s.source_topics, strings(&["eos-in"]));
    assert_eq!(s.state_changelog_topics[0].partitions, 3);
    assert_eq!(s.state_changelog_topics[0].replication_factor, -1);
    assert_eq!(s.state_changelog_topics[0].configs, changelog_configs());
}

#[test]
fn replication_factor_zero_means_the_broker_default_and_others_are_kept() {
    let topics = cluster(&[("eos-in", 3)]);
    let c = configure(&e2e(0), &topics).unwrap();
    assert_eq!(c.to_create[0].replication_factor, -1);
    // The configured topic keeps what the client sent (Describe shows 0).
    assert_eq!(
        c.subtopologies["0"].state_changelog_topics[0].replication_factor,
        0
    );
    let c = configure(&e2e(3), &topics).unwrap();
    assert_eq!(c.to_create[0].replication_factor, 3);
}

#[test]
fn e2e_application_is_ready_once_its_changelog_exists() {
    let topics = cluster(&[("eos-in", 3), ("app-counts-changelog", 3)]);
    let c = configure(&e2e(-1), &topics).unwrap();
    assert!(c.ready());
    assert_eq!(c.problem, None);
    assert!(c.to_create.is_empty());
    assert_eq!(c.topology_epoch, 7);
    assert_eq!(c.subtopologies["0"].tasks, 3);
}

#[test]
fn e2e_changelog_with_another_partition_count_is_incorrectly_partitioned() {
    let topics = cluster(&[("eos-in", 3), ("app-counts-changelog", 2)]);
    let c = configure(&e2e(-1), &topics).unwrap();
    assert_not_ready(
        &c,
        INCORRECTLY_PARTITIONED_TOPICS,
        "Existing topic app-counts-changelog has different number of partitions: expected 3, \
         found 2",
    );
    assert_eq!(c.topology_epoch, 7);
    // A grown source topic: the changelog must grow with it (5.5).
    let topics = cluster(&[("eos-in", 4), ("app-counts-changelog", 3)]);
    let c = configure(&e2e(-1), &topics).unwrap();
    assert_eq!(
        problem(&c).1,
        "Existing topic app-counts-changelog has different number of partitions: expected 4, \
         found 3"
    );
}

#[test]
fn missing_source_topics_are_summarized_in_name_order() {
    let t = topology(vec![
        sub("0", &["e", "present", "b"], &[], &[]),
        sub("1", &["d", "a", "c"], &[], &[]),
    ]);
    let c = configure(&t, &cluster(&[("present", 1)])).unwrap();
    assert_not_ready(
        &c,
        MISSING_SOURCE_TOPICS,
        "Source topics a, b, c and 2 additional topics are missing.",
    );
    // Checked before anything else, even an invalid topology.
    let mut t = t;
    t.subtopologies.push(sub("2", &[], &["loop"], &[]));
    let c = configure(&t, &cluster(&[("present", 1), ("a", 1), ("b", 1)])).unwrap();
    assert_not_ready(
        &c,
        MISSING_SOURCE_TOPICS,
        "Source topics c, d, e are missing.",
    );
    let c = configure(&e2e(-1), &cluster(&[])).unwrap();
    assert_not_ready(
        &c,
        MISSING_SOURCE_TOPICS,
        "Source topics eos-in are missing.",
    );
}

#[test]
fn summaries_list_three_names_then_a_count() {
    assert_eq!(summarize_topics(&[]), "<none>");
    assert_eq!(summarize_topics(&["a", "b", "c"]), "a, b, c");
    assert_eq!(
        summarize_topics(&["a", "b", "c", "d"]),
        "a, b, c and 1 additional topics"
    );
}

#[test]
fn missing_internal_topics_are_listed_sorted_and_created_with_decided_counts() {
    let t = topology(vec![
        with_changelog(
            sub("0", &["in"], &["app-z-repartition"], &[]),
            "app-b-changelog",
        ),
        with_changelog(
            sub("1", &[], &[], &[info("app-z-repartition", 0)]),
            "app-a-changelog",
        ),
        with_changelog(sub("2", &["in"], &[], &[]), "app-c-changelog"),
        with_changelog(sub("3", &["in"], &[], &[]), "app-d-changelog"),
    ]);
    let c = configure(&t, &cluster(&[("in", 5), ("app-d-changelog", 5)])).unwrap();
    assert_eq!(
        problem(&c),
        (
            MISSING_INTERNAL_TOPICS,
            "Internal topics are missing: app-a-changelog, app-b-changelog, app-c-changelog and \
             1 additional topics"
        )
    );
    let created: Vec<(&str, i32)> = c
        .to_create
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(
        created,
        vec![
            ("app-a-changelog", 5),
            ("app-b-changelog", 5),
            ("app-c-changelog", 5),
            ("app-z-repartition", 5),
        ]
    );
    assert_eq!(c.subtopologies.len(), 4);
}

fn chain(repartition_partitions: i32) -> Topology {
    topology(vec![
        sub("0", &["in"], &["app-rep-repartition"], &[]),
        with_changelog(
            sub(
                "1",
                &[],
                &[],
                &[info("app-rep-repartition", repartition_partitions)],
            ),
            "app-store-changelog",
        ),
    ])
}

#[test]
fn repartition_topic_takes_the_count_of_what_its_writer_reads() {
    let c = configure(&chain(0), &cluster(&[("in", 4)])).unwrap();
    assert_eq!(c.problem.as_ref().unwrap().0, MISSING_INTERNAL_TOPICS);
    let created: Vec<(&str, i32)> = c
        .to_create
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(
        created,
        vec![("app-rep-repartition", 4), ("app-store-changelog", 4)]
    );
    let s0 = &c.subtopologies["0"];
    assert_eq!(s0.tasks, 4);
    assert!(!s0.stateful());
    assert_eq!(
        s0.repartition_sink_topics,
        strings(&["app-rep-repartition"])
    );
    let s1 = &c.subtopologies["1"];
    assert_eq!(s1.tasks, 4);
    assert_eq!(s1.repartition_source_topics[0].partitions, 4);
    assert_eq!(s1.state_changelog_topics[0].partitions, 4);
    assert!(s1.source_topics.is_empty());

    let topics = cluster(&[
        ("in", 4),
        ("app-rep-repartition", 4),
        ("app-store-changelog", 4),
    ]);
    assert!(configure(&chain(0), &topics).unwrap().ready());
}

#[test]
fn a_fixed_repartition_count_is_kept() {
    let c = configure(&chain(6), &cluster(&[("in", 4)])).unwrap();
    let created: Vec<(&str, i32)> = c
        .to_create
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(
        created,
        vec![("app-rep-repartition", 6), ("app-store-changelog", 6)]
    );
    assert_eq!(c.subtopologies["0"].tasks, 4);
    assert_eq!(c.subtopologies["1"].tasks, 6);
    assert_eq!(
        c.subtopologies["1"].repartition_source_topics[0].partitions,
        6
    );
    // An existing repartition topic of another size is reported.
    let c = configure(
        &chain(6),
        &cluster(&[("in", 4), ("app-rep-repartition", 4)]),
    )
    .unwrap();
    assert_not_ready(
        &c,
        INCORRECTLY_PARTITIONED_TOPICS,
        "Existing topic app-rep-repartition has different number of partitions: expected 6, \
         found 4",
    );
}

#[test]
fn a_sink_count_only_sees_what_is_known_in_its_pass() {
    // Subtopology 0 is visited first: `r2` takes the max of what 0 reads
    // and is known then (small: 2), before `r1` gets 8 from subtopology 1.
    let t = topology(vec![
        sub("0", &["small"], &["r2"], &[info("r1", 0)]),
        sub("1", &["big"], &["r1"], &[]),
        sub("2", &[], &[], &[info("r2", 0)]),
    ]);
    let c = configure(&t, &cluster(&[("small", 2), ("big", 8)])).unwrap();
    assert_eq!(c.subtopologies["0"].tasks, 8);
    assert_eq!(c.subtopologies["2"].tasks, 2);
    assert_eq!(
        c.subtopologies["2"].repartition_source_topics[0].partitions,
        2
    );
}

#[test]
fn a_sink_nobody_reads_is_neither_required_nor_created() {
    let t = topology(vec![sub("0", &["in"], &["app-orphan-repartition"], &[])]);
    let c = configure(&t, &cluster(&[("in", 2)])).unwrap();
    assert!(c.ready());
    assert!(c.to_create.is_empty());
    assert_eq!(
        c.subtopologies["0"].repartition_sink_topics,
        strings(&["app-orphan-repartition"])
    );
    assert_eq!(t.required_topics().len(), 1);
}

const LOOPS: &str = "Failed to compute number of partitions for all repartition topics. There \
                     may be loops in the topology that cannot be resolved.";

#[test]
fn a_loop_between_repartition_topics_is_invalid() {
    let t = topology(vec![
        sub("0", &[], &["r2"], &[info("r1", 0)]),
        sub("1", &[], &["r1"], &[info("r2", 0)]),
    ]);
    assert_eq!(invalid(&t, &cluster(&[])), LOOPS);
    // A fixed count anywhere in the loop resolves it.
    let t = topology(vec![
        sub("0", &[], &["r2"], &[info("r1", 5)]),
        sub("1", &[], &["r1"], &[info("r2", 0)]),
    ]);
    let c = configure(&t, &cluster(&[])).unwrap();
    assert_eq!(c.subtopologies["1"].tasks, 5);
    // A subtopology without sources that writes a sink never gets a count.
    let t = topology(vec![sub("0", &[], &["r"], &[])]);
    assert_eq!(invalid(&t, &cluster(&[])), LOOPS);
}

#[test]
fn a_repartition_source_never_written_is_invalid() {
    let t = topology(vec![
        sub("0", &["in"], &[], &[]),
        sub("1", &[], &[], &[info("app-never-repartition", 0)]),
    ]);
    assert_eq!(
        invalid(&t, &cluster(&[("in", 1)])),
        "Failed to compute number of partitions for all repartition topics, because a \
         repartition source topic is never used as a sink topic."
    );
}

fn copartitioned(mut s: Subtopology, sources: &[i16], repartition: &[i16]) -> Subtopology {
    s.copartition_groups.push(CopartitionGroup {
        source_topics: sources.to_vec(),
        source_topic_regex: Vec::new(),
        repartition_source_topics: repartition.to_vec(),
    });
    s
}

#[test]
fn copartitioned_sources_must_have_one_count() {
    let t = topology(vec![copartitioned(
        sub("0", &["b", "a"], &[], &[]),
        &[0, 1],
        &[],
    )]);
    let c = configure(&t, &cluster(&[("a", 3), ("b", 4)])).unwrap();
    assert_not_ready(
        &c,
        INCORRECTLY_PARTITIONED_TOPICS,
        "Following topics do not have the same number of partitions: [{a=3, b=4}]",
    );
    let c = configure(&t, &cluster(&[("a", 4), ("b", 4)])).unwrap();
    assert!(c.ready());
    assert_eq!(c.subtopologies["0"].tasks, 4);
}

#[test]
fn copartitioned_repartition_topics_get_the_source_count() {
    let t = topology(vec![
        sub("0", &["big"], &["app-rep-repartition"], &[]),
        copartitioned(
            with_changelog(
                sub("1", &["left"], &[], &[info("app-rep-repartition", 0)]),
                "app-join-changelog",
            ),
            &[0],
            &[0],
        ),
    ]);
    let c = configure(&t, &cluster(&[("big", 8), ("left", 3)])).unwrap();
    let created: Vec<(&str, i32)> = c
        .to_create
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(
        created,
        vec![("app-join-changelog", 3), ("app-rep-repartition", 3)]
    );
    assert_eq!(c.subtopologies["1"].tasks, 3);
    assert_eq!(c.subtopologies["0"].tasks, 8);
}

#[test]
fn a_fixed_repartition_topic_copartitioned_with_another_count_is_reported() {
    let t = topology(vec![
        sub("0", &["big"], &["app-rep-repartition"], &[]),
        copartitioned(
            sub("1", &["left"], &[], &[info("app-rep-repartition", 6)]),
            &[0],
            &[0],
        ),
    ]);
    let c = configure(&t, &cluster(&[("big", 8), ("left", 3)])).unwrap();
    assert_not_ready(
        &c,
        INCORRECTLY_PARTITIONED_TOPICS,
        "Number of partitions [6] of repartition topic [app-rep-repartition] doesn't match \
         number of partitions [3] of the source topic.",
    );
}

#[test]
fn copartitioned_repartition_topics_alone_take_the_max_or_the_fixed_count() {
    let reads_both = |p1: i32, p2: i32| {
        topology(vec![
            sub("0", &["x"], &["r1"], &[]),
            sub("1", &["y"], &["r2"], &[]),
            copartitioned(
                sub("2", &[], &[], &[info("r1", p1), info("r2", p2)]),
                &[],
                &[0, 1],
            ),
        ])
    };
    let topics = cluster(&[("x", 2), ("y", 5)]);
    let c = configure(&reads_both(0, 0), &topics).unwrap();
    let counts: Vec<i32> = c.subtopologies["2"]
        .repartition_source_topics
        .iter()
        .map(|t| t.partitions)
        .collect();
    assert_eq!(counts, vec![5, 5]);
    let c = configure(&reads_both(3, 0), &topics).unwrap();
    let counts: Vec<i32> = c.subtopologies["2"]
        .repartition_source_topics
        .iter()
        .map(|t| t.partitions)
        .collect();
    assert_eq!(counts, vec![3, 3]);
    let c = configure(&reads_both(3, 4), &topics).unwrap();
    assert_not_ready(
        &c,
        INCORRECTLY_PARTITIONED_TOPICS,
        "Following topics do not have the same number of partitions: [{r1=3, r2=4}]",
    );
}

#[test]
fn a_subtopology_without_sources_is_invalid() {
    let t = topology(vec![
        sub("0", &["in"], &[], &[]),
        with_changelog(sub("S", &[], &[], &[]), "app-s-changelog"),
    ]);
    assert_eq!(
        invalid(&t, &cluster(&[("in", 1)])),
        "No source topics found for subtopology S"
    );
}

#[test]
fn malformed_topologies_fail() {
    let t = topology(vec![
        sub("0", &["in"], &[], &[]),
        sub("0", &["in"], &[], &[]),
    ]);
    assert!(invalid(&t, &cluster(&[("in", 1)])).contains("Duplicate subtopology id 0"));
    let t = topology(vec![copartitioned(sub("0", &["in"], &[], &[]), &[1], &[])]);
    // Before the missing-source check, as in Kafka.
    assert!(invalid(&t, &cluster(&[])).contains("source topic index 1"));
    let mut s = sub("0", &["in"], &[], &[]);
    s.state_changelog_topics = vec![info("c", 0), info("c", 0)];
    assert!(invalid(&topology(vec![s]), &cluster(&[("in", 1)])).contains("Duplicate topic c"));
}

#[test]
fn java_hash_order_matches_java_hash_sets() {
    // Printed by Java 17's HashSet after adding the keys in this order.
    let ids: Vec<String> = (0..13).map(|i| i.to_string()).collect();
    assert_eq!(
        java_hash_order(ids.iter().map(String::as_str)).join(","),
        "11,12,0,1,2,3,4,5,6,7,8,9,10"
    );
    let ids: Vec<String> = (0..30).map(|i| i.to_string()).collect();
    assert_eq!(
        java_hash_order(ids.iter().map(String::as_str)).join(","),
        "22,23,24,25,26,27,28,29,10,11,12,13,14,15,16,17,18,19,0,1,2,3,4,5,6,7,8,9,20,21"
    );
    let names = [
        "in",
        "app-rep-repartition",
        "app-counts-changelog",
        "eos-in",
        "b",
        "a",
        "b",
    ];
    assert_eq!(
        java_hash_order(names).join(","),
        "a,b,eos-in,app-counts-changelog,in,app-rep-repartition"
    );
    // Ten keys in one bucket of 16: the ninth doubles the table.
    let colliding = ["0", "@", "P", "`", "p", " ", "00", "0@", "0P", "0`", "x"];
    assert_eq!(
        java_hash_order(colliding).join(","),
        "@,`, ,00,0P,0,P,p,0@,0`,x"
    );
}

#[test]
fn subtopologies_are_visited_in_java_hash_map_order() {
    // Kafka's HashMap visits thirteen ids as 11, 12, 0, 1, …, 10: 11 sets
    // r1 = 8 before 10 decides its sink r2 from r1 and `small` (2). In
    // request or name order 10 would come first and r2 would get 2.
    let mut subs: Vec<Subtopology> = (0..13)
        .map(|i| sub(&i.to_string(), &["pad"], &[], &[]))
        .collect();
    subs[4] = sub("4", &[], &[], &[info("r2", 0)]);
    subs[10] = sub("10", &["small"], &["r2"], &[info("r1", 0)]);
    subs[11] = sub("11", &["big"], &["r1"], &[]);
    let t = topology(subs);
    let c = configure(&t, &cluster(&[("pad", 1), ("small", 2), ("big", 8)])).unwrap();
    let created: Vec<(&str, i32)> = c
        .to_create
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(created, vec![("r1", 8), ("r2", 8)]);
    assert_eq!(c.subtopologies["4"].tasks, 8);
    assert_eq!(c.subtopologies["10"].tasks, 8);
}

#[test]
fn metadata_hash_follows_the_required_topics() {
    let t = e2e(-1);
    assert_eq!(metadata_hash(&t, &cluster(&[])), 0);
    assert_eq!(metadata_hash(&t, &cluster(&[("other", 3)])), 0);
    let base = cluster(&[("eos-in", 3)]);
    let h = metadata_hash(&t, &base);
    assert_ne!(h, 0);
    assert_eq!(metadata_hash(&t, &base), h);
    // Stable across builds and restarts.
    let mut unrelated = base.clone();
    unrelated.insert("other".to_string(), (id(9), 5));
    assert_eq!(metadata_hash(&t, &unrelated), h);
    let mut grown = base.clone();
    grown.get_mut("eos-in").unwrap().1 = 4;
    assert_ne!(metadata_hash(&t, &grown), h);
    let mut recreated = base.clone();
    recreated.get_mut("eos-in").unwrap().0 = id(9);
    assert_ne!(metadata_hash(&t, &recreated), h);
    let mut with_changelog = base.clone();
    with_changelog.insert("app-counts-changelog".to_string(), (id(9), 3));
    assert_ne!(metadata_hash(&t, &with_changelog), h);
}
