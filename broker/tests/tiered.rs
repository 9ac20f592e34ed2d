//! Tiered storage over the wire, one broker with a directory store: a
//! consumer's Fetch of several partitions whose offsets are only in the
//! store reads them all in one request, within the response's `max_bytes`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;

const TOPIC: &str = "tiered";
const PARTITIONS: i32 = 3;

/// ListOffsets v8 `EARLIEST_LOCAL_TIMESTAMP` (-4): the local log start.
async fn earliest_local(c: &mut Client, partition: i32) -> i64 {
    let (error, offset, _) = list_offset_v(c, TOPIC, partition, -4, 8).await;
    assert_eq!(error, 0);
    offset
}

/// A Fetch of every partition from offset 0, with a response of at most `max_bytes`.
async fn fetch_all_from_zero(c: &mut Client, max_bytes: i32) -> Vec<fetch_response::PartitionData> {
    let mut req = fetch_request(TOPIC, 0, 0, -1);
    let first = req.topics[0].partitions[0].clone();
    req.topics[0].partitions = (0..PARTITIONS)
        .map(|p| {
            let mut fp = first.clone();
            fp.partition = p;
            fp
        })
        .collect();
    req.max_bytes = max_bytes;
    req.max_wait_ms = 500;
    req.min_bytes = 1;
    let resp = c.call(&req, 12).await.unwrap();
    let mut parts = resp.responses.into_iter().next().unwrap().partitions;
    parts.sort_by_key(|p| p.partition_index);
    parts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_reads_every_tiered_partition_at_once_within_its_max_bytes() {
    let store = tempfile::tempdir().unwrap();
    let url = format!("rsm.config.storage.url={}", store.path().display());
    let b = TestBroker::start(&[
        "remote.log.storage.system.enable=true",
        &url,
        "remote.log.manager.task.interval.ms=100",
        "log.retention.check.interval.ms=100",
        "log.segment.delete.delay.ms=0",
    ])
    .await;
    let mut c = b.client().await;
    let r = create_replicated_topic(
        &mut c,
        TOPIC,
        PARTITIONS,
        1,
        &[
            ("remote.storage.enable", "true"),
            // The test batches are timestamped in 2023: kept forever.
            ("retention.ms", "-1"),
            ("segment.bytes", "1024"),
            ("local.retention.ms", "1"),
        ],
    )
    .await;
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    for p in 0..PARTITIONS {
        for _ in 0..20 {
            assert_eq!(
                produce(&mut c, TOPIC, p, batch(10, Compression::None))
                    .await
                    .error_code,
                0
            );
        }
    }
    // Copied and gone from the local log: offset 0 is only in the store.
    let deadline = Instant::now() + Duration::from_secs(60);
    for p in 0..PARTITIONS {
        while earliest_local(&mut c, p).await == 0 {
            assert!(
                Instant::now() < deadline,
                "partition {p}: offset 0 still local"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Room for all: every partition answers its first records from the store
    // (a download not done within the wait answers empty; asked again, it is).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let parts = fetch_all_from_zero(&mut c, 50 << 20).await;
        for p in &parts {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
        }
        let read: Vec<_> = parts
            .iter()
            .map(|p| p.records.clone().map(decode_records).unwrap_or_default())
            .collect();
        if read.iter().all(|r| !r.is_empty()) {
            for r in &read {
                assert_eq!(r[0].0, 0, "each partition from offset 0");
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every partition read from the store"
        );
    }

    // A response of one byte: the first partition's first batch only
    // (KIP-74), the others empty and without an error.
    let parts = fetch_all_from_zero(&mut c, 1).await;
    let sizes: Vec<usize> = parts
        .iter()
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .collect();
    assert!(
        sizes[0] > 0 && sizes[1..].iter().all(|s| *s == 0),
        "{sizes:?}"
    );
    assert!(parts.iter().all(|p| p.error_code == 0));
    let first = decode_records(parts[0].records.clone().unwrap());
    assert_eq!(first.len(), 10, "one batch");
    b.stop().await;
}
