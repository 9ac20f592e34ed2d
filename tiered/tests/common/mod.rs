//! Shared by the integration tests: segment files, uploads and the one
//! round-trip scenario every store backend (directory, memory, S3) runs.

#![allow(dead_code)] // Each test binary uses a different part.

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use skein_tiered::{
    local_file_name, Manifest, ObjectKind, PartitionKey, RemoteSegment, RemoteStore, SegmentUpload,
    TieredError, PART_SIZE,
};
use uuid::Uuid;

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A partition of a topic nobody else uses (S3 runs share a bucket).
pub fn fresh_partition(partition: i32) -> PartitionKey {
    PartitionKey::new("orders", Uuid::new_v4(), partition)
}

/// `len` bytes that differ per `seed` and per position (so a part sent
/// twice or out of order shows).
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u64).wrapping_mul(2654435761) >> 7) as u8 ^ seed)
        .collect()
}

/// The contents of a segment's files besides the `.log`.
#[derive(Clone)]
pub struct SideFiles {
    pub offset_index: Bytes,
    pub time_index: Bytes,
    pub txn_index: Option<Bytes>,
    pub producer_snapshot: Bytes,
    pub leader_epochs: Bytes,
}

impl SideFiles {
    pub fn new(seed: u8, with_txns: bool) -> Self {
        SideFiles {
            offset_index: Bytes::from(pattern(8 * 100, seed)),
            time_index: Bytes::from(pattern(12 * 100, seed.wrapping_add(1))),
            txn_index: with_txns.then(|| Bytes::from(pattern(34 * 3, seed.wrapping_add(2)))),
            producer_snapshot: Bytes::from(pattern(77, seed.wrapping_add(3))),
            leader_epochs: Bytes::from(format!("0\n1\n{seed} 0\n")),
        }
    }
}

/// An upload of offsets `base..=end` whose `.log` is `log` (written to a
/// file in `dir` that is unlinked before the upload reads it, as local
/// retention may do).
pub fn upload(dir: &Path, base: i64, end: i64, log: &[u8], side: &SideFiles) -> SegmentUpload {
    let path = dir.join(format!("{}.log", Uuid::new_v4()));
    let mut file = std::fs::File::create(&path).expect("create the segment file");
    file.write_all(log).expect("write the segment file");
    let log_file = std::fs::File::open(&path).expect("reopen the segment file");
    std::fs::remove_file(&path).expect("unlink the segment file");
    SegmentUpload {
        base_offset: base,
        end_offset: end,
        max_timestamp_ms: 1_700_000_000_000 + end,
        epochs: vec![(4, base), (5, base + 1)],
        broker_id: 2,
        log_file,
        log_len: log.len() as u64,
        offset_index: side.offset_index.clone(),
        time_index: side.time_index.clone(),
        txn_index: side.txn_index.clone(),
        producer_snapshot: side.producer_snapshot.clone(),
        leader_epochs: side.leader_epochs.clone(),
    }
}

/// Uploads one segment of `log_len` pattern bytes; returns it with its
/// `.log` contents and side files.
pub async fn upload_one(
    store: &RemoteStore,
    p: &PartitionKey,
    base: i64,
    log_len: usize,
    with_txns: bool,
) -> (RemoteSegment, Vec<u8>, SideFiles) {
    let scratch = tempfile::tempdir().expect("a scratch dir");
    let log = pattern(log_len, base as u8);
    let side = SideFiles::new(base as u8, with_txns);
    let seg = store
        .upload_segment(
            p,
            upload(scratch.path(), base, base + 99, &log, &side),
            now_ms(),
        )
        .await
        .expect("the upload succeeds");
    (seg, log, side)
}

fn assert_not_found<T: std::fmt::Debug>(r: Result<T, TieredError>) {
    match r {
        Err(e) if e.is_not_found() => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
}

/// Everything the store offers, end to end, on a fresh partition.
pub async fn round_trip(store: &RemoteStore) {
    let p = fresh_partition(0);
    let started = now_ms();

    // A .log over two parts and a bit, so it goes up as a multipart upload.
    let big = 2 * PART_SIZE + 12_345;
    let (seg1, log1, side1) = upload_one(store, &p, 100, big, true).await;
    assert_eq!(seg1.base_offset, 100);
    assert_eq!(seg1.end_offset, 199);
    assert_eq!(seg1.size_bytes, big as u64);
    assert_eq!(seg1.epochs, vec![(4, 100), (5, 101)]);
    assert_eq!(seg1.broker_id, 2);
    assert!(!seg1.txn_index_empty);
    assert!(seg1.copied_at_ms >= started);

    // Whole small objects, the whole .log and ranges across part borders.
    assert_eq!(
        store
            .get(&p, &seg1, ObjectKind::OffsetIndex)
            .await
            .expect("index"),
        side1.offset_index
    );
    assert_eq!(
        store
            .get(&p, &seg1, ObjectKind::TimeIndex)
            .await
            .expect("timeindex"),
        side1.time_index
    );
    assert_eq!(
        Some(
            store
                .get(&p, &seg1, ObjectKind::TxnIndex)
                .await
                .expect("txnindex")
        ),
        side1.txn_index
    );
    assert_eq!(
        store
            .get(&p, &seg1, ObjectKind::ProducerSnapshot)
            .await
            .expect("snapshot"),
        side1.producer_snapshot
    );
    assert_eq!(
        store
            .get(&p, &seg1, ObjectKind::LeaderEpochs)
            .await
            .expect("epochs"),
        side1.leader_epochs
    );
    assert_eq!(
        store
            .get(&p, &seg1, ObjectKind::Log)
            .await
            .expect("log")
            .as_ref(),
        &log1[..]
    );
    let border = PART_SIZE as u64;
    for range in [0..10, border - 7..border + 9, big as u64 - 100..big as u64] {
        let got = store
            .get_range(&p, &seg1, ObjectKind::Log, range.clone())
            .await
            .expect("a range");
        assert_eq!(
            got.as_ref(),
            &log1[range.start as usize..range.end as usize]
        );
    }
    let empty = store
        .get_range(&p, &seg1, ObjectKind::Log, 5..5)
        .await
        .expect("an empty range");
    assert!(empty.is_empty());

    // A small segment without aborted transactions: no .txnindex object.
    let (seg2, log2, _) = upload_one(store, &p, 200, 4096, false).await;
    assert!(seg2.txn_index_empty);
    assert!(store
        .get(&p, &seg2, ObjectKind::TxnIndex)
        .await
        .expect("an empty txnindex")
        .is_empty());
    assert!(store
        .get_range(&p, &seg2, ObjectKind::TxnIndex, 0..10)
        .await
        .expect("empty")
        .is_empty());

    // Manifests: the highest epoch wins and lower ones are deleted.
    assert_eq!(
        store.load_manifest(&p).await.expect("no manifest yet"),
        None
    );
    let mut m1 = Manifest::new(1, 100);
    m1.insert(seg1.clone());
    store.write_manifest(&p, &m1).await.expect("write epoch 1");
    assert_eq!(
        store.load_manifest(&p).await.expect("load"),
        Some(m1.clone())
    );
    let mut m3 = m1.clone();
    m3.leader_epoch = 3;
    m3.insert(seg2.clone());
    store.write_manifest(&p, &m3).await.expect("write epoch 3");
    assert_eq!(
        store.load_manifest(&p).await.expect("load"),
        Some(m3.clone())
    );
    assert_eq!(
        store.manifest_epochs_listed(&p).await.expect("list"),
        vec![3]
    );
    // A deposed leader's late write under epoch 2 is never read.
    store
        .write_manifest(&p, &m1_with_epoch(&m1, 2))
        .await
        .expect("write epoch 2");
    assert_eq!(
        store.load_manifest(&p).await.expect("load"),
        Some(m3.clone())
    );
    // The same epoch again replaces it.
    m3.log_start_offset = 150;
    store
        .write_manifest(&p, &m3)
        .await
        .expect("rewrite epoch 3");
    assert_eq!(
        store.load_manifest(&p).await.expect("load"),
        Some(m3.clone())
    );

    // Downloads: the files as the partition log names them, replaced when
    // downloaded again.
    let local = tempfile::tempdir().expect("a download dir");
    let dir = local.path().join("orders-0");
    store
        .download_segment(&p, &seg1, &dir)
        .await
        .expect("download seg1");
    store
        .download_segment(&p, &seg1, &dir)
        .await
        .expect("download seg1 again");
    store
        .download_segment(&p, &seg2, &dir)
        .await
        .expect("download seg2");
    let read = |base, kind| {
        std::fs::read(dir.join(local_file_name(base, kind))).expect("a downloaded file")
    };
    assert_eq!(read(100, ObjectKind::Log), log1);
    assert_eq!(
        read(100, ObjectKind::OffsetIndex),
        side1.offset_index.to_vec()
    );
    assert_eq!(read(100, ObjectKind::TimeIndex), side1.time_index.to_vec());
    assert_eq!(
        Some(Bytes::from(read(100, ObjectKind::TxnIndex))),
        side1.txn_index
    );
    assert_eq!(read(200, ObjectKind::Log), log2);
    assert!(read(200, ObjectKind::TxnIndex).is_empty());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list the download dir")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 8, "no temporary files left: {names:?}");

    // A failed upload (the file is shorter than it says) leaves nothing.
    let scratch = tempfile::tempdir().expect("a scratch dir");
    let mut short = upload(
        scratch.path(),
        300,
        399,
        &pattern(1000, 9),
        &SideFiles::new(9, true),
    );
    short.log_len = 5000;
    match store.upload_segment(&p, short, now_ms()).await {
        Err(TieredError::InvalidUpload(_)) => {}
        other => panic!("expected InvalidUpload, got {other:?}"),
    }
    let later = now_ms() + 3_600_000;
    assert_eq!(
        store
            .delete_orphans(&p, &m3, later)
            .await
            .expect("no orphans"),
        0
    );

    // Orphans: a copy no manifest lists goes; only once it is old enough.
    let (orphan, _, _) = upload_one(store, &p, 300, 70_000, false).await;
    assert_eq!(
        store
            .delete_orphans(&p, &m3, started - 3_600_000)
            .await
            .expect("too young"),
        0
    );
    assert_eq!(
        store.delete_orphans(&p, &m3, later).await.expect("orphans"),
        5
    );
    assert_not_found(store.get(&p, &orphan, ObjectKind::Log).await);
    assert_not_found(store.get(&p, &orphan, ObjectKind::OffsetIndex).await);
    assert_eq!(
        store
            .get(&p, &seg1, ObjectKind::OffsetIndex)
            .await
            .expect("kept"),
        side1.offset_index
    );
    assert_eq!(
        store
            .get(&p, &seg2, ObjectKind::Log)
            .await
            .expect("kept")
            .as_ref(),
        &log2[..]
    );
    assert_eq!(
        store.load_manifest(&p).await.expect("kept"),
        Some(m3.clone())
    );

    // Deleting a segment, twice.
    store.delete_segment(&p, &seg2).await.expect("delete seg2");
    store
        .delete_segment(&p, &seg2)
        .await
        .expect("delete seg2 again");
    assert_not_found(store.get(&p, &seg2, ObjectKind::Log).await);
    assert_not_found(store.download_segment(&p, &seg2, &dir).await);
    assert_eq!(
        read(200, ObjectKind::Log),
        log2,
        "a failed download keeps the old files"
    );

    // Another partition is untouched by deleting this one.
    let other = PartitionKey::new(p.topic.clone(), p.topic_id, 1);
    let (seg_other, _, side_other) = upload_one(store, &other, 0, 1000, false).await;
    store
        .delete_partition(&p)
        .await
        .expect("delete the partition");
    assert_eq!(store.load_manifest(&p).await.expect("load"), None);
    assert_not_found(store.get(&p, &seg1, ObjectKind::Log).await);
    assert_eq!(
        store
            .get(&other, &seg_other, ObjectKind::OffsetIndex)
            .await
            .expect("kept"),
        side_other.offset_index
    );
    store
        .delete_partition(&other)
        .await
        .expect("delete the other partition");
    store
        .delete_partition(&other)
        .await
        .expect("deleting nothing is fine");
}

fn m1_with_epoch(m: &Manifest, epoch: i32) -> Manifest {
    Manifest {
        leader_epoch: epoch,
        ..m.clone()
    }
}
