//! Fetch sessions (KIP-227): a fetcher with thousands of partitions names
//! them once; later requests list only the partitions whose fetch state
//! changed (and those to forget), and responses carry only the partitions
//! with something new — records, an error, a moved high watermark, last
//! stable offset or log start offset.
//!
//! The protocol, as Kafka's `FetchManager`:
//! - `session_id 0, epoch 0`: a full fetch that opens a session if the
//!   cache has room (the response's `session_id`; 0 when none was opened).
//! - `session_id N, epoch 0`: closes N, then as above.
//! - `epoch -1`: a sessionless full fetch; closes `session_id` if set.
//! - `session_id N, epoch E > 0`: incremental. E must be the session's next
//!   epoch (1 after the opening fetch, then +1, wrapping to 1), else
//!   `INVALID_FETCH_SESSION_EPOCH`; an unknown N is
//!   `FETCH_SESSION_ID_NOT_FOUND`. A session opened with topic ids (v13+)
//!   must go on with them, else `FETCH_SESSION_TOPIC_ID_ERROR`.
//!
//! The cache holds `max.incremental.fetch.session.cache.slots` sessions
//! (1000, 0 turns sessions off). When full, a new session takes the slot of
//! a session idle for two minutes; failing that a follower's session (they
//! are few and carry every replicated partition) takes the slot of the
//! smallest consumer session, and a consumer's session that of a smaller
//! consumer session. Otherwise the fetch is answered without a session.
//!
//! A follower's session reads only the partitions that may have news each
//! round (`quiet.rs`); a consumer's reads all of its partitions.

mod quiet;

pub use quiet::{FollowerTerms, QuietRound};

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{FetchRequest, TopicName};
use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};
use uuid::Uuid;

/// A session idle this long may give its slot to a new one (Kafka's
/// `FetchSessionCache` eviction age).
const EVICTABLE_AFTER: Duration = Duration::from_secs(120);

/// A partition as a fetch request names it: by topic id from v13, by topic
/// name before (the other field is then empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartKey {
    pub topic: TopicName,
    pub topic_id: Uuid,
    pub partition: i32,
}

/// What the fetcher asks of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FetchState {
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    /// Fetch v12+; -1 before.
    pub last_fetched_epoch: i32,
    /// A follower's log start offset (v5+; -1 before).
    pub log_start_offset: i64,
}

/// What a response told the fetcher of one partition; an incremental
/// response leaves the partition out while this stays the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reported {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// One partition of a read, and whether its answer must go out whatever
/// was reported before (records, an error, a divergence).
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub reported: Reported,
    pub must_send: bool,
    /// A follower's read that found it at the log end with nothing to send
    /// (see `quiet.rs`): skipped until the partition changes.
    pub quiet: bool,
}

#[derive(Debug)]
struct Cached {
    state: FetchState,
    /// None until a response carried the partition.
    reported: Option<Reported>,
    /// The partition's token in a follower session's waker (`quiet.rs`).
    token: u32,
}

#[derive(Debug)]
struct Session {
    /// The epoch the next incremental request must carry.
    next_epoch: i32,
    uses_topic_ids: bool,
    follower: bool,
    partitions: IndexMap<PartKey, Cached>,
    last_used: Instant,
    /// A follower session's memory of what needs reading (`quiet.rs`).
    quiet: Option<quiet::Quiet>,
}

/// How one fetch request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every requested partition, no session (`session_id` 0).
    Sessionless,
    /// Every requested partition, then a session is opened with them.
    Open,
    /// The session's partitions; only the changed ones are answered.
    Incremental(i32),
}

/// A request turned into what to read.
#[derive(Debug)]
pub struct Plan {
    pub mode: Mode,
    pub partitions: Vec<(PartKey, FetchState)>,
    /// A follower session's round: only the partitions that may have news
    /// are planned; the read watches them with the session's waker.
    pub quiet: Option<QuietRound>,
}

pub struct FetchSessionCache {
    slots: usize,
    sessions: Mutex<HashMap<i32, Session>>,
    open: IntGauge,
    evictions: IntCounter,
    requests: IntCounterVec,
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl PartKey {
    /// A partition as Fetch `version` names it: by topic id from v13, by
    /// name before.
    fn of(version: i16, topic: &TopicName, topic_id: Uuid, partition: i32) -> Self {
        let by_id = version >= 13;
        PartKey {
            topic: if by_id {
                TopicName::default()
            } else {
                topic.clone()
            },
            topic_id: if by_id { topic_id } else { Uuid::nil() },
            partition,
        }
    }
}

/// The partitions a request names, in its order, with their fetch state.
pub fn requested(req: &FetchRequest, version: i16) -> Vec<(PartKey, FetchState)> {
    let mut out = Vec::new();
    for ft in &req.topics {
        for fp in &ft.partitions {
            let key = PartKey::of(version, &ft.topic, ft.topic_id, fp.partition);
            let state = FetchState {
                fetch_offset: fp.fetch_offset,
                max_bytes: fp.partition_max_bytes,
                current_leader_epoch: fp.current_leader_epoch,
                last_fetched_epoch: if version >= 12 {
                    fp.last_fetched_epoch
                } else {
                    -1
                },
                log_start_offset: if version >= 5 {
                    fp.log_start_offset
                } else {
                    -1
                },
            };
            out.push((key, state));
        }
    }
    out
}

fn forgotten(req: &FetchRequest, version: i16) -> Vec<PartKey> {
    let mut out = Vec::new();
    for ft in &req.forgotten_topics_data {
        for &partition in &ft.partitions {
            out.push(PartKey::of(version, &ft.topic, ft.topic_id, partition));
        }
    }
    out
}

impl FetchSessionCache {
    pub fn new(slots: usize, registry: &Registry) -> Self {
        let open = IntGauge::new(
            "skein_fetch_sessions",
            "Fetch sessions (KIP-227) in this broker's cache.",
        )
        .expect("metric");
        let evictions = IntCounter::new(
            "skein_fetch_session_evictions_total",
            "Fetch sessions dropped from a full cache to make room for a new one.",
        )
        .expect("metric");
        let requests = IntCounterVec::new(
            Opts::new(
                "skein_fetch_session_requests_total",
                "Fetch requests by session use: sessionless, open (a full fetch opening a session), incremental, refused (an unknown session or a wrong epoch).",
            ),
            &["kind"],
        )
        .expect("metric");
        for m in [
            Box::new(open.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(evictions.clone()),
            Box::new(requests.clone()),
        ] {
            registry.register(m).expect("register");
        }
        Self {
            slots,
            sessions: Mutex::new(HashMap::new()),
            open,
            evictions,
            requests,
        }
    }

    /// Sessions in the cache.
    pub fn len(&self) -> usize {
        self.sessions.lock().expect("sessions").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies the request's session part: opens, closes or updates the
    /// session, and says which partitions to read. An error is the
    /// response's top-level error code. `terms`: a follower's fetch whose
    /// session may skip partitions with nothing new (`quiet.rs`).
    pub fn begin(
        &self,
        req: &FetchRequest,
        version: i16,
        terms: Option<FollowerTerms>,
    ) -> Result<Plan, ResponseError> {
        let asked = requested(req, version);
        if version < 7 {
            return Ok(self.sessionless(asked));
        }
        let mut sessions = self.sessions.lock().expect("sessions");
        match req.session_epoch {
            -1 | 0 => {
                if req.session_id != 0 {
                    sessions.remove(&req.session_id);
                    self.open.set(sessions.len() as i64);
                }
                if req.session_epoch == -1 || self.slots == 0 {
                    return Ok(self.sessionless(asked));
                }
                self.requests.with_label_values(&["open"]).inc();
                Ok(Plan {
                    mode: Mode::Open,
                    quiet: terms.map(|t| QuietRound::opening(t, asked.len())),
                    partitions: asked,
                })
            }
            epoch => {
                let refuse = |e: ResponseError| {
                    self.requests.with_label_values(&["refused"]).inc();
                    Err(e)
                };
                let Some(session) = sessions.get_mut(&req.session_id) else {
                    return refuse(ResponseError::FetchSessionIdNotFound);
                };
                if session.next_epoch != epoch {
                    return refuse(ResponseError::InvalidFetchSessionEpoch);
                }
                if session.uses_topic_ids != (version >= 13) {
                    return refuse(ResponseError::FetchSessionTopicIdError);
                }
                session.next_epoch = next_epoch(epoch);
                session.last_used = Instant::now();
                // Skipping needs the terms the skipped reads were made
                // under: new terms read everything once.
                match (terms, &session.quiet) {
                    (None, _) => session.quiet = None,
                    (Some(t), Some(q)) if q.terms() == t => {}
                    (Some(t), _) => {
                        session.quiet = Some(quiet::Quiet::new(t, &mut session.partitions))
                    }
                }
                for (key, state) in asked {
                    match session.partitions.get_mut(&key) {
                        Some(c) => {
                            c.state = state;
                            if let Some(q) = &mut session.quiet {
                                q.named(&key);
                            }
                        }
                        None => {
                            let mut c = Cached {
                                state,
                                reported: None,
                                token: 0,
                            };
                            if let Some(q) = &mut session.quiet {
                                q.add(&key, &mut c);
                            }
                            session.partitions.insert(key, c);
                        }
                    }
                }
                // One pass, keeping the order: a follower whose leader
                // moved forgets tens of thousands of partitions at once,
                // and removing them one by one (each O(n)) stalled the
                // broker for seconds with the session cache locked.
                let forget: HashSet<PartKey> = forgotten(req, version).into_iter().collect();
                if !forget.is_empty() {
                    if let Some(q) = &mut session.quiet {
                        for key in &forget {
                            if let Some(c) = session.partitions.get(key) {
                                q.forget(key, c);
                            }
                        }
                    }
                    session.partitions.retain(|k, _| !forget.contains(k));
                }
                self.requests.with_label_values(&["incremental"]).inc();
                let (partitions, quiet) = match &mut session.quiet {
                    Some(q) => {
                        q.take_fired();
                        let (read, mut round) = q.round(&session.partitions);
                        round.forgotten = forget.into_iter().collect();
                        (read, Some(round))
                    }
                    None => (
                        session
                            .partitions
                            .iter()
                            .map(|(k, c)| (k.clone(), c.state))
                            .collect(),
                        None,
                    ),
                };
                Ok(Plan {
                    mode: Mode::Incremental(req.session_id),
                    partitions,
                    quiet,
                })
            }
        }
    }

    fn sessionless(&self, asked: Vec<(PartKey, FetchState)>) -> Plan {
        self.requests.with_label_values(&["sessionless"]).inc();
        Plan {
            mode: Mode::Sessionless,
            partitions: asked,
            quiet: None,
        }
    }

    /// While a follower session's round waits: the partitions that changed
    /// since it was planned (or since the last call), with their fetch
    /// state and token, to be read before the round answers.
    pub fn fired(&self, plan: &Plan) -> Vec<(PartKey, FetchState, u32)> {
        let (Mode::Incremental(id), Some(round)) = (plan.mode, &plan.quiet) else {
            return Vec::new();
        };
        let mut sessions = self.sessions.lock().expect("sessions");
        let Some(session) = sessions.get_mut(&id) else {
            return Vec::new();
        };
        let Some(q) = session.quiet.as_mut().filter(|q| q.planned(round)) else {
            return Vec::new();
        };
        q.take_fired()
            .into_iter()
            .filter_map(|(key, token)| {
                let state = session.partitions.get(&key)?.state;
                Some((key, state, token))
            })
            .collect()
    }

    /// After a follower session's read pass at `now_ms`: every partition
    /// the round skipped counts as fetched then (`quiet.rs`).
    pub fn pulse(plan: &Plan, now_ms: i64) {
        if let Some(round) = &plan.quiet {
            round.pulse.fetch_max(now_ms, Ordering::AcqRel);
        }
    }

    /// After the read: opens the session of an `Open` plan, or records what
    /// an incremental response reports. Returns the response's session id
    /// and, per partition of the plan, whether the response carries it.
    pub fn finish(
        &self,
        plan: &Plan,
        outcomes: &[Outcome],
        version: i16,
        follower: bool,
    ) -> (i32, Vec<bool>) {
        match plan.mode {
            Mode::Sessionless => (0, vec![true; outcomes.len()]),
            Mode::Open => {
                let tokens = plan.quiet.as_ref().map(|r| &r.tokens[..]);
                let partitions = plan
                    .partitions
                    .iter()
                    .zip(outcomes)
                    .enumerate()
                    .map(|(i, ((k, state), o))| {
                        (
                            k.clone(),
                            Cached {
                                state: *state,
                                reported: Some(o.reported),
                                token: tokens.map_or(0, |t| t[i]),
                            },
                        )
                    })
                    .collect();
                let quiet = plan.quiet.as_ref().map(|round| {
                    quiet::Quiet::opened(
                        round,
                        plan.partitions
                            .iter()
                            .zip(outcomes)
                            .map(|((k, _), o)| (k, o.quiet)),
                    )
                });
                let session = Session {
                    next_epoch: 1,
                    uses_topic_ids: version >= 13,
                    follower,
                    partitions,
                    last_used: Instant::now(),
                    quiet,
                };
                (self.insert(session), vec![true; outcomes.len()])
            }
            Mode::Incremental(id) => {
                let mut sessions = self.sessions.lock().expect("sessions");
                let Some(session) = sessions.get_mut(&id) else {
                    // Closed or evicted while the fetch waited: answer in
                    // full; the next request learns the session is gone.
                    return (id, vec![true; outcomes.len()]);
                };
                let mut send = Vec::with_capacity(outcomes.len());
                let mut rotate = Vec::new();
                let mut quiet = match (&mut session.quiet, &plan.quiet) {
                    (Some(q), Some(round)) if q.planned(round) => Some(q),
                    _ => None,
                };
                for ((key, _), o) in plan.partitions.iter().zip(outcomes) {
                    let Some(c) = session.partitions.get_mut(key) else {
                        send.push(false);
                        continue;
                    };
                    if let Some(q) = &mut quiet {
                        q.settle(key, o.quiet);
                    }
                    let changed = o.must_send || c.reported != Some(o.reported);
                    c.reported = Some(o.reported);
                    if o.must_send {
                        rotate.push(key.clone());
                    }
                    send.push(changed);
                }
                // Partitions that returned data go to the back, in their
                // order, so a response limit does not always favour the
                // same ones. One O(n) pass: moving them one at a time is
                // O(n) each, and a follower catching up on 60,000
                // partitions held the lock (and a runtime thread) for
                // seconds per response.
                if !rotate.is_empty() {
                    let rotate: HashSet<PartKey> = rotate.into_iter().collect();
                    let all = std::mem::take(&mut session.partitions);
                    let mut back = IndexMap::with_capacity(rotate.len());
                    session
                        .partitions
                        .reserve(all.len() - rotate.len().min(all.len()));
                    for (k, c) in all {
                        if rotate.contains(&k) {
                            back.insert(k, c);
                        } else {
                            session.partitions.insert(k, c);
                        }
                    }
                    session.partitions.extend(back);
                }
                (id, send)
            }
        }
    }

    /// Stores a new session if there is or can be made room; its id, or 0.
    fn insert(&self, session: Session) -> i32 {
        let mut sessions = self.sessions.lock().expect("sessions");
        if sessions.len() >= self.slots {
            let now = Instant::now();
            let stale = sessions
                .iter()
                .filter(|(_, s)| now.duration_since(s.last_used) >= EVICTABLE_AFTER)
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id);
            let smaller = || {
                sessions
                    .iter()
                    .filter(|(_, s)| !s.follower)
                    .filter(|(_, s)| {
                        session.follower || s.partitions.len() < session.partitions.len()
                    })
                    .min_by_key(|(_, s)| (s.partitions.len(), s.last_used))
                    .map(|(id, _)| *id)
            };
            match stale.or_else(smaller) {
                Some(victim) => {
                    sessions.remove(&victim);
                    self.evictions.inc();
                }
                None => return 0,
            }
        }
        let id = loop {
            let id = (Uuid::new_v4().as_u128() as u32 & 0x7fff_ffff) as i32;
            if id != 0 && !sessions.contains_key(&id) {
                break id;
            }
        };
        sessions.insert(id, session);
        self.open.set(sessions.len() as i64);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};

    fn req(session_id: i32, epoch: i32, parts: &[(&str, i32, i64)]) -> FetchRequest {
        let mut r = FetchRequest::default();
        r.session_id = session_id;
        r.session_epoch = epoch;
        for (topic, p, offset) in parts {
            let mut fp = FetchPartition::default();
            fp.partition = *p;
            fp.fetch_offset = *offset;
            fp.partition_max_bytes = 1024;
            let mut ft = FetchTopic::default();
            ft.topic = TopicName(kafka_protocol::protocol::StrBytes::from_string(
                topic.to_string(),
            ));
            ft.partitions.push(fp);
            r.topics.push(ft);
        }
        r
    }

    fn outcome(hw: i64, must_send: bool) -> Outcome {
        Outcome {
            reported: Reported {
                high_watermark: hw,
                last_stable_offset: hw,
                log_start_offset: 0,
            },
            must_send,
            quiet: false,
        }
    }

    fn cache(slots: usize) -> FetchSessionCache {
        FetchSessionCache::new(slots, &Registry::new())
    }

    fn open(c: &FetchSessionCache, parts: &[(&str, i32, i64)]) -> i32 {
        let plan = c.begin(&req(0, 0, parts), 12, None).unwrap();
        assert_eq!(plan.mode, Mode::Open);
        let outcomes: Vec<_> = parts.iter().map(|_| outcome(0, false)).collect();
        let (id, send) = c.finish(&plan, &outcomes, 12, false);
        assert!(
            send.iter().all(|s| *s),
            "an opening fetch answers everything"
        );
        id
    }

    #[test]
    fn incremental_fetches_read_every_partition_and_answer_only_changes() {
        let c = cache(10);
        let id = open(&c, &[("a", 0, 0), ("a", 1, 0), ("b", 0, 0)]);
        assert_ne!(id, 0);
        // Nothing listed: all three are read, none changed.
        let plan = c.begin(&req(id, 1, &[]), 12, None).unwrap();
        assert_eq!(plan.mode, Mode::Incremental(id));
        assert_eq!(plan.partitions.len(), 3);
        let (rid, send) = c.finish(
            &plan,
            &[outcome(0, false), outcome(0, false), outcome(0, false)],
            12,
            false,
        );
        assert_eq!((rid, send), (id, vec![false, false, false]));
        // a-1 moves its fetch offset; b-0's high watermark moves.
        let plan = c.begin(&req(id, 2, &[("a", 1, 7)]), 12, None).unwrap();
        let a1 = plan
            .partitions
            .iter()
            .find(|(k, _)| k.partition == 1)
            .unwrap();
        assert_eq!(
            a1.1.fetch_offset, 7,
            "the request's state replaces the cached one"
        );
        let (_, send) = c.finish(
            &plan,
            &[outcome(0, false), outcome(0, true), outcome(5, false)],
            12,
            false,
        );
        assert_eq!(send, vec![false, true, true]);
        // The partition that returned records went to the back.
        let plan = c.begin(&req(id, 3, &[]), 12, None).unwrap();
        let order: Vec<_> = plan
            .partitions
            .iter()
            .map(|(k, _)| (k.topic.0.to_string(), k.partition))
            .collect();
        assert_eq!(
            order,
            vec![("a".into(), 0), ("b".into(), 0), ("a".into(), 1)]
        );
    }

    #[test]
    fn wrong_epochs_and_unknown_sessions_are_refused_and_forgotten_partitions_dropped() {
        let c = cache(10);
        let id = open(&c, &[("a", 0, 0), ("a", 1, 0)]);
        assert_eq!(
            c.begin(&req(id, 2, &[]), 12, None).unwrap_err(),
            ResponseError::InvalidFetchSessionEpoch
        );
        assert_eq!(
            c.begin(&req(id.wrapping_add(1), 1, &[]), 12, None)
                .unwrap_err(),
            ResponseError::FetchSessionIdNotFound
        );
        assert_eq!(
            c.begin(&req(id, 1, &[]), 13, None).unwrap_err(),
            ResponseError::FetchSessionTopicIdError
        );
        let mut r = req(id, 1, &[]);
        let mut f = ForgottenTopic::default();
        f.topic = TopicName(kafka_protocol::protocol::StrBytes::from_static_str("a"));
        f.partitions = vec![0];
        r.forgotten_topics_data.push(f);
        let plan = c.begin(&r, 12, None).unwrap();
        assert_eq!(plan.partitions.len(), 1);
        assert_eq!(plan.partitions[0].0.partition, 1);
        // A final (epoch -1) request closes the session.
        let plan = c.begin(&req(id, -1, &[("a", 1, 0)]), 12, None).unwrap();
        assert_eq!(plan.mode, Mode::Sessionless);
        assert!(c.is_empty());
        assert_eq!(
            c.begin(&req(id, 3, &[]), 12, None).unwrap_err(),
            ResponseError::FetchSessionIdNotFound
        );
    }

    #[test]
    fn a_full_cache_gives_a_slot_to_a_larger_session_or_a_follower_only() {
        let c = cache(1);
        let small = open(&c, &[("a", 0, 0)]);
        assert_ne!(small, 0);
        // Same size: no room, answered without a session.
        assert_eq!(open(&c, &[("b", 0, 0)]), 0);
        // Larger: takes the slot.
        let large = open(&c, &[("b", 0, 0), ("b", 1, 0)]);
        assert_ne!(large, 0);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c.begin(&req(small, 1, &[]), 12, None).unwrap_err(),
            ResponseError::FetchSessionIdNotFound
        );
        // A follower takes a consumer's slot whatever its size.
        let plan = c.begin(&req(0, 0, &[("c", 0, 0)]), 12, None).unwrap();
        let (follower, _) = c.finish(&plan, &[outcome(0, false)], 12, true);
        assert_ne!(follower, 0);
        assert_eq!(c.len(), 1);
        // And a consumer never takes a follower's.
        assert_eq!(open(&c, &[("d", 0, 0), ("d", 1, 0), ("d", 2, 0)]), 0);
        // Epoch 0 with a session id closes that session and opens another.
        let plan = c
            .begin(&req(follower, 0, &[("c", 0, 0)]), 12, None)
            .unwrap();
        assert_eq!(plan.mode, Mode::Open);
        assert!(c.is_empty());
    }

    /// Many partitions rotated and forgotten in one request (a follower
    /// catching up, a leader moving away) keep everyone else's order; the
    /// rotated ones go to the back in their own order.
    #[test]
    fn several_partitions_rotate_and_are_forgotten_in_order() {
        let c = cache(10);
        let parts: Vec<(&str, i32, i64)> = (0..6).map(|p| ("a", p, 0)).collect();
        let id = open(&c, &parts);
        let order = |plan: &Plan| -> Vec<i32> {
            plan.partitions.iter().map(|(k, _)| k.partition).collect()
        };
        let plan = c.begin(&req(id, 1, &[]), 12, None).unwrap();
        assert_eq!(order(&plan), vec![0, 1, 2, 3, 4, 5]);
        let returned = [1, 3, 4];
        let outcomes: Vec<_> = (0..6).map(|p| outcome(0, returned.contains(&p))).collect();
        c.finish(&plan, &outcomes, 12, false);
        let mut r = req(id, 2, &[]);
        let mut f = ForgottenTopic::default();
        f.topic = TopicName(kafka_protocol::protocol::StrBytes::from_static_str("a"));
        let plan = c.begin(&r, 12, None).unwrap();
        assert_eq!(order(&plan), vec![0, 2, 5, 1, 3, 4]);
        c.finish(&plan, &[outcome(0, false); 6], 12, false);
        f.partitions = vec![2, 5, 3];
        r = req(id, 3, &[]);
        r.forgotten_topics_data.push(f);
        let plan = c.begin(&r, 12, None).unwrap();
        assert_eq!(order(&plan), vec![0, 1, 4]);
    }

    #[test]
    fn no_slots_means_no_sessions() {
        let c = cache(0);
        let plan = c.begin(&req(0, 0, &[("a", 0, 0)]), 12, None).unwrap();
        assert_eq!(plan.mode, Mode::Sessionless);
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    fn quiet() -> Outcome {
        Outcome {
            quiet: true,
            ..outcome(0, false)
        }
    }

    fn planned(plan: &Plan) -> Vec<(String, i32)> {
        plan.partitions
            .iter()
            .map(|(k, _)| (k.topic.0.to_string(), k.partition))
            .collect()
    }

    fn partition(dir: &std::path::Path, topic: &str) -> crate::partition::Partition {
        let log = skein_storage::Log::open(
            dir.join(format!("{topic}-0")),
            skein_storage::LogConfig::default(),
            0,
        )
        .unwrap();
        crate::partition::Partition::new(topic, 0, Uuid::nil(), 1, log)
    }

    /// A follower's session reads, each round, only the partitions the
    /// request names, those that changed (their token fired in the
    /// session's waker) and those its last read did not find quiet; a round
    /// that never finished leaves its partitions to the next; new terms,
    /// or a fetch without them, read everything.
    #[test]
    fn a_follower_session_reads_only_what_may_have_news() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(10);
        let terms = FollowerTerms {
            replica_id: 2,
            replica_epoch: 5,
            isr_eligible: true,
        };
        let parts = [("a", 0, 0), ("a", 1, 0), ("b", 0, 0)];
        let plan = c.begin(&req(0, 0, &parts), 12, Some(terms)).unwrap();
        let round = plan.quiet.clone().expect("a follower's round");
        assert_eq!(round.tokens, vec![0, 1, 2]);
        let (id, _) = c.finish(&plan, &[quiet(), outcome(0, true), quiet()], 12, true);
        assert_ne!(id, 0);

        let plan = c.begin(&req(id, 1, &[]), 12, Some(terms)).unwrap();
        assert_eq!(
            planned(&plan),
            [("a".into(), 1)],
            "only the one with records"
        );
        c.finish(&plan, &[quiet()], 12, true);
        let plan = c.begin(&req(id, 2, &[]), 12, Some(terms)).unwrap();
        assert!(planned(&plan).is_empty(), "all quiet");

        // b-0 changes while the round waits: it joins the round.
        let b = partition(dir.path(), "b");
        b.watch(&round.waker, 2);
        b.make_leader(1, 1, vec![1, 2], vec![1, 2], 0).unwrap();
        let fired = c.fired(&plan);
        assert_eq!(fired.len(), 1);
        assert_eq!((fired[0].0.partition, fired[0].2), (0, 2));
        assert_eq!(fired[0].0.topic.0.to_string(), "b");
        assert!(c.fired(&plan).is_empty(), "once per change");
        // That round is dropped (the connection closed) before it finished:
        // b-0 is still read next, with the partition the request names.
        let plan = c
            .begin(&req(id, 3, &[("a", 0, 5)]), 12, Some(terms))
            .unwrap();
        assert_eq!(planned(&plan), [("a".into(), 0), ("b".into(), 0)]);
        assert_eq!(plan.quiet.as_ref().unwrap().tokens, vec![0, 2]);
        assert_eq!(plan.partitions[0].1.fetch_offset, 5);
        c.finish(&plan, &[quiet(), quiet()], 12, true);

        // A change before the request comes in is read by it.
        b.watch(&round.waker, 2);
        b.make_stopped();
        let plan = c.begin(&req(id, 4, &[]), 12, Some(terms)).unwrap();
        assert_eq!(planned(&plan), [("b".into(), 0)]);
        c.finish(&plan, &[quiet()], 12, true);

        // A forgotten partition's token is ignored; one named again is new.
        let mut r = req(id, 5, &[]);
        let mut f = ForgottenTopic::default();
        f.topic = TopicName(kafka_protocol::protocol::StrBytes::from_static_str("b"));
        f.partitions.push(0);
        r.forgotten_topics_data.push(f);
        b.watch(&round.waker, 2);
        let plan = c.begin(&r, 12, Some(terms)).unwrap();
        assert!(planned(&plan).is_empty());
        let gone = &plan.quiet.as_ref().unwrap().forgotten;
        assert_eq!(gone.len(), 1, "its progress must leave the pulse");
        assert_eq!((gone[0].topic.0.as_str(), gone[0].partition), ("b", 0));
        c.finish(&plan, &[], 12, true);
        b.make_leader(2, 2, vec![1, 2], vec![1, 2], 0).unwrap();
        let plan = c.begin(&req(id, 6, &[]), 12, Some(terms)).unwrap();
        assert!(planned(&plan).is_empty(), "b-0 left the session");
        c.finish(&plan, &[], 12, true);
        let plan = c
            .begin(&req(id, 7, &[("b", 0, 9)]), 12, Some(terms))
            .unwrap();
        assert_eq!(plan.quiet.as_ref().unwrap().tokens, vec![3], "a new token");
        c.finish(&plan, &[quiet()], 12, true);

        // The follower re-registered: every partition once, then as before.
        let terms = FollowerTerms {
            replica_epoch: 6,
            ..terms
        };
        let plan = c.begin(&req(id, 8, &[]), 12, Some(terms)).unwrap();
        assert_eq!(plan.partitions.len(), 3, "new terms read everything");
        c.finish(&plan, &[quiet(), quiet(), quiet()], 12, true);
        let plan = c.begin(&req(id, 9, &[]), 12, Some(terms)).unwrap();
        assert!(planned(&plan).is_empty());
        c.finish(&plan, &[], 12, true);
        let plan = c.begin(&req(id, 10, &[]), 12, None).unwrap();
        assert_eq!(plan.partitions.len(), 3, "no terms: everything");
        assert!(plan.quiet.is_none());
    }
}
