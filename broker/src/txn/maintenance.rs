//! The coordinator's timer: loads `__transaction_state` partitions this
//! broker came to lead (and drops those it lost), finishes prepared
//! transactions no task is completing, aborts transactions past their
//! `transaction.timeout.ms`, and forgets ids idle for
//! `transactional.id.expiration.ms`.

use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use super::coordinator::TxnCoordinator;
use super::log_format;
use super::{TxnState, TRANSACTION_STATE};
use crate::append::RequiredAcks;
use crate::coordinator_runtime as runtime;
use crate::system::now_ms;

impl TxnCoordinator {
    /// Starts the timer: loads partitions this broker came to lead, finishes
    /// transactions found half way, aborts expired ones, forgets idle ids.
    pub fn start(self: &Arc<Self>) {
        runtime::every(
            &self.ctx,
            Duration::from_millis(500),
            self,
            |txns: &Arc<Self>| txns.tick(),
        );
    }

    /// The periodic work: see [`TxnCoordinator::start`].
    pub(super) fn tick(&self) {
        self.tick_load();
        self.metrics.ongoing.set(self.ongoing() as i64);
        let now = now_ms();
        let (expired, idle) = {
            let mut st = self.lock();
            let mut expired = Vec::new();
            if now - st.last_abort_check_ms >= self.cfg.abort_check_interval_ms {
                st.last_abort_check_ms = now;
                expired = st
                    .txns
                    .iter()
                    .filter(|(_, m)| {
                        !m.pending
                            && m.state == TxnState::Ongoing
                            && m.start_ms + m.timeout_ms as i64 <= now
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
            }
            let mut idle = Vec::new();
            if now - st.last_expiry_check_ms >= self.cfg.remove_expired_interval_ms {
                st.last_expiry_check_ms = now;
                idle = st
                    .txns
                    .iter()
                    .filter(|(_, m)| {
                        !m.pending
                            && m.state.is_complete()
                            && now - m.last_update_ms >= self.cfg.id_expiration_ms
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
            }
            (expired, idle)
        };
        for tid in expired {
            self.abort_open(&tid, "transaction.timeout.ms passed");
        }
        let stuck: Vec<String> = {
            let st = self.lock();
            st.txns
                .iter()
                .filter(|(id, m)| {
                    m.state.is_preparing() && !m.pending && !st.completing.contains(*id)
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        for tid in stuck {
            self.spawn_completion(&tid);
        }
        for tid in idle {
            self.expire_id(&tid);
        }
    }

    /// Loads every `__transaction_state` partition this broker came to lead.
    pub(super) fn tick_load(&self) {
        let Some(topic) = self.ctx.metadata.topic(TRANSACTION_STATE) else {
            return;
        };
        for p in 0..topic.partitions.len() as i32 {
            if self
                .ctx
                .replicas
                .get(TRANSACTION_STATE, p)
                .is_some_and(|part| part.is_leader())
            {
                self.ensure_loaded(p);
            } else {
                self.unload(p, topic.partitions.len() as i32);
            }
        }
    }

    /// Forgets an idle transactional id (`transactional.id.expiration.ms`):
    /// a tombstone, so compaction removes it from the log too.
    pub(super) fn expire_id(&self, tid: &str) {
        let Ok((p, epoch)) = self.led_partition(tid) else {
            return;
        };
        let mut st = self.lock();
        if !st.loaded_epochs.is_loaded(p, epoch) || st.txns.get(tid).is_none_or(|m| m.pending) {
            return;
        }
        let batch = runtime::encode_batch(&[(log_format::key(tid), None)], now_ms());
        // The tombstone is not waited for: should it not reach the ISR, a
        // new leader still knows the id and expires it in turn.
        let appended = runtime::write(
            &self.ctx,
            TRANSACTION_STATE,
            p,
            batch,
            RequiredAcks::Leader,
            Duration::ZERO,
        );
        if appended.is_ok() {
            st.txns.remove(tid);
            info!(transactional_id = tid, "transactional id expired");
        }
    }
}
