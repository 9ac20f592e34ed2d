//! Unclean recovery (KIP-966 part 2) through the core: a partition with no
//! ISR or ELR member left elects the longest log its live replicas report.

mod common;

use common::*;
use skein_controller::unclean_recovery::{ReplicaLog, UncleanRecoveryStrategy};
use skein_controller::{
    BrokerId, Command, ControllerConfig, ControllerCore, ControllerError, DirectoryId, Event,
    NewTopic, Reply, TopicId, NO_LEADER,
};

const TIMEOUT: u64 = 60_000;

fn config(strategy: UncleanRecoveryStrategy) -> ControllerConfig {
    ControllerConfig {
        min_insync_replicas: 2,
        unclean_recovery_strategy: strategy,
        unclean_recovery_timeout_ms: TIMEOUT,
        broker_session_timeout_ms: 1_000_000,
        ..test_config()
    }
}

fn register_on(broker: BrokerId, dir: u128, previous_broker_epoch: Option<u64>) -> Event {
    Event::BrokerRegistered {
        broker,
        host: format!("broker-{broker}"),
        port: 9092,
        rack: None,
        directory_id: Some(DirectoryId(dir)),
        previous_broker_epoch,
        endpoints: vec![],
        software: Default::default(),
    }
}

fn epoch(core: &ControllerCore, broker: BrokerId) -> u64 {
    core.broker(broker).unwrap().broker_epoch
}

/// `broker`'s report of its replica of `t`-0 at its current epoch.
fn report(core: &ControllerCore, broker: BrokerId, last_epoch: i32, leo: i64) -> Event {
    report_at(epoch(core, broker), broker, last_epoch, leo)
}

fn report_at(broker_epoch: u64, broker: BrokerId, last_epoch: i32, leo: i64) -> Event {
    Event::ReplicaLogsReported {
        broker,
        broker_epoch,
        logs: vec![ReplicaLog {
            topic: "t".into(),
            partition: 0,
            last_leader_epoch: last_epoch,
            log_end_offset: leo,
        }],
    }
}

fn recoveries(commands: &[Command]) -> Vec<(BrokerId, i64, i64)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::UncleanRecovery {
                leader,
                log_end_offset,
                highest_reported_offset,
                ..
            } => Some((*leader, *log_end_offset, *highest_reported_offset)),
            _ => None,
        })
        .collect()
}

fn leader(core: &ControllerCore) -> BrokerId {
    core.partition("t", 0).unwrap().leader
}

/// Brokers 1-3, `t`-0 on [1, 2, 3] with min.insync.replicas 2, stopped one
/// at a time in id order as `skein-operator local` stops them (each a
/// controlled shutdown, then its session ends). Broker 1, the leader,
/// left an ISR of three: it is in no ELR, though it holds every record.
/// Returns the controller restarted on the persisted image, and the
/// epochs of the clean-shutdown markers.
fn stopped_cluster(strategy: UncleanRecoveryStrategy) -> (ControllerCore, Vec<u64>) {
    let mut core = ControllerCore::new(config(strategy));
    for b in 1..=3 {
        core.handle(register_on(b, b as u128, None), 0);
    }
    let mut topic = NewTopic::new("t", TopicId(1), 1, 3);
    topic.assignment = Some(vec![vec![1, 2, 3]]);
    core.handle(Event::CreateTopic(topic), 0);
    let mut markers = Vec::new();
    for b in 1..=3 {
        let e = epoch(&core, b);
        markers.push(e);
        core.handle(
            Event::ControlledShutdownRequested {
                broker: b,
                broker_epoch: e,
            },
            0,
        );
        core.handle(Event::BrokerLost { broker: b }, 0);
    }
    let s = core.partition("t", 0).unwrap();
    assert_eq!((s.isr.clone(), s.elr.clone()), (vec![], vec![2, 3]));
    let restarted = ControllerCore::from_image(core.image().clone(), config(strategy)).unwrap();
    (restarted, markers)
}

/// The sequence (#43) in every order: brokers 2 and 3 come back on
/// empty directories, broker 1 (intact) comes back, is paused until it is
/// fenced and resumes; each live replica reports when told the partition
/// has no leader. Whatever the order, broker 1 ends up leading with its
/// 1,000 records, and an empty replica never leads.
#[test]
fn two_lost_disks_recover_the_intact_copy_in_any_order() {
    // Steps: 0 broker 1 registers, 1 and 2 the wiped brokers, 3 broker 1 is
    // fenced (paused), 4 it registers again (resumed). 3 after 0, 4 after 3.
    let mut orders = Vec::new();
    permute(&mut vec![0, 1, 2, 3, 4], 0, &mut orders);
    orders.retain(|o| pos(o, 0) < pos(o, 3) && pos(o, 3) < pos(o, 4));
    assert_eq!(orders.len(), 20);
    for order in orders {
        let (mut core, markers) = stopped_cluster(UncleanRecoveryStrategy::Balanced);
        let mut recovered = Vec::new();
        for step in &order {
            let (broker, event) = match step {
                0 => (1, register_on(1, 1, Some(markers[0]))),
                1 => (2, register_on(2, 20, None)),
                2 => (3, register_on(3, 30, None)),
                3 => (1, Event::BrokerLost { broker: 1 }),
                _ => (1, register_on(1, 1, Some(epoch(&core, 1)))),
            };
            recovered.extend(recoveries(&core.handle(event, 10)));
            assert!(
                ![2, 3].contains(&leader(&core)),
                "an empty replica leads after {order:?}"
            );
            if *step != 3 {
                let (last_epoch, leo) = if broker == 1 { (0, 1000) } else { (-1, 0) };
                let e = report(&core, broker, last_epoch, leo);
                recovered.extend(recoveries(&core.handle(e, 10)));
            }
        }
        assert_eq!(
            leader(&core),
            1,
            "after {order:?}: {:?}",
            core.partition("t", 0)
        );
        assert_eq!(core.partition("t", 0).unwrap().isr, vec![1]);
        assert!(
            recovered.iter().all(|r| *r == (1, 1000, 1000)),
            "after {order:?}: {recovered:?}"
        );
    }
}

fn pos(order: &[u8], step: u8) -> usize {
    order.iter().position(|s| *s == step).unwrap()
}

fn permute(items: &mut Vec<u8>, k: usize, out: &mut Vec<Vec<u8>>) {
    if k == items.len() {
        out.push(items.clone());
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permute(items, k + 1, out);
        items.swap(k, i);
    }
}

#[test]
fn strategy_none_leaves_the_partition_offline_until_asked() {
    let (mut core, markers) = stopped_cluster(UncleanRecoveryStrategy::None);
    core.handle(register_on(1, 1, Some(markers[0])), 10);
    core.handle(register_on(2, 20, None), 10);
    core.handle(register_on(3, 30, None), 10);
    for (b, leo) in [(1, 1000), (2, 0), (3, 0)] {
        let e = report(&core, b, 0, leo);
        assert!(recoveries(&core.handle(e, 10)).is_empty());
    }
    core.handle(Event::Tick, 10 * TIMEOUT);
    assert_eq!(leader(&core), NO_LEADER);
}

#[test]
fn a_report_of_an_earlier_incarnation_is_refused_and_not_counted() {
    let (mut core, markers) = stopped_cluster(UncleanRecoveryStrategy::Aggressive);
    core.handle(register_on(2, 20, None), 10);
    core.handle(register_on(3, 30, None), 10);
    core.handle(register_on(1, 1, Some(markers[0])), 10);
    let old = epoch(&core, 1);
    // Broker 1 restarts (uncleanly) before its report arrives: the report
    // speaks for a log that may since have lost its tail.
    core.handle(register_on(1, 1, None), 10);
    let commands = core.handle(report_at(old, 1, 0, 1000), 10);
    assert!(matches!(
        reply(&commands),
        Reply::ReportReplicaLogs {
            result: Err(ControllerError::StaleBrokerEpoch),
            ..
        }
    ));
    for b in [2, 3] {
        let e = report(&core, b, -1, 0);
        core.handle(e, 10);
    }
    assert_eq!(
        leader(&core),
        NO_LEADER,
        "waits for the current incarnation"
    );
    let e = report(&core, 1, 0, 990);
    assert_eq!(recoveries(&core.handle(e, 10)), vec![(1, 990, 990)]);
}

/// Brokers 1-3 with `t`-0 on [1, 2, 3] (`configs` its topic configs): 3
/// falls out of the ISR, then 2 and 1 are lost: ISR [], ELR [1, 2], both
/// fenced; 3 is alive but out of sync.
fn elr_members_lost(strategy: UncleanRecoveryStrategy, configs: &[(&str, &str)]) -> ControllerCore {
    let mut core = ControllerCore::new(config(strategy));
    for b in 1..=3 {
        core.handle(register_on(b, b as u128, None), 0);
    }
    let mut topic = NewTopic::new("t", TopicId(1), 1, 3);
    for (k, v) in configs {
        topic = topic.with_config(*k, *v);
    }
    topic.assignment = Some(vec![vec![1, 2, 3]]);
    core.handle(Event::CreateTopic(topic), 0);
    core.handle(propose_isr(&core, "t", 0, &[1, 2]), 0);
    core.handle(Event::BrokerLost { broker: 2 }, 0);
    core
}

#[test]
fn balanced_waits_for_an_elr_member_until_the_timeout_aggressive_does_not() {
    let mut core = elr_members_lost(UncleanRecoveryStrategy::Balanced, &[]);
    core.handle(Event::BrokerLost { broker: 1 }, 0);
    let s = core.partition("t", 0).unwrap();
    assert_eq!(
        (s.leader, s.isr.clone(), s.elr.clone()),
        (NO_LEADER, vec![], vec![1, 2])
    );
    let e = report(&core, 3, 0, 800);
    assert!(recoveries(&core.handle(e, 100)).is_empty());
    assert!(recoveries(&core.handle(Event::Tick, 100 + TIMEOUT - 1)).is_empty());
    assert_eq!(leader(&core), NO_LEADER);
    let commands = core.handle(Event::Tick, 100 + TIMEOUT);
    assert_eq!(recoveries(&commands), vec![(3, 800, 800)]);
    let s = core.partition("t", 0).unwrap();
    assert_eq!((s.isr.clone(), s.elr.clone()), (vec![3], vec![]));

    let mut core = elr_members_lost(UncleanRecoveryStrategy::Aggressive, &[]);
    core.handle(Event::BrokerLost { broker: 1 }, 0);
    let e = report(&core, 3, 0, 800);
    assert_eq!(recoveries(&core.handle(e, 100)), vec![(3, 800, 800)]);
}

#[test]
fn an_elr_member_back_in_time_is_elected_cleanly() {
    let mut core = elr_members_lost(UncleanRecoveryStrategy::Balanced, &[]);
    core.handle(Event::BrokerLost { broker: 1 }, 0);
    let e = report(&core, 3, 0, 800);
    core.handle(e, 100);
    let commands = core.handle(register_on(1, 1, Some(epoch(&core, 1))), 200);
    assert!(recoveries(&commands).is_empty());
    assert_eq!(leader(&core), 1);
    assert!(recoveries(&core.handle(Event::Tick, 100 + TIMEOUT)).is_empty());
}

#[test]
fn unclean_leader_election_enable_still_elects_at_once() {
    let mut core = elr_members_lost(
        UncleanRecoveryStrategy::None,
        &[("unclean.leader.election.enable", "true")],
    );
    let commands = core.handle(Event::BrokerLost { broker: 1 }, 0);
    assert!(commands
        .iter()
        .any(|c| matches!(c, Command::UncleanLeaderElection { leader: 3, .. })));
    assert_eq!(leader(&core), 3);
}
