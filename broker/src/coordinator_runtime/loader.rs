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
