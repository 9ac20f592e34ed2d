//! The log cleaner runs beside produce and fetch: while a throttled clean
//! of a compacted partition is in progress (its `.cleaned` files are on
//! disk), appends to that partition are acknowledged at once; once it is
//! done only the latest value per key is left.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use kafka_protocol::records::Compression;
use skein_storage::testing::kv_batch;

fn cleaning(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir.join("cmp-0"))
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().contains(".cleaned"))
        })
        .unwrap_or(false)
}

#[tokio::test]
async fn produce_is_not_held_up_by_a_running_clean() {
    // 400 kB/s: cleaning the ~3 MB below takes several seconds.
    let b = TestBroker::start(&[
        "log.cleaner.backoff.ms=100",
        "log.cleaner.io.max.bytes.per.second=400000",
    ])
    .await;
    let mut c = b.client().await;
    let r = create_replicated_topic(
        &mut c,
        "cmp",
        1,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "262144"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    )
    .await;
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let value = "v".repeat(900);
    for round in 0..30 {
        let vals: Vec<(String, String)> = (0..100)
            .map(|k| (format!("k{k}"), format!("{round}-{value}")))
            .collect();
        let kvs: Vec<(&str, Option<&str>)> = vals
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect();
        let batch = Bytes::from(kv_batch(&kvs, 0, Compression::None));
        assert_eq!(produce(&mut c, "cmp", 0, batch).await.error_code, 0);
    }

    let deadline = Instant::now() + Duration::from_secs(30);
    while !cleaning(b.dir.path()) {
        assert!(Instant::now() < deadline, "the cleaner never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut slowest = Duration::ZERO;
    for i in 0..10 {
        let started = Instant::now();
        let batch = Bytes::from(kv_batch(
            &[("during", Some(&format!("d{i}")))],
            0,
            Compression::None,
        ));
        assert_eq!(produce(&mut c, "cmp", 0, batch).await.error_code, 0);
        slowest = slowest.max(started.elapsed());
        let f = fetch(&mut c, "cmp", 0, 0, 0, 0).await;
        assert_eq!(f.error_code, 0);
    }
    assert!(cleaning(b.dir.path()), "the clean must still be running");
    assert!(
        slowest < Duration::from_millis(500),
        "an append waited {slowest:?} for the cleaner"
    );

    // When it is done: the last value of each key, and the appends made meanwhile.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let recs = read_all(&mut c, "cmp", 0).await;
        let first_rounds = recs.iter().filter(|(_, _, v)| v.starts_with(b"0-")).count();
        if first_rounds == 0 && !cleaning(b.dir.path()) {
            let last: Vec<_> = recs
                .iter()
                .filter(|(_, k, _)| k.as_ref() == b"during")
                .collect();
            assert_eq!(last.last().unwrap().2.as_ref(), b"d9");
            assert!(recs.iter().any(|(_, _, v)| v.starts_with(b"29-")));
            break;
        }
        assert!(Instant::now() < deadline, "the clean did not finish");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b.stop().await;
}
