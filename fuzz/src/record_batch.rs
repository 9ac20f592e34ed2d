//! The `record_batch` target: arbitrary bytes as the records field of a
//! produce request, through batch validation (`skein_storage::batch`), record
//! decoding, a leader append to a fresh log, and compaction.
//!
//! Checked: nothing panics; a batch failing its CRC never decodes; decoded
//! batches hold exactly `records_count` records; whatever a log accepted is
//! read back as batches that pass CRC validation, in offset order, before
//! and after compaction.

use skein_storage::batch::{self, BatchHeader};
use skein_storage::{CleanupPolicy, Log, LogConfig};

/// Byte offsets in the magic-v2 header (see `skein_storage::batch`).
const CRC_POS: usize = 17;
const ATTRIBUTES_POS: usize = 21;

/// A copy of `data` where every batch `iter_batches` can delimit carries a
/// correct CRC, so mutations reach the decoders instead of the checksum.
pub fn with_fixed_crcs(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut pos = 0;
    for item in batch::iter_batches(data) {
        let Ok((_, bytes)) = item else { break };
        let b = &mut out[pos..pos + bytes.len()];
        let crc = crc32c::crc32c(&b[ATTRIBUTES_POS..]);
        b[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
        pos += bytes.len();
    }
    out
}

/// Validation and decoding of every batch in `data`.
fn check_batches(data: &[u8]) {
    let _ = BatchHeader::parse(data);
    for item in batch::iter_batches(data) {
        let Ok((h, bytes)) = item else { break };
        assert_eq!(bytes.len(), h.total_size());
        let crc_ok = batch::validate_crc(bytes).is_ok();
        match skein_storage::record_decode::decode_records(bytes) {
            Ok(records) => {
                assert!(crc_ok, "a batch failing its CRC decoded");
                assert_eq!(records.len(), h.records_count as usize);
            }
            Err(_) => {}
        }
    }
}

/// Reads the whole log back; every batch must pass CRC validation and
/// offsets must only grow.
pub fn check_served(log: &Log) {
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let r = log.read(offset, 1 << 20, end, true).unwrap_or_else(|e| {
            panic!(
                "read at {offset} of [{}, {end}): {e}",
                log.log_start_offset()
            )
        });
        if r.records.is_empty() {
            // Compaction may leave gaps; the next segment picks up.
            break;
        }
        let mut next = offset;
        for item in batch::iter_batches(&r.records) {
            let (h, bytes) = item.expect("served bytes are whole batches");
            batch::validate_crc(bytes).expect("served batch passes its CRC");
            assert!(
                h.last_offset() >= next,
                "batch {}..={} served for offset {next}",
                h.base_offset,
                h.last_offset()
            );
            next = h.next_offset();
        }
        assert!(next > offset, "read at {offset} made no progress");
        offset = next;
    }
}

/// One input: checks on the raw and CRC-fixed bytes, then a leader append.
pub fn run(data: &[u8]) {
    check_batches(data);
    let mut fixed = with_fixed_crcs(data);
    check_batches(&fixed);

    let dir = tempfile::Builder::new()
        .prefix("skein-fuzz-batch-")
        .tempdir_in(crate::request::scratch_dir())
        .expect("temp dir");
    let config = LogConfig {
        cleanup_policy: if data.len() % 2 == 0 {
            CleanupPolicy::COMPACT
        } else {
            CleanupPolicy::DELETE
        },
        // Small segments so a few appends roll and compaction has work.
        segment_bytes: 512,
        index_interval_bytes: 64,
        ..LogConfig::default()
    };
    let now = 1_700_000_000_000;
    let mut log = Log::open(dir.path(), config, now).expect("open empty log");
    let _ = log.append_as_leader(&mut fixed, 0, now, skein_storage::AppendOrigin::Client);
    // A second append of the same bytes exercises producer sequence checks
    // (duplicates and out-of-order sequences) on what the first left behind.
    let mut again = with_fixed_crcs(data);
    let _ = log.append_as_leader(&mut again, 1, now + 1, skein_storage::AppendOrigin::Client);
    check_served(&log);
    let _ = log.maybe_roll(now + 10_000_000_000);
    let _ = log.compact_up_to(now + 2, log.log_end_offset());
    check_served(&log);
}
