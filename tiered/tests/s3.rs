//! The round trip against a real S3 server (SeaweedFS in Skein's tests).
//! Ignored by default; run with a server up:
//!
//! ```text
//! SKEIN_TEST_S3_ENDPOINT=http://127.0.0.1:8333 SKEIN_TEST_S3_BUCKET=tiered \
//! SKEIN_TEST_S3_ACCESS_KEY=skeinkey SKEIN_TEST_S3_SECRET_KEY=skeinsecret \
//!   cargo test -p skein-tiered --test s3 -- --ignored
//! ```

mod common;

use std::time::Duration;

use skein_tiered::{ObjectKind, RemoteStore, SegmentCache, StoreConfig, TieredError};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("set {name} to run the S3 test"))
}

fn config(prefix: &str) -> StoreConfig {
    let bucket = std::env::var("SKEIN_TEST_S3_BUCKET").unwrap_or_else(|_| "tiered".to_string());
    StoreConfig {
        endpoint: Some(env("SKEIN_TEST_S3_ENDPOINT")),
        region: std::env::var("SKEIN_TEST_S3_REGION").ok(),
        access_key_id: Some(env("SKEIN_TEST_S3_ACCESS_KEY")),
        secret_access_key: Some(env("SKEIN_TEST_S3_SECRET_KEY")),
        max_retries: 1,
        retry_timeout: Duration::from_secs(10),
        ..StoreConfig::new(format!("s3://{bucket}/{prefix}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an S3 server: SKEIN_TEST_S3_ENDPOINT and keys"]
async fn s3_store_round_trip() {
    let store = RemoteStore::open(&config("skein-test/round-trip")).expect("open");
    assert!(!store.describe().contains(&env("SKEIN_TEST_S3_SECRET_KEY")));
    common::round_trip(&store).await;

    // The cache over S3, too.
    let p = common::fresh_partition(0);
    let (seg, log, _) = common::upload_one(&store, &p, 0, 300_000, true).await;
    let dir = tempfile::tempdir().expect("a cache dir");
    let cache = SegmentCache::new(store.clone(), dir.path(), 1 << 30).expect("new");
    let got = cache.get(&p, &seg).await.expect("downloaded");
    assert_eq!(
        std::fs::read(got.file(ObjectKind::Log)).expect("the .log"),
        log
    );
    store.delete_partition(&p).await.expect("clean up");
}

#[tokio::test]
#[ignore = "needs an S3 server: SKEIN_TEST_S3_ENDPOINT and keys"]
async fn s3_wrong_secret_is_refused() {
    let mut cfg = config("skein-test/refused");
    cfg.secret_access_key = Some("not-the-secret".to_string());
    let store = RemoteStore::open(&cfg).expect("open");
    let p = common::fresh_partition(0);
    match store.load_manifest(&p).await {
        Err(TieredError::Store(_)) => {}
        other => panic!("expected an authorization error, got {other:?}"),
    }
}
