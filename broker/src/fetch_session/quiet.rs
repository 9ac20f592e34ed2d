//! The leader's side of a follower's fetch session, read in O(changed): a
//! follower fetches every partition it follows from this leader, tens of
//! thousands at scale, and each round used to read every one of them (two
//! locks, a log lookup and the session bookkeeping each) to find the few
//! with news. A round now reads only the partitions that may have news:
//!
//! - the ones the request names (their fetch state changed),
//! - the ones that changed since they were last read: each partition the
//!   session skips is watched with the session's tracking waker, and any
//!   change of it (an append, a high-watermark or log-start move, a role or
//!   ISR change) records its token,
//! - the ones whose last read was not *quiet*. Quiet: the follower fetched
//!   at the log end and got nothing (no records, no error, no divergence,
//!   no throttle), so until the partition changes another read would find
//!   the same.
//!
//! What a skipped read would have done still happens. Its answer (nothing)
//! and its reported offsets (unchanged) need no work; the follower's
//! progress does: each round stores its time in the session's *pulse*, and
//! a partition left quiet keeps a link to it, so its follower counts as
//! having fetched, and as caught up, at every round since
//! (`partition/follower_progress.rs`, `FollowerProgress`). That holds
//! because any change of the partition wakes the session, which reads it
//! again before its next pulse.
//!
//! A round may skip partitions only under the terms its reads were made
//! with (the follower's id and broker epoch, its ISR eligibility); when
//! they change, every partition is read again once. Sessions of consumers,
//! of followers that may not fetch, and of replicas under a leader throttle
//! read every partition each round, as before.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use indexmap::IndexMap;

use super::{Cached, FetchState, PartKey};
use crate::partition::FetchWaker;

/// What a follower's fetch is judged by besides its partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerTerms {
    pub replica_id: i32,
    pub replica_epoch: i64,
    pub isr_eligible: bool,
}

/// The session's memory of which partitions need reading.
#[derive(Debug)]
pub(super) struct Quiet {
    terms: FollowerTerms,
    waker: Arc<FetchWaker>,
    pulse: Arc<AtomicI64>,
    /// Token → partition, for the waker's fired tokens.
    keys: HashMap<u32, PartKey>,
    next_token: u32,
    /// Partitions the next round reads: named, changed, or not quiet after
    /// their last read. A partition enters before it is read and leaves
    /// only when a finished round found it quiet, so a fetch cancelled
    /// halfway loses nothing.
    loud: HashSet<PartKey>,
}

/// What one round of a follower session reads with: the session's waker
/// (every partition read is watched with it, by its token), its pulse,
/// and each planned partition's token.
#[derive(Debug, Clone)]
pub struct QuietRound {
    pub terms: FollowerTerms,
    pub waker: Arc<FetchWaker>,
    pub pulse: Arc<AtomicI64>,
    /// Aligned with the plan's partitions.
    pub tokens: Vec<u32>,
    /// The partitions this request took out of the session: their
    /// followers' progress must stop following the pulse.
    pub forgotten: Vec<PartKey>,
}

impl QuietRound {
    /// The round of an opening fetch of `n` partitions: a new waker and
    /// pulse, tokens in request order.
    pub(super) fn opening(terms: FollowerTerms, n: usize) -> Self {
        Self {
            terms,
            waker: Arc::new(FetchWaker::tracking()),
            pulse: Arc::new(AtomicI64::new(i64::MIN)),
            tokens: (0..n as u32).collect(),
            forgotten: Vec::new(),
        }
    }
}

impl Quiet {
    /// Every partition loud: a session that starts skipping under `terms`.
    pub(super) fn new(terms: FollowerTerms, partitions: &mut IndexMap<PartKey, Cached>) -> Self {
        let mut q = Self {
            terms,
            waker: Arc::new(FetchWaker::tracking()),
            pulse: Arc::new(AtomicI64::new(i64::MIN)),
            keys: HashMap::with_capacity(partitions.len()),
            next_token: 0,
            loud: HashSet::with_capacity(partitions.len()),
        };
        for (key, c) in partitions.iter_mut() {
            q.add(key, c);
        }
        q
    }

    /// The memory an opening round leaves: its partitions in plan order,
    /// each quiet or not.
    pub(super) fn opened<'a>(
        round: &QuietRound,
        read: impl Iterator<Item = (&'a PartKey, bool)>,
    ) -> Self {
        let mut keys = HashMap::with_capacity(round.tokens.len());
        let mut loud = HashSet::new();
        for ((key, quiet), token) in read.zip(&round.tokens) {
            keys.insert(*token, key.clone());
            if !quiet {
                loud.insert(key.clone());
            }
        }
        Self {
            terms: round.terms,
            waker: round.waker.clone(),
            pulse: round.pulse.clone(),
            keys,
            next_token: round.tokens.len() as u32,
            loud,
        }
    }

    pub(super) fn terms(&self) -> FollowerTerms {
        self.terms
    }

    /// Whether `round` was planned from this memory (and not from one
    /// replaced since under other terms).
    pub(super) fn planned(&self, round: &QuietRound) -> bool {
        Arc::ptr_eq(&self.waker, &round.waker)
    }

    /// A partition new to the session: a token, and read next round.
    pub(super) fn add(&mut self, key: &PartKey, c: &mut Cached) {
        let token = self.next_token;
        self.next_token = self.next_token.wrapping_add(1);
        c.token = token;
        self.keys.insert(token, key.clone());
        self.loud.insert(key.clone());
    }

    /// A partition the request names (its fetch state changed).
    pub(super) fn named(&mut self, key: &PartKey) {
        self.loud.insert(key.clone());
    }

    pub(super) fn forget(&mut self, key: &PartKey, c: &Cached) {
        self.keys.remove(&c.token);
        self.loud.remove(key);
    }

    /// The partitions that changed since their last read, each made loud
    /// (with its token).
    pub(super) fn take_fired(&mut self) -> Vec<(PartKey, u32)> {
        let mut out = Vec::new();
        for token in self.waker.take_fired() {
            if let Some(key) = self.keys.get(&token) {
                self.loud.insert(key.clone());
                out.push((key.clone(), token));
            }
        }
        out
    }

    /// The next round: the loud partitions, in session order.
    pub(super) fn round(
        &self,
        partitions: &IndexMap<PartKey, Cached>,
    ) -> (Vec<(PartKey, FetchState)>, QuietRound) {
        let mut at: Vec<usize> = self
            .loud
            .iter()
            .filter_map(|k| partitions.get_index_of(k))
            .collect();
        at.sort_unstable();
        let mut read = Vec::with_capacity(at.len());
        let mut tokens = Vec::with_capacity(at.len());
        for i in at {
            let (k, c) = partitions.get_index(i).expect("index from the map");
            read.push((k.clone(), c.state));
            tokens.push(c.token);
        }
        let round = QuietRound {
            terms: self.terms,
            waker: self.waker.clone(),
            pulse: self.pulse.clone(),
            tokens,
            forgotten: Vec::new(),
        };
        (read, round)
    }

    /// After a round: a partition found quiet is skipped until it changes.
    pub(super) fn settle(&mut self, key: &PartKey, quiet: bool) {
        if quiet {
            self.loud.remove(key);
        }
    }
}
