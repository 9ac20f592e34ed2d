//! Loading a coordinator's state: a partition of its topic read from the
//! log start up to an offset, each record and transaction marker handed to
//! the coordinator in log order (Kafka's `CoordinatorLoader`).

use bytes::Bytes;
use skein_storage::batch::BatchHeader;
use skein_storage::ControlMarker;
use tracing::warn;

use crate::partition::Partition;

/// What a replay finds in the log.
pub enum Replayed<'a> {
    /// A keyed record of a data batch.
    Record {
        header: &'a BatchHeader,
        key: Bytes,
        value: Option<Bytes>,
    },
    /// A control batch's COMMIT or ABORT marker.
    Marker {
        header: &'a BatchHeader,
        marker: ControlMarker,
    },
}

/// Reads `part` from its log start up to `end` (exclusive), handing every
/// keyed record and marker to `visit`. Batches that cannot be decoded are
/// skipped; a read error ends the replay (logged).
pub fn replay(part: &Partition, end: i64, mut visit: impl FnMut(Replayed<'_>)) {
    let mut offset = part.log_start_offset();
    while offset < end {
        let read = match part.read_local(offset, 1 << 20) {
            Ok(r) if !r.records.is_empty() => r,
            Ok(_) => break,
            Err(e) => {
                warn!(topic = %part.topic, partition = part.index, offset, error = %e, "cannot read a coordinator partition");
                break;
            }
        };
        let before = offset;
        for b in skein_storage::batch::iter_batches(&read.records) {
            let Ok((header, bytes)) = b else { break };
            if header.base_offset >= end {
                break;
            }
            offset = header.next_offset();
            if header.is_control() {
                if let Some(marker) = ControlMarker::parse(bytes) {
                    visit(Replayed::Marker {
                        header: &header,
                        marker,
                    });
                }
                continue;
            }
            let Ok(recs) = skein_storage::record_decode::decode_records(bytes) else {
                continue;
            };
            for r in recs {
                let Some(key) = r.key else { continue };
                visit(Replayed::Record {
                    header: &header,
                    key,
                    value: r.value,
                });
            }
        }
        if offset <= before {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator_runtime::{encode_batch, encode_txn_batch};
    use skein_storage::AppendOrigin;

    /// What a replay handed over, in order: `(key, is a tombstone,
    /// transactional)` for records, the producer and result for markers.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Record(&'static str, bool, bool),
        Marker(i64, bool),
    }

    fn seen(part: &Partition, end: i64) -> Vec<Seen> {
        let mut out = Vec::new();
        replay(part, end, |item| match item {
            Replayed::Record { header, key, value } => {
                let key = match &key[..] {
                    b"a" => "a",
                    b"b" => "b",
                    b"c" => "c",
                    b"d" => "d",
                    _ => "?",
                };
                out.push(Seen::Record(
                    key,
                    value.is_none(),
                    header.is_transactional(),
                ))
            }
            Replayed::Marker { header, marker } => {
                out.push(Seen::Marker(header.producer_id, marker.commit))
            }
        });
        out
    }

    #[test]
    fn replays_records_and_markers_in_log_order_up_to_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let part = super::super::test_partition(dir.path(), 1);
        let k = |s: &'static str| Bytes::from_static(s.as_bytes());
        let append = |mut batch: Vec<u8>| {
            part.append_as_leader(&mut batch, false, 10, AppendOrigin::Coordinator)
                .unwrap()
        };
        append(encode_batch(&[(k("a"), Some(k("1"))), (k("b"), None)], 10).to_vec());
        append(encode_txn_batch(&[(k("c"), Some(k("2")))], 10, (5, 0)).to_vec());
        let marker = ControlMarker {
            commit: true,
            coordinator_epoch: 0,
        };
        append(skein_storage::control_batch(5, 0, marker, 10));
        append(encode_batch(&[(k("d"), Some(k("3")))], 10).to_vec());

        let all = vec![
            Seen::Record("a", false, false),
            Seen::Record("b", true, false),
            Seen::Record("c", false, true),
            Seen::Marker(5, true),
            Seen::Record("d", false, false),
        ];
        assert_eq!(seen(&part, part.log_end_offset()), all);
        // Offsets 0-1, 2, the marker at 3: a replay up to 3 stops before it.
        assert_eq!(seen(&part, 3), all[..3]);
    }
}
