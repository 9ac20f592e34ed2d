//! Batch builders and log helpers shared by the tests.

use std::path::Path;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};
use skein_storage::batch::{iter_batches, BatchHeader};
use skein_storage::{Log, LogConfig};

pub use skein_storage::testing::{encode, kv_batch, record};

/// A batch of `n` records with unique keys and values of `value_len` bytes,
/// all with timestamp `ts`.
pub fn batch(n: usize, ts: i64, value_len: usize) -> Vec<u8> {
    let value = "x".repeat(value_len);
    let records: Vec<Record> = (0..n)
        .map(|i| record(Some(&format!("key-{i}")), Some(&value), ts))
        .collect();
    encode(&records, Compression::None)
}

/// Decodes all records of concatenated batches.
pub fn decode(bytes: &Bytes) -> Vec<Record> {
    let mut buf = bytes.clone();
    RecordBatchDecoder::decode_all(&mut buf)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .collect()
}

/// Headers of the concatenated batches (each must be well-formed).
pub fn headers(bytes: &[u8]) -> Vec<BatchHeader> {
    iter_batches(bytes).map(|b| b.unwrap().0).collect()
}

/// Everything in the log from its start, read batch by batch.
pub fn read_all(log: &Log) -> Vec<Record> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log
            .read(offset, 1 << 20, log.log_end_offset(), true)
            .unwrap();
        if r.records.is_empty() {
            break;
        }
        let hs = headers(&r.records);
        offset = hs.last().unwrap().last_offset() + 1;
        out.extend(decode(&r.records));
    }
    out
}

/// Appends one batch per call and returns its first offset. Control
/// batches (transaction markers) come from a coordinator, the rest from a
/// client.
pub fn append(log: &mut Log, mut batch: Vec<u8>, now_ms: i64) -> i64 {
    let origin = match skein_storage::batch::BatchHeader::parse(&batch) {
        Ok(h) if h.is_control() => skein_storage::AppendOrigin::Coordinator,
        _ => skein_storage::AppendOrigin::Client,
    };
    log.append_as_leader(&mut batch, 0, now_ms, origin)
        .unwrap()
        .first_offset
}

/// A config that never rolls or deletes by itself unless a test says so.
pub fn config() -> LogConfig {
    LogConfig {
        retention_ms: -1,
        ..LogConfig::default()
    }
}

/// File names in `dir`, sorted.
pub fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Path of a segment file.
pub fn seg(dir: &Path, base: i64, ext: &str) -> std::path::PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

/// Milliseconds in a day.
pub const DAY: i64 = 86_400_000;

/// Five segments of four 2-record batches; segment i holds timestamps i * DAY.
pub fn log_with_aged_segments(dir: &std::path::Path, cfg: LogConfig) -> Log {
    let size = batch(2, 0, 30).len() as u64;
    let cfg = LogConfig {
        segment_bytes: size * 4,
        ..cfg
    };
    let mut log = Log::open(dir, cfg, 0).unwrap();
    for i in 0..20 {
        append(&mut log, batch(2, (i / 4) * DAY, 30), 0);
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 8, 16, 24, 32]);
    log
}
