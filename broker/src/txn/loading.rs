//! Loading transactions from `__transaction_state`: a partition is read
//! again whenever this broker's leadership of it is newer than what is in
//! memory (followers replicate the records but do not apply them), and the
//! transactions found half way through (PrepareCommit, PrepareAbort) are
//! finished by writing their markers again.

use tracing::{info, warn};

use super::coordinator::{State, TxnCoordinator};
use super::log_format;
use super::metadata::TxnMetadata;
use super::{partition_for, TRANSACTION_STATE};
use crate::coordinator_runtime::{self as runtime, CoordinatorShard, LoadedEpochs, Replayed};

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
        let (epoch, unfinished) = {
            let mut st = self.lock();
            let mut load = Load {
                st: &mut st,
                records: 0,
                unfinished: Vec::new(),
            };
            let (epoch, read) = runtime::ensure_loaded(&mut load, &part, p, n);
            if read {
                info!(
                    partition = p,
                    leader_epoch = epoch,
                    records = load.records,
                    unfinished = load.unfinished.len(),
                    "transactions of a __transaction_state partition loaded"
                );
            }
            (epoch, load.unfinished)
        };
        for tid in unfinished {
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

/// The transactions of one `__transaction_state` partition being read
/// again, with what the read found: records, and transactions stopped half
/// way through (PrepareCommit, PrepareAbort) whose markers are written again.
struct Load<'a> {
    st: &'a mut State,
    records: usize,
    unfinished: Vec<String>,
}

impl CoordinatorShard for Load<'_> {
    fn loaded_epochs(&mut self) -> &mut LoadedEpochs {
        &mut self.st.loaded_epochs
    }

    fn unload(&mut self, p: i32, n: i32, _epoch: i32) {
        self.st.txns.retain(|id, _| partition_for(id, n) != p);
    }

    fn replay(&mut self, p: i32, epoch: i32, item: Replayed<'_>) {
        // Markers end transactions of other topics' partitions; this
        // topic's state is in its records alone.
        let Replayed::Record { key, value, .. } = item else {
            return;
        };
        let Ok(Some(tid)) = log_format::decode_key(key) else {
            return;
        };
        self.records += 1;
        match value.map(log_format::decode_value) {
            None => {
                self.st.txns.remove(&tid);
            }
            Some(Ok(stored)) => {
                self.st
                    .txns
                    .insert(tid, TxnMetadata::from_stored(stored, epoch));
            }
            Some(Err(e)) => {
                warn!(partition = p, transactional_id = %tid, error = %e, "skipping a transaction record")
            }
        }
    }

    fn loaded(&mut self, p: i32, n: i32, epoch: i32) {
        for (id, m) in self.st.txns.iter_mut() {
            if partition_for(id, n) == p {
                m.coordinator_epoch = epoch;
                if m.state.is_preparing() {
                    self.unfinished.push(id.clone());
                }
            }
        }
    }
}
