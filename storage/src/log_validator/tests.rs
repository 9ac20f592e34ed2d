use kafka_protocol::records::Compression;

use super::*;
use crate::batch::{update_crc, validate_crc, BatchHeader};
use crate::config::CleanupPolicy;
use crate::test_util::{batch_with, encode, record};

const NOW: i64 = 1_700_000_000_000;

fn check(b: &mut [u8], config: &LogConfig) -> Result<(), StorageError> {
    let h = BatchHeader::parse(b).unwrap();
    validate_client_batch(&h, b, config, NOW, "t-0")
}

fn invalid(r: Result<(), StorageError>, words: &str) {
    match r {
        Err(StorageError::InvalidRecord(m)) => assert!(m.contains(words), "{m}"),
        other => panic!("expected InvalidRecord({words}), got {other:?}"),
    }
}

/// Sets a header field covered by the CRC and fixes the CRC, as a hostile
/// client would.
fn forge(b: &mut [u8], pos: usize, bytes: &[u8]) {
    b[pos..pos + bytes.len()].copy_from_slice(bytes);
    update_crc(b);
}

#[test]
fn a_client_may_not_write_control_batches() {
    let mut b = batch_with(&[("k", Some("v"))], NOW, Compression::None);
    let attributes = 0x30i16; // transactional + control
    forge(&mut b, 21, &attributes.to_be_bytes());
    forge(&mut b, 43, &7i64.to_be_bytes()); // someone's producer id
    forge(&mut b, 53, &0i32.to_be_bytes());
    invalid(
        check(&mut b, &LogConfig::default()),
        "not allowed to write control records",
    );
}

#[test]
fn an_idempotent_batch_needs_a_sequence_and_a_transactional_one_a_producer() {
    let mut b = batch_with(&[("k", Some("v"))], NOW, Compression::None);
    forge(&mut b, 43, &7i64.to_be_bytes());
    invalid(
        check(&mut b, &LogConfig::default()),
        "Invalid sequence number -1",
    );
    let mut b = batch_with(&[("k", Some("v"))], NOW, Compression::None);
    forge(&mut b, 21, &0x10i16.to_be_bytes());
    invalid(check(&mut b, &LogConfig::default()), "needs a producer id");
}

#[test]
fn a_forged_max_timestamp_is_recomputed_from_the_records() {
    for c in [
        Compression::None,
        Compression::Gzip,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut b = batch_with(&[("a", Some("1")), ("b", Some("2"))], NOW, c);
        let year_2200 = 7_258_118_400_000i64;
        forge(&mut b, 35, &year_2200.to_be_bytes());
        check(&mut b, &LogConfig::default()).unwrap();
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(h.max_timestamp, NOW + 1, "{c:?}");
        assert!(!h.is_log_append_time());
        validate_crc(&b).unwrap();
    }
    // A header that says LogAppendTime on a CreateTime topic is a client's lie too.
    let mut b = batch_with(&[("a", Some("1"))], NOW, Compression::None);
    forge(&mut b, 21, &0x08i16.to_be_bytes());
    check(&mut b, &LogConfig::default()).unwrap();
    let h = BatchHeader::parse(&b).unwrap();
    assert!(!h.is_log_append_time());
    assert_eq!(h.max_timestamp, NOW);
}

#[test]
fn every_record_is_held_to_the_timestamp_window_whatever_the_header_says() {
    let config = LogConfig {
        message_timestamp_after_max_ms: 3_600_000,
        ..LogConfig::default()
    };
    let two_days = 2 * 86_400_000;
    let mut b = encode(
        &[
            record(Some("a"), None, 0, NOW),
            record(Some("b"), None, 0, NOW + two_days),
        ],
        Compression::None,
    );
    // The header claims the batch's largest timestamp is now.
    forge(&mut b, 35, &NOW.to_be_bytes());
    match check(&mut b, &config) {
        Err(StorageError::RejectedRecords { timestamp, errors }) => {
            assert!(timestamp);
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].batch_index, 1);
        }
        other => panic!("expected a refused record, got {other:?}"),
    }
}

#[test]
fn header_and_records_must_agree_on_the_count_and_the_offsets() {
    let mut b = batch_with(
        &[("a", Some("1")), ("b", Some("2"))],
        NOW,
        Compression::None,
    );
    // Says three records, holds two.
    forge(&mut b, 57, &3i32.to_be_bytes());
    forge(&mut b, 23, &2i32.to_be_bytes());
    invalid(check(&mut b, &LogConfig::default()), "premature EOF");
    // Says one record, holds two.
    let mut b = batch_with(
        &[("a", Some("1")), ("b", Some("2"))],
        NOW,
        Compression::None,
    );
    forge(&mut b, 57, &1i32.to_be_bytes());
    forge(&mut b, 23, &0i32.to_be_bytes());
    invalid(
        check(&mut b, &LogConfig::default()),
        "records still remaining",
    );
    // Count and last offset delta disagree.
    let mut b = batch_with(
        &[("a", Some("1")), ("b", Some("2"))],
        NOW,
        Compression::None,
    );
    forge(&mut b, 23, &5i32.to_be_bytes());
    invalid(
        check(&mut b, &LogConfig::default()),
        "Inconsistent batch offset range",
    );
    // Offset deltas 0, 0 instead of 0, 1: the second record's delta byte is rewritten.
    let mut r1 = record(Some("a"), None, 0, NOW);
    r1.timestamp = NOW;
    let mut b = encode(&[r1.clone(), r1], Compression::None);
    let second = second_record_offset_delta_position(&b);
    b[second] = 0;
    update_crc(&mut b);
    invalid(check(&mut b, &LogConfig::default()), "offset delta 0");
}

/// Where the second record's offset-delta varint is in an uncompressed
/// batch of two records with 1-byte keys, no values, no headers, equal
/// timestamps.
fn second_record_offset_delta_position(b: &[u8]) -> usize {
    let first_len = (b[HEADER_SIZE] >> 1) as usize; // zigzag, one byte
                                                    // length(1) + attributes(1) + timestamp delta(1) of the second record.
    HEADER_SIZE + 1 + first_len + 3
}

#[test]
fn keyless_records_on_a_compacted_topic_are_named() {
    let config = LogConfig {
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        ..LogConfig::default()
    };
    let mut b = encode(
        &[
            record(Some("a"), Some("1"), 0, NOW),
            record(None, Some("2"), 0, NOW),
        ],
        Compression::Snappy,
    );
    match check(&mut b, &config) {
        Err(StorageError::RejectedRecords { timestamp, errors }) => {
            assert!(!timestamp);
            assert_eq!(errors[0].batch_index, 1);
        }
        other => panic!("expected a refused record, got {other:?}"),
    }
}

#[test]
fn an_honest_batch_is_left_byte_for_byte() {
    let b = batch_with(&[("a", Some("1")), ("b", Some("2"))], NOW, Compression::Lz4);
    let mut copy = b.clone();
    check(&mut copy, &LogConfig::default()).unwrap();
    assert_eq!(copy, b);
}
