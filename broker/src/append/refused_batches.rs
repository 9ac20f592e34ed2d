//! Idempotent batches this broker refused with a retriable error, so that
//! the batches an idempotent producer had already pipelined behind one of
//! them are refused the same way instead of with OUT_OF_ORDER_SEQUENCE_NUMBER.
//!
//! A producer keeps up to five Produce requests in flight per partition. When
//! the first (R1) is refused without being written (NOT_LEADER_OR_FOLLOWER
//! from a broker about to become leader, NOT_ENOUGH_REPLICAS while the ISR
//! regrows, ...) and the condition clears before R2 is read, R2 finds a gap
//! where R1 should be: Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER. The Java
//! client then just retries, but librdkafka (through 2.16, issue #4953)
//! bumps the producer epoch and renumbers every unacknowledged message of
//! every partition — including batches another partition's leader already
//! wrote whose answer was lost in the same failover — so they are stored
//! twice. And a leader with no state for the producer (KIP-360) would even
//! append R2 ahead of R1. Refusing R2 with R1's retriable error keeps the
//! pipeline in order: the client resends R1, then R2, and nothing is written
//! twice or out of order.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use skein_storage::batch::BatchHeader;
use skein_storage::producer_state::{last_sequence, ProducerEntry};

/// A refusal only concerns requests already in flight behind the refused
/// one; they arrive within the clients' request timeouts.
const KEEP: Duration = Duration::from_secs(120);
/// Bound on remembered refusals (one per partition and producer at most).
const MAX_ENTRIES: usize = 100_000;

/// `(topic, partition, producer id)`.
pub type Key = (String, i32, i64);

#[derive(Debug, Clone, Copy)]
struct Refusal {
    epoch: i16,
    first_seq: i32,
    code: ResponseError,
    at: Instant,
}

/// What to do with an idempotent batch before appending it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Check and append it as usual.
    Proceed,
    /// An earlier batch of the same producer was refused and is not in the
    /// log: refuse this one the same way, writing nothing.
    Refuse(ResponseError),
}

/// The refusals of one broker, per partition and producer.
#[derive(Debug, Default)]
pub struct RefusedBatches {
    entries: Mutex<HashMap<Key, Refusal>>,
}

/// Whether sequence `b` comes after `a` (sequences wrap at i32::MAX).
fn after(a: i32, b: i32) -> bool {
    let d = (b as i64 - a as i64).rem_euclid(1 << 31);
    d > 0 && d < 1 << 30
}

/// The errors after which a producer resends the same batch, with what to
/// answer the batches behind it: never a "possibly written" code (that would
/// make the client count them as acknowledged later), always one that says
/// the batch was not written.
fn retry_code(code: ResponseError) -> Option<ResponseError> {
    use ResponseError::*;
    match code {
        NotLeaderOrFollower | UnknownTopicOrPartition | LeaderNotAvailable => {
            Some(NotLeaderOrFollower)
        }
        NotEnoughReplicas | NotEnoughReplicasAfterAppend | RequestTimedOut | KafkaStorageError => {
            Some(NotEnoughReplicas)
        }
        _ => None,
    }
}

impl RefusedBatches {
    /// Remembers that batch `h` was answered `code`. Only retriable codes
    /// count, and the earliest refused batch of a producer epoch is kept.
    pub fn record(&self, key: Key, h: &BatchHeader, code: ResponseError, now: Instant) {
        let Some(code) = retry_code(code) else {
            return;
        };
        let mut entries = self.entries.lock().expect("refusals lock");
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, r| now.duration_since(r.at) < KEEP);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        let refusal = Refusal {
            epoch: h.producer_epoch,
            first_seq: h.base_sequence,
            code,
            at: now,
        };
        match entries.get_mut(&key) {
            // The pipeline already broke before this batch.
            Some(r) if r.epoch == h.producer_epoch && after(r.first_seq, h.base_sequence) => {}
            _ => {
                entries.insert(key, refusal);
            }
        }
    }

    /// Batch `h` went through: if it is the refused batch or one after it,
    /// the producer's pipeline is whole again.
    pub fn clear(&self, key: &Key, h: &BatchHeader) {
        let mut entries = self.entries.lock().expect("refusals lock");
        if let Some(r) = entries.get(key) {
            if r.epoch != h.producer_epoch || !after(h.base_sequence, r.first_seq) {
                entries.remove(key);
            }
        }
    }

    /// Decides on batch `h` given the producer's state in the log (`None`:
    /// the log has none for it).
    pub fn check(
        &self,
        key: &Key,
        h: &BatchHeader,
        state: Option<&ProducerEntry>,
        now: Instant,
    ) -> Verdict {
        let refusal = {
            let mut entries = self.entries.lock().expect("refusals lock");
            match entries.get(key) {
                None => return Verdict::Proceed,
                Some(r) if now.duration_since(r.at) >= KEEP => {
                    entries.remove(key);
                    return Verdict::Proceed;
                }
                Some(r) => *r,
            }
        };
        decide(&refusal, h, state)
    }
}

fn decide(refusal: &Refusal, h: &BatchHeader, state: Option<&ProducerEntry>) -> Verdict {
    // Another epoch starts a new pipeline; the refused batch itself, or one
    // before it, is a retry and goes through the ordinary checks.
    if h.producer_epoch != refusal.epoch || !after(refusal.first_seq, h.base_sequence) {
        return Verdict::Proceed;
    }
    let refuse = Verdict::Refuse(refusal.code);
    let Some(entry) = state else {
        // No state: the log would take any sequence and skip the refused batch.
        return refuse;
    };
    if entry.epoch != h.producer_epoch {
        return refuse;
    }
    let last_seq = last_sequence(h);
    if entry
        .batches
        .iter()
        .any(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
    {
        // Written already: the ordinary path answers it as a duplicate.
        return Verdict::Proceed;
    }
    match entry.batches.back() {
        // The gap is exactly the refused batch.
        Some(last) if last.last_seq as i64 + 1 == refusal.first_seq as i64 => refuse,
        Some(last) if last.last_seq == i32::MAX && refusal.first_seq == 0 => refuse,
        // In sequence (the refused batch is in the log after all), or a gap
        // that is not ours to explain: the log's own checks answer.
        _ => Verdict::Proceed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_storage::producer_state::BatchMetadata;

    fn header(epoch: i16, seq: i32, count: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: 7,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    /// A producer whose batches of five up to sequence `last` are in the log.
    fn state(epoch: i16, last: i32) -> ProducerEntry {
        let mut e = ProducerEntry {
            epoch,
            ..Default::default()
        };
        let mut first = (last + 1 - 25).max(0);
        while first <= last {
            e.batches.push_back(BatchMetadata {
                first_seq: first,
                last_seq: first + 4,
                first_offset: first as i64,
                last_offset: first as i64 + 4,
                max_timestamp: 0,
            });
            first += 5;
        }
        e
    }

    fn key() -> Key {
        ("t".into(), 0, 7)
    }

    /// The refusals for producer 7 on `t-0`, seen at one instant, and its
    /// batches of five records in epoch 0.
    struct Producer {
        refusals: RefusedBatches,
        now: Instant,
    }

    impl Producer {
        fn new() -> Self {
            Producer {
                refusals: RefusedBatches::default(),
                now: Instant::now(),
            }
        }

        /// The batch starting at `seq` was answered `code`.
        fn answered(&self, seq: i32, code: ResponseError) {
            self.refusals
                .record(key(), &header(0, seq, 5), code, self.now);
        }

        /// The batch starting at `seq` was written.
        fn written(&self, seq: i32) {
            self.refusals.clear(&key(), &header(0, seq, 5));
        }

        /// The verdict on the batch starting at `seq` when the log holds the
        /// producer's batches up to sequence `log_last` (`None`: no state).
        fn check(&self, seq: i32, log_last: Option<i32>) -> Verdict {
            let log = log_last.map(|last| state(0, last));
            self.refusals
                .check(&key(), &header(0, seq, 5), log.as_ref(), self.now)
        }
    }

    const REFUSE_NOT_ENOUGH_REPLICAS: Verdict = Verdict::Refuse(ResponseError::NotEnoughReplicas);
    const REFUSE_NOT_LEADER: Verdict = Verdict::Refuse(ResponseError::NotLeaderOrFollower);

    #[test]
    fn batches_behind_a_refused_one_are_refused_the_same_way() {
        let p = Producer::new();
        // Sequences 0..9 are written; 10..14 is refused while the ISR is short.
        p.answered(10, ResponseError::NotEnoughReplicas);
        // 15..19 was already in flight: refused, not OUT_OF_ORDER_SEQUENCE_NUMBER.
        assert_eq!(p.check(15, Some(9)), REFUSE_NOT_ENOUGH_REPLICAS);
        // The resent 10..14 goes through, and so does everything after it.
        assert_eq!(p.check(10, Some(9)), Verdict::Proceed);
        assert_eq!(p.check(15, Some(14)), Verdict::Proceed);
        // A retry of an older batch going through changes nothing...
        p.written(5);
        assert_ne!(p.check(20, Some(9)), Verdict::Proceed);
        // ...the refused one going through ends it.
        p.written(10);
        assert_eq!(p.check(20, Some(9)), Verdict::Proceed);
    }

    #[test]
    fn without_producer_state_a_later_batch_must_not_overtake_the_refused_one() {
        let p = Producer::new();
        p.answered(0, ResponseError::NotLeaderOrFollower);
        assert_eq!(p.check(5, None), REFUSE_NOT_LEADER);
    }

    #[test]
    fn other_gaps_duplicates_epochs_and_old_refusals_are_left_to_the_log() {
        let p = Producer::new();
        p.answered(10, ResponseError::RequestTimedOut);
        // A duplicate of a written batch is answered as such.
        assert_eq!(p.check(5, Some(9)), Verdict::Proceed);
        // A gap before the refused batch is a real one: the log says so.
        assert_eq!(p.check(15, Some(4)), Verdict::Proceed);
        // A new epoch starts over.
        let (r, now) = (&p.refusals, p.now);
        assert_eq!(
            r.check(&key(), &header(1, 0, 5), Some(&state(0, 9)), now),
            Verdict::Proceed
        );
        // "Possibly written" codes become one that says "not written".
        assert_eq!(p.check(15, Some(9)), REFUSE_NOT_ENOUGH_REPLICAS);
        // Permanent errors are not remembered; refusals expire.
        let other: Key = ("t".into(), 1, 7);
        r.record(
            other.clone(),
            &header(0, 10, 5),
            ResponseError::InvalidRecord,
            now,
        );
        assert_eq!(
            r.check(&other, &header(0, 15, 5), None, now),
            Verdict::Proceed
        );
        assert_eq!(
            r.check(&key(), &header(0, 15, 5), Some(&state(0, 9)), now + KEEP),
            Verdict::Proceed
        );
        assert_eq!(p.check(15, Some(9)), Verdict::Proceed);
    }

    #[test]
    fn the_earliest_refusal_of_a_pipeline_is_kept() {
        let p = Producer::new();
        p.answered(10, ResponseError::NotLeaderOrFollower);
        p.answered(15, ResponseError::NotEnoughReplicas);
        assert_eq!(p.check(20, Some(9)), REFUSE_NOT_LEADER);
        // An earlier refusal (a retry of an older batch) moves the break back.
        p.answered(5, ResponseError::NotEnoughReplicas);
        assert_eq!(p.check(10, Some(4)), REFUSE_NOT_ENOUGH_REPLICAS);
        assert!(after(i32::MAX, 0) && after(5, 6) && !after(6, 5) && !after(5, 5));
    }
}
