//! Self-healing on the controller core: the replicas of a broker gone past
//! the grace period are re-created on other brokers, as reassignments that
//! complete once the new replicas are in sync.

mod common;

use std::collections::BTreeSet;

use common::*;
use skein_controller::{
    BrokerId, Command, ControllerConfig, ControllerCore, Event, NewTopic, Reply, SelfHealingConfig,
    TopicId,
};

const GRACE: u64 = 10_000;
const LEADER: &str = skein_controller::replication_throttle::LEADER_REPLICAS;
const FOLLOWER: &str = skein_controller::replication_throttle::FOLLOWER_REPLICAS;

fn healing_cluster(n: BrokerId, grace: Option<u64>) -> ControllerCore {
    let config = ControllerConfig {
        self_healing: grace.map(|g| SelfHealingConfig {
            broker_loss_grace_ms: g,
            excluded: BTreeSet::new(),
        }),
        auto_leader_rebalance_enable: false,
        ..test_config()
    };
    let mut core = ControllerCore::new(config);
    for id in 1..=n {
        core.handle(register(id, None), 0);
    }
    core
}

fn create(core: &mut ControllerCore, name: &str, partitions: u32, rf: u16) {
    let id = TopicId(core.topics().len() as u128 + 1);
    let commands = core.handle(
        Event::CreateTopic(NewTopic::new(name, id, partitions, rf)),
        0,
    );
    assert!(
        matches!(reply(&commands), Reply::CreateTopic { result: Ok(_), .. }),
        "{commands:?}"
    );
}

/// Heartbeats of every unfenced broker, then a tick, at `now`.
fn tick(core: &mut ControllerCore, now: u64) -> Vec<Command> {
    let live: Vec<(BrokerId, u64)> = core
        .image()
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| (b.id, b.broker_epoch))
        .collect();
    for (broker, broker_epoch) in live {
        core.handle(
            Event::BrokerHeartbeat {
                broker,
                broker_epoch,
            },
            now,
        );
    }
    core.handle(Event::Tick, now)
}

fn healing_notices(commands: &[Command]) -> Vec<(u32, Vec<(String, u32)>)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::SelfHealing {
                started, blocked, ..
            } => Some((*started, blocked.clone())),
            _ => None,
        })
        .collect()
}

fn holding(core: &ControllerCore, broker: BrokerId) -> usize {
    core.topic("t")
        .unwrap()
        .partitions
        .iter()
        .filter(|p| p.replicas.contains(&broker))
        .count()
}

#[test]
fn a_broker_gone_past_the_grace_period_has_its_replicas_recreated_elsewhere() {
    let mut core = healing_cluster(4, Some(GRACE));
    create(&mut core, "t", 8, 3);
    let held = holding(&core, 2);
    assert!(held > 0);
    core.handle(Event::BrokerLost { broker: 2 }, 100);

    // Within the grace period nothing moves.
    for now in [1_000, 5_000, 100 + GRACE - 1] {
        let commands = tick(&mut core, now);
        assert!(healing_notices(&commands).is_empty(), "{commands:?}");
        assert!(core
            .topic("t")
            .unwrap()
            .partitions
            .iter()
            .all(|p| !p.is_reassigning()));
    }

    // Past it, every partition holding broker 2 is reassigned off it.
    let commands = tick(&mut core, 100 + GRACE);
    assert_eq!(healing_notices(&commands), vec![(held as u32, vec![])]);
    for (p, state) in core.topic("t").unwrap().partitions.iter().enumerate() {
        let target = state.target_replicas();
        assert_eq!(target.len(), 3, "partition {p}: {state:?}");
        assert!(!target.contains(&2), "partition {p}: {state:?}");
        if state.is_reassigning() {
            assert_eq!(state.removing_replicas, vec![2], "partition {p}");
            assert_eq!(state.adding_replicas.len(), 1, "partition {p}");
        }
    }
    // Each copy is throttled as kafka-reassign-partitions --throttle does:
    // the sources under the leader list, the new replica under the
    // follower list.
    let configs = core.topic("t").unwrap().spec.configs.clone();
    for (p, state) in core.topic("t").unwrap().partitions.iter().enumerate() {
        let named = |key: &str, b: &BrokerId| {
            configs
                .get(key)
                .is_some_and(|v| v.split(',').any(|e| e == format!("{p}:{b}")))
        };
        for b in &state.adding_replicas {
            assert!(named(FOLLOWER, b), "partition {p}: {configs:?}");
        }
        for b in state.target_replicas() {
            if state.is_reassigning() && !state.adding_replicas.contains(&b) {
                assert!(named(LEADER, &b), "partition {p}: {configs:?}");
            }
        }
    }
    // A second tick starts nothing more.
    assert!(healing_notices(&tick(&mut core, 100 + GRACE + 500)).is_empty());

    // The new replicas catch up: the leader puts them in the ISR, the lost
    // one leaves the assignment.
    for p in 0..8 {
        let state = core.partition("t", p).unwrap().clone();
        if !state.is_reassigning() {
            continue;
        }
        let mut isr = state.isr.clone();
        isr.extend(state.adding_replicas.iter().copied());
        core.handle(propose_isr(&core, "t", p, &isr), 100 + GRACE + 1_000);
        let after = core.partition("t", p).unwrap();
        assert!(!after.is_reassigning(), "partition {p}: {after:?}");
        assert_eq!(after.replicas.len(), 3);
        assert!(!after.replicas.contains(&2));
    }
    assert_eq!(holding(&core, 2), 0);
    // The moves ended: their throttle entries are gone.
    let configs = &core.topic("t").unwrap().spec.configs;
    assert!(
        !configs.contains_key(LEADER) && !configs.contains_key(FOLLOWER),
        "{configs:?}"
    );
    // The replicas moved to different brokers, not all onto one.
    let per_broker: Vec<usize> = [1, 3, 4].iter().map(|b| holding(&core, *b)).collect();
    assert!(per_broker.iter().all(|n| *n == 8), "{per_broker:?}");
}

#[test]
fn a_broker_back_within_the_grace_period_keeps_its_replicas() {
    let mut core = healing_cluster(4, Some(GRACE));
    create(&mut core, "t", 8, 3);
    let held = holding(&core, 2);
    core.handle(Event::BrokerLost { broker: 2 }, 100);
    tick(&mut core, 5_000);
    core.handle(register(2, None), 6_000);
    for now in [100 + GRACE, 30_000] {
        assert!(healing_notices(&tick(&mut core, now)).is_empty());
    }
    assert_eq!(holding(&core, 2), held);
    // Lost again: the grace period starts over from the new loss.
    core.handle(Event::BrokerLost { broker: 2 }, 31_000);
    assert!(healing_notices(&tick(&mut core, 31_000 + GRACE - 1)).is_empty());
    assert_eq!(
        healing_notices(&tick(&mut core, 31_000 + GRACE))[0].0,
        held as u32
    );
}

#[test]
fn too_few_brokers_leave_the_partitions_alone_and_say_why_once() {
    let mut core = healing_cluster(3, Some(GRACE));
    create(&mut core, "t", 4, 3);
    core.handle(Event::BrokerLost { broker: 2 }, 0);
    let notices = healing_notices(&tick(&mut core, GRACE));
    assert_eq!(notices.len(), 1, "{notices:?}");
    let (started, blocked) = &notices[0];
    assert_eq!(*started, 0);
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].1, 4);
    assert!(blocked[0].0.contains("live broker"), "{blocked:?}");
    assert!(
        healing_notices(&tick(&mut core, GRACE + 1_000)).is_empty(),
        "said once"
    );
    assert_eq!(holding(&core, 2), 4);
}

#[test]
fn without_self_healing_a_lost_broker_keeps_its_replicas() {
    let mut core = healing_cluster(4, None);
    create(&mut core, "t", 8, 3);
    let held = holding(&core, 2);
    core.handle(Event::BrokerLost { broker: 2 }, 0);
    assert!(healing_notices(&tick(&mut core, 10 * GRACE)).is_empty());
    assert_eq!(holding(&core, 2), held);
    assert_eq!(
        core.lost_since().get(&2),
        Some(&0),
        "the loss is still timed"
    );
}

#[test]
fn a_broker_that_returned_and_was_lost_again_gets_a_fresh_grace_period() {
    // Found by the simulation: lost, back and lost again with no tick in
    // between must not count the first loss.
    let mut core = healing_cluster(4, Some(GRACE));
    create(&mut core, "t", 8, 3);
    core.handle(Event::BrokerLost { broker: 2 }, 0);
    core.handle(register(2, None), GRACE);
    core.handle(Event::BrokerLost { broker: 2 }, GRACE + 100);
    assert!(healing_notices(&tick(&mut core, GRACE + 200)).is_empty());
    assert_eq!(core.lost_since().get(&2), Some(&(GRACE + 100)));
    assert!(!healing_notices(&tick(&mut core, 2 * GRACE + 100)).is_empty());
}

#[test]
fn a_throttled_move_lists_its_replicas_until_it_ends_and_a_clients_does_not() {
    let mut core = healing_cluster(4, None);
    create(&mut core, "t", 2, 2);
    let before = core.partition("t", 0).unwrap().replicas.clone();
    let to = (1..=4).find(|b| !before.contains(b)).unwrap();
    let target = vec![before[0], to];
    let reassign = |core: &mut ControllerCore, target: &[BrokerId], throttled: bool| {
        core.handle(
            Event::ReassignPartition {
                topic: "t".into(),
                partition: 0,
                target: Some(target.to_vec()),
                throttled,
            },
            0,
        )
    };
    // A Kafka client's move (AlterPartitionReassignments): its lists are its own.
    reassign(&mut core, &target, false);
    assert!(core.partition("t", 0).unwrap().is_reassigning());
    assert!(core.topic("t").unwrap().spec.configs.is_empty());
    core.handle(
        Event::ReassignPartition {
            topic: "t".into(),
            partition: 0,
            target: None,
            throttled: false,
        },
        0,
    );
    // The operator's: the sources and the new replica are listed.
    reassign(&mut core, &target, true);
    let configs = core.topic("t").unwrap().spec.configs.clone();
    // Every replica it has now (the leaving one may lead the copy).
    let expected_leader: Vec<String> = before.iter().map(|b| format!("0:{b}")).collect();
    assert_eq!(
        configs.get(LEADER),
        Some(&expected_leader.join(",")),
        "{configs:?}"
    );
    assert_eq!(
        configs.get(FOLLOWER),
        Some(&format!("0:{to}")),
        "{configs:?}"
    );
    // It completes: the lists are emptied.
    let state = core.partition("t", 0).unwrap().clone();
    let mut isr = state.isr.clone();
    isr.push(to);
    core.handle(propose_isr(&core, "t", 0, &isr), 1_000);
    assert!(!core.partition("t", 0).unwrap().is_reassigning());
    assert!(core.topic("t").unwrap().spec.configs.is_empty());
}
