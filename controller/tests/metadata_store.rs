//! The metadata log (`skein_controller::store`): what it commits survives
//! a reopen, it writes in proportion to the change, and a crash or an
//! ambiguous failure at any write boundary leaves either the state before
//! a batch or the state after it.

mod common;

use common::{cluster, test_config};
use skein_controller::store::{MemoryBlobStore, StoreFault};
use skein_controller::{
    BlobStore, Command, ControllerCore, Event, FileBlobStore, MetadataImage, MetadataLog,
    MetadataRecord, NewTopic, TopicId,
};

fn records(commands: &[Command]) -> Vec<MetadataRecord> {
    commands
        .iter()
        .filter_map(MetadataRecord::from_command)
        .collect()
}

fn open(store: &MemoryBlobStore) -> (MetadataLog, MetadataImage) {
    let o = MetadataLog::open(Box::new(store.clone()), "w1".into(), || "cid".into()).unwrap();
    assert_eq!(o.cluster_id, "cid");
    (o.log, o.image)
}

fn reopen_image(store: &MemoryBlobStore) -> MetadataImage {
    let o = MetadataLog::open(Box::new(store.fork()), "w2".into(), || "new".into()).unwrap();
    assert_eq!(o.cluster_id, "cid", "the cluster id is kept");
    o.image
}

/// Events that touch many objects: topics of several partitions, a broker
/// lost (elections), one back, configs, a name reused.
fn workload() -> Vec<Event> {
    let mut out = Vec::new();
    for i in 0..6u128 {
        out.push(Event::CreateTopic(NewTopic::new(
            format!("t{i}"),
            TopicId(i + 1),
            12,
            3,
        )));
    }
    out.push(Event::BrokerLost { broker: 1 });
    out.push(common::register(1, None));
    out.push(Event::TopicConfigChanged {
        topic: "t2".into(),
        configs: [("retention.ms".to_string(), "1000".to_string())].into(),
    });
    out.push(Event::DeleteTopic { topic: "t3".into() });
    out.push(Event::CreateTopic(NewTopic::new("t3", TopicId(99), 4, 2)));
    out
}

#[test]
fn what_is_committed_survives_a_reopen_through_tail_blobs_and_snapshots() {
    let store = MemoryBlobStore::tiny();
    let (mut log, image) = open(&store);
    assert_eq!(image, MetadataImage::default());
    let mut core = cluster(3);
    // The registrations of `cluster` happened before the log: start from
    // a snapshot of them.
    log.append(MetadataRecord::snapshot(core.image()), core.image())
        .unwrap();
    let mut saw = (false, false, false);
    for (i, event) in workload().into_iter().enumerate() {
        let commands = core.handle(event, 10 + i as u64);
        log.append(records(&commands), core.image()).unwrap();
        let s = log.stats();
        saw.0 |= s.tail_records > 0;
        saw.1 |= s.log_blobs > 0;
        saw.2 |= s.snapshot_blobs > 1;
        assert!(&reopen_image(&store) == core.image(), "after event {i}");
    }
    assert!(
        saw.0 && saw.1 && saw.2,
        "tail, log blobs and a multi-blob snapshot all used: {saw:?}"
    );
    // Blobs no head names are gone after snapshots.
    let (_log, image) = open(&store);
    assert_eq!(&image, core.image());
    ControllerCore::from_image(image, test_config()).unwrap();
}

#[test]
fn a_crash_at_every_write_of_a_batch_leaves_the_state_before_or_after_it() {
    let store = MemoryBlobStore::tiny();
    let (mut log, _) = open(&store);
    let mut core = cluster(3);
    log.append(MetadataRecord::snapshot(core.image()), core.image())
        .unwrap();
    let mut boundaries = 0;
    for (i, event) in workload().into_iter().enumerate() {
        let before = reopen_image(&store);
        let commands = core.handle(event, 10 + i as u64);
        let recs = records(&commands);
        // How many writes this batch takes (on a copy of the store), then
        // a crash at each of them on another copy.
        let probe = store.fork();
        let mut probe_log = MetadataLog::open(Box::new(probe.clone()), "p".into(), || "x".into())
            .unwrap()
            .log;
        probe.set_fault(None);
        probe_log.append(recs.clone(), core.image()).unwrap();
        let writes = probe.writes();
        for op in 0..writes {
            for landed in [false, true] {
                let copy = store.fork();
                let mut l = MetadataLog::open(Box::new(copy.clone()), "c".into(), || "x".into())
                    .unwrap()
                    .log;
                copy.set_fault(Some(StoreFault { op, landed }));
                let result = l.append(recs.clone(), core.image());
                let after_crash =
                    MetadataLog::open(Box::new(copy.fork()), "r".into(), || "x".into())
                        .unwrap()
                        .image;
                assert!(
                    after_crash == before || &after_crash == core.image(),
                    "crash at write {op} of {writes} (landed: {landed}, result {result:?}) left a state that is neither before nor after the batch"
                );
                ControllerCore::from_image(after_crash, test_config()).unwrap();
                boundaries += 1;
            }
        }
        log.append(recs, core.image()).unwrap();
        assert!(&reopen_image(&store) == core.image());
    }
    assert!(boundaries > 40, "{boundaries} write boundaries tried");
}

#[test]
fn a_failed_append_is_committed_with_the_next_one_and_a_landed_one_not_twice() {
    for landed in [false, true] {
        let store = MemoryBlobStore::tiny();
        let (mut log, _) = open(&store);
        let mut core = cluster(3);
        log.append(MetadataRecord::snapshot(core.image()), core.image())
            .unwrap();
        // Fail the head write of a small batch (the tail).
        let first = records(&core_step(&mut core, 1000));
        let seq = log.stats().seq;
        store.set_fault(Some(StoreFault { op: 0, landed }));
        assert!(log.append(first, core.image()).is_err());
        assert_eq!(&reopen_image(&store) == core.image(), landed);

        store.set_fault(None);
        // The next append commits both (or only its own, if the first
        // landed).
        let second = records(&core_step(&mut core, 2000));
        log.append(second, core.image()).unwrap();
        assert!(&reopen_image(&store) == core.image());
        assert_eq!(log.stats().seq, seq + if landed { 2 } else { 1 });
    }
}

/// A config change: one small record.
fn core_step(core: &mut ControllerCore, now: u64) -> Vec<Command> {
    if core.topic("solo").is_none() {
        core.handle(
            Event::CreateTopic(NewTopic::new("solo", TopicId(5000), 1, 1)),
            now,
        )
    } else {
        core.handle(
            Event::TopicConfigChanged {
                topic: "solo".into(),
                configs: [("retention.ms".to_string(), now.to_string())].into(),
            },
            now,
        )
    }
}

#[test]
fn a_second_writer_is_refused_and_fenced() {
    let store = MemoryBlobStore::tiny();
    let (mut a, _) = open(&store);
    let mut core = cluster(3);
    a.append(MetadataRecord::snapshot(core.image()), core.image())
        .unwrap();
    let mut b = MetadataLog::open(Box::new(store.clone()), "w2".into(), || "x".into())
        .unwrap()
        .log;
    let c1 = core_step(&mut core, 1);
    b.append(records(&c1), core.image()).unwrap();
    let c2 = core_step(&mut core, 2);
    let err = a.append(records(&c2), core.image()).unwrap_err();
    assert!(err.to_string().contains("version"), "{err}");
    let err = a.append(Vec::new(), core.image()).unwrap_err();
    assert!(err.to_string().contains("another writer"), "{err}");
}

#[test]
fn writes_are_proportional_to_the_change_not_the_cluster() {
    let store = MemoryBlobStore::new(skein_controller::StoreLimits {
        max_blob_bytes: 768 << 10,
        max_tail_bytes: 128 << 10,
        min_snapshot_interval_bytes: 4 << 20,
        max_log_blobs: 64,
    });
    let (mut log, _) = open(&store);
    let mut core = cluster(3);
    for i in 0..40u128 {
        let c = core.handle(
            Event::CreateTopic(NewTopic::new(format!("big{i}"), TopicId(i + 1), 100, 3)),
            i as u64,
        );
        log.append(records(&c), core.image()).unwrap();
    }
    let before = log.stats();
    let c = core_step(&mut core, 10_000);
    let recs = records(&c);
    let change: usize = recs
        .iter()
        .map(|r| serde_json::to_vec(r).unwrap().len())
        .sum();
    log.append(recs, core.image()).unwrap();
    let after = log.stats();
    let written = (after.tail_bytes + after.log_bytes) - (before.tail_bytes + before.log_bytes);
    assert!(
        written as usize <= change + 64,
        "{written} bytes for a {change}-byte change"
    );
    assert_eq!(after.snapshot_blobs, before.snapshot_blobs);
}

#[test]
fn an_older_skeins_single_image_is_moved_into_the_log() {
    let mut core = cluster(3);
    core.handle(
        Event::CreateTopic(NewTopic::new("old", TopicId(1), 3, 3)),
        1,
    );
    let legacy = serde_json::json!({ "cluster_id": "legacy-id", "image": core.image() });
    let dir = tempfile::tempdir().unwrap();
    let legacy_path = dir.path().join("cluster-metadata.json");
    std::fs::write(&legacy_path, serde_json::to_vec(&legacy).unwrap()).unwrap();
    let log_dir = dir.path().join("cluster-metadata");
    let store = FileBlobStore::open(&log_dir, Some(legacy_path.clone())).unwrap();
    let o = MetadataLog::open(Box::new(store), "w".into(), || "new".into()).unwrap();
    assert_eq!(o.cluster_id, "legacy-id");
    assert_eq!(&o.image, core.image());
    assert!(!legacy_path.exists(), "the old file is replaced by the log");
    let read = MetadataLog::read(Box::new(FileBlobStore::open_existing(&log_dir).unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(read, ("legacy-id".to_string(), core.image().clone()));
}

#[test]
fn a_file_store_reopens_and_drops_blobs_left_by_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = cluster(3);
    let o = MetadataLog::open(
        Box::new(FileBlobStore::open(dir.path(), None).unwrap()),
        "w".into(),
        || "cid".into(),
    )
    .unwrap();
    let mut log = o.log;
    log.append(MetadataRecord::snapshot(core.image()), core.image())
        .unwrap();
    for i in 0..30u128 {
        let c = core.handle(
            Event::CreateTopic(NewTopic::new(format!("t{i}"), TopicId(i + 1), 50, 3)),
            i as u64,
        );
        log.append(records(&c), core.image()).unwrap();
    }
    // A blob written by a writer that crashed before its head.
    let store = FileBlobStore::open(dir.path(), None).unwrap();
    store.write_blob("dead-0", b"{}\n").unwrap();
    let o = MetadataLog::open(Box::new(store), "v".into(), || "x".into()).unwrap();
    assert_eq!(&o.image, core.image());
    assert!(!dir.path().join("dead-0.jsonl").exists());
}

#[test]
fn a_newer_head_format_is_refused() {
    let store = MemoryBlobStore::tiny();
    let (_log, _) = open(&store);
    let (bytes, v) = store.read_head().unwrap().unwrap();
    let mut head: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    head["version"] = 99.into();
    store
        .write_head(&serde_json::to_vec(&head).unwrap(), Some(&v))
        .unwrap();
    let err = MetadataLog::open(Box::new(store), "w".into(), || "x".into())
        .err()
        .unwrap();
    assert!(err.to_string().contains("newer"), "{err}");
}
