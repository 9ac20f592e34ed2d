//! Reads: a consumer's (up to the high watermark or the last stable
//! offset), the coordinator's of its own log, and a follower's fetch, which
//! also records the follower's progress.

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use skein_storage::{AbortedTxn, Log, ReadResult, Records, RecordsRead, StorageError};

use super::{not_leader, FollowerProgress, IsrProposal, Partition, Role, State};
use crate::error::ApiError;

/// A follower's fetch of one partition, as its Fetch request states it.
#[derive(Debug, Clone, Copy)]
pub struct FollowerFetch {
    pub replica_id: i32,
    /// The follower's broker epoch (KIP-903; -1 before Fetch v15).
    pub replica_epoch: i64,
    pub fetch_offset: i64,
    /// The follower's log start offset (-1 if it did not say).
    pub log_start_offset: i64,
    /// KIP-320: the epoch of the follower's last record (-1: none).
    pub last_fetched_epoch: i32,
    pub current_leader_epoch: i32,
    /// The follower may join the ISR as the leader's view has it (Kafka's
    /// `isReplicaIsrEligible`): registered, not fenced, not in a controlled
    /// shutdown, and fetching with its current broker epoch. A leader that
    /// proposed an ineligible one would only be refused by the controller,
    /// over and over, while the broker is still starting.
    pub isr_eligible: bool,
}

/// How much a fetch reads of a partition, and in what form.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimit {
    pub max_bytes: usize,
    /// KIP-74: the first batch even if larger than `max_bytes`.
    pub min_one_batch: bool,
    /// A large read may stay in its segment file (see `zero_copy`).
    pub file_slices: bool,
}

impl ReadLimit {
    /// Up to `max_bytes`, at least one batch, in memory.
    pub fn in_memory(max_bytes: usize) -> Self {
        ReadLimit {
            max_bytes,
            min_one_batch: true,
            file_slices: false,
        }
    }

    fn read(&self, log: &Log, offset: i64, max_offset: i64) -> Result<RecordsRead, StorageError> {
        if self.file_slices {
            return log.read_records(offset, self.max_bytes, max_offset, self.min_one_batch);
        }
        let r = log.read(offset, self.max_bytes, max_offset, self.min_one_batch)?;
        Ok(RecordsRead {
            records: Records::Memory(r.records),
            log_start_offset: r.log_start_offset,
            log_end_offset: r.log_end_offset,
        })
    }
}

/// What the leader tells a follower about its fetch.
#[derive(Debug, Clone)]
pub struct ReplicaRead {
    pub records: Records,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Set when the follower's log diverges from the leader's: truncate to
    /// at most `end_offset` of `epoch` before fetching again (KIP-320).
    pub diverging: Option<(i32, i64)>,
    /// An ISR expansion this fetch made possible.
    pub proposal: Option<IsrProposal>,
    /// The follower fetched at our log end: until this partition changes,
    /// reading it again would find the same (nothing to send).
    pub caught_up: bool,
}

impl Partition {
    /// Reads whole batches from `offset` up to the high watermark, for
    /// consumers; `read_committed` ones up to the last stable offset, with
    /// the aborted transactions among what was read. Only the leader
    /// serves them.
    pub fn read(
        &self,
        offset: i64,
        limit: ReadLimit,
        current_leader_epoch: i32,
        read_committed: bool,
        follower_reads: bool,
    ) -> Result<(RecordsRead, Option<Vec<AbortedTxn>>), ApiError> {
        let st = self.state();
        self.check_epoch(&st, current_leader_epoch)?;
        // KIP-392: a consumer that knows of preferred read replicas (Fetch
        // v11+) may read from a follower, up to the high watermark the
        // follower knows.
        let serves = match st.role {
            Role::Leader => true,
            Role::Follower { .. } => follower_reads,
            Role::Stopped => false,
        };
        if !serves {
            return Err(not_leader(&self.topic, self.index));
        }
        let log = self.log.read().expect("log lock");
        if !read_committed {
            return Ok((limit.read(&log, offset, st.high_watermark)?, None));
        }
        let lso = Self::lso(&st, &log);
        let read = limit.read(&log, offset, lso)?;
        let upper = read.records.next_offset().unwrap_or(offset);
        let aborted = log.aborted_transactions(offset, upper);
        Ok((read, Some(aborted)))
    }

    /// Last stable offset: nothing at or after it is readable by a
    /// `read_committed` consumer (the high watermark, or the first offset
    /// of the oldest open transaction if lower).
    fn lso(st: &State, log: &Log) -> i64 {
        log.first_unstable_offset()
            .map_or(st.high_watermark, |f| f.min(st.high_watermark))
    }

    /// The last stable offset (see `read`).
    pub fn last_stable_offset(&self) -> i64 {
        let st = self.state();
        let log = self.log.read().expect("log lock");
        Self::lso(&st, &log)
    }

    /// Reads this replica's own log up to its end, whatever its role (the
    /// group coordinator replays `__consumer_offsets` with it).
    pub fn read_local(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, ApiError> {
        let log = self.log.read().expect("log lock");
        let end = log.log_end_offset();
        Ok(log.read(offset, max_bytes, end, true)?)
    }

    /// A follower's fetch: records its progress (which may move the high
    /// watermark or allow it back into the ISR), checks for a divergent log
    /// (KIP-320) and reads up to the log end offset. `pulse`: the
    /// follower's session, which may leave this partition out of its next
    /// rounds if the follower is caught up (see [`FollowerProgress`]).
    pub fn read_for_follower(
        &self,
        f: FollowerFetch,
        limit: ReadLimit,
        now_ms: i64,
        pulse: Option<&Arc<AtomicI64>>,
    ) -> Result<ReplicaRead, ApiError> {
        let FollowerFetch {
            replica_id,
            replica_epoch,
            fetch_offset,
            last_fetched_epoch,
            ..
        } = f;
        let mut st = self.state();
        // This fetch's outcome replaces the rounds the session skipped:
        // only a successful read at the log end links the pulse again (a
        // refused fetch, as in Kafka, is not a fetch).
        if let Some(p) = st.followers.get_mut(&replica_id) {
            p.leave_pulse();
        }
        self.check_epoch(&st, f.current_leader_epoch)?;
        if st.role != Role::Leader {
            return Err(not_leader(&self.topic, self.index));
        }
        if !st.replicas.contains(&replica_id) {
            return Err(ApiError::new(
                ResponseError::NotLeaderOrFollower,
                format!(
                    "broker {replica_id} is not a replica of {}-{}",
                    self.topic, self.index
                ),
            ));
        }
        let log = self.log.read().expect("log lock");
        let leo = log.log_end_offset();
        let lso = log.log_start_offset();
        if last_fetched_epoch >= 0 {
            let diverging = match log.end_offset_for_epoch(last_fetched_epoch) {
                // Our epochs are all older than the follower's: it must
                // cut back to where our latest one ends.
                None => Some((log.latest_epoch().unwrap_or(0).max(0), leo)),
                Some((epoch, end)) if epoch < last_fetched_epoch || end < fetch_offset => {
                    Some((epoch, end))
                }
                Some(_) => None,
            };
            if let Some(d) = diverging {
                return Ok(ReplicaRead {
                    records: Records::default(),
                    high_watermark: st.high_watermark,
                    log_start_offset: lso,
                    diverging: Some(d),
                    proposal: None,
                    caught_up: false,
                });
            }
        }
        // Progress is only recorded for a fetch offset inside our log: a
        // follower ahead of us has a tail it must truncate first.
        let mut proposal = None;
        if fetch_offset <= leo {
            let p = st
                .followers
                .entry(f.replica_id)
                .or_insert_with(|| FollowerProgress::new(0, now_ms));
            // Rounds the session skipped counted as fetches (of an
            // unchanged log, so at the log end each time): folded above.
            let previous_fetch_ms = p.last_fetch_ms;
            if fetch_offset >= leo {
                p.last_caught_up_ms = now_ms;
            } else if fetch_offset >= p.leo_at_last_fetch && p.leo_at_last_fetch >= 0 {
                p.last_caught_up_ms = p.last_caught_up_ms.max(previous_fetch_ms);
            }
            p.log_end_offset = fetch_offset;
            p.leo_at_last_fetch = leo;
            p.last_fetch_ms = now_ms;
            // A follower that moved its log start (after a DeleteRecords)
            // may complete a DeleteRecords waiting for the low watermark.
            let lso_moved = f.log_start_offset != p.log_start_offset;
            p.log_start_offset = f.log_start_offset;
            let old_hw = st.high_watermark;
            self.maybe_advance_hw(&mut st, leo);
            if st.high_watermark != old_hw || lso_moved {
                self.notify_changed();
            }
            if f.isr_eligible {
                proposal = self.maybe_expand_isr(&mut st, replica_id, replica_epoch, fetch_offset);
            }
        }
        let read = limit.read(&log, fetch_offset, leo)?;
        let caught_up = fetch_offset == leo;
        if caught_up {
            if let Some(p) = st.followers.get_mut(&replica_id) {
                p.pulse = pulse.cloned();
            }
        }
        Ok(ReplicaRead {
            records: read.records,
            high_watermark: st.high_watermark,
            log_start_offset: lso,
            diverging: None,
            proposal,
            caught_up,
        })
    }
}
