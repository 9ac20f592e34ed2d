//! Protocol-level behaviour of one broker: round trips, long polls, and what
//! malformed or invalid input gets back (an error code or a closed
//! connection, never a dead broker or a damaged log).

mod common;

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;

fn code(e: ResponseError) -> i16 {
    e.code()
}

#[tokio::test]
async fn produce_then_fetch_round_trips_every_codec() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let r = create_topic(&mut c, "rt", 2).await;
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let mut expected_offset = 0;
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let p = produce(&mut c, "rt", 1, batch(10, codec)).await;
        assert_eq!(p.error_code, 0, "{codec:?}");
        assert_eq!(p.base_offset, expected_offset, "{codec:?}");
        expected_offset += 10;
    }
    let f = fetch(&mut c, "rt", 1, 0, 0, 0).await;
    assert_eq!(f.error_code, 0);
    assert_eq!(f.high_watermark, 50);
    let recs = decode_records(f.records.unwrap());
    assert_eq!(recs.len(), 50);
    for (i, (off, k, v)) in recs.iter().enumerate() {
        assert_eq!(*off, i as i64);
        assert_eq!(k.as_ref(), format!("key-{}", i % 10).as_bytes());
        assert_eq!(v.as_ref(), format!("value-{}", i % 10).as_bytes());
    }
    // Fetching from the middle of a batch returns that whole batch.
    let f = fetch(&mut c, "rt", 1, 15, 0, 0).await;
    let recs = decode_records(f.records.unwrap());
    assert_eq!(recs.first().unwrap().0, 10);
    // Partition 0 is untouched.
    assert_eq!(fetch(&mut c, "rt", 0, 0, 0, 0).await.high_watermark, 0);
    b.stop().await;
}

#[tokio::test]
async fn long_poll_waits_for_data_and_wakes_on_produce() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "lp", 1).await;
    // Nothing to read: the fetch waits for max.wait.ms.
    let t = Instant::now();
    let f = fetch(&mut c, "lp", 0, 0, 600, 1).await;
    assert!(f.records.unwrap().is_empty());
    assert!(
        t.elapsed() >= Duration::from_millis(550),
        "returned after {:?}",
        t.elapsed()
    );

    // A produce during the wait completes the fetch early.
    let mut c2 = b.client().await;
    let t = Instant::now();
    let waiter = tokio::spawn(async move { fetch(&mut c, "lp", 0, 0, 10_000, 1).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    produce(&mut c2, "lp", 0, batch(3, Compression::None)).await;
    let f = waiter.await.unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "fetch was not woken: {:?}",
        t.elapsed()
    );
    assert_eq!(decode_records(f.records.unwrap()).len(), 3);
    b.stop().await;
}

#[tokio::test]
async fn corrupt_crc_is_rejected_and_nothing_is_appended() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "crc", 1).await;
    let mut bad = BytesMut::from(&batch(5, Compression::None)[..]);
    let n = bad.len();
    bad[n - 1] ^= 0xff; // flip a byte of the last record: CRC no longer matches
    let p = produce(&mut c, "crc", 0, bad.freeze()).await;
    assert_eq!(p.error_code, code(ResponseError::CorruptMessage));
    let f = fetch(&mut c, "crc", 0, 0, 0, 0).await;
    assert_eq!(f.high_watermark, 0);
    // The same connection keeps working.
    assert_eq!(
        produce(&mut c, "crc", 0, batch(1, Compression::None))
            .await
            .base_offset,
        0
    );
    b.stop().await;
}

#[tokio::test]
async fn oversized_batch_gets_message_too_large() {
    let b = TestBroker::start(&["message.max.bytes=200"]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "big", 1).await;
    let p = produce(&mut c, "big", 0, batch(50, Compression::None)).await;
    assert_eq!(p.error_code, code(ResponseError::MessageTooLarge));
    assert_eq!(
        produce(&mut c, "big", 0, batch(1, Compression::None))
            .await
            .error_code,
        0
    );
    b.stop().await;
}

#[tokio::test]
async fn unknown_topic_and_partition() {
    let b = TestBroker::start(&["auto.create.topics.enable=false"]).await;
    let mut c = b.client().await;
    let p = produce(&mut c, "nope", 0, batch(1, Compression::None)).await;
    assert_eq!(p.error_code, code(ResponseError::UnknownTopicOrPartition));
    create_topic(&mut c, "one", 1).await;
    let p = produce(&mut c, "one", 7, batch(1, Compression::None)).await;
    assert_eq!(p.error_code, code(ResponseError::UnknownTopicOrPartition));
    let f = fetch(&mut c, "nope", 0, 0, 0, 0).await;
    assert_eq!(f.error_code, code(ResponseError::UnknownTopicOrPartition));
    b.stop().await;
}

#[tokio::test]
async fn invalid_topic_names_and_bad_create_requests() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    for name in ["bad name", "..", "x/y", &"a".repeat(250)] {
        let r = create_topic(&mut c, name, 1).await;
        assert_eq!(
            r.topics[0].error_code,
            code(ResponseError::InvalidTopicException),
            "{name}"
        );
    }
    let r = create_topic(&mut c, "dup", 1).await;
    assert_eq!(r.topics[0].error_code, 0);
    let r = create_topic(&mut c, "dup", 1).await;
    assert_eq!(
        r.topics[0].error_code,
        code(ResponseError::TopicAlreadyExists)
    );
    let r = create_topic(&mut c, "zero", 0).await;
    assert_eq!(
        r.topics[0].error_code,
        code(ResponseError::InvalidPartitions)
    );

    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name("rf3");
    t.num_partitions = 1;
    t.replication_factor = 3;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    let r = c.call(&req, 7).await.unwrap();
    assert_eq!(
        r.topics[0].error_code,
        code(ResponseError::InvalidReplicationFactor)
    );

    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name("badcfg");
    t.num_partitions = 1;
    t.replication_factor = 1;
    let mut cfg = create_topics_request::CreatableTopicConfig::default();
    cfg.name = "retention.ms".into();
    cfg.value = Some("soon".into());
    t.configs = vec![cfg];
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    let r = c.call(&req, 7).await.unwrap();
    assert_eq!(r.topics[0].error_code, code(ResponseError::InvalidConfig));
    b.stop().await;
}

#[tokio::test]
async fn malformed_frames_close_only_that_connection() {
    let b = TestBroker::start(&["socket.request.max.bytes=1024"]).await;

    // A frame larger than socket.request.max.bytes.
    let mut c = b.client().await;
    let mut huge = BytesMut::new();
    huge.put_i32(10_000);
    tokio::io::AsyncWriteExt::write_all(&mut c.stream, &huge)
        .await
        .unwrap();
    assert!(
        c.is_closed().await,
        "oversized frame must close the connection"
    );

    // Garbage where a request header should be.
    let mut c = b.client().await;
    c.send_raw(&[0x00, 0x00, 0x00, 0x09, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02])
        .await
        .unwrap();
    assert!(c.is_closed().await, "garbage must close the connection");

    // An unknown API key.
    let mut c = b.client().await;
    c.send_raw(&[0x03, 0xe7, 0x00, 0x00, 0, 0, 0, 1, 0xff, 0xff])
        .await
        .unwrap();
    assert!(
        c.is_closed().await,
        "unknown API key must close the connection"
    );

    // An unsupported version of a known API (Produce v99).
    let mut c = b.client().await;
    c.send_raw(&[0x00, 0x00, 0x00, 0x63, 0, 0, 0, 1, 0xff, 0xff])
        .await
        .unwrap();
    assert!(
        c.is_closed().await,
        "unsupported version must close the connection"
    );

    // A truncated body of a valid header.
    let mut c = b.client().await;
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::CreateTopics as i16);
    frame.put_i16(5);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_slice(&[0x05, 0x01]);
    c.send_raw(&frame).await.unwrap();
    assert!(
        c.is_closed().await,
        "truncated body must close the connection"
    );

    // Everyone else is still served.
    let mut c = b.client().await;
    let r = c.call(&api_versions_request(), 3).await.unwrap();
    assert_eq!(r.error_code, 0);
    assert!(r.api_keys.iter().any(|k| k.api_key == ApiKey::Fetch as i16));
    b.stop().await;
}

#[tokio::test]
async fn api_versions_with_a_future_version_answers_unsupported_version() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::ApiVersions as i16);
    frame.put_i16(99);
    frame.put_i32(42);
    frame.put_i16(-1);
    c.send_raw(&frame).await.unwrap();
    let mut body = c.recv().await.unwrap();
    use kafka_protocol::protocol::Decodable;
    let h = ResponseHeader::decode(&mut body, 0).unwrap();
    assert_eq!(h.correlation_id, 42);
    let r = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(r.error_code, code(ResponseError::UnsupportedVersion));
    assert!(!r.api_keys.is_empty());
    b.stop().await;
}

#[tokio::test]
async fn list_offsets_earliest_latest_and_by_timestamp() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "lo", 1).await;
    produce(&mut c, "lo", 0, batch(10, Compression::None)).await;
    produce(&mut c, "lo", 0, batch(10, Compression::Lz4)).await;
    let ask = |ts: i64| {
        let mut p = list_offsets_request::ListOffsetsPartition::default();
        p.partition_index = 0;
        p.timestamp = ts;
        p.current_leader_epoch = -1;
        let mut t = list_offsets_request::ListOffsetsTopic::default();
        t.name = topic_name("lo");
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = vec![t];
        req
    };
    let get = |r: ListOffsetsResponse| {
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    };
    assert_eq!(get(c.call(&ask(-2), 7).await.unwrap()).1, 0);
    assert_eq!(get(c.call(&ask(-1), 7).await.unwrap()).1, 20);
    // Batch timestamps are 1_700_000_000_000 + i for i in 0..10, twice.
    let (e, off, _) = get(c.call(&ask(1_700_000_000_005), 7).await.unwrap());
    assert_eq!(e, 0);
    assert!(
        off <= 5,
        "offset for timestamp must be at or before the first matching record, got {off}"
    );
    let (_, off, ts) = get(c.call(&ask(-3), 7).await.unwrap());
    assert_eq!(ts, 1_700_000_000_009);
    assert!(off == 9 || off == 19, "max timestamp offset {off}");
    let (_, off, _) = get(c.call(&ask(1_800_000_000_000), 7).await.unwrap());
    assert_eq!(off, -1);
    b.stop().await;
}

#[tokio::test]
async fn data_survives_a_clean_restart() {
    let b = TestBroker::start(&["log.segment.bytes=2000"]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "keep", 1).await;
    for _ in 0..20 {
        assert_eq!(
            produce(&mut c, "keep", 0, batch(10, Compression::Gzip))
                .await
                .error_code,
            0
        );
    }
    drop(c);
    let dir = b.stop().await;
    let b = TestBroker::start_in(dir, &["log.segment.bytes=2000"]).await;
    let mut c = b.client().await;
    let mut offset = 0;
    let mut n = 0;
    while offset < 200 {
        let f = fetch(&mut c, "keep", 0, offset, 0, 0).await;
        assert_eq!(f.high_watermark, 200);
        let recs = decode_records(f.records.unwrap());
        for (o, _, _) in &recs {
            if *o >= offset {
                assert_eq!(*o, offset);
                offset += 1;
                n += 1;
            }
        }
    }
    assert_eq!(n, 200);
    let segments = std::fs::read_dir(b.dir.path().join("keep-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .map(|x| x == "log")
                .unwrap_or(false)
        })
        .count();
    assert!(
        segments > 1,
        "log.segment.bytes=2000 should have rolled segments"
    );
    b.stop().await;
}

/// acks=0: no response ever comes back. A produce that succeeds leaves the
/// connection open; one that fails (here: an unknown topic) closes it, as
/// Kafka does, so the client notices and refreshes its metadata.
#[tokio::test]
async fn a_failed_acks_zero_produce_closes_the_connection() {
    let b = TestBroker::start(&["auto.create.topics.enable=false"]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "fire", 1).await;
    let send = |topic: &str| {
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(batch(3, Compression::None));
        let mut td = produce_request::TopicProduceData::default();
        td.name = topic_name(topic);
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = 0;
        req.timeout_ms = 5000;
        req.topic_data = vec![td];
        req
    };
    c.send(&send("fire"), 9).await.unwrap();
    // The connection still answers (and the records are there).
    let f = fetch(&mut c, "fire", 0, 0, 0, 0).await;
    assert_eq!(f.high_watermark, 3);
    c.send(&send("nowhere"), 9).await.unwrap();
    assert!(
        c.is_closed().await,
        "a failed acks=0 produce closes the connection"
    );
    // Nothing else is affected.
    let mut c2 = b.client().await;
    assert_eq!(
        produce(&mut c2, "fire", 0, batch(1, Compression::None))
            .await
            .base_offset,
        3
    );
    b.stop().await;
}

/// DescribeTopicPartitions (KIP-966): every partition once, in topic-name
/// order, paged by `response_partition_limit` with a cursor; named topics
/// that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION.
#[tokio::test]
async fn describe_topic_partitions_pages_with_a_cursor() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(
        create_topic(&mut c, "dtp-b", 3).await.topics[0].error_code,
        0
    );
    assert_eq!(
        create_topic(&mut c, "dtp-a", 5).await.topics[0].error_code,
        0
    );
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let mut req = DescribeTopicPartitionsRequest::default();
        req.response_partition_limit = 4;
        req.cursor = cursor.take();
        let resp = c.call(&req, 0).await.unwrap();
        pages += 1;
        for t in &resp.topics {
            assert_eq!(t.error_code, 0);
            let name = t.name.as_ref().unwrap().0.to_string();
            for p in &t.partitions {
                assert_eq!(p.error_code, 0);
                assert_eq!(p.leader_id.0, 1);
                assert_eq!(p.isr_nodes.len(), 1);
                assert_eq!(p.eligible_leader_replicas.as_deref(), Some(&[][..]));
                seen.push((name.clone(), p.partition_index));
            }
        }
        match resp.next_cursor {
            Some(next) => {
                let mut cur = describe_topic_partitions_request::Cursor::default();
                cur.topic_name = next.topic_name;
                cur.partition_index = next.partition_index;
                cursor = Some(cur);
            }
            None => break,
        }
        assert!(pages < 10, "the cursor does not advance");
    }
    let want: Vec<(String, i32)> = (0..5)
        .map(|i| ("dtp-a".to_string(), i))
        .chain((0..3).map(|i| ("dtp-b".to_string(), i)))
        .collect();
    assert_eq!(seen, want);
    assert_eq!(pages, 2);

    let mut t = describe_topic_partitions_request::TopicRequest::default();
    t.name = topic_name("dtp-missing");
    let mut req = DescribeTopicPartitionsRequest::default();
    req.response_partition_limit = 2000;
    req.topics = vec![t];
    let resp = c.call(&req, 0).await.unwrap();
    assert_eq!(
        resp.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

/// connections.max.idle.ms: a connection without a request for that long is
/// closed; one that keeps sending requests stays open.
#[tokio::test]
async fn idle_connections_are_closed_after_connections_max_idle_ms() {
    let b = TestBroker::start(&["connections.max.idle.ms=600"]).await;
    let mut idle = b.client().await;
    let mut busy = b.client().await;
    let req = api_versions_request();
    idle.call(&req, 3).await.unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1_500) {
        busy.call(&req, 3)
            .await
            .expect("a busy connection stays open");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        idle.is_closed().await,
        "an idle connection outlived connections.max.idle.ms"
    );
    busy.call(&req, 3).await.unwrap();
}
