//! A share-partition (KIP-932): the delivery state of one topic partition
//! for one share group, kept by the partition's leader. Records between the
//! share-partition start offset (SPSO) and the first offset never handed
//! out are in flight, each AVAILABLE, ACQUIRED (by one member, under a lock
//! that expires), ACKNOWLEDGED or ARCHIVED, with a delivery count.
//!
//! The rules are Kafka 4.4's (`SharePartition`; docs/design/share-groups-kafka-4.4.md,
//! section 6):
//! - acquiring a record counts a delivery; a release or an expired lock
//!   makes it AVAILABLE again, or ARCHIVED once it was delivered
//!   `delivery_count_limit` times;
//! - an acknowledgement (ACCEPT, RELEASE, REJECT, GAP, RENEW) applies only
//!   to records the member holds, and all of a partition's batches apply or
//!   none (INVALID_RECORD_STATE, INVALID_REQUEST);
//! - new records are acquired only while fewer than `max_in_flight` offsets
//!   are in flight; released ones are handed out again first;
//! - the start offset moves past records that reached a final state.
//!
//! State is per offset: at most `max_in_flight` of them (Kafka's
//! `share.partition.max.record.locks`, 4,000 at most), so a map stays small.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

/// A record's delivery state (Kafka's `RecordState` ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Available = 0,
    Acquired = 1,
    Acknowledged = 2,
    Archived = 4,
}

impl RecordState {
    /// ACKNOWLEDGED and ARCHIVED never change again.
    pub fn is_final(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// Acknowledgement types (ShareFetch/ShareAcknowledge).
pub const GAP: i8 = 0;
pub const ACCEPT: i8 = 1;
pub const RELEASE: i8 = 2;
pub const REJECT: i8 = 3;
pub const RENEW: i8 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
    /// The member holding it (ACQUIRED only).
    owner: Option<String>,
    /// When its acquisition lock expires, in the caller's milliseconds.
    lock_until: i64,
}

/// The settings a share-partition follows (the group's configs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub lock_duration_ms: i64,
    pub delivery_count_limit: i16,
    pub max_in_flight: i64,
}

/// A range of offsets handed to a member, with their delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub first: i64,
    pub last: i64,
    pub delivery_count: i16,
}

/// One acknowledgement batch: offsets `first..=last`, with one type for
/// all of them or one per offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    pub first: i64,
    pub last: i64,
    pub types: Vec<i8>,
}

/// A persisted range: offsets `first..=last` in `state` with `delivery_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first: i64,
    pub last: i64,
    pub state: RecordState,
    pub delivery_count: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    /// The share-partition start offset (SPSO): every record below it is done.
    start: i64,
    /// The first offset never acquired.
    next_new: i64,
    records: BTreeMap<i64, InFlight>,
    limits: Limits,
}

fn invalid_state(msg: String) -> (ResponseError, String) {
    (ResponseError::InvalidRecordState, msg)
}

impl SharePartition {
    /// A share-partition starting at `start` with nothing in flight.
    pub fn new(start: i64, limits: Limits) -> Self {
        SharePartition {
            start,
            next_new: start,
            records: BTreeMap::new(),
            limits,
        }
    }

    /// A share-partition loaded from its persisted state: the start offset
    /// and the ranges written since; records in them come back AVAILABLE
    /// (an acquisition is never persisted) or in their final state.
    pub fn load(start: i64, batches: &[StateBatch], limits: Limits) -> Self {
        let mut p = SharePartition::new(start, limits);
        for b in batches {
            for o in b.first.max(start)..=b.last {
                let state = match b.state {
                    RecordState::Acquired => RecordState::Available,
                    s => s,
                };
                p.records.insert(
                    o,
                    InFlight {
                        state,
                        delivery_count: b.delivery_count,
                        owner: None,
                        lock_until: 0,
                    },
                );
                p.next_new = p.next_new.max(o + 1);
            }
        }
        p.advance();
        p
    }

    pub fn start_offset(&self) -> i64 {
        self.start
    }

    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Where the next fetch reads from: the first record released for
    /// redelivery, else the first one never handed out.
    pub fn next_fetch_offset(&self) -> i64 {
        self.records
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map_or(self.next_new, |(o, _)| *o)
    }

    /// Offsets between the start and the first never acquired.
    pub fn in_flight(&self) -> i64 {
        self.next_new - self.start
    }

    /// Whether a fetch could acquire anything now (a record to redeliver,
    /// or room for new ones below `log_end`).
    pub fn can_acquire(&self, log_end: i64) -> bool {
        self.records
            .values()
            .any(|r| r.state == RecordState::Available)
            || (self.next_new < log_end && self.in_flight() < self.limits.max_in_flight)
    }

    /// Hands the records a fetch read to `member`: `offsets` are the offsets
    /// of the records read (ascending), `batch_ends` where the log's record
    /// batches end (a new acquisition does not stop inside one, as Kafka's
    /// `batch_optimized` mode), at most `max_records` beyond that rule.
    /// Returns the acquired ranges, consecutive offsets with the same
    /// delivery count merged.
    pub fn acquire(
        &mut self,
        member: &str,
        offsets: &[i64],
        batch_ends: &[i64],
        max_records: usize,
        now_ms: i64,
    ) -> Vec<Acquired> {
        let mut out: Vec<Acquired> = Vec::new();
        let mut taken = 0usize;
        let mut last_taken: Option<i64> = None;
        let lock_until = now_ms + self.limits.lock_duration_ms;
        // The last offset of the log batch holding `o` (`batch_ends` ascend).
        let end_of = |o: i64| {
            batch_ends
                .get(batch_ends.partition_point(|&e| e < o))
                .copied()
        };
        for &o in offsets {
            if o < self.start {
                continue;
            }
            if taken >= max_records {
                // Past the limit only to finish the log batch begun.
                let same_batch =
                    last_taken.is_some_and(|l| end_of(o).is_some() && end_of(l) == end_of(o));
                if !same_batch {
                    break;
                }
            }
            let count = match self.records.get_mut(&o) {
                Some(r) if r.state == RecordState::Available => {
                    r.state = RecordState::Acquired;
                    r.delivery_count += 1;
                    r.owner = Some(member.to_string());
                    r.lock_until = lock_until;
                    r.delivery_count
                }
                Some(_) => continue,
                None if o >= self.next_new => {
                    if self.in_flight() >= self.limits.max_in_flight {
                        break;
                    }
                    // Offsets skipped between (compacted away, or control
                    // records the fetch did not return) are archived.
                    for gap in self.next_new..o {
                        self.records.insert(
                            gap,
                            InFlight {
                                state: RecordState::Archived,
                                delivery_count: 0,
                                owner: None,
                                lock_until: 0,
                            },
                        );
                    }
                    self.records.insert(
                        o,
                        InFlight {
                            state: RecordState::Acquired,
                            delivery_count: 1,
                            owner: Some(member.to_string()),
                            lock_until,
                        },
                    );
                    self.next_new = o + 1;
                    1
                }
                None => continue,
            };
            taken += 1;
            last_taken = Some(o);
            match out.last_mut() {
                Some(a) if a.last + 1 == o && a.delivery_count == count => a.last = o,
                _ => out.push(Acquired {
                    first: o,
                    last: o,
                    delivery_count: count,
                }),
            }
        }
        out
    }

    /// The state a record returns to when its holder lets go of it.
    fn released(&self, r: &InFlight) -> RecordState {
        if r.delivery_count >= self.limits.delivery_count_limit {
            RecordState::Archived
        } else {
            RecordState::Available
        }
    }

    /// Applies one partition's acknowledgements by `member`, all or none.
    /// Offsets below the start offset are ignored (done already).
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[AckBatch],
        now_ms: i64,
    ) -> Result<(), (ResponseError, String)> {
        let mut changes: Vec<(i64, InFlight)> = Vec::new();
        for b in batches {
            // i128: a hostile batch may span all of i64.
            let n = b.last as i128 - b.first as i128 + 1;
            if b.first > b.last
                || b.types.is_empty()
                || (b.types.len() != 1 && b.types.len() as i128 != n)
            {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("invalid acknowledgement batch {}..{}", b.first, b.last),
                ));
            }
            // Offsets never handed out: Kafka's "past the acquired records".
            // Checked first, so the walk below stays within what is in
            // flight (at most `max_in_flight` offsets plus a log batch).
            if b.last >= self.next_new {
                return Err(invalid_state(format!(
                    "acknowledgement batch {}..{} reaches past the last acquired offset {}",
                    b.first,
                    b.last,
                    self.next_new - 1
                )));
            }
            for o in b.first.max(self.start)..=b.last {
                let ty = if b.types.len() == 1 {
                    b.types[0]
                } else {
                    // One type per offset: the batch is as short as its list.
                    b.types[(o - b.first) as usize]
                };
                let Some(r) = self.records.get(&o) else {
                    return Err(invalid_state(format!("offset {o} is not in flight")));
                };
                if r.state != RecordState::Acquired || r.owner.as_deref() != Some(member) {
                    return Err(invalid_state(format!(
                        "offset {o} is not acquired by member {member}"
                    )));
                }
                let mut next = r.clone();
                match ty {
                    ACCEPT => next.state = RecordState::Acknowledged,
                    REJECT | GAP => next.state = RecordState::Archived,
                    RELEASE => next.state = self.released(r),
                    RENEW => next.lock_until = now_ms + self.limits.lock_duration_ms,
                    other => {
                        return Err((
                            ResponseError::InvalidRequest,
                            format!("unknown acknowledgement type {other}"),
                        ))
                    }
                }
                if next.state != RecordState::Acquired {
                    next.owner = None;
                    next.lock_until = 0;
                }
                changes.push((o, next));
            }
        }
        for (o, r) in changes {
            self.records.insert(o, r);
        }
        self.advance();
        Ok(())
    }

    /// Releases every record `member` holds (its session closed).
    pub fn release_member(&mut self, member: &str) -> usize {
        self.release_where(|r| r.owner.as_deref() == Some(member))
    }

    /// Releases records whose acquisition lock expired by `now_ms`.
    pub fn expire_locks(&mut self, now_ms: i64) -> usize {
        self.release_where(|r| r.lock_until <= now_ms)
    }

    fn release_where(&mut self, held: impl Fn(&InFlight) -> bool) -> usize {
        let limit = self.limits.delivery_count_limit;
        let mut n = 0;
        for r in self.records.values_mut() {
            if r.state == RecordState::Acquired && held(r) {
                r.state = if r.delivery_count >= limit {
                    RecordState::Archived
                } else {
                    RecordState::Available
                };
                r.owner = None;
                r.lock_until = 0;
                n += 1;
            }
        }
        self.advance();
        n
    }

    /// Moves the start offset past records in a final state.
    fn advance(&mut self) {
        while let Some((&o, r)) = self.records.first_key_value() {
            if o < self.start || r.state.is_final() {
                self.records.remove(&o);
                self.start = self.start.max(o + 1);
            } else {
                break;
            }
        }
        if self.records.is_empty() {
            self.start = self.start.max(self.next_new);
        }
        self.next_new = self.next_new.max(self.start);
    }

    /// Archives what lies below `log_start` (retention or DeleteRecords
    /// removed it) and starts there.
    pub fn move_start_to(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        self.records.retain(|o, _| *o >= log_start);
        self.start = log_start;
        self.next_new = self.next_new.max(log_start);
        self.advance();
    }

    /// The state to persist: ranges of equal state and delivery count from
    /// the start offset (acquired records as what they return to, since an
    /// acquisition is never persisted).
    pub fn state_batches(&self) -> Vec<StateBatch> {
        let mut out: Vec<StateBatch> = Vec::new();
        for (&o, r) in &self.records {
            let (state, count) = match r.state {
                RecordState::Acquired => (RecordState::Available, r.delivery_count - 1),
                s => (s, r.delivery_count),
            };
            match out.last_mut() {
                Some(b) if b.last + 1 == o && b.state == state && b.delivery_count == count => {
                    b.last = o
                }
                _ => out.push(StateBatch {
                    first: o,
                    last: o,
                    state,
                    delivery_count: count,
                }),
            }
        }
        out
    }

    /// Records in flight by state, for metrics and tests.
    pub fn count(&self, state: RecordState) -> usize {
        self.records.values().filter(|r| r.state == state).count()
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
