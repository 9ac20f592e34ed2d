//! Fetch sessions (KIP-227) over the wire: a session opened by a full fetch,
//! incremental fetches that name only changed partitions and get back only
//! partitions with news, forgotten partitions, and the session errors a
//! client recovers from.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;
use uuid::Uuid;

/// Fetch v13+ names topics by id.
const VERSION: i16 = 13;

fn part(partition: i32, offset: i64) -> FetchPartition {
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    fp.current_leader_epoch = -1;
    fp.last_fetched_epoch = -1;
    fp.log_start_offset = -1;
    fp
}

fn request(id: Uuid, session: (i32, i32), parts: Vec<FetchPartition>) -> FetchRequest {
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 50 << 20;
    req.session_id = session.0;
    req.session_epoch = session.1;
    if !parts.is_empty() {
        let mut ft = FetchTopic::default();
        ft.topic_id = id;
        ft.partitions = parts;
        req.topics = vec![ft];
    }
    req
}

/// (partition, high watermark, records) of each partition in a response.
fn answered(resp: &FetchResponse) -> Vec<(i32, i64, usize)> {
    let mut out: Vec<_> = resp
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let n = p
                .records
                .clone()
                .map(|r| decode_records(r).len())
                .unwrap_or(0);
            (p.partition_index, p.high_watermark, n)
        })
        .collect();
    out.sort();
    out
}

async fn topic_id(c: &mut Client, name: &str) -> Uuid {
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic_name(name));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let resp = c.call(&req, 12).await.unwrap();
    resp.topics[0].topic_id
}

#[tokio::test]
async fn incremental_fetches_carry_only_what_changed() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "s", 3).await;
    assert_eq!(
        produce(&mut c, "s", 0, batch(5, Compression::None))
            .await
            .error_code,
        0
    );
    let id = topic_id(&mut c, "s").await;

    // Epoch 0 opens a session: everything is answered, records of p0.
    let parts = vec![part(0, 0), part(1, 0), part(2, 0)];
    let resp = c.call(&request(id, (0, 0), parts), VERSION).await.unwrap();
    assert_eq!(resp.error_code, 0);
    let session = resp.session_id;
    assert_ne!(session, 0, "a full fetch with epoch 0 opens a session");
    assert_eq!(answered(&resp), vec![(0, 5, 5), (1, 0, 0), (2, 0, 0)]);

    // Nothing changed, p0's position moved past its records: empty answer.
    let resp = c
        .call(&request(id, (session, 1), vec![part(0, 5)]), VERSION)
        .await
        .unwrap();
    assert_eq!((resp.error_code, resp.session_id), (0, session));
    assert!(answered(&resp).is_empty(), "{:?}", answered(&resp));

    // New records on p1, not named in the request: p1 alone comes back,
    // read from the session's offset.
    assert_eq!(
        produce(&mut c, "s", 1, batch(3, Compression::None))
            .await
            .error_code,
        0
    );
    let resp = c
        .call(&request(id, (session, 2), vec![]), VERSION)
        .await
        .unwrap();
    assert_eq!(answered(&resp), vec![(1, 3, 3)]);

    // A long poll on the session wakes on an append to any of its partitions.
    let started = Instant::now();
    let mut req = request(id, (session, 3), vec![part(1, 3)]);
    req.max_wait_ms = 5_000;
    req.min_bytes = 1;
    let mut waiter = b.client().await;
    let poll = tokio::spawn(async move { waiter.call(&req, VERSION).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        produce(&mut c, "s", 2, batch(2, Compression::None))
            .await
            .error_code,
        0
    );
    let resp = poll.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(answered(&resp), vec![(2, 2, 2)]);

    // Forget p2: later appends to it are no longer fetched.
    let mut req = request(id, (session, 4), vec![]);
    let mut forget = ForgottenTopic::default();
    forget.topic_id = id;
    forget.partitions = vec![2];
    req.forgotten_topics_data = vec![forget];
    let resp = c.call(&req, VERSION).await.unwrap();
    assert!(answered(&resp).is_empty(), "{:?}", answered(&resp));
    assert_eq!(
        produce(&mut c, "s", 2, batch(2, Compression::None))
            .await
            .error_code,
        0
    );
    let resp = c
        .call(&request(id, (session, 5), vec![]), VERSION)
        .await
        .unwrap();
    assert!(answered(&resp).is_empty(), "{:?}", answered(&resp));

    // A replayed epoch, an unknown session: top-level errors, nothing else.
    let resp = c
        .call(&request(id, (session, 5), vec![]), VERSION)
        .await
        .unwrap();
    assert_eq!(
        resp.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    assert!(resp.responses.is_empty());
    let resp = c
        .call(&request(id, (session ^ 1, 1), vec![]), VERSION)
        .await
        .unwrap();
    assert_eq!(
        resp.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );

    // Epoch -1 closes the session and answers in full without one.
    let resp = c
        .call(&request(id, (session, -1), vec![part(0, 0)]), VERSION)
        .await
        .unwrap();
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(answered(&resp), vec![(0, 5, 5)]);
    let resp = c
        .call(&request(id, (session, 6), vec![]), VERSION)
        .await
        .unwrap();
    assert_eq!(
        resp.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    b.stop().await;
}

#[tokio::test]
async fn zero_cache_slots_turn_sessions_off() {
    let b = TestBroker::start(&["max.incremental.fetch.session.cache.slots=0"]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "off", 1).await;
    let id = topic_id(&mut c, "off").await;
    let resp = c
        .call(&request(id, (0, 0), vec![part(0, 0)]), VERSION)
        .await
        .unwrap();
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(answered(&resp), vec![(0, 0, 0)]);
    b.stop().await;
}
