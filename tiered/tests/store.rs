//! The round trip on the stores that need no server: a directory
//! (object_store's LocalFileSystem) and memory.

mod common;

use skein_tiered::{RemoteStore, StoreConfig, TieredError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_store_round_trip() {
    let root = tempfile::tempdir().expect("a store dir");
    let dir = root.path().join("not-yet-there");
    let store = RemoteStore::open(&StoreConfig::new(dir.to_string_lossy())).expect("open");
    assert_eq!(store.describe(), format!("file://{}", dir.display()));
    common::round_trip(&store).await;
    // Deleted partitions leave no empty directories behind.
    let left: Vec<_> = std::fs::read_dir(&dir).expect("the store dir").collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_url_store_round_trip() {
    let root = tempfile::tempdir().expect("a store dir");
    let url = format!("file://{}", root.path().display());
    let store = RemoteStore::open(&StoreConfig::new(url)).expect("open");
    common::round_trip(&store).await;
}

#[tokio::test]
async fn memory_store_round_trip() {
    let store = RemoteStore::open(&StoreConfig::new("mem://cluster-a")).expect("open");
    common::round_trip(&store).await;
}

#[test]
fn bad_urls_are_refused() {
    for url in ["relative/dir", "s3://", "gs://bucket"] {
        let cfg = StoreConfig::new(url);
        assert!(
            matches!(RemoteStore::open(&cfg), Err(TieredError::Config(_))),
            "{url}"
        );
    }
}
