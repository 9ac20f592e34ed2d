//! The follower's side of a fetch session (KIP-227, Kafka's
//! `FetchSessionHandler`): the first fetch to a leader names every
//! partition and opens a session; later fetches name only the partitions
//! whose fetch state changed and those to forget, and the leader answers
//! only the partitions with news. With thousands of followed partitions
//! that turns most of each idle fetch's bytes (both ways) into nothing.
//!
//! Any doubt about the session (an error, a lost connection, a refused
//! epoch) goes back to a full fetch with epoch 0, which also closes the
//! old session on the leader.

use std::collections::{HashMap, HashSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use uuid::Uuid;

/// One partition as the follower asks for it.
pub type Key = (Uuid, i32);

#[derive(Debug, Default)]
pub struct SessionHandler {
    /// The leader's session id; 0 while there is none.
    id: i32,
    /// The epoch of the next request (0: a full fetch).
    next_epoch: i32,
    /// What the leader's session holds for each partition, as last sent.
    sent: HashMap<Key, FetchPartition>,
    /// What the request in flight changes, until its response says the
    /// session took it.
    pending: Option<Pending>,
}

/// The session change a request in flight carries.
#[derive(Debug)]
enum Pending {
    /// A full fetch: the session holds exactly these afterwards.
    Full(HashMap<Key, FetchPartition>),
    /// An incremental fetch: these partitions added or changed, those
    /// forgotten. Only the difference is kept: a follower of tens of
    /// thousands of partitions rebuilt a map of all of them every round.
    Incremental {
        changed: Vec<(Key, FetchPartition)>,
        forgotten: Vec<Key>,
    },
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// A request's topics, each listed once: found through an index, since a
/// fetcher can follow thousands of topics and a scan per partition is
/// quadratic.
#[derive(Default)]
struct Topics {
    topics: Vec<FetchTopic>,
    at: HashMap<Uuid, usize>,
}

impl Topics {
    fn add(&mut self, key: &Key, fp: &FetchPartition) {
        let topics = &mut self.topics;
        let i = *self.at.entry(key.0).or_insert_with(|| {
            let mut t = FetchTopic::default();
            t.topic_id = key.0;
            topics.push(t);
            topics.len() - 1
        });
        topics[i].partitions.push(fp.clone());
    }
}

impl SessionHandler {
    /// Whether the next request must be a full fetch (no session, or one
    /// in doubt): it then names every partition, and only
    /// [`SessionHandler::build`] can make it.
    pub fn needs_full(&self) -> bool {
        self.id == 0 || self.next_epoch == 0
    }

    /// An incremental fetch from the fresh state of the partitions that may
    /// have changed since the last request (those its response answered);
    /// every other partition the session holds stays as it was sent. No
    /// partition is forgotten. Only when not [`SessionHandler::needs_full`].
    pub fn build_changes(&mut self, req: &mut FetchRequest, maybe: Vec<(Key, FetchPartition)>) {
        debug_assert!(!self.needs_full());
        let mut topics = Topics::default();
        let mut changed = Vec::new();
        for (key, fp) in maybe {
            if self.sent.get(&key) != Some(&fp) {
                topics.add(&key, &fp);
                changed.push((key, fp));
            }
        }
        req.topics = topics.topics;
        req.forgotten_topics_data = Vec::new();
        req.session_id = self.id;
        req.session_epoch = self.next_epoch;
        self.pending = Some(Pending::Incremental {
            changed,
            forgotten: Vec::new(),
        });
    }

    /// Fills the request's partitions and session fields from `wanted`
    /// (every partition this fetcher follows, with its current state; each
    /// named once).
    pub fn build(&mut self, req: &mut FetchRequest, wanted: Vec<(Key, FetchPartition)>) {
        let full = self.needs_full();
        let mut topics = Topics::default();
        let mut add = |key: &Key, fp: &FetchPartition| topics.add(key, fp);
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        let pending = if full {
            for (key, fp) in &wanted {
                add(key, fp);
            }
            Pending::Full(wanted.into_iter().collect())
        } else {
            // Every wanted partition the session holds, counted: when that
            // is all of them, nothing is to be forgotten.
            let mut held = 0usize;
            let mut changed = Vec::new();
            for (key, fp) in &wanted {
                match self.sent.get(key) {
                    Some(before) if before == fp => held += 1,
                    before => {
                        held += usize::from(before.is_some());
                        add(key, fp);
                        changed.push((*key, fp.clone()));
                    }
                }
            }
            let mut gone = Vec::new();
            if held < self.sent.len() {
                let now: HashSet<Key> = wanted.iter().map(|(k, _)| *k).collect();
                gone.extend(self.sent.keys().filter(|k| !now.contains(*k)).copied());
                let mut forgotten_at: HashMap<Uuid, usize> = HashMap::new();
                for key in &gone {
                    let i = *forgotten_at.entry(key.0).or_insert_with(|| {
                        let mut f = ForgottenTopic::default();
                        f.topic_id = key.0;
                        forgotten.push(f);
                        forgotten.len() - 1
                    });
                    forgotten[i].partitions.push(key.1);
                }
            }
            Pending::Incremental {
                changed,
                forgotten: gone,
            }
        };
        req.topics = topics.topics;
        req.forgotten_topics_data = forgotten;
        req.session_id = self.id;
        req.session_epoch = if full { 0 } else { self.next_epoch };
        self.pending = Some(pending);
    }

    /// Learns from the response whether the session took the request. An
    /// error means the next fetch is a full one.
    pub fn handle(&mut self, resp: &FetchResponse) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        if resp.error_code != 0 {
            let code = ResponseError::try_from_code(resp.error_code);
            if code == Some(ResponseError::FetchSessionIdNotFound) {
                self.id = 0;
            }
            self.next_epoch = 0;
            return;
        }
        match pending {
            Pending::Full(now) => {
                self.id = resp.session_id;
                self.next_epoch = 1;
                // A leader that opened no session holds nothing for us.
                self.sent = if self.id == 0 { HashMap::new() } else { now };
            }
            Pending::Incremental { changed, forgotten } => {
                self.next_epoch = next_epoch(self.next_epoch);
                self.sent.extend(changed);
                for key in forgotten {
                    self.sent.remove(&key);
                }
            }
        }
    }

    /// A top-level error about the session itself, fixed by a full fetch.
    pub fn is_session_error(code: i16) -> bool {
        code == ResponseError::FetchSessionIdNotFound.code()
            || code == ResponseError::InvalidFetchSessionEpoch.code()
            || code == ResponseError::FetchSessionTopicIdError.code()
    }

    /// The request got no answer: the leader may or may not have moved the
    /// session on, so the next fetch starts over (closing this session).
    pub fn failed(&mut self) {
        self.pending = None;
        self.next_epoch = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(partition: i32, offset: i64) -> FetchPartition {
        let mut p = FetchPartition::default();
        p.partition = partition;
        p.fetch_offset = offset;
        p
    }

    fn named(req: &FetchRequest) -> Vec<(i32, i64)> {
        let mut v: Vec<_> = req
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
            .collect();
        v.sort();
        v
    }

    fn ok(session_id: i32) -> FetchResponse {
        let mut r = FetchResponse::default();
        r.session_id = session_id;
        r
    }

    #[test]
    fn sends_everything_first_then_only_changes_and_forgets() {
        let t = Uuid::new_v4();
        let mut h = SessionHandler::default();
        let mut req = FetchRequest::default();
        h.build(&mut req, vec![((t, 0), fp(0, 5)), ((t, 1), fp(1, 7))]);
        assert_eq!((req.session_id, req.session_epoch), (0, 0));
        assert_eq!(named(&req), vec![(0, 5), (1, 7)]);
        h.handle(&ok(42));

        h.build(&mut req, vec![((t, 0), fp(0, 5)), ((t, 1), fp(1, 9))]);
        assert_eq!((req.session_id, req.session_epoch), (42, 1));
        assert_eq!(named(&req), vec![(1, 9)]);
        h.handle(&ok(42));

        h.build(&mut req, vec![((t, 1), fp(1, 9))]);
        assert_eq!(req.session_epoch, 2);
        assert!(named(&req).is_empty());
        assert_eq!(req.forgotten_topics_data[0].partitions, vec![0]);
        h.handle(&ok(42));

        // A refused epoch: the next fetch is full again, on the same id
        // (epoch 0 closes it on the leader).
        h.build(&mut req, vec![((t, 1), fp(1, 9))]);
        let mut refused = ok(0);
        refused.error_code = ResponseError::InvalidFetchSessionEpoch.code();
        h.handle(&refused);
        h.build(&mut req, vec![((t, 1), fp(1, 9))]);
        assert_eq!((req.session_id, req.session_epoch), (42, 0));
        assert_eq!(named(&req), vec![(1, 9)]);
        assert!(req.forgotten_topics_data.is_empty());
    }

    #[test]
    fn a_leader_without_sessions_gets_full_fetches() {
        let t = Uuid::new_v4();
        let mut h = SessionHandler::default();
        let mut req = FetchRequest::default();
        for _ in 0..3 {
            h.build(&mut req, vec![((t, 0), fp(0, 1))]);
            assert_eq!((req.session_id, req.session_epoch), (0, 0));
            assert_eq!(named(&req), vec![(0, 1)]);
            h.handle(&ok(0));
        }
        // A lost answer starts over too.
        h.handle(&ok(9));
        h.build(&mut req, vec![((t, 0), fp(0, 1))]);
        h.handle(&ok(9));
        h.build(&mut req, vec![((t, 0), fp(0, 1))]);
        assert_eq!(req.session_epoch, 1);
        h.failed();
        h.build(&mut req, vec![((t, 0), fp(0, 1))]);
        assert_eq!((req.session_id, req.session_epoch), (9, 0));
    }

    /// Between full rebuilds the fetcher offers only the partitions its
    /// last response answered: those whose state moved are named, the
    /// rest of the session stands, nothing is forgotten.
    #[test]
    fn changes_name_only_what_moved_and_forget_nothing() {
        let t = Uuid::new_v4();
        let mut h = SessionHandler::default();
        let mut req = FetchRequest::default();
        assert!(h.needs_full());
        h.build(&mut req, vec![((t, 0), fp(0, 5)), ((t, 1), fp(1, 7))]);
        h.handle(&ok(42));
        assert!(!h.needs_full());
        h.build_changes(&mut req, vec![((t, 0), fp(0, 5)), ((t, 1), fp(1, 8))]);
        assert_eq!((req.session_id, req.session_epoch), (42, 1));
        assert_eq!(named(&req), vec![(1, 8)]);
        assert!(req.forgotten_topics_data.is_empty());
        h.handle(&ok(42));
        // The session took 1 at 8: a full rebuild later names nothing new.
        h.build(&mut req, vec![((t, 0), fp(0, 5)), ((t, 1), fp(1, 8))]);
        assert_eq!(req.session_epoch, 2);
        assert!(named(&req).is_empty());
        assert!(req.forgotten_topics_data.is_empty());
        h.handle(&ok(42));
        h.build_changes(&mut req, Vec::new());
        assert!(named(&req).is_empty());
        h.failed();
        assert!(h.needs_full());
    }
}
