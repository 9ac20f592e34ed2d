//! Unclean recovery (KIP-966 part 2): a pure decision over one leaderless
//! partition whose ISR and ELR have no one to offer.
//!
//! The live replicas report what their logs hold (last leader epoch, log
//! end offset; [`ReplicaLog`]); the replica with the longest log in the
//! latest epoch leads, the ISR restarts from it alone, and the offsets the
//! others (or a replica that is not back) may have held beyond it are
//! reported as possibly missing. A replica whose broker came back on a new,
//! empty directory is never chosen while another replica may hold data.
//!
//! When it runs is [`UncleanRecoveryStrategy`] (Kafka's
//! `unclean.recovery.strategy`): `None` never (an explicit unclean
//! `ElectLeaders` still elects), `Balanced` (the default) once every replica
//! that may hold data (any not on an empty directory) is alive and has
//! reported, or `unclean.recovery.timeout.ms` after the first report; `Aggressive` as soon as no ISR or ELR member is alive, with the
//! live replicas' reports. A topic
//! with `unclean.leader.election.enable=true` keeps its immediate unclean
//! election ([`crate::election`]), which runs before this is asked.

use std::fmt;
use std::str::FromStr;

use crate::model::{BrokerId, PartitionState, NO_LEADER};

/// Kafka's `unclean.recovery.strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UncleanRecoveryStrategy {
    /// Never on its own: the partition waits for an ISR or ELR member, or
    /// an unclean election asked for (`ElectLeaders` UNCLEAN).
    None,
    /// Once every replica that may hold data has reported and may lead (an
    /// ISR or ELR member that comes back is elected cleanly instead), or
    /// after the timeout with the live replicas' reports.
    #[default]
    Balanced,
    /// As soon as no ISR or ELR member is alive.
    Aggressive,
}

impl FromStr for UncleanRecoveryStrategy {
    type Err = String;

    /// Kafka's spellings, in any case.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "balanced" => Ok(Self::Balanced),
            "aggressive" => Ok(Self::Aggressive),
            other => Err(format!(
                "unclean.recovery.strategy {other:?}: expected None, Balanced or Aggressive"
            )),
        }
    }
}

impl fmt::Display for UncleanRecoveryStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "None",
            Self::Balanced => "Balanced",
            Self::Aggressive => "Aggressive",
        })
    }
}

/// What one broker's replica of a leaderless partition holds, as it
/// reports it (`ReportReplicaLogs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLog {
    pub topic: String,
    pub partition: u32,
    /// The latest epoch of its leader-epoch checkpoint (-1: none).
    pub last_leader_epoch: i32,
    pub log_end_offset: i64,
}

/// A replica's log as the decision sees it: `(last leader epoch, log end
/// offset)`, compared in that order.
pub type LogPosition = (i32, i64);

/// One assigned replica, as [`decide`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub broker: BrokerId,
    /// Alive and not shutting down: it may lead.
    pub eligible: bool,
    /// Known to hold nothing of the partition's past: its broker came back
    /// on a new, empty directory and it has not been in sync since.
    pub empty: bool,
    /// What its current incarnation reported, if it has.
    pub report: Option<LogPosition>,
}

/// The replica [`decide`] chose and what may be missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    pub leader: BrokerId,
    pub last_leader_epoch: i32,
    pub log_end_offset: i64,
    /// The highest log end offset any replica reported: the offsets from
    /// `log_end_offset` up to it may be lost. Replicas that did not report
    /// (not back, or on an empty directory) may have held more.
    pub highest_reported_offset: i64,
}

/// A recovery as the platform reports it (a Kubernetes Event, a log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryNote {
    pub topic: String,
    pub partition: u32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub log_end_offset: i64,
    pub highest_reported_offset: i64,
    /// Replicas that had not reported: what they held is unknown.
    pub unreported: Vec<BrokerId>,
}

impl fmt::Display for RecoveryNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partition {}-{} had no in-sync or eligible replica left: broker {} leads it \
             (leader epoch {}) with the longest log, ending at offset {}",
            self.topic, self.partition, self.leader, self.leader_epoch, self.log_end_offset
        )?;
        if self.highest_reported_offset > self.log_end_offset {
            write!(
                f,
                "; offsets {}..{} that another replica held are lost",
                self.log_end_offset, self.highest_reported_offset
            )?;
        }
        if !self.unreported.is_empty() {
            write!(
                f,
                "; brokers {:?} did not report, records only they held may be lost",
                self.unreported
            )?;
        }
        Ok(())
    }
}

/// What to do with a leaderless partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not for unclean recovery: it has a leader, an ISR or ELR member may
    /// lead, or the strategy is `None`.
    NotNeeded,
    /// Later: an ISR or ELR member may still come back, a live replica has
    /// not reported, or only empty replicas are there to choose from.
    Wait(&'static str),
    /// Elect this replica.
    Elect(Recovery),
}

/// Decides for `state`, leaderless since `offline_ms` ago; `replicas` are
/// its assigned replicas (in preference order) with what is known of them.
pub fn decide(
    state: &PartitionState,
    replicas: &[ReplicaStatus],
    strategy: UncleanRecoveryStrategy,
    offline_ms: u64,
    timeout_ms: u64,
) -> Decision {
    if state.leader != NO_LEADER || strategy == UncleanRecoveryStrategy::None {
        return Decision::NotNeeded;
    }
    let status = |b: &BrokerId| replicas.iter().find(|r| r.broker == *b);
    let trusted: Vec<&BrokerId> = state.isr.iter().chain(&state.elr).collect();
    if trusted
        .iter()
        .any(|b| status(b).is_some_and(|r| r.eligible))
    {
        // A clean election elects it.
        return Decision::NotNeeded;
    }
    let timed_out = offline_ms >= timeout_ms;
    // The longest log may be the one not heard from yet, or one that cannot
    // lead now (fenced, shutting down): Balanced waits until every replica
    // that may hold data has reported and may lead, Aggressive only for the
    // live ones' reports; both give up waiting at the timeout.
    if !timed_out {
        let waiting = |r: &ReplicaStatus| match strategy {
            UncleanRecoveryStrategy::Balanced => !r.empty && (!r.eligible || r.report.is_none()),
            _ => r.eligible && r.report.is_none(),
        };
        if replicas.iter().any(waiting) {
            return Decision::Wait("a replica that may hold the data has not reported");
        }
    }
    let anyone_holds_data = replicas.iter().any(|r| !r.empty);
    let chosen = replicas
        .iter()
        .filter(|r| r.eligible && !(anyone_holds_data && r.empty))
        .filter_map(|r| r.report.map(|pos| (r.broker, pos)))
        // The first of equals wins: `max_by_key` keeps the last, so the
        // preference order is walked backwards.
        .rev()
        .max_by_key(|(_, pos)| *pos);
    let Some((leader, (last_leader_epoch, log_end_offset))) = chosen else {
        return Decision::Wait("no live replica that may hold the data has reported");
    };
    let highest_reported_offset = replicas
        .iter()
        .filter_map(|r| r.report.map(|(_, leo)| leo))
        .max()
        .unwrap_or(log_end_offset);
    Decision::Elect(Recovery {
        leader,
        last_leader_epoch,
        log_end_offset,
        highest_reported_offset,
    })
}

/// `state` led by `leader` alone after a recovery: the ISR restarts from it
/// and the ELR, which may diverge from its log, is cleared.
pub fn apply(state: &mut PartitionState, leader: BrokerId) {
    state.leader = leader;
    state.isr = vec![leader];
    state.elr.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use UncleanRecoveryStrategy::{Aggressive, Balanced};
    const NEVER: UncleanRecoveryStrategy = UncleanRecoveryStrategy::None;

    const TIMEOUT: u64 = 300_000;

    fn offline(isr: &[BrokerId], elr: &[BrokerId]) -> PartitionState {
        let mut s = PartitionState::new(vec![1, 2, 3], isr.to_vec(), NO_LEADER);
        s.elr = elr.to_vec();
        s
    }

    fn live(broker: BrokerId, report: Option<LogPosition>) -> ReplicaStatus {
        ReplicaStatus {
            broker,
            eligible: true,
            empty: false,
            report,
        }
    }

    fn gone(broker: BrokerId) -> ReplicaStatus {
        ReplicaStatus {
            eligible: false,
            ..live(broker, None)
        }
    }

    fn empty(broker: BrokerId, report: Option<LogPosition>) -> ReplicaStatus {
        ReplicaStatus {
            empty: true,
            ..live(broker, report)
        }
    }

    fn leader(d: Decision) -> Option<BrokerId> {
        match d {
            Decision::Elect(r) => Some(r.leader),
            _ => None,
        }
    }

    #[test]
    fn the_longest_log_in_the_latest_epoch_wins() {
        let s = offline(&[], &[]);
        // Epoch first: a longer log of an older epoch may hold records the
        // newer leader truncated away.
        let r = [
            live(1, Some((4, 900))),
            live(2, Some((5, 700))),
            live(3, Some((5, 800))),
        ];
        let d = decide(&s, &r, Balanced, 0, TIMEOUT);
        assert_eq!(
            d,
            Decision::Elect(Recovery {
                leader: 3,
                last_leader_epoch: 5,
                log_end_offset: 800,
                highest_reported_offset: 900,
            })
        );
    }

    #[test]
    fn ties_go_to_the_preferred_replica() {
        let s = offline(&[], &[]);
        let r = [
            live(1, Some((5, 700))),
            live(2, Some((5, 800))),
            live(3, Some((5, 800))),
        ];
        assert_eq!(leader(decide(&s, &r, Aggressive, 0, TIMEOUT)), Some(2));
    }

    #[test]
    fn an_empty_directory_is_never_elected_while_another_replica_holds_data() {
        let s = offline(&[], &[]);
        // The replica with the data is not back: wait for it, however long.
        let r = [gone(1), empty(2, Some((7, 0))), empty(3, Some((7, 0)))];
        assert!(matches!(
            decide(&s, &r, Aggressive, 10 * TIMEOUT, TIMEOUT),
            Decision::Wait(_)
        ));
        // Even a longer log on an empty directory (copied from a leader since
        // the directory was formatted, of a history that is not the data's).
        let r = [live(1, Some((3, 10))), empty(2, Some((9, 50))), gone(3)];
        assert_eq!(leader(decide(&s, &r, Aggressive, 0, TIMEOUT)), Some(1));
        // Every replica lost its disk: nothing to keep, the longest leads.
        let r = [
            empty(1, Some((7, 0))),
            empty(2, Some((7, 3))),
            ReplicaStatus {
                eligible: false,
                ..empty(3, None)
            },
        ];
        assert_eq!(leader(decide(&s, &r, Balanced, 0, TIMEOUT)), Some(2));
    }

    #[test]
    fn strategies() {
        let r = [gone(1), live(2, Some((3, 10))), live(3, Some((3, 5)))];
        // 1 is in the ELR and fenced: it may come back with everything.
        let s = offline(&[], &[1]);
        assert_eq!(
            decide(&s, &r, NEVER, 10 * TIMEOUT, TIMEOUT),
            Decision::NotNeeded
        );
        assert!(matches!(
            decide(&s, &r, Balanced, TIMEOUT - 1, TIMEOUT),
            Decision::Wait(_)
        ));
        assert_eq!(leader(decide(&s, &r, Balanced, TIMEOUT, TIMEOUT)), Some(2));
        assert_eq!(leader(decide(&s, &r, Aggressive, 0, TIMEOUT)), Some(2));
        // No ISR or ELR member: Balanced still waits for 1, which may hold
        // more than the live ones (it is on its own disk); Aggressive not.
        let s = offline(&[], &[]);
        assert!(matches!(
            decide(&s, &r, Balanced, 0, TIMEOUT),
            Decision::Wait(_)
        ));
        assert_eq!(leader(decide(&s, &r, Aggressive, 0, TIMEOUT)), Some(2));
        assert_eq!(decide(&s, &r, NEVER, 0, TIMEOUT), Decision::NotNeeded);
        // Only empty directories are not waited for.
        let r = [
            ReplicaStatus {
                eligible: false,
                ..empty(1, None)
            },
            live(2, Some((3, 10))),
            live(3, Some((3, 5))),
        ];
        assert_eq!(leader(decide(&s, &r, Balanced, 0, TIMEOUT)), Some(2));
        // A live ISR or ELR member is a clean election's.
        let r = [live(1, Some((3, 1))), live(2, Some((3, 10))), gone(3)];
        let s = offline(&[], &[1]);
        assert_eq!(decide(&s, &r, Aggressive, 0, TIMEOUT), Decision::NotNeeded);
        // A partition with a leader needs nothing.
        let mut s = offline(&[2], &[]);
        s.leader = 2;
        assert_eq!(decide(&s, &r, Aggressive, 0, TIMEOUT), Decision::NotNeeded);
    }

    #[test]
    fn every_live_replica_reports_before_the_choice_until_the_timeout() {
        let s = offline(&[], &[]);
        let r = [live(1, None), live(2, Some((3, 10))), gone(3)];
        assert!(matches!(
            decide(&s, &r, Balanced, 0, TIMEOUT),
            Decision::Wait(_)
        ));
        assert_eq!(leader(decide(&s, &r, Balanced, TIMEOUT, TIMEOUT)), Some(2));
    }

    #[test]
    fn applying_restarts_the_isr_from_the_leader() {
        let mut s = offline(&[], &[3]);
        apply(&mut s, 2);
        assert_eq!(
            (s.leader, s.isr.clone(), s.elr.clone()),
            (2, vec![2], vec![])
        );
    }

    #[test]
    fn strategy_names_are_kafkas() {
        for (text, s) in [
            ("None", NEVER),
            ("balanced", Balanced),
            (" AGGRESSIVE ", Aggressive),
        ] {
            assert_eq!(text.parse::<UncleanRecoveryStrategy>(), Ok(s));
        }
        assert!("eager".parse::<UncleanRecoveryStrategy>().is_err());
        assert_eq!(UncleanRecoveryStrategy::default().to_string(), "Balanced");
    }
}
