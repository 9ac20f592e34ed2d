//! The leader's side: appends, the acks=all check, the high watermark,
//! and what the leader knows of its followers (leadership evidence, read
//! replicas, the low watermark, bytes still to copy); DeleteRecords.

use kafka_protocol::error::ResponseError;
use skein_storage::batch::BatchHeader;
use skein_storage::{AppendInfo, AppendOrigin, Log, StorageError};

use super::{not_leader, Partition, Role, State};
use crate::error::ApiError;
use crate::system::mono_ms;

/// How long after becoming leader a gap in an idempotent producer's
/// sequence may be batches still on their way from the previous leader
/// (see [`gap_left_by_previous_leader`]): a producer's requests to the old
/// leader end within its request timeout (30 s by default), and its retry
/// of them follows.
pub(crate) const PREVIOUS_LEADER_GAP_MS: i64 = 60_000;

/// Whether an idempotent producer's batch `records`, which the log refused
/// for a gap in its sequence, may be behind batches the producer sent to
/// the previous leader and will resend here: this replica leads since less
/// than [`PREVIOUS_LEADER_GAP_MS`], and the producer has written nothing
/// through it yet (its last batch here is older than this leader's epoch).
///
/// Kafka answers such a batch OUT_OF_ORDER_SEQUENCE_NUMBER. The Java
/// client retries then, but librdkafka (through 2.16, issue #4953) bumps
/// the producer epoch and renumbers every unacknowledged message of every
/// partition, so a batch that the old leader of another partition wrote
/// but answered NOT_LEADER_OR_FOLLOWER (a leader change while acks=all
/// waited) is written a second time. Answering NOT_LEADER_OR_FOLLOWER
/// (retriable, nothing written) here instead makes the producer resend its
/// pipeline in order once the earlier batches are refused elsewhere. A real
/// gap (records lost by an unclean election) gets Kafka's answer once the
/// window has passed.
pub(super) fn gap_left_by_previous_leader(
    st: &State,
    log: &Log,
    records: &[u8],
    now_mono_ms: i64,
) -> bool {
    if st.role != Role::Leader || now_mono_ms - st.leader_since_mono_ms >= PREVIOUS_LEADER_GAP_MS {
        return false;
    }
    let Ok(h) = BatchHeader::parse(records) else {
        return false;
    };
    let Some(entry) = log.producer_state().producers().get(&h.producer_id) else {
        return false;
    };
    let Some(last) = entry.batches.back() else {
        return false;
    };
    if last.last_offset >= st.epoch_start_offset || h.producer_epoch < entry.epoch {
        return false;
    }
    if h.producer_epoch > entry.epoch {
        // A new epoch starts at 0: its first batch went elsewhere.
        return h.base_sequence > 0;
    }
    // A gap ahead of the last batch, not an old batch behind it.
    let ahead = (h.base_sequence as i64 - last.last_seq as i64).rem_euclid(1 << 31);
    ahead > 1 && ahead < 1 << 30
}

impl Partition {
    /// Whether this leader has evidence that it still leads: it is the only
    /// member of its ISR, or another member fetched from it within
    /// `within_ms` (followers fetch only from the leader the controller
    /// named). A leader the controller replaced while it was cut off keeps
    /// believing it leads until the controller reaches it again; this is
    /// false for it as soon as its followers have moved on.
    pub fn leadership_confirmed(&self, now_ms: i64, within_ms: i64) -> bool {
        let st = self.state();
        if st.role != Role::Leader {
            return false;
        }
        let mut others = st.isr.iter().filter(|b| **b != self.local_id).peekable();
        others.peek().is_none()
            || others.any(|b| {
                st.followers
                    .get(b)
                    .is_some_and(|f| now_ms - f.fetched_ms() <= within_ms)
            })
    }

    /// Appends batches as leader. With `acks=all`, refuses when the ISR is
    /// smaller than `min.insync.replicas`. Only `ReplicaManager::append_records`
    /// (and tests) call it: everything that writes goes that way.
    pub(crate) fn append_as_leader(
        &self,
        records: &mut [u8],
        acks_all: bool,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<AppendInfo, ApiError> {
        let info = {
            let mut st = self.state();
            if st.role != Role::Leader {
                return Err(not_leader(&self.topic, self.index));
            }
            if acks_all && st.isr.len() < st.min_isr {
                return Err(ApiError::new(
                    ResponseError::NotEnoughReplicas,
                    format!(
                        "the ISR of {}-{} has {} members; min.insync.replicas is {}",
                        self.topic,
                        self.index,
                        st.isr.len(),
                        st.min_isr
                    ),
                ));
            }
            let (info, leo) = {
                let mut log = self.log.write().expect("log lock");
                // The log applies the flush policy (flush.messages / flush.ms) itself.
                let info = match log.append_as_leader(records, st.leader_epoch, now_ms, origin) {
                    Err(StorageError::OutOfOrderSequence(why))
                        if gap_left_by_previous_leader(&st, &log, records, mono_ms()) =>
                    {
                        return Err(ApiError::new(
                            ResponseError::NotLeaderOrFollower,
                            format!(
                                "{}-{} just changed leader and the producer's batches before \
                                 this one have not reached it yet ({why}): resend them first",
                                self.topic, self.index
                            ),
                        ));
                    }
                    r => r?,
                };
                (info, log.log_end_offset())
            };
            self.maybe_advance_hw(&mut st, leo);
            info
        };
        self.notify_changed();
        Ok(info)
    }

    /// Whether an acks=all append ending at `required_offset` (exclusive)
    /// is complete: `Ok(true)` replicated, `Ok(false)` not yet, or the error
    /// the producer must see.
    pub fn check_replicated(
        &self,
        required_offset: i64,
        leader_epoch: i32,
    ) -> Result<bool, ApiError> {
        let st = self.state();
        if st.role != Role::Leader || st.leader_epoch != leader_epoch {
            return Err(not_leader(&self.topic, self.index));
        }
        if st.high_watermark < required_offset {
            return Ok(false);
        }
        if st.isr.len() < st.min_isr {
            return Err(ApiError::new(
                ResponseError::NotEnoughReplicasAfterAppend,
                format!(
                    "written, but the ISR of {}-{} shrank below min.insync.replicas ({})",
                    self.topic, self.index, st.min_isr
                ),
            ));
        }
        Ok(true)
    }

    /// High watermark = min LEO over the (maximal) ISR; it never goes back,
    /// and it stands still while the committed ISR is smaller than
    /// `min.insync.replicas` (KIP-966's strict rule, Kafka 4.1's default):
    /// the replicas that left such an ISR wait in the ELR as replicas that
    /// hold everything committed, so nothing may be committed without them.
    pub(super) fn maybe_advance_hw(&self, st: &mut State, leo: i64) {
        if st.role != Role::Leader {
            return;
        }
        let effective_min_isr = st.min_isr.min(st.replicas.len()).max(1);
        if st.isr.len() < effective_min_isr {
            return;
        }
        let mut min = leo;
        let members = st.isr.iter().chain(st.pending_isr.iter().flatten());
        for id in members {
            if *id == self.local_id {
                continue;
            }
            match st.followers.get(id) {
                Some(p) => min = min.min(p.log_end_offset),
                None => min = -1,
            }
        }
        if min > st.high_watermark {
            st.high_watermark = min;
        }
    }

    /// As leader, the replicas a consumer fetching at `fetch_offset` could
    /// read from instead (KIP-392): the in-sync followers holding that
    /// offset, as `(id, log end offset, ms since caught up)`. `None` when
    /// this replica does not lead.
    pub fn read_replica_candidates(
        &self,
        fetch_offset: i64,
        now_ms: i64,
    ) -> Option<Vec<(i32, i64, i64)>> {
        let st = self.state();
        if st.role != Role::Leader {
            return None;
        }
        Some(
            st.followers
                .iter()
                .filter(|(id, _)| st.isr.contains(id))
                .filter(|(_, f)| {
                    f.log_end_offset >= fetch_offset
                        && f.log_start_offset >= 0
                        && f.log_start_offset <= fetch_offset
                })
                .map(|(id, f)| (*id, f.log_end_offset, now_ms - f.caught_up_ms()))
                .collect(),
        )
    }

    /// DeleteRecords on the leader: makes `offset` (-1: the high watermark)
    /// the log start offset. Followers follow through their fetches (the
    /// leader's log start offset is in every fetch response). Returns the
    /// offset the low watermark must reach.
    pub fn delete_records_on_leader(&self, offset: i64) -> Result<i64, ApiError> {
        let st = self.state();
        if st.role != Role::Leader {
            return Err(not_leader(&self.topic, self.index));
        }
        let hw = st.high_watermark;
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(ApiError::new(
                ResponseError::OffsetOutOfRange,
                format!(
                    "cannot delete records of {}-{} before offset {target}: the high watermark is {hw}",
                    self.topic, self.index
                ),
            ));
        }
        let mut log = self.log.write().expect("log lock");
        log.delete_records_before(target)?;
        drop(log);
        drop(st);
        self.notify_changed();
        Ok(target)
    }

    /// As leader, the low watermark (Kafka's `lowWatermarkIfLeader`): the
    /// smallest log start offset among this replica and the followers on
    /// brokers `alive` says are up (a follower that has not fetched in this
    /// term counts as -1).
    pub fn low_watermark(&self, alive: impl Fn(i32) -> bool) -> Result<i64, ApiError> {
        let st = self.state();
        if st.role != Role::Leader {
            return Err(not_leader(&self.topic, self.index));
        }
        let own = self.log.read().expect("log lock").log_start_offset();
        Ok(st
            .replicas
            .iter()
            .filter(|r| **r != self.local_id && alive(**r))
            .map(|r| st.followers.get(r).map_or(-1, |p| p.log_start_offset))
            .fold(own, i64::min))
    }

    /// As leader: the bytes its replicas outside the ISR still have to copy
    /// (from each one's last fetch offset, or the whole log for one that has
    /// not fetched, such as a broker back on an empty disk).
    pub fn bytes_to_copy(&self) -> u64 {
        let st = self.state();
        if st.role != Role::Leader {
            return 0;
        }
        let log = self.log.read().expect("log lock");
        st.replicas
            .iter()
            .filter(|r| **r != self.local_id && !st.isr.contains(r))
            .map(|r| {
                let from = st
                    .followers
                    .get(r)
                    .map(|p| p.log_end_offset)
                    .filter(|o| *o >= 0)
                    .unwrap_or_else(|| log.log_start_offset());
                log.bytes_from(from)
            })
            .sum()
    }
}
