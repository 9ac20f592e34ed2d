//! Small requests whose length and count fields are huge (the 343 GB
//! OffsetForLeaderEpoch allocation found by replaying mutated client
//! requests, and its relatives): each must get an error or a closed
//! connection, and the broker must keep serving everyone else.
//!
//! Before the kafka-protocol patch (vendor/kafka-protocol/SKEIN-PATCH.md)
//! the first test aborted the whole test process on the failed allocation.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

/// A request header v1 (non-flexible requests): key, version, correlation
/// id, client id.
fn header_v1(api: ApiKey, version: i16) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i16(api as i16);
    b.put_i16(version);
    b.put_i32(1);
    b.put_i16(4);
    b.put_slice(b"fuzz");
    b
}

/// A request header v2 (flexible requests): v1 plus empty tagged fields.
fn header_v2(api: ApiKey, version: i16) -> BytesMut {
    let mut b = header_v1(api, version);
    b.put_u8(0);
    b
}

/// An unsigned varint as flexible versions encode lengths (length + 1).
fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// Sends `frame` on its own connection and expects the broker to close it.
async fn expect_closed(b: &TestBroker, frame: &[u8], what: &str) {
    let mut c = b.client().await;
    c.send_raw(frame).await.unwrap();
    assert!(c.is_closed().await, "{what}: the connection must be closed");
}

/// A new connection is answered: ApiVersions and Metadata.
async fn still_serving(b: &TestBroker) {
    let mut c = b.client().await;
    let r = c.call(&api_versions_request(), 3).await.unwrap();
    assert_eq!(r.error_code, 0);
    let m = c.call(&MetadataRequest::default(), 12).await.unwrap();
    assert_eq!(m.brokers.len(), 1);
}

#[tokio::test]
async fn offset_for_leader_epoch_with_a_huge_array_count_does_not_kill_the_broker() {
    let b = TestBroker::start(&[]).await;

    // v2: `topics` is an Array with an i32 count.
    let mut f = header_v1(ApiKey::OffsetForLeaderEpoch, 2);
    f.put_i32(0x7fff_ffff);
    f.put_slice(&[0; 8]);
    expect_closed(&b, &f, "OffsetForLeaderEpoch v2, 2^31-1 topics").await;

    // v3 adds the replica id before the array.
    let mut f = header_v1(ApiKey::OffsetForLeaderEpoch, 3);
    f.put_i32(-1);
    f.put_i32(0x7fff_ffff);
    f.put_slice(&[0; 8]);
    expect_closed(&b, &f, "OffsetForLeaderEpoch v3, 2^31-1 topics").await;

    // v4 is flexible: `topics` is a CompactArray (varint count + 1).
    let mut f = header_v2(ApiKey::OffsetForLeaderEpoch, 4);
    f.put_i32(-1);
    put_uvarint(&mut f, u32::MAX);
    f.put_slice(&[0; 8]);
    expect_closed(&b, &f, "OffsetForLeaderEpoch v4, 2^32-2 topics").await;

    // A valid count of topics whose partition array count is huge.
    let mut f = header_v2(ApiKey::OffsetForLeaderEpoch, 4);
    f.put_i32(-1);
    put_uvarint(&mut f, 2); // one topic
    put_uvarint(&mut f, 2); // name "t"
    f.put_u8(b't');
    put_uvarint(&mut f, u32::MAX); // partitions
    expect_closed(&b, &f, "OffsetForLeaderEpoch v4, 2^32-2 partitions").await;

    still_serving(&b).await;
    b.stop().await;
}

#[tokio::test]
async fn other_huge_counts_and_lengths_close_the_connection() {
    let b = TestBroker::start(&[]).await;

    // Metadata v12 (flexible): topics CompactArray of 2^32-2.
    let mut f = header_v2(ApiKey::Metadata, 12);
    put_uvarint(&mut f, u32::MAX);
    f.put_slice(&[0; 4]);
    expect_closed(&b, &f, "Metadata v12, 2^32-2 topics").await;

    // Produce v9 (flexible): one topic, one partition, records claiming 4 GiB.
    let mut f = header_v2(ApiKey::Produce, 9);
    put_uvarint(&mut f, 0); // null transactional id
    f.put_i16(1);
    f.put_i32(1000);
    put_uvarint(&mut f, 2); // one topic
    put_uvarint(&mut f, 2);
    f.put_u8(b't');
    put_uvarint(&mut f, 2); // one partition
    f.put_i32(0);
    put_uvarint(&mut f, u32::MAX); // records length
    f.put_slice(&[0; 8]);
    expect_closed(&b, &f, "Produce v9, 4 GiB records").await;

    // DescribeConfigs v1 (non-flexible): resources Array of 2^31-1.
    let mut f = header_v1(ApiKey::DescribeConfigs, 1);
    f.put_i32(i32::MAX);
    expect_closed(&b, &f, "DescribeConfigs v1, 2^31-1 resources").await;

    // A size prefix of socket.request.max.bytes with only a few bytes sent
    // reserves nothing up front; the other connections carry on.
    let mut slow = b.client().await;
    let mut prefix = BytesMut::new();
    prefix.put_i32(100 << 20);
    prefix.put_slice(&[0; 16]);
    tokio::io::AsyncWriteExt::write_all(&mut slow.stream, &prefix)
        .await
        .unwrap();

    still_serving(&b).await;
    drop(slow);
    b.stop().await;
}

#[tokio::test]
async fn create_topics_with_billions_of_partitions_is_a_policy_violation() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let r = create_topic(&mut c, "huge", i32::MAX).await;
    assert_eq!(
        r.topics[0].error_code,
        kafka_protocol::error::ResponseError::PolicyViolation.code()
    );
    let r = create_topic(&mut c, "fine", 3).await;
    assert_eq!(r.topics[0].error_code, 0);

    let mut t = create_partitions_request::CreatePartitionsTopic::default();
    t.name = topic_name("fine");
    t.count = i32::MAX;
    let mut req = CreatePartitionsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 5000;
    let r = c.call(&req, 3).await.unwrap();
    assert_eq!(
        r.results[0].error_code,
        kafka_protocol::error::ResponseError::PolicyViolation.code()
    );
    still_serving(&b).await;
    b.stop().await;
}

/// The patched decoders, through the messages the broker decodes: every
/// count or length larger than the bytes left is an error, not an
/// allocation. (The `String`/`Vec<u8>` decoders that were patched too are
/// not used by any message and not reachable from outside the crate.)
#[test]
fn patched_kafka_protocol_refuses_counts_beyond_the_buffer() {
    // Array (i32 count), OffsetForLeaderEpoch v2.
    let mut body = BytesMut::new();
    body.put_i32(i32::MAX);
    body.put_slice(&[0; 8]);
    let err = OffsetForLeaderEpochRequest::decode(&mut body.freeze(), 2).unwrap_err();
    assert!(err.to_string().contains("remaining"), "{err}");

    // CompactArray (varint count), OffsetForLeaderEpoch v4.
    let mut body = BytesMut::new();
    body.put_i32(-1);
    put_uvarint(&mut body, u32::MAX);
    body.put_slice(&[0; 8]);
    let err = OffsetForLeaderEpochRequest::decode(&mut body.freeze(), 4).unwrap_err();
    assert!(err.to_string().contains("remaining"), "{err}");

    // A CompactString length (topic name), Metadata v12.
    let mut body = BytesMut::new();
    put_uvarint(&mut body, 2);
    body.put_slice(&[0; 16]); // topic id
    put_uvarint(&mut body, u32::MAX);
    body.put_slice(b"abc");
    assert!(MetadataRequest::decode(&mut body.freeze(), 12).is_err());

    // Untouched: legitimate requests still round-trip.
    let mut req = OffsetForLeaderEpochRequest::default();
    let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
    t.topic = topic_name("t");
    t.partitions = vec![Default::default(); 3];
    req.topics = vec![t];
    for v in 2..=4 {
        let mut out = BytesMut::new();
        kafka_protocol::protocol::Encodable::encode(&req, &mut out, v).unwrap();
        let back = OffsetForLeaderEpochRequest::decode(&mut out.freeze(), v).unwrap();
        assert_eq!(back, req, "v{v}");
    }
}

/// Overwrites a batch's record count and fixes its CRC so the decoder gets
/// past the checksum.
fn with_record_count(batch: &Bytes, count: i32) -> Bytes {
    let mut b = batch.to_vec();
    b[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[test]
fn patched_record_decoder_refuses_counts_beyond_the_batch() {
    let ok = batch(2, Compression::None);
    assert_eq!(
        RecordBatchDecoder::decode(&mut ok.clone())
            .unwrap()
            .records
            .len(),
        2
    );
    let lying = with_record_count(&ok, i32::MAX);
    let err = RecordBatchDecoder::decode(&mut lying.clone()).unwrap_err();
    assert!(err.to_string().contains("remaining"), "{err}");
    assert!(skein_storage::record_decode::decode_records(&lying).is_err());

    // One record whose header count is 2^31-1 (zigzag varint).
    let mut rec = BytesMut::new();
    rec.put_u8(0); // attributes
    rec.put_u8(0); // timestamp delta
    rec.put_u8(0); // offset delta
    rec.put_u8(1); // key: null (-1)
    rec.put_u8(1); // value: null (-1)
    rec.put_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]); // headers: i32::MAX
    let mut records = BytesMut::new();
    records.put_u8((rec.len() as u8) << 1); // record size, zigzag
    records.put_slice(&rec);
    let mut b = ok[..61].to_vec();
    b.extend_from_slice(&records);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let b = with_record_count(&Bytes::from(b), 1);
    let err = RecordBatchDecoder::decode(&mut b.clone()).unwrap_err();
    assert!(err.to_string().contains("remaining"), "{err}");
    assert!(skein_storage::record_decode::decode_records(&b).is_err());
}

/// A snappy stream whose header claims 4 GiB was allocated as claimed.
#[test]
fn patched_snappy_refuses_implausible_lengths() {
    use kafka_protocol::compression::{Decompressor, Snappy};
    let mut raw = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00]);
    let r = Snappy::decompress(&mut raw, |b: &mut Bytes| Ok(b.len()));
    assert!(r.is_err());
}
