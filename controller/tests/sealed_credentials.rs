//! SCRAM credentials sealed in the metadata log (issue #41): plain until
//! the cluster is finalized at `skein.version` 3, then sealed with the
//! store's key, and the commit that finalizes is followed by a snapshot,
//! so no object of the store holds a verifier afterwards. Plain and sealed
//! records are both read; a store whose key is missing or another is an
//! error that names the key's origin, never credentials dropped.

use skein_controller::features::{SEALED_CREDENTIALS_LEVEL, SKEIN_VERSION};
use skein_controller::store::{is_seal_error, MemoryBlobStore, StoreFault};
use skein_controller::{
    BlobStore, ControllerConfig, ControllerCore, ControllerService, Event, MetadataImage,
    MetadataLog, MetadataRecord, Reply, ScramCredential, ScramMechanism, ScramUpsertion,
    SealingKey, StoreLimits,
};

const ORIGIN: &str = "Secret ns/demo-controller-key";

/// Small objects: a user's credentials fill the tail, so the log spans
/// blobs; snapshots only when one is needed to seal.
fn small() -> MemoryBlobStore {
    MemoryBlobStore::new(StoreLimits {
        max_blob_bytes: 4096,
        max_tail_bytes: 1024,
        min_snapshot_interval_bytes: 1 << 20,
        max_log_blobs: 64,
    })
}

fn key(byte: u8) -> SealingKey {
    SealingKey::new(&[byte; 32], ORIGIN).unwrap()
}

/// A credential whose bytes are easy to look for.
fn credential(seed: u8) -> ScramCredential {
    ScramCredential {
        salt: (0..32).map(|i| seed.wrapping_add(i * 7)).collect(),
        stored_key: (0..64)
            .map(|i| seed.wrapping_mul(3).wrapping_add(i))
            .collect(),
        server_key: (0..64)
            .map(|i| seed.wrapping_mul(5).wrapping_add(i * 3))
            .collect(),
        iterations: 8192,
    }
}

fn upsert(user: &str, seed: u8) -> Event {
    Event::AlterScramCredentials {
        upsertions: vec![ScramUpsertion {
            user: user.into(),
            mechanism: ScramMechanism::Sha512,
            credential: credential(seed),
        }],
        deletions: vec![],
    }
}

fn finalize(level: i16) -> Event {
    Event::UpdateFeature {
        feature: SKEIN_VERSION.into(),
        level,
        validate_only: false,
    }
}

/// The ways a verifier's bytes could show in a ConfigMap: as serde writes
/// them (a JSON array), base64, hex, raw.
fn encodings(bytes: &[u8]) -> Vec<Vec<u8>> {
    use base64::Engine;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    vec![
        serde_json::to_vec(bytes).unwrap(),
        base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .into_bytes(),
        hex.into_bytes(),
        bytes.to_vec(),
    ]
}

/// The objects of `store` that show any of the verifier's salt, stored key
/// or server key, in any encoding.
fn leaks(store: &MemoryBlobStore, seeds: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, bytes) in store.objects() {
        for seed in seeds {
            let c = credential(*seed);
            for secret in [&c.salt, &c.stored_key, &c.server_key] {
                for needle in encodings(secret) {
                    if bytes.windows(needle.len()).any(|w| w == needle.as_slice()) {
                        out.push(name.clone());
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn head_version(store: &MemoryBlobStore) -> Option<u64> {
    let (bytes, _) = store.read_head().unwrap().unwrap();
    serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()["version"].as_u64()
}

fn handle(svc: &ControllerService, event: Event) -> Vec<Reply> {
    svc.handle(event).expect("the event is committed")
}

fn credentials_of(image: &MetadataImage, user: &str) -> Option<ScramCredential> {
    image
        .scram_credentials
        .get(user)
        .and_then(|m| m.get(&ScramMechanism::Sha512))
        .cloned()
}

#[test]
fn after_finalizing_level_3_no_object_of_the_store_holds_a_verifier() {
    let store = small().with_sealing_key(Some(key(1)));
    let svc =
        ControllerService::open_store(Some(Box::new(store.clone())), ControllerConfig::default())
            .unwrap();
    // Enough users that the log spans blobs (tiny objects), and one the
    // tail holds.
    for (i, user) in ["alice", "bob", "carol", "dave"].iter().enumerate() {
        handle(&svc, upsert(user, 10 + i as u8));
    }
    handle(&svc, finalize(2));
    handle(&svc, upsert("erin", 20));
    let all = [10, 11, 12, 13, 20];
    // Below level 3 the records are plain, as a previous release writes them.
    assert!(
        !leaks(&store, &all).is_empty(),
        "plain below level 3: the test would see a verifier"
    );
    assert_eq!(head_version(&store), Some(2));

    let replies = handle(&svc, finalize(SEALED_CREDENTIALS_LEVEL));
    assert!(
        replies
            .iter()
            .any(|r| matches!(r, Reply::UpdateFeature { result: Ok(2), .. })),
        "{replies:?}"
    );
    // The commit that finalized is followed by a snapshot of sealed
    // records, and the old blobs are gone: nothing shows a verifier.
    assert_eq!(leaks(&store, &all), Vec::<String>::new());
    assert_eq!(
        head_version(&store),
        Some(3),
        "a level-2 controller refuses it"
    );

    // New and changed credentials are sealed too (a change with the
    // tail's room, and a deletion, which holds nothing secret).
    handle(&svc, upsert("frank", 30));
    handle(&svc, upsert("alice", 31));
    handle(
        &svc,
        Event::AlterScramCredentials {
            upsertions: vec![],
            deletions: vec![("bob".into(), ScramMechanism::Sha512)],
        },
    );
    assert_eq!(
        leaks(&store, &[10, 11, 12, 13, 20, 30, 31]),
        Vec::<String>::new()
    );
    let text: String = store
        .objects()
        .iter()
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert!(text.contains("sealed_scram_user") && text.contains("\"frank\""));
    assert!(!text.contains("iterations") && !text.contains("stored_key"));

    // The same key reads every credential back.
    let opened = MetadataLog::open(Box::new(store.fork()), "w2".into(), || "x".into()).unwrap();
    let image = opened.image;
    assert_eq!(credentials_of(&image, "alice"), Some(credential(31)));
    assert_eq!(credentials_of(&image, "bob"), None);
    assert_eq!(credentials_of(&image, "carol"), Some(credential(12)));
    assert_eq!(credentials_of(&image, "frank"), Some(credential(30)));
    assert_eq!(image.cluster.feature_level(SKEIN_VERSION), 3);
    assert_eq!(image.scram_credentials, svc.image().scram_credentials);
}

/// A log of sealed credentials: a store with `key`, credentials for alice
/// at level 3.
fn sealed_store(key: SealingKey) -> MemoryBlobStore {
    let store = small().with_sealing_key(Some(key));
    let (mut log, mut core) = new_log(&store);
    for event in [finalize(3), upsert("alice", 40)] {
        step(&mut log, &mut core, event).unwrap();
    }
    assert!(leaks(&store, &[40]).is_empty());
    store
}

#[test]
fn another_key_or_none_is_refused_with_a_message_naming_the_key() {
    let store = sealed_store(key(1));

    let other = key(2);
    let e = MetadataLog::open(
        Box::new(store.fork().with_sealing_key(Some(other.clone()))),
        "w2".into(),
        || "x".into(),
    )
    .err()
    .expect("another key is refused");
    assert!(is_seal_error(&e), "{e}");
    let text = e.to_string();
    assert!(text.contains("\"alice\""), "{text}");
    assert!(text.contains(ORIGIN), "{text}");
    assert!(
        text.contains(key(1).id()) && text.contains(other.id()),
        "{text}"
    );

    let e = MetadataLog::open(
        Box::new(store.fork().with_sealing_key(None)),
        "w2".into(),
        || "x".into(),
    )
    .err()
    .expect("no key is refused");
    assert!(is_seal_error(&e) && e.to_string().contains("no key"), "{e}");
    // ... also for the read-only dump.
    assert!(MetadataLog::read(Box::new(store.fork().with_sealing_key(None))).is_err());

    // Nothing was written by the refused opens: the right key still reads it.
    let opened = MetadataLog::open(Box::new(store.fork()), "w3".into(), || "x".into()).unwrap();
    assert_eq!(credentials_of(&opened.image, "alice"), Some(credential(40)));
    // An error opening the store for another reason is not a seal error.
    assert!(!is_seal_error(&std::io::Error::other(
        "the API server did not answer"
    )));
}

#[test]
fn plain_records_are_read_at_any_level_and_sealed_by_the_next_snapshot() {
    // A store without a key (a file store) at level 3 writes plain records.
    let store = small();
    let (mut log, mut core) = new_log(&store);
    for event in [finalize(3), upsert("alice", 50)] {
        step(&mut log, &mut core, event).unwrap();
    }
    assert!(!leaks(&store, &[50]).is_empty(), "no key: plain");
    assert_eq!(head_version(&store), Some(3));

    // Opened with a key, it reads them and seals them at the next
    // compaction, whatever the sizes.
    let keyed = store.with_sealing_key(Some(key(1)));
    let opened = MetadataLog::open(Box::new(keyed.clone()), "w2".into(), || "x".into()).unwrap();
    assert_eq!(credentials_of(&opened.image, "alice"), Some(credential(50)));
    let mut log = opened.log;
    assert!(log.snapshot_due());
    assert!(log.compact_if_due(&opened.image).unwrap());
    assert_eq!(leaks(&keyed, &[50]), Vec::<String>::new());
    assert!(!log.snapshot_due());
}

/// A log with five users' plain credentials (in blobs and the tail), and
/// its core.
fn five_plain_users() -> (MemoryBlobStore, MetadataLog, ControllerCore) {
    let store = small().with_sealing_key(Some(key(1)));
    let (mut log, mut core) = new_log(&store);
    for (i, user) in ["alice", "bob", "carol", "dave", "erin"].iter().enumerate() {
        step(&mut log, &mut core, upsert(user, 60 + i as u8)).unwrap();
    }
    (store, log, core)
}

/// A new log in `store` (writer `w1`) and an empty core.
fn new_log(store: &MemoryBlobStore) -> (MetadataLog, ControllerCore) {
    let log = MetadataLog::open(Box::new(store.clone()), "w1".into(), || "cid".into())
        .unwrap()
        .log;
    (log, ControllerCore::new(ControllerConfig::default()))
}

/// What the service does with an event: commit its records, then compact.
fn step(log: &mut MetadataLog, core: &mut ControllerCore, event: Event) -> std::io::Result<()> {
    let records: Vec<MetadataRecord> = core
        .handle(event, 0)
        .iter()
        .filter_map(MetadataRecord::from_command)
        .collect();
    log.append(records, core.image())
}

#[test]
fn a_blob_of_plain_records_left_by_a_failed_delete_goes_with_a_later_commit() {
    let seeds = [60, 61, 62, 63, 64];
    // Where the deletes of the blobs the sealing snapshot replaces start:
    // they are the last writes of the finalizing step.
    let (store, mut log, mut core) = five_plain_users();
    let old_blobs = store.blob_count();
    assert!(old_blobs > 0 && leaks(&store, &seeds).iter().any(|n| n != "head"));
    store.set_fault(None);
    step(&mut log, &mut core, finalize(3)).unwrap();
    let first_delete = store.writes() - old_blobs;
    assert_eq!(leaks(&store, &seeds), Vec::<String>::new());

    // Again, with every delete failing (the first fails, and the store
    // takes no more writes, as a lost API server).
    let (store, mut log, mut core) = five_plain_users();
    store.set_fault(Some(StoreFault {
        op: first_delete,
        landed: false,
    }));
    step(&mut log, &mut core, finalize(3)).expect("a failed delete does not fail the commit");
    let left = leaks(&store, &seeds);
    assert!(
        !left.is_empty() && !left.contains(&"head".to_string()),
        "the head is sealed, the old blobs are left: {left:?}"
    );
    // The store takes writes again: the next commit's compaction deletes
    // them.
    store.set_fault(None);
    step(&mut log, &mut core, upsert("frank", 70)).unwrap();
    assert_eq!(
        leaks(&store, &[60, 61, 62, 63, 64, 70]),
        Vec::<String>::new()
    );
}
