//! Loading transactions from `__transaction_state`: a partition is read
//! again whenever this broker's leadership of it is newer than what is in
//! memory (followers replicate the records but do not apply them), and the
//! transactions found half way through (PrepareCommit, PrepareAbort) are
//! finished by writing their markers again.

use tracing::{info, warn};

use super::coordinator::TxnCoordinator;
use super::log_format;
use super::metadata::TxnMetadata;
use super::{partition_for, TRANSACTION_STATE};
use crate::coordinator_runtime::{self as runtime, Replayed};

impl TxnCoordinator {
    /// Reads partition `p` again if its leader epoch changed; returns the
    /// epoch it is loaded at.
    pub(super) fn ensure_loaded(&self, p: i32) -> i32 {
        let Some(part) = self.ctx.replicas.get(TRANSACTION_STATE, p) else {
            return -1;
        };
        let Some(topic) = self.ctx.metadata.topic(TRANSACTION_STATE) else {
            return -1;
        };
        let n = topic.partitions.len() as i32;
        let epoch = part.leader_epoch();
        let mut to_finish = Vec::new();
        {
            let mut st = self.lock();
            if st.loaded_epochs.is_loaded(p, epoch) {
                return epoch;
            }
            st.txns.retain(|id, _| partition_for(id, n) != p);
            let mut records = 0usize;
            runtime::replay(&part, part.log_end_offset(), |item| {
                // Markers end transactions of other topics' partitions;
                // this topic's state is in its records alone.
                let Replayed::Record { key, value, .. } = item else {
                    return;
                };
                let Ok(Some(tid)) = log_format::decode_key(key) else {
                    return;
                };
                records += 1;
                match value.map(log_format::decode_value) {
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
            });
            for (id, m) in st.txns.iter_mut() {
                if partition_for(id, n) == p {
                    m.coordinator_epoch = epoch;
                    if m.state.is_preparing() {
                        to_finish.push(id.clone());
                    }
                }
            }
            st.loaded_epochs.loaded(p, epoch);
            info!(
                partition = p,
                leader_epoch = epoch,
                records,
                unfinished = to_finish.len(),
                "transactions of a __transaction_state partition loaded"
            );
        }
        for tid in to_finish {
            self.spawn_completion(&tid);
        }
        epoch
    }

    /// Drops what is in memory for a partition this broker no longer leads.
    pub(super) fn unload(&self, p: i32, n: i32) {
        let mut st = self.lock();
        if st.loaded_epochs.unload(p) {
            st.txns.retain(|id, _| partition_for(id, n) != p);
        }
    }
}
