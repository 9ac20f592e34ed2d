//! Offsets committed inside a transaction (TxnOffsetCommit): appended to
//! `__consumer_offsets` as a transactional batch of the producer, held
//! aside, and applied when the transaction's COMMIT marker lands in that
//! partition (dropped on ABORT). While held, OffsetFetch with
//! `require_stable` answers `UNSTABLE_OFFSET_COMMIT` for the partition, as
//! Kafka does, so a consumer taking over never starts from an offset that
//! is about to move.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::coordinator::{GroupCoordinator, Pending, State};
use super::log_format;
use super::offsets::{CommittedOffset, LogPosition, TopicPartition, TxnOffset};
use super::partition_for;
use crate::append::RequiredAcks;
use crate::coordinator_runtime::{self as runtime, TxnMarkerListener};
use crate::error::ApiError;
use crate::metadata::CONSUMER_OFFSETS;

/// A transactional offset write, not yet replicated.
pub struct PendingTxnCommit {
    write: Pending,
    group: String,
    producer_id: i64,
    offsets: Vec<TxnOffset>,
}

impl GroupCoordinator {
    /// TxnOffsetCommit: checks the committer against the group (when it
    /// names its generation) and appends the offsets as part of the
    /// producer's transaction.
    #[allow(clippy::too_many_arguments)]
    pub fn commit_txn_offsets(
        &self,
        group: &str,
        producer: (i64, i16),
        member: &str,
        instance: Option<&str>,
        generation: i32,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> Result<Option<PendingTxnCommit>, ApiError> {
        let st = self.shard_of(group);
        if let Some(g) = st.streams.get(group) {
            let parts: Vec<TopicPartition> = offsets.iter().map(|(tp, _)| tp.clone()).collect();
            g.validate_offset_commit(member, generation, true, 6, &parts)
                .map_err(|(code, msg)| ApiError::new(code, msg))?;
        }
        let check = if generation < 0 && member.is_empty() || st.streams.contains_key(group) {
            None
        } else if let Some(cg) = st.consumer.get(group) {
            cg.validate_member_epoch(member, generation)
        } else if let Some(g) = st.classic.get(group) {
            g.validate_offset_commit(member, instance, generation)
        } else {
            Some(ResponseError::IllegalGeneration)
        };
        if let Some(e) = check {
            return Err(ApiError::new(
                e,
                format!("transactional offset commit rejected by group {group}"),
            ));
        }
        if offsets.is_empty() {
            return Ok(None);
        }
        let records = log_format::offset_records(group, &offsets);
        let write = self.append_txn(group, &records, producer)?;
        Ok(Some(PendingTxnCommit {
            write,
            group: group.to_string(),
            producer_id: producer.0,
            offsets: offsets
                .into_iter()
                .map(|(tp, offset)| TxnOffset {
                    group: group.to_string(),
                    tp,
                    offset,
                })
                .collect(),
        }))
    }

    /// Waits until the ISR has the write, then holds the offsets until
    /// the transaction ends.
    pub async fn complete_txn_commit(&self, commit: PendingTxnCommit) -> Result<(), ApiError> {
        commit.write.await?;
        let mut st = self.shard_of(&commit.group);
        st.pending_txn
            .entry(commit.producer_id)
            .or_default()
            .extend(commit.offsets);
        Ok(())
    }

    /// A COMMIT or ABORT marker of `producer_id` reached partition `p` of
    /// `__consumer_offsets` (at `at`): its held offsets of the groups on
    /// that partition (all in `p`'s shard) become committed, or are dropped.
    pub fn complete_txn(&self, p: i32, producer_id: i64, commit: bool, at: LogPosition) {
        let n = self
            .ctx
            .metadata
            .topic(CONSUMER_OFFSETS)
            .map_or(1, |t| t.partitions.len() as i32);
        let mut st = self.shard_at(p);
        Self::apply_txn_end(&mut st, n, p, producer_id, commit, at);
    }

    pub(super) fn apply_txn_end(
        st: &mut State,
        n: i32,
        p: i32,
        producer_id: i64,
        commit: bool,
        at: LogPosition,
    ) {
        let Some(held) = st.pending_txn.remove(&producer_id) else {
            return;
        };
        let (mine, others): (Vec<TxnOffset>, Vec<TxnOffset>) = held
            .into_iter()
            .partition(|o| partition_for(&o.group, n) == p);
        if !others.is_empty() {
            st.pending_txn.insert(producer_id, others);
        }
        if commit {
            for o in mine {
                st.offsets.commit_replicated(&o.group, o.tp, o.offset, at);
            }
        }
    }

    /// Whether an open transaction holds an offset of `group` for `tp`.
    pub fn has_unstable_offset(&self, group: &str, tp: &TopicPartition) -> bool {
        self.shard_of(group)
            .pending_txn
            .values()
            .flatten()
            .any(|o| o.group == group && &o.tp == tp)
    }

    fn append_txn(
        &self,
        group: &str,
        records: &[(Bytes, Option<Bytes>)],
        producer: (i64, i16),
    ) -> Result<Pending, ApiError> {
        let p = self.led_partition(group)?;
        let batch = runtime::encode_txn_batch(records, crate::system::now_ms(), producer);
        runtime::write(
            &self.ctx,
            CONSUMER_OFFSETS,
            p,
            batch,
            RequiredAcks::All,
            super::coordinator::WRITE_TIMEOUT,
        )
        .map_err(|e| {
            if e.code == ResponseError::InvalidProducerEpoch {
                ApiError::new(ResponseError::ProducerFenced, e.message)
            } else {
                ApiError::new(ResponseError::CoordinatorNotAvailable, e.message)
            }
        })
    }
}

impl TxnMarkerListener for GroupCoordinator {
    fn on_txn_marker(&self, partition: i32, producer_id: i64, commit: bool, at: (i32, i64)) {
        self.complete_txn(partition, producer_id, commit, at);
    }
}
