//! Loading transactions from `__transaction_state`: a partition is read
//! again whenever this broker's leadership of it is newer than what is in
//! memory (followers replicate the records but do not apply them), and the
//! transactions found half way through (PrepareCommit, PrepareAbort) are
//! finished by writing their markers again.

use std::sync::Arc;

use tracing::{info, warn};

use super::coordinator::TxnCoordinator;
use super::log_format;
use super::metadata::TxnMetadata;
use super::{partition_for, TRANSACTION_STATE};
use crate::broker::Broker;

impl TxnCoordinator {
    /// Reads partition `p` again if its leader epoch changed; returns the
    /// epoch it is loaded at.
    pub(super) fn ensure_loaded(&self, broker: &Arc<Broker>, p: i32) -> i32 {
        let Some(part) = broker.replicas.get(TRANSACTION_STATE, p) else {
            return -1;
        };
        let Some(topic) = broker.metadata.topic(TRANSACTION_STATE) else {
            return -1;
        };
        let n = topic.partitions.len() as i32;
        let epoch = part.leader_epoch();
        let mut to_finish = Vec::new();
        {
            let mut st = self.lock();
            if st.loaded_epochs.get(&p) == Some(&epoch) {
                return epoch;
            }
            st.txns.retain(|id, _| partition_for(id, n) != p);
            let mut offset = part.log_start_offset();
            let end = part.log_end_offset();
            let mut records = 0usize;
            while offset < end {
                let read = match part.read_local(offset, 1 << 20) {
                    Ok(r) if !r.records.is_empty() => r,
                    Ok(_) => break,
                    Err(e) => {
                        warn!(partition = p, offset, error = %e, "cannot read __transaction_state");
                        break;
                    }
                };
                let before = offset;
                for b in skein_storage::batch::iter_batches(&read.records) {
                    let Ok((header, bytes)) = b else { break };
                    offset = header.next_offset();
                    if header.is_control() {
                        continue;
                    }
                    let Ok(recs) = skein_storage::record_decode::decode_records(bytes) else {
                        continue;
                    };
                    for r in recs {
                        let Some(key) = r.key else { continue };
                        let Ok(Some(tid)) = log_format::decode_key(key) else {
                            continue;
                        };
                        records += 1;
                        match r.value.map(log_format::decode_value) {
                            None => {
                                st.txns.remove(&tid);
                            }
                            Some(Ok(stored)) => {
                                st.txns.insert(tid, TxnMetadata::from_stored(stored, epoch));
                            }
                            Some(Err(e)) => {
                                warn!(partition = p, transactional_id = %tid, error = %e, "skipping a transaction record")
                            }
                        }
                    }
                }
                if offset <= before {
                    break;
                }
            }
            for (id, m) in st.txns.iter_mut() {
                if partition_for(id, n) == p {
                    m.coordinator_epoch = epoch;
                    if m.state.is_preparing() {
                        to_finish.push(id.clone());
                    }
                }
            }
            st.loaded_epochs.insert(p, epoch);
            info!(
                partition = p,
                leader_epoch = epoch,
                records,
                unfinished = to_finish.len(),
                "transactions of a __transaction_state partition loaded"
            );
        }
        for tid in to_finish {
            self.spawn_completion(broker, &tid);
        }
        epoch
    }

    /// Drops what is in memory for a partition this broker no longer leads.
    pub(super) fn unload(&self, _broker: &Broker, p: i32, n: i32) {
        let mut st = self.lock();
        if st.loaded_epochs.remove(&p).is_some() {
            st.txns.retain(|id, _| partition_for(id, n) != p);
        }
    }
}
