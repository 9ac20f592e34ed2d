//! Share sessions (KIP-932): what a member fetches from this broker, keyed
//! by (group, member), with an epoch each ShareFetch and ShareAcknowledge
//! must match. The rules are Kafka 4.4's (`SharePartitionManager.newContext`,
//! `acknowledgeSessionUpdate`):
//!
//! - ShareFetch with epoch 0 opens a session (replacing one of the same key)
//!   and may carry no acknowledgements; -1 closes it (the fetch reads
//!   nothing; the member's records are released); any other epoch must be
//!   the session's, which then moves on (past `i32::MAX` to 1), and the
//!   fetch covers every partition of the session;
//! - ShareAcknowledge never opens a session (epoch 0 is
//!   INVALID_SHARE_SESSION_EPOCH); -1 closes it after the acknowledgements;
//! - a session is closed, and its records released, when the connection
//!   that opened it closes;
//! - at most `max_sessions` (`group.share.max.share.sessions`) sessions;
//!   past it a new one is SHARE_SESSION_LIMIT_REACHED.

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

/// (group, member).
pub type SessionKey = (String, String);
/// A share-partition as the share APIs name it: (topic id, partition).
pub type Tip = (Uuid, i32);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    epoch: i32,
    partitions: BTreeSet<Tip>,
    connection: u64,
}

/// What a ShareFetch's session step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchSession {
    /// Fetch these partitions (epoch 0: the new session's; otherwise every
    /// partition of the session).
    Fetch {
        partitions: BTreeSet<Tip>,
        new: bool,
    },
    /// The session closed (epoch -1): fetch nothing, release the member's
    /// records in these partitions.
    Closed { partitions: BTreeSet<Tip> },
}

#[derive(Debug, Default)]
pub struct ShareSessions {
    sessions: HashMap<SessionKey, Session>,
    max_sessions: usize,
}

fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

impl ShareSessions {
    pub fn new(max_sessions: usize) -> Self {
        ShareSessions {
            sessions: HashMap::new(),
            max_sessions,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// ShareFetch's session step; an error is the response's top-level one.
    pub fn on_fetch(
        &mut self,
        key: &SessionKey,
        epoch: i32,
        add: &[Tip],
        forget: &[Tip],
        has_acks: bool,
        connection: u64,
    ) -> Result<FetchSession, ResponseError> {
        match epoch {
            0 => {
                if has_acks {
                    return Err(ResponseError::InvalidRequest);
                }
                if !self.sessions.contains_key(key) && self.sessions.len() >= self.max_sessions {
                    return Err(ResponseError::ShareSessionLimitReached);
                }
                let partitions: BTreeSet<Tip> = add.iter().copied().collect();
                self.sessions.insert(
                    key.clone(),
                    Session {
                        epoch: 1,
                        partitions: partitions.clone(),
                        connection,
                    },
                );
                Ok(FetchSession::Fetch {
                    partitions,
                    new: true,
                })
            }
            -1 => match self.sessions.remove(key) {
                Some(s) => Ok(FetchSession::Closed {
                    partitions: s.partitions,
                }),
                None => Err(ResponseError::ShareSessionNotFound),
            },
            e => {
                let s = self
                    .sessions
                    .get_mut(key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if s.epoch != e {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                s.partitions.extend(add.iter().copied());
                for f in forget {
                    s.partitions.remove(f);
                }
                s.epoch = next_epoch(e);
                Ok(FetchSession::Fetch {
                    partitions: s.partitions.clone(),
                    new: false,
                })
            }
        }
    }

    /// ShareAcknowledge's session step: `Some(partitions)` when it closes
    /// the session (their records are released after the acknowledgements).
    pub fn on_acknowledge(
        &mut self,
        key: &SessionKey,
        epoch: i32,
    ) -> Result<Option<BTreeSet<Tip>>, ResponseError> {
        if epoch == 0 {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        if epoch == -1 {
            return self
                .sessions
                .remove(key)
                .map(|s| Some(s.partitions))
                .ok_or(ResponseError::ShareSessionNotFound);
        }
        let s = self
            .sessions
            .get_mut(key)
            .ok_or(ResponseError::ShareSessionNotFound)?;
        if s.epoch != epoch {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        s.epoch = next_epoch(epoch);
        Ok(None)
    }

    /// The sessions a closed connection opened, removed: their keys and
    /// partitions (whose records the caller releases).
    pub fn on_disconnect(&mut self, connection: u64) -> Vec<(SessionKey, BTreeSet<Tip>)> {
        let keys: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.connection == connection)
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| self.sessions.remove(&k).map(|s| (k, s.partitions)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(m: &str) -> SessionKey {
        ("g".into(), m.into())
    }

    fn tip(p: i32) -> Tip {
        (Uuid::from_u128(7), p)
    }

    #[test]
    fn fetch_epochs_open_move_and_close_a_session() {
        let mut s = ShareSessions::new(10);
        let open = s.on_fetch(&key("a"), 0, &[tip(0)], &[], false, 1).unwrap();
        assert_eq!(
            open,
            FetchSession::Fetch {
                partitions: [tip(0)].into(),
                new: true
            }
        );
        // Epoch 1 adds a partition; the fetch covers both.
        let next = s.on_fetch(&key("a"), 1, &[tip(1)], &[], true, 1).unwrap();
        assert_eq!(
            next,
            FetchSession::Fetch {
                partitions: [tip(0), tip(1)].into(),
                new: false
            }
        );
        // Epoch 1 again is stale now; an unknown member has no session.
        assert_eq!(
            s.on_fetch(&key("a"), 1, &[], &[], false, 1),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        assert_eq!(
            s.on_fetch(&key("b"), 3, &[], &[], false, 1),
            Err(ResponseError::ShareSessionNotFound)
        );
        // Forgetting a partition, then closing.
        s.on_fetch(&key("a"), 2, &[], &[tip(0)], false, 1).unwrap();
        assert_eq!(
            s.on_fetch(&key("a"), -1, &[], &[], false, 1),
            Ok(FetchSession::Closed {
                partitions: [tip(1)].into()
            })
        );
        assert!(s.is_empty());
        // Epoch 0 must not carry acknowledgements.
        assert_eq!(
            s.on_fetch(&key("a"), 0, &[tip(0)], &[], true, 1),
            Err(ResponseError::InvalidRequest)
        );
    }

    #[test]
    fn acknowledge_never_opens_a_session_and_limits_and_disconnects_hold() {
        let mut s = ShareSessions::new(1);
        assert_eq!(
            s.on_acknowledge(&key("a"), 0),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        assert_eq!(
            s.on_acknowledge(&key("a"), 1),
            Err(ResponseError::ShareSessionNotFound)
        );
        s.on_fetch(&key("a"), 0, &[tip(0)], &[], false, 5).unwrap();
        assert_eq!(s.on_acknowledge(&key("a"), 1), Ok(None));
        assert_eq!(
            s.on_acknowledge(&key("a"), 1),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        // Full: another member cannot open one; the same key may reopen.
        assert_eq!(
            s.on_fetch(&key("b"), 0, &[tip(0)], &[], false, 6),
            Err(ResponseError::ShareSessionLimitReached)
        );
        s.on_fetch(&key("a"), 0, &[tip(2)], &[], false, 5).unwrap();
        // The connection closes: its session goes, with its partitions.
        assert_eq!(s.on_disconnect(6), vec![]);
        assert_eq!(s.on_disconnect(5), vec![(key("a"), [tip(2)].into())]);
        assert!(s.is_empty());
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
