//! The transaction coordinator's state and requests. One lock guards every
//! transactional id this broker coordinates; it is never held across an
//! `.await`. A state change is appended under the lock (so the log order
//! is the order of changes), marked pending, and applied once the ISR has
//! it; requests that find a change pending, or markers being written, are
//! answered `CONCURRENT_TRANSACTIONS` and retried by the client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tracing::{debug, info, warn};

use super::log_format;
pub use super::metadata::TxnMetadata;
use super::{partition_for, TxnConfig, TxnState, TRANSACTION_STATE};

use crate::append::RequiredAcks;
use crate::coordinator_runtime::{
    self as runtime, CoordinatorContext, LoadedEpochs, TxnMarkerListener,
};
use crate::error::ApiError;
use crate::system::now_ms;

/// How long a state change may take to reach the ISR.
const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

pub(super) use super::transitions::Change;
use super::transitions::{self, api, concurrent, EndTxn};

#[derive(Default)]
pub(super) struct State {
    pub(super) txns: HashMap<String, TxnMetadata>,
    /// Leader epoch at which each `__transaction_state` partition was loaded.
    pub(super) loaded_epochs: LoadedEpochs,
    pub(super) last_abort_check_ms: i64,
    pub(super) last_expiry_check_ms: i64,
    /// Transactions whose markers a task is writing now.
    pub(super) completing: std::collections::HashSet<String>,
}

/// Metrics of the coordinator.
pub(super) struct TxnMetrics {
    pub(super) ongoing: prometheus::IntGauge,
    pub(super) completed: prometheus::IntCounterVec,
}

impl TxnMetrics {
    fn new(registry: &prometheus::Registry) -> Self {
        let ongoing = prometheus::IntGauge::new(
            "skein_transactions_ongoing",
            "Transactions this broker coordinates that are open or completing",
        )
        .expect("metric");
        let completed = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "skein_transactions_completed_total",
                "Transactions this broker coordinated to the end, by result",
            ),
            &["result"],
        )
        .expect("metric");
        let _ = registry.register(Box::new(ongoing.clone()));
        let _ = registry.register(Box::new(completed.clone()));
        // Both series exist from the start, so rate() has data at once.
        for result in ["commit", "abort"] {
            completed.with_label_values(&[result]);
        }
        Self { ongoing, completed }
    }
}

/// The broker's transaction coordinator.
pub struct TxnCoordinator {
    pub cfg: TxnConfig,
    /// The broker as the coordinator sees it.
    pub(super) ctx: Arc<CoordinatorContext>,
    /// Itself, for the tasks it starts (they end when it is dropped).
    me: Weak<TxnCoordinator>,
    /// Told of every marker written to `__consumer_offsets` (the group
    /// coordinator, whose transactional offsets it ends).
    pub(super) offsets_markers: Arc<dyn TxnMarkerListener>,
    state: Mutex<State>,
    pub(super) metrics: TxnMetrics,
    pub(super) markers: crate::broker_channels::BrokerChannels,
    /// Connections to other coordinators, to verify that a transactional
    /// batch's partition is in its transaction (KIP-890).
    pub(crate) verification: crate::broker_channels::BrokerChannels,
}

/// A transaction as DescribeTransactions and ListTransactions show it.
#[derive(Debug, Clone)]
pub struct TxnDescription {
    pub transactional_id: String,
    pub meta: TxnMetadata,
}

impl TxnCoordinator {
    pub fn new(
        cfg: TxnConfig,
        registry: &prometheus::Registry,
        ctx: Arc<CoordinatorContext>,
        offsets_markers: Arc<dyn TxnMarkerListener>,
    ) -> Arc<Self> {
        let channels = |job| {
            crate::broker_channels::BrokerChannels::new(
                job,
                ctx.metadata.clone(),
                ctx.node_id,
                ctx.inter_broker_security.clone(),
            )
        };
        let markers = channels("txn-markers");
        let verification = channels("txn-verification");
        Arc::new_cyclic(|me| Self {
            cfg,
            ctx,
            me: me.clone(),
            offsets_markers,
            state: Mutex::new(State::default()),
            metrics: TxnMetrics::new(registry),
            markers,
            verification,
        })
    }

    /// Runs `task` with this coordinator in the background (not at all once
    /// it is dropped).
    pub(super) fn spawn<F>(&self, task: impl FnOnce(Arc<Self>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Some(me) = self.me.upgrade() {
            self.ctx.spawn(task(me));
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("transaction coordinator lock")
    }

    pub(crate) fn state_topic(&self) -> Result<Arc<crate::metadata::TopicView>, ApiError> {
        runtime::internal_topic::ensure(
            &self.ctx,
            &runtime::InternalTopic {
                name: TRANSACTION_STATE,
                partitions: self.cfg.state_partitions,
                replication_factor: self.cfg.state_replication_factor,
                min_isr: Some(self.cfg.state_min_isr),
                segment_bytes: self.cfg.state_segment_bytes,
            },
        )
    }

    /// The broker coordinating `transactional_id` (FindCoordinator key type 1).
    pub fn coordinator_of(&self, transactional_id: &str) -> Result<i32, ApiError> {
        runtime::internal_topic::coordinator(&self.ctx, &*self.state_topic()?, transactional_id)
    }

    /// The partition of `transactional_id` when this broker leads it (and
    /// has loaded it at its current leader epoch).
    pub(super) fn led_partition(&self, transactional_id: &str) -> Result<(i32, i32), ApiError> {
        let Some(topic) = self.ctx.metadata.topic(TRANSACTION_STATE) else {
            return Err(api(
                ResponseError::NotCoordinator,
                format!("{TRANSACTION_STATE} does not exist yet"),
            ));
        };
        let p = partition_for(transactional_id, topic.partitions.len() as i32);
        runtime::led_partition(&self.ctx, TRANSACTION_STATE, p)?;
        let epoch = self.ensure_loaded(p);
        Ok((p, epoch))
    }

    /// Applies `decide` to the transaction of `tid` and, when it asks,
    /// writes the new state and waits until the ISR has it.
    pub(super) async fn transition(
        &self,
        tid: &str,
        decide: impl FnOnce(Option<&TxnMetadata>, i64) -> Result<Change, ApiError>,
    ) -> Result<TxnMetadata, ApiError> {
        let (p, coordinator_epoch) = self.led_partition(tid)?;
        let (pending, prior, target) = {
            let mut st = self.lock();
            let cur = st.txns.get(tid);
            if cur.is_some_and(|m| m.pending) {
                return Err(concurrent(tid));
            }
            let now = now_ms();
            let mut target = match decide(cur, now)? {
                Change::None => {
                    return cur.cloned().ok_or_else(|| {
                        api(ResponseError::TransactionalIdNotFound, tid.to_string())
                    })
                }
                Change::Write(t) => t,
            };
            target.coordinator_epoch = coordinator_epoch;
            target.pending = false;
            let batch = runtime::encode_batch(
                &[(
                    log_format::key(tid),
                    Some(log_format::value(
                        &target.stored(),
                        log_format::value_version(self.ctx.metadata.transaction_version()),
                    )),
                )],
                now,
            );
            let appended = runtime::write(
                &self.ctx,
                TRANSACTION_STATE,
                p,
                batch,
                RequiredAcks::All,
                WRITE_TIMEOUT,
            )
            .map_err(|e| {
                warn!(transactional_id = tid, error = %e, "append to __transaction_state failed");
                api(ResponseError::CoordinatorNotAvailable, e.message)
            })?;
            let prior = cur.cloned();
            let mut marked = target.clone();
            marked.pending = true;
            if let Some(m) = &prior {
                marked = TxnMetadata {
                    pending: true,
                    ..m.clone()
                };
            }
            st.txns.insert(tid.to_string(), marked);
            (appended, prior, target)
        };
        let written = pending.await;
        let mut st = self.lock();
        if !st.loaded_epochs.is_loaded(p, coordinator_epoch) {
            // Reloaded (or unloaded) meanwhile: what is in memory now came
            // from the log; only a placeholder of this write may remain.
            if st.txns.get(tid).is_some_and(|m| m.pending) {
                match prior {
                    Some(m) => st.txns.insert(tid.to_string(), m),
                    None => st.txns.remove(tid),
                };
            }
            return Err(api(
                ResponseError::NotCoordinator,
                format!("{TRANSACTION_STATE}-{p} changed leader while writing"),
            ));
        }
        match written {
            Ok(_) => {
                st.txns.insert(tid.to_string(), target.clone());
                Ok(target)
            }
            Err(e) => {
                match prior {
                    Some(m) => st.txns.insert(tid.to_string(), m),
                    None => st.txns.remove(tid),
                };
                let code = if e.code == ResponseError::NotLeaderOrFollower {
                    ResponseError::NotCoordinator
                } else {
                    ResponseError::CoordinatorNotAvailable
                };
                Err(api(code, e.message))
            }
        }
    }

    /// InitProducerId with a transactional id: a new producer id, or the
    /// same id at the next epoch (fencing every older producer of the id).
    /// An open transaction is aborted first; the client retries meanwhile.
    pub async fn init_producer_id(
        &self,
        tid: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ApiError> {
        if timeout_ms <= 0 || timeout_ms > self.cfg.max_timeout_ms {
            return Err(api(
                ResponseError::InvalidTransactionTimeout,
                format!(
                    "transaction.timeout.ms {timeout_ms} is not within 1..={} (transaction.max.timeout.ms)",
                    self.cfg.max_timeout_ms
                ),
            ));
        }
        let mut must_abort = false;
        let fresh_id = match self.lock().txns.get(tid) {
            Some(m) if m.producer_epoch < i16::MAX - 1 => None,
            _ => Some(self.ctx.metadata.allocate_producer_id()?),
        };
        let result = self
            .transition(tid, |cur, now| {
                let Some(m) = cur else {
                    // Gone since the first look (expired, reloaded): retry.
                    let Some(producer_id) = fresh_id else {
                        return Err(concurrent(tid));
                    };
                    return Ok(Change::Write(TxnMetadata::new_producer(
                        producer_id,
                        timeout_ms,
                        now,
                    )));
                };
                if let Some((pid, epoch)) = expected {
                    let known = m.producer_id == pid
                        && (m.producer_epoch == epoch || m.last_producer_epoch == epoch);
                    if !known {
                        return Err(api(
                            ResponseError::ProducerFenced,
                            format!("producer {pid} epoch {epoch} was fenced by a newer producer"),
                        ));
                    }
                }
                match m.state {
                    TxnState::Ongoing => {
                        must_abort = true;
                        Err(concurrent(tid))
                    }
                    TxnState::PrepareCommit
                    | TxnState::PrepareAbort
                    | TxnState::PrepareEpochFence
                    | TxnState::Dead => Err(concurrent(tid)),
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                        let mut next = m.successor();
                        match fresh_id {
                            Some(id) if m.producer_epoch >= i16::MAX - 1 => {
                                next.producer_id = id;
                                next.producer_epoch = 0;
                                next.last_producer_epoch = -1;
                            }
                            _ => {
                                next.last_producer_epoch = m.producer_epoch;
                                next.producer_epoch = m.producer_epoch + 1;
                            }
                        }
                        next.timeout_ms = timeout_ms;
                        next.state = TxnState::Empty;
                        next.partitions.clear();
                        next.start_ms = -1;
                        next.last_update_ms = now;
                        Ok(Change::Write(next))
                    }
                }
            })
            .await;
        if must_abort {
            self.abort_open(tid, "a new producer initialised with its transactional id");
        }
        result.map(|m| (m.producer_id, m.producer_epoch))
    }

    /// AddPartitionsToTxn and AddOffsetsToTxn, and the implicit add of a
    /// transaction version 2 Produce or TxnOffsetCommit: the partitions join
    /// the producer's transaction (which starts if none is open).
    pub async fn add_partitions(
        &self,
        tid: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), ApiError> {
        self.transition(tid, |cur, now| {
            transitions::add_partitions(cur, tid, producer_id, producer_epoch, partitions, now)
        })
        .await
        .map(|_| ())
    }

    /// EndTxn: PrepareCommit or PrepareAbort is written (then the client
    /// is answered), the markers follow, then CompleteCommit/CompleteAbort.
    /// `client_version` 2 (EndTxn v5+) bumps the epoch (`transitions`);
    /// the answer is the producer id and epoch the client goes on with.
    pub async fn end_txn(
        &self,
        tid: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_version: i16,
    ) -> Result<(i64, i16), ApiError> {
        let req = EndTxn {
            producer_id,
            producer_epoch,
            commit,
            client_version,
        };
        // An exhausted epoch moves to a new producer id: allocated before
        // the lock (it may ask the controller).
        let exhausted = self
            .lock()
            .txns
            .get(tid)
            .is_some_and(|m| m.epoch_exhausted());
        let fresh_id = if client_version >= transitions::TV2 && exhausted {
            Some(self.ctx.metadata.allocate_producer_id()?)
        } else {
            None
        };
        let mut started = false;
        let m = self
            .transition(tid, |cur, now| {
                let change = transitions::end_txn(cur, tid, &req, fresh_id, now)?;
                started = matches!(change, Change::Write(_));
                Ok(change)
            })
            .await?;
        if started {
            self.spawn_completion(tid);
        }
        Ok(transitions::producer_after_end(&m))
    }

    /// Aborts the open transaction of `tid` with the producer epoch bumped,
    /// so the producer that opened it is fenced (transaction timeout, or a
    /// new producer initialising the id).
    pub(super) fn abort_open(&self, tid: &str, why: &'static str) {
        let tid = tid.to_string();
        self.spawn(|txns| async move {
            let server_version = txns.ctx.metadata.transaction_version();
            let r = txns
                .transition(&tid, |cur, now| {
                    Ok(cur
                        .and_then(|m| transitions::abort_open(m, server_version, now))
                        .map_or(Change::None, Change::Write))
                })
                .await;
            match r {
                Ok(m) if m.state == TxnState::PrepareAbort => {
                    info!(transactional_id = %tid, producer_id = m.producer_id, epoch = m.producer_epoch, why, "aborting an open transaction");
                    txns.spawn_completion(&tid);
                }
                Ok(_) => {}
                Err(e) => warn!(transactional_id = %tid, error = %e, "could not abort an open transaction"),
            }
        });
    }

    /// Writes the markers of a prepared transaction, then its completion
    /// (one task per transaction; the timer starts it again for any
    /// prepared transaction without one).
    pub(super) fn spawn_completion(&self, tid: &str) {
        if !self.lock().completing.insert(tid.to_string()) {
            return;
        }
        let tid = tid.to_string();
        self.spawn(|txns| async move {
            txns.complete(&tid).await;
            txns.lock().completing.remove(&tid);
        });
    }

    async fn complete(&self, tid: &str) {
        let Some(m) = self.lock().txns.get(tid).cloned() else {
            return;
        };
        if !m.state.is_preparing() {
            return;
        }
        let commit = m.state == TxnState::PrepareCommit;
        debug!(transactional_id = %tid, producer_id = m.producer_id, epoch = m.producer_epoch, commit, partitions = m.partitions.len(), "writing transaction markers");
        if let Err(e) = self.write_all(tid, &m, commit).await {
            // No longer the coordinator: the new one finishes the transaction.
            info!(transactional_id = %tid, error = %e, "markers not all written here");
            return;
        }
        let r = self
            .transition(tid, |cur, now| {
                let Some(c) = cur.filter(|c| {
                    c.state == m.state
                        && c.producer_id == m.producer_id
                        && c.producer_epoch == m.producer_epoch
                }) else {
                    return Ok(Change::None);
                };
                Ok(Change::Write(transitions::complete(c, now)))
            })
            .await;
        match r {
            Ok(_) => {
                self.metrics
                    .completed
                    .with_label_values(&[if commit { "commit" } else { "abort" }])
                    .inc();
            }
            // The timer tries again (markers are idempotent for readers).
            Err(e) => {
                warn!(transactional_id = %tid, error = %e, "could not complete a transaction; will retry")
            }
        }
    }

    /// Transactions of the given ids, for DescribeTransactions: each one's
    /// state or the error for it.
    pub fn describe(&self, tid: &str) -> Result<TxnMetadata, ApiError> {
        self.led_partition(tid)?;
        self.lock().txns.get(tid).cloned().ok_or_else(|| {
            api(
                ResponseError::TransactionalIdNotFound,
                format!("no transactional id {tid}"),
            )
        })
    }

    /// Every transaction this broker coordinates (ListTransactions).
    pub fn list(&self) -> Vec<TxnDescription> {
        self.tick_load();
        self.lock()
            .txns
            .iter()
            .map(|(id, m)| TxnDescription {
                transactional_id: id.clone(),
                meta: m.clone(),
            })
            .collect()
    }

    /// Number of open or completing transactions (tests, metrics).
    pub fn ongoing(&self) -> usize {
        self.lock()
            .txns
            .values()
            .filter(|m| !m.state.is_complete())
            .count()
    }
}
