//! The read cache: one download per segment however many readers ask, LRU
//! eviction within the capacity, held segments never evicted, prefetch.

mod common;

use std::time::Duration;

use skein_tiered::{
    ObjectKind, PartitionKey, RemoteSegment, RemoteStore, SegmentCache, StoreConfig,
};

const LOG_LEN: usize = 100_000;

async fn store_with_segments(n: i64) -> (RemoteStore, PartitionKey, Vec<(RemoteSegment, Vec<u8>)>) {
    let store = RemoteStore::open(&StoreConfig::new("mem://")).expect("open");
    let p = common::fresh_partition(7);
    let mut segs = Vec::new();
    for i in 0..n {
        let (seg, log, _) = common::upload_one(&store, &p, i * 100, LOG_LEN, i % 2 == 0).await;
        segs.push((seg, log));
    }
    (store, p, segs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_share_one_download() {
    let (store, p, segs) = store_with_segments(1).await;
    let dir = tempfile::tempdir().expect("a cache dir");
    let cache =
        SegmentCache::new(store, dir.path().join("cache"), 10 * LOG_LEN as u64).expect("new");
    let (seg, log) = &segs[0];
    let readers: Vec<_> = (0..16)
        .map(|_| {
            let (cache, p, seg) = (cache.clone(), p.clone(), seg.clone());
            tokio::spawn(async move {
                cache
                    .get(&p, &seg)
                    .await
                    .expect("cached")
                    .dir()
                    .to_path_buf()
            })
        })
        .collect();
    let mut dirs = Vec::new();
    for reader in readers {
        dirs.push(reader.await.expect("the reader task"));
    }
    assert!(dirs.iter().all(|d| d == &dirs[0]));
    assert_eq!(cache.misses(), 1, "downloaded once");
    assert_eq!(cache.hits(), 15);
    let held = cache.get(&p, seg).await.expect("cached");
    assert_eq!(cache.hits(), 16);
    assert_eq!(
        std::fs::read(held.file(ObjectKind::Log)).expect("the .log"),
        *log
    );
    assert_eq!(
        held.dir(),
        dir.path()
            .join("cache")
            .join(format!("orders-7-{}", p.topic_id))
            .join(format!("0-{}", seg.id))
    );
    assert_eq!(cache.cached_bytes(), held.size_bytes());
    assert!(held.size_bytes() > LOG_LEN as u64);
}

#[tokio::test]
async fn least_recently_used_segments_are_evicted_within_capacity() {
    let (store, p, segs) = store_with_segments(4).await;
    let dir = tempfile::tempdir().expect("a cache dir");
    // Room for two segments and a half.
    let one = LOG_LEN as u64 + 4096;
    let cache = SegmentCache::new(store, dir.path(), 2 * one + one / 2).expect("new");
    let get = |i: usize| {
        let (cache, p, seg) = (cache.clone(), p.clone(), segs[i].0.clone());
        async move {
            cache
                .get(&p, &seg)
                .await
                .expect("cached")
                .dir()
                .to_path_buf()
        }
    };
    let d0 = get(0).await;
    let d1 = get(1).await;
    get(0).await; // 0 is now more recent than 1
    let d2 = get(2).await;
    assert!(cache.cached_bytes() <= cache.capacity_bytes());
    assert_eq!(cache.evictions(), 1);
    assert!(d0.exists() && d2.exists());
    assert!(!d1.exists(), "the least recently used one went");
    assert_eq!((cache.misses(), cache.hits()), (3, 1));
    // Asked again, it is downloaded again (and 0 goes: 2 was used later).
    get(1).await;
    assert_eq!((cache.misses(), cache.evictions()), (4, 2));
    assert!(!d0.exists() && d2.exists());
    // Nothing else is left in the cache dir.
    let mut kept = 0;
    for entry in std::fs::read_dir(dir.path().join(p.cache_dir_name())).expect("the partition dir")
    {
        kept += 1;
        assert!(entry.expect("an entry").path().is_dir());
    }
    assert_eq!(kept, 2);
}

#[tokio::test]
async fn held_segments_are_not_evicted() {
    let (store, p, segs) = store_with_segments(3).await;
    let dir = tempfile::tempdir().expect("a cache dir");
    // Room for one segment only.
    let cache = SegmentCache::new(store, dir.path(), LOG_LEN as u64 + 4096).expect("new");
    let held = cache.get(&p, &segs[0].0).await.expect("cached");
    let second = cache.get(&p, &segs[1].0).await.expect("cached");
    // Both held: over capacity for now.
    assert!(held.dir().exists() && second.dir().exists());
    assert_eq!(cache.evictions(), 0);
    drop(second);
    let third = cache.get(&p, &segs[2].0).await.expect("cached");
    assert_eq!(cache.evictions(), 1, "the released one went");
    assert!(held.dir().exists() && third.dir().exists());
    assert_eq!(
        std::fs::read(held.file(ObjectKind::Log)).expect("still readable"),
        segs[0].1
    );
    assert_eq!(cache.cached_bytes(), held.size_bytes() + third.size_bytes());
}

#[tokio::test]
async fn prefetch_downloads_in_the_background() {
    let (store, p, segs) = store_with_segments(2).await;
    let dir = tempfile::tempdir().expect("a cache dir");
    let cache = SegmentCache::new(store, dir.path(), 10 * LOG_LEN as u64).expect("new");
    cache.prefetch(&p, &segs[1].0);
    for _ in 0..500 {
        if cache.prefetches() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(cache.prefetches(), 1);
    let got = cache.get(&p, &segs[1].0).await.expect("cached");
    assert_eq!((cache.hits(), cache.misses()), (1, 0));
    assert_eq!(
        std::fs::read(got.file(ObjectKind::Log)).expect("the .log"),
        segs[1].1
    );
    assert!(std::fs::read(got.file(ObjectKind::TxnIndex))
        .expect("the .txnindex")
        .is_empty());
}

#[tokio::test]
async fn a_failed_download_is_retried_by_the_next_reader() {
    let (store, p, segs) = store_with_segments(1).await;
    let dir = tempfile::tempdir().expect("a cache dir");
    let cache = SegmentCache::new(store.clone(), dir.path(), 10 * LOG_LEN as u64).expect("new");
    let mut missing = segs[0].0.clone();
    missing.id = uuid::Uuid::new_v4();
    let err = cache.get(&p, &missing).await.expect_err("not in the store");
    assert!(err.is_not_found(), "{err}");
    assert_eq!(cache.cached_bytes(), 0);
    let got = cache.get(&p, &segs[0].0).await.expect("cached");
    assert_eq!(cache.cached_bytes(), got.size_bytes());
}

#[test]
fn new_empties_the_cache_dir() {
    let dir = tempfile::tempdir().expect("a cache dir");
    std::fs::create_dir_all(dir.path().join("old/segment")).expect("mkdir");
    std::fs::write(dir.path().join("old/segment/0.log"), b"stale").expect("write");
    std::fs::write(dir.path().join("stray"), b"stale").expect("write");
    let store = RemoteStore::open(&StoreConfig::new("mem://")).expect("open");
    let _cache = SegmentCache::new(store, dir.path(), 1).expect("new");
    assert_eq!(std::fs::read_dir(dir.path()).expect("the dir").count(), 0);
}
