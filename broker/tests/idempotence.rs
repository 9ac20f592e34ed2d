//! The idempotent producer through the wire: InitProducerId, retried batches
//! answered with their original offsets, gaps refused, state kept across a
//! restart.

mod common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;

async fn init_producer_id(c: &mut Client) -> (i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    let r = c.call(&req, 4).await.unwrap();
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}

#[tokio::test]
async fn retries_are_deduplicated_and_gaps_refused() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "idem", 1).await;
    let (pid, epoch) = init_producer_id(&mut c).await;
    let (pid2, _) = init_producer_id(&mut c).await;
    assert_ne!(pid, pid2, "producer ids must be unique");

    let first = produce_acks(
        &mut c,
        "idem",
        0,
        producer_batch(5, Compression::Lz4, pid, epoch, 0),
        -1,
    )
    .await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    // The same batch again (a retry after a lost response): same offset, not appended.
    let retry = produce_acks(
        &mut c,
        "idem",
        0,
        producer_batch(5, Compression::Lz4, pid, epoch, 0),
        -1,
    )
    .await;
    assert_eq!((retry.error_code, retry.base_offset), (0, 0));
    let next = produce_acks(
        &mut c,
        "idem",
        0,
        producer_batch(2, Compression::None, pid, epoch, 5),
        -1,
    )
    .await;
    assert_eq!((next.error_code, next.base_offset), (0, 5));
    let gap = produce_acks(
        &mut c,
        "idem",
        0,
        producer_batch(1, Compression::None, pid, epoch, 9),
        -1,
    )
    .await;
    assert_eq!(
        gap.error_code,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    let f = fetch(&mut c, "idem", 0, 0, 0, 0).await;
    assert_eq!(f.high_watermark, 7);
    assert_eq!(decode_records(f.records.unwrap()).len(), 7);
    drop(c);

    // After a restart the producer state is rebuilt: the retry is still recognised.
    let dir = b.stop().await;
    let b = TestBroker::start_in(dir, &[]).await;
    let mut c = b.client().await;
    let retry = produce_acks(
        &mut c,
        "idem",
        0,
        producer_batch(2, Compression::None, pid, epoch, 5),
        -1,
    )
    .await;
    assert_eq!((retry.error_code, retry.base_offset), (0, 5));
    let (pid3, _) = init_producer_id(&mut c).await;
    assert!(pid3 > pid2, "producer ids are never reused across restarts");
    assert_eq!(fetch(&mut c, "idem", 0, 0, 0, 0).await.high_watermark, 7);
    b.stop().await;
}

#[tokio::test]
async fn two_batches_in_one_partition_are_refused() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic(&mut c, "two", 1).await;
    let mut both = bytes::BytesMut::new();
    both.extend_from_slice(&batch(2, Compression::None));
    both.extend_from_slice(&batch(2, Compression::None));
    let r = produce(&mut c, "two", 0, both.freeze()).await;
    assert_eq!(r.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(fetch(&mut c, "two", 0, 0, 0, 0).await.high_watermark, 0);
    b.stop().await;
}
