//! Scenario tests of the controller core through its public API.

mod common;

use std::collections::BTreeMap;

use common::*;
use skein_controller::{
    AlterPartitionRequest, Command, ControllerConfig, ControllerCore, ControllerError,
    ElectionType, Event, MetadataImage, NewTopic, Reply, TopicId, TopicPartition, NO_LEADER,
};

fn create(
    core: &mut ControllerCore,
    name: &str,
    id: u128,
    partitions: u32,
    rf: u16,
) -> Vec<Command> {
    let commands = core.handle(
        Event::CreateTopic(NewTopic::new(name, TopicId(id), partitions, rf)),
        0,
    );
    match reply(&commands) {
        Reply::CreateTopic { result: Ok(_), .. } => commands,
        other => panic!("create {name} failed: {other:?}"),
    }
}

fn create_result(core: &mut ControllerCore, topic: NewTopic) -> Result<TopicId, ControllerError> {
    match reply(&core.handle(Event::CreateTopic(topic), 0)) {
        Reply::CreateTopic { result, .. } => result,
        other => panic!("{other:?}"),
    }
}

fn alter_result(commands: &[Command]) -> Result<skein_controller::PartitionState, ControllerError> {
    match reply(commands) {
        Reply::AlterPartition { result, .. } => result,
        other => panic!("{other:?}"),
    }
}

/// The one result of an `ElectLeaders` event for one partition.
fn elected(commands: &[Command]) -> Reply {
    match reply(commands) {
        Reply::ElectLeaders(mut results) if results.len() == 1 => results.remove(0),
        other => panic!("{other:?}"),
    }
}

fn lose(core: &mut ControllerCore, broker: i32) -> Vec<Command> {
    core.handle(Event::BrokerLost { broker }, 0)
}

// ----- topics ---------------------------------------------------------------

#[test]
fn single_node_create_topic_makes_broker_leader() {
    let mut core = cluster(1);
    let commands = create(&mut core, "orders", 1, 3, 1);
    for p in 0..3 {
        assert_eq!(leaders_told(&commands, "orders", p), vec![1]);
        let s = core.partition("orders", p).unwrap();
        assert_eq!(
            (s.replicas.clone(), s.isr.clone(), s.leader),
            (vec![1], vec![1], 1)
        );
        assert_eq!((s.leader_epoch, s.partition_epoch), (0, 0));
    }
    assert!(commands.contains(&Command::PersistTopic(
        core.topic("orders").unwrap().spec.clone()
    )));
    assert_eq!(commands.last(), Some(&Command::PublishMetadata));
}

#[test]
fn create_topic_errors() {
    let mut core = cluster(2);
    create(&mut core, "a", 1, 1, 2);
    let code = |r: Result<TopicId, ControllerError>| r.unwrap_err().kafka_code();
    assert_eq!(
        code(create_result(
            &mut core,
            NewTopic::new("a", TopicId(2), 1, 1)
        )),
        36
    );
    assert_eq!(
        code(create_result(
            &mut core,
            NewTopic::new("b", TopicId(2), 1, 3)
        )),
        38
    );
    assert_eq!(
        code(create_result(
            &mut core,
            NewTopic::new("b", TopicId(2), 0, 1)
        )),
        37
    );
    assert_eq!(
        code(create_result(
            &mut core,
            NewTopic::new("b c", TopicId(2), 1, 1)
        )),
        17
    );
    let bad_config =
        NewTopic::new("b", TopicId(2), 1, 1).with_config("unclean.leader.election.enable", "maybe");
    assert_eq!(code(create_result(&mut core, bad_config)), 40);
    let mut explicit = NewTopic::new("b", TopicId(2), 0, 0);
    explicit.assignment = Some(vec![vec![1, 1]]);
    assert_eq!(code(create_result(&mut core, explicit.clone())), 39);
    explicit.assignment = Some(vec![vec![1, 9]]);
    assert_eq!(code(create_result(&mut core, explicit)), 39);
    assert_eq!(core.topics().len(), 1, "failed creations leave no trace");
}

#[test]
fn replication_factor_counts_only_live_brokers() {
    let mut core = cluster(3);
    lose(&mut core, 3);
    let err = create_result(&mut core, NewTopic::new("t", TopicId(1), 1, 3)).unwrap_err();
    assert!(matches!(err, ControllerError::InvalidReplicationFactor(_)));
    core.handle(register(3, None), 0);
    assert!(create_result(&mut core, NewTopic::new("t", TopicId(1), 1, 3)).is_ok());
}

#[test]
fn validate_only_changes_nothing() {
    let mut core = cluster(1);
    let mut topic = NewTopic::new("t", TopicId(1), 2, 1);
    topic.validate_only = true;
    let commands = core.handle(Event::CreateTopic(topic), 0);
    assert!(matches!(
        reply(&commands),
        Reply::CreateTopic { result: Ok(_), .. }
    ));
    assert_eq!(commands.len(), 1, "{commands:?}");
    assert!(core.topics().is_empty());
}

#[test]
fn explicit_assignment_is_used_and_dead_replicas_start_out_of_sync() {
    let mut core = cluster(3);
    lose(&mut core, 2);
    let mut topic = NewTopic::new("t", TopicId(1), 0, 0);
    topic.assignment = Some(vec![vec![2, 3, 1]]);
    assert!(create_result(&mut core, topic).is_ok());
    let s = core.partition("t", 0).unwrap();
    assert_eq!(s.replicas, vec![2, 3, 1]);
    assert_eq!(s.isr, vec![3, 1]);
    assert_eq!(s.leader, 3);
    assert_eq!(core.topic("t").unwrap().spec.replication_factor, 3);
}

#[test]
fn create_partitions_adds_and_keeps_existing() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 2, 2);
    let before: Vec<_> = (0..2)
        .map(|p| core.partition("t", p).unwrap().clone())
        .collect();
    let commands = core.handle(
        Event::CreatePartitions {
            topic: "t".into(),
            count: 5,
            assignment: None,
        },
        0,
    );
    assert!(matches!(
        reply(&commands),
        Reply::CreatePartitions { result: Ok(()), .. }
    ));
    assert_eq!(core.topic("t").unwrap().partitions.len(), 5);
    assert_eq!(core.topic("t").unwrap().spec.partitions, 5);
    for p in 0..2 {
        assert_eq!(core.partition("t", p).unwrap(), &before[p as usize]);
    }
    for p in 2..5 {
        assert_eq!(core.partition("t", p).unwrap().replicas.len(), 2);
        assert_eq!(leaders_told(&commands, "t", p).len(), 1);
    }
    let commands = core.handle(
        Event::CreatePartitions {
            topic: "t".into(),
            count: 5,
            assignment: None,
        },
        0,
    );
    match reply(&commands) {
        Reply::CreatePartitions { result: Err(e), .. } => assert_eq!(e.kafka_code(), 37),
        other => panic!("{other:?}"),
    }
}

#[test]
fn config_change_is_stored() {
    let mut core = cluster(1);
    create(&mut core, "t", 1, 1, 1);
    let configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
    let commands = core.handle(
        Event::TopicConfigChanged {
            topic: "t".into(),
            configs: configs.clone(),
        },
        0,
    );
    assert!(matches!(
        reply(&commands),
        Reply::AlterConfigs { result: Ok(()), .. }
    ));
    assert_eq!(core.topic("t").unwrap().spec.configs, configs);
    assert!(matches!(commands[0], Command::PersistTopic(_)));
}

#[test]
fn delete_topic_stops_replicas_and_allows_recreation() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    lose(&mut core, 3);
    let commands = core.handle(Event::DeleteTopic { topic: "t".into() }, 0);
    assert!(commands.contains(&Command::DeleteTopic {
        topic: "t".into(),
        topic_id: TopicId(1)
    }));
    let mut stopped: Vec<i32> = commands
        .iter()
        .filter_map(|c| match c {
            Command::StopReplica {
                broker,
                delete: true,
                ..
            } => Some(*broker),
            _ => None,
        })
        .collect();
    stopped.sort();
    assert_eq!(stopped, vec![1, 2], "only live brokers are told");
    assert!(core.topic("t").is_none());
    create(&mut core, "t", 2, 1, 2);
    let commands = core.handle(
        Event::DeleteTopic {
            topic: "nope".into(),
        },
        0,
    );
    assert!(matches!(
        reply(&commands),
        Reply::DeleteTopic {
            result: Err(ControllerError::UnknownTopicOrPartition),
            ..
        }
    ));
}

// ----- elections --------------------------------------------------------------

#[test]
fn leader_loss_elects_from_isr_and_bumps_epochs() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    assert_eq!(core.partition("t", 0).unwrap().leader, 1);
    let commands = lose(&mut core, 1);
    let s = core.partition("t", 0).unwrap().clone();
    assert_eq!(s.leader, 2);
    assert_eq!(s.isr, vec![2, 3]);
    assert_eq!((s.leader_epoch, s.partition_epoch), (1, 1));
    assert_eq!(leaders_told(&commands, "t", 0), vec![2]);
    assert!(commands.iter().any(|c| matches!(
        c,
        Command::BecomeFollower {
            broker: 3,
            leader: 2,
            leader_epoch: 1,
            ..
        }
    )));
    assert!(!commands
        .iter()
        .any(|c| matches!(c, Command::UncleanLeaderElection { .. })));
    // Losing a follower shrinks the ISR without a new leader epoch, and the
    // leader learns the new partition epoch.
    let commands = lose(&mut core, 3);
    let s = core.partition("t", 0).unwrap();
    assert_eq!(
        (s.leader, s.isr.clone(), s.leader_epoch, s.partition_epoch),
        (2, vec![2], 1, 2)
    );
    assert!(commands.iter().any(|c| matches!(c, Command::BecomeLeader { broker: 2, partition_epoch: 2, isr, .. } if isr == &vec![2])));
}

/// A follower lost changes the ISR only: the leader learns the new ISR
/// and partition epoch; the other follower's role is the same, so it is
/// told nothing (at 100,000 partitions a broker loss would otherwise send
/// every surviving replica an instruction).
#[test]
fn a_follower_lost_tells_the_leader_only() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    let s = core.partition("t", 0).unwrap().clone();
    assert_eq!((s.leader, s.replicas.clone()), (1, vec![1, 2, 3]));
    let commands = lose(&mut core, 3);
    let told: Vec<(i32, bool)> = commands
        .iter()
        .filter_map(|c| match c {
            Command::BecomeLeader { broker, isr, .. } => {
                assert_eq!(isr, &vec![1, 2]);
                Some((*broker, true))
            }
            Command::BecomeFollower { broker, .. } | Command::StopReplica { broker, .. } => {
                Some((*broker, false))
            }
            _ => None,
        })
        .collect();
    assert_eq!(told, vec![(1, true)], "{commands:#?}");
    let s = core.partition("t", 0).unwrap();
    assert_eq!((s.isr.clone(), s.partition_epoch), (vec![1, 2], 1));
}

#[test]
fn a_broker_loss_elects_first_and_leaves_the_other_isrs_second() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 3, 3);
    let lost = core.partition("t", 0).unwrap().leader;
    let led_by_lost: Vec<u32> = (0..3)
        .filter(|p| core.partition("t", *p).unwrap().leader == lost)
        .collect();
    assert_eq!(led_by_lost.len(), 1);
    let first = core.handle_first_step(Event::BrokerLost { broker: lost }, 0);
    assert!(core.has_unfinished_fencing());
    for p in 0..3 {
        let s = core.partition("t", p).unwrap();
        assert_ne!(s.leader, lost, "t-{p} still led by the lost broker");
        let persisted = first
            .iter()
            .any(|c| matches!(c, Command::PersistPartition { partition, .. } if *partition == p));
        // Only what it led changed in the first step; it is still in the
        // other ISRs.
        assert_eq!(persisted, led_by_lost.contains(&p), "t-{p}: {first:#?}");
        assert_eq!(
            s.isr.contains(&lost),
            !led_by_lost.contains(&p),
            "t-{p}: {s:?}"
        );
    }
    let second = core.finish_fencing(0);
    assert!(!core.has_unfinished_fencing());
    assert_eq!(
        second
            .iter()
            .filter(|c| matches!(c, Command::PersistPartition { .. }))
            .count(),
        2
    );
    for p in 0..3 {
        assert!(!core.partition("t", p).unwrap().isr.contains(&lost));
    }
    // Handled in one go, the same outcome.
    let mut once = cluster(3);
    create(&mut once, "t", 1, 3, 3);
    once.handle(Event::BrokerLost { broker: lost }, 0);
    assert_eq!(once.image(), core.image());
}

#[test]
fn a_broker_registering_between_the_fencing_steps_is_in_no_isr() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 3, 3);
    core.handle_first_step(Event::BrokerLost { broker: 3 }, 0);
    assert!((0..3).any(|p| core.partition("t", p).unwrap().isr.contains(&3)));
    // A controller restarted from the image of the first step finishes too.
    let mut restarted = ControllerCore::from_image(core.image().clone(), test_config()).unwrap();
    assert!(restarted.has_unfinished_fencing());
    for c in [&mut core, &mut restarted] {
        c.handle_first_step(register(3, None), 0);
        for p in 0..3 {
            let s = c.partition("t", p).unwrap();
            assert!(
                !s.isr.contains(&3),
                "t-{p}: back in an ISR it fell behind in: {s:?}"
            );
        }
        assert!(!c.has_unfinished_fencing());
    }
}

#[test]
fn out_of_sync_replica_is_not_elected_and_partition_goes_offline() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let shrink = propose_isr(&core, "t", 0, &[1]);
    assert!(alter_result(&core.handle(shrink, 0)).is_ok());
    let commands = lose(&mut core, 1);
    let s = core.partition("t", 0).unwrap().clone();
    assert_eq!(s.leader, NO_LEADER);
    assert!(s.isr.is_empty());
    assert_eq!(
        s.elr,
        vec![1],
        "the last in-sync replica is remembered as eligible"
    );
    assert!(leaders_told(&commands, "t", 0).is_empty());
    assert!(commands.iter().any(|c| matches!(
        c,
        Command::BecomeFollower {
            broker: 2,
            leader: NO_LEADER,
            ..
        }
    )));
    assert_eq!(core.offline_partitions(), vec![TopicPartition::new("t", 0)]);
    // The last in-sync replica comes back and is elected cleanly.
    let commands = core.handle(register(1, None), 0);
    assert_eq!(leaders_told(&commands, "t", 0), vec![1]);
    assert_eq!(core.partition("t", 0).unwrap().leader, 1);
    assert!(s.leader_epoch < core.partition("t", 0).unwrap().leader_epoch);
}

#[test]
fn unclean_topic_elects_out_of_sync_replica_and_says_so() {
    let mut core = cluster(2);
    let topic =
        NewTopic::new("t", TopicId(1), 1, 2).with_config("unclean.leader.election.enable", "true");
    assert!(create_result(&mut core, topic).is_ok());
    let shrink = propose_isr(&core, "t", 0, &[1]);
    core.handle(shrink, 0);
    let commands = lose(&mut core, 1);
    let s = core.partition("t", 0).unwrap();
    assert_eq!((s.leader, s.isr.clone()), (2, vec![2]));
    let notice = commands
        .iter()
        .find(|c| matches!(c, Command::UncleanLeaderElection { .. }))
        .expect("unclean election reported");
    assert_eq!(
        notice,
        &Command::UncleanLeaderElection {
            topic: "t".into(),
            topic_id: TopicId(1),
            partition: 0,
            leader: 2,
            leader_epoch: s.leader_epoch,
            previous_isr: vec![1],
        }
    );
}

#[test]
fn enabling_unclean_election_brings_offline_partition_back() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let shrink = propose_isr(&core, "t", 0, &[1]);
    core.handle(shrink, 0);
    lose(&mut core, 1);
    assert!(core.partition("t", 0).unwrap().is_offline());
    let commands = core.handle(
        Event::TopicConfigChanged {
            topic: "t".into(),
            configs: BTreeMap::from([("unclean.leader.election.enable".into(), "true".into())]),
        },
        0,
    );
    assert_eq!(core.partition("t", 0).unwrap().leader, 2);
    assert!(commands
        .iter()
        .any(|c| matches!(c, Command::UncleanLeaderElection { leader: 2, .. })));
}

#[test]
fn elect_leaders_unclean_overrides_topic_config() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let shrink = propose_isr(&core, "t", 0, &[1]);
    core.handle(shrink, 0);
    lose(&mut core, 1);
    let tp = vec![TopicPartition::new("t", 0)];
    let commands = core.handle(
        Event::ElectLeaders {
            election: ElectionType::Unclean,
            partitions: tp.clone(),
        },
        0,
    );
    assert!(matches!(
        elected(&commands),
        Reply::ElectLeader { result: Ok(2), .. }
    ));
    assert!(commands
        .iter()
        .any(|c| matches!(c, Command::UncleanLeaderElection { .. })));
    let commands = core.handle(
        Event::ElectLeaders {
            election: ElectionType::Unclean,
            partitions: tp,
        },
        0,
    );
    assert!(matches!(
        elected(&commands),
        Reply::ElectLeader {
            result: Err(ControllerError::ElectionNotNeeded),
            ..
        }
    ));
}

#[test]
fn preferred_leader_returns_once_back_in_sync() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    lose(&mut core, 1);
    assert_eq!(core.partition("t", 0).unwrap().leader, 2);
    let commands = core.handle(register(1, None), 0);
    assert!(commands.iter().any(|c| matches!(
        c,
        Command::BecomeFollower {
            broker: 1,
            leader: 2,
            ..
        }
    )));
    core.handle(Event::Tick, 10);
    assert_eq!(
        core.partition("t", 0).unwrap().leader,
        2,
        "1 is not in sync yet"
    );
    let expand = propose_isr(&core, "t", 0, &[2, 3, 1]);
    assert!(alter_result(&core.handle(expand, 10)).is_ok());
    assert_eq!(
        core.partition("t", 0).unwrap().leader,
        2,
        "the ISR change alone moves nothing"
    );
    let commands = core.handle(Event::Tick, 20);
    assert_eq!(leaders_told(&commands, "t", 0), vec![1]);
    let s = core.partition("t", 0).unwrap();
    assert_eq!((s.leader, s.leader_epoch), (1, 2));
}

/// Two brokers, no automatic leader rebalance, topic "t" of `partitions`
/// (RF 2) created, then broker 1 lost and registered again.
fn broker_1_back_without_rebalance(partitions: u32) -> ControllerCore {
    let config = ControllerConfig {
        auto_leader_rebalance_enable: false,
        ..test_config()
    };
    let mut core = ControllerCore::new(config);
    for b in 1..=2 {
        core.handle(register(b, None), 0);
    }
    create(&mut core, "t", 1, partitions, 2);
    lose(&mut core, 1);
    core.handle(register(1, None), 0);
    core
}

#[test]
fn no_automatic_rebalance_when_disabled_but_elect_leaders_works() {
    let mut core = broker_1_back_without_rebalance(1);
    let expand = propose_isr(&core, "t", 0, &[2, 1]);
    core.handle(expand, 0);
    // Within the session timeout, with the rebalance interval (0) elapsed.
    core.handle(Event::Tick, 500);
    assert_eq!(core.partition("t", 0).unwrap().leader, 2);
    let commands = core.handle(
        Event::ElectLeaders {
            election: ElectionType::Preferred,
            partitions: vec![TopicPartition::new("t", 0)],
        },
        500,
    );
    assert!(matches!(
        elected(&commands),
        Reply::ElectLeader { result: Ok(1), .. }
    ));
    assert_eq!(core.partition("t", 0).unwrap().leader, 1);
}

#[test]
fn elect_leaders_for_many_partitions_is_one_reply_in_order() {
    let mut core = broker_1_back_without_rebalance(4);
    for p in 0..4 {
        let isr = core.partition("t", p).unwrap().replicas.clone();
        core.handle(propose_isr(&core, "t", p, &isr), 0);
    }
    // Partitions whose preferred replica (1) lost leadership move back;
    // the others need no election; an unknown partition is refused.
    let moved: Vec<u32> = (0..4)
        .filter(|&p| {
            let s = core.partition("t", p).unwrap();
            s.leader != s.replicas[0]
        })
        .collect();
    assert!(!moved.is_empty() && moved.len() < 4, "{moved:?}");
    let mut asked: Vec<TopicPartition> = (0..4).map(|p| TopicPartition::new("t", p)).collect();
    asked.push(TopicPartition::new("t", 9));
    let commands = core.handle(
        Event::ElectLeaders {
            election: ElectionType::Preferred,
            partitions: asked,
        },
        500,
    );
    let Reply::ElectLeaders(results) = reply(&commands) else {
        panic!("one batch reply wanted: {commands:#?}");
    };
    let got: Vec<(u32, Result<i32, ControllerError>)> = results
        .into_iter()
        .map(|r| match r {
            Reply::ElectLeader {
                partition, result, ..
            } => (partition, result),
            other => panic!("{other:?}"),
        })
        .collect();
    let mut wanted: Vec<(u32, Result<i32, ControllerError>)> = (0..4)
        .map(|p| {
            if moved.contains(&p) {
                (p, Ok(1))
            } else {
                (p, Err(ControllerError::ElectionNotNeeded))
            }
        })
        .collect();
    wanted.push((9, Err(ControllerError::UnknownTopicOrPartition)));
    assert_eq!(got, wanted);
    for p in 0..4 {
        let told = leaders_told(&commands, "t", p);
        assert_eq!(told, if moved.contains(&p) { vec![1] } else { vec![] });
        assert_eq!(
            core.partition("t", p).unwrap().leader,
            core.partition("t", p).unwrap().replicas[0]
        );
    }
}

// ----- ISR proposals (AlterPartition) ----------------------------------------------

#[test]
fn isr_proposal_accepted_bumps_partition_epoch_only() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    let commands = core.handle(propose_isr(&core, "t", 0, &[1, 2]), 0);
    let state = alter_result(&commands).unwrap();
    assert_eq!(state.isr, vec![1, 2]);
    assert_eq!((state.leader_epoch, state.partition_epoch), (0, 1));
    assert_eq!(core.partition("t", 0).unwrap(), &state);
    assert!(commands
        .iter()
        .any(|c| matches!(c, Command::PersistPartition { state: s, .. } if s == &state)));
    assert!(
        leaders_told(&commands, "t", 0).is_empty(),
        "the reply informs the leader"
    );
    // The same ISR again is accepted without a change.
    let commands = core.handle(propose_isr(&core, "t", 0, &[2, 1]), 0);
    assert_eq!(alter_result(&commands).unwrap().partition_epoch, 1);
    assert_eq!(commands.len(), 1);
}

#[test]
fn stale_isr_proposals_are_rejected() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    let stale = propose_isr(&core, "t", 0, &[1, 2]);
    core.handle(propose_isr(&core, "t", 0, &[1, 3]), 0);
    let before = core.partition("t", 0).unwrap().clone();
    assert_eq!(
        alter_result(&core.handle(stale.clone(), 0)),
        Err(ControllerError::InvalidUpdateVersion {
            request: 0,
            current: 1
        })
    );
    assert_eq!(core.partition("t", 0).unwrap(), &before);
    assert_eq!(
        alter_result(&core.handle(stale.clone(), 0))
            .unwrap_err()
            .kafka_code(),
        95
    );

    // After a leader change the old leader is fenced by its epoch.
    lose(&mut core, 1);
    core.handle(register(1, None), 0);
    let Event::AlterPartition(mut old_leader) = stale else {
        unreachable!()
    };
    old_leader.broker_epoch = core.broker(1).unwrap().broker_epoch;
    let err = alter_result(&core.handle(Event::AlterPartition(old_leader.clone()), 0)).unwrap_err();
    assert_eq!(
        err,
        ControllerError::NotLeaderOrFollower,
        "1 no longer leads"
    );

    let Event::AlterPartition(mut current) = propose_isr(&core, "t", 0, &[3]) else {
        unreachable!()
    };
    current.leader_epoch -= 1;
    assert_eq!(
        alter_result(&core.handle(Event::AlterPartition(current.clone()), 0))
            .unwrap_err()
            .kafka_code(),
        74
    );
    current.leader_epoch += 1;
    current.broker_epoch = 999;
    assert_eq!(
        alter_result(&core.handle(Event::AlterPartition(current), 0)),
        Err(ControllerError::StaleBrokerEpoch)
    );
}

#[test]
fn invalid_isr_proposals_are_rejected() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    core.handle(propose_isr(&core, "t", 0, &[1, 2]), 0);
    lose(&mut core, 3);
    let leader = core.partition("t", 0).unwrap().leader;
    let check = |core: &mut ControllerCore, isr: &[i32], want: fn(&ControllerError) -> bool| {
        let event = propose_isr(core, "t", 0, isr);
        let err = alter_result(&core.handle(event, 0)).unwrap_err();
        assert!(want(&err), "{isr:?}: {err:?}");
    };
    check(&mut core, &[leader, 3], |e| {
        matches!(e, ControllerError::IneligibleReplica(3))
    });
    check(&mut core, &[2], |e| {
        matches!(e, ControllerError::InvalidRequest(_))
    });
    check(&mut core, &[leader, 7], |e| {
        matches!(e, ControllerError::InvalidRequest(_))
    });
    check(&mut core, &[leader, leader], |e| {
        matches!(e, ControllerError::InvalidRequest(_))
    });
    let mut wrong_id = match propose_isr(&core, "t", 0, &[leader]) {
        Event::AlterPartition(r) => r,
        _ => unreachable!(),
    };
    wrong_id.topic_id = TopicId(42);
    assert_eq!(
        alter_result(&core.handle(Event::AlterPartition(wrong_id), 0)),
        Err(ControllerError::UnknownTopicId)
    );
    let from_follower = AlterPartitionRequest {
        broker: 2,
        broker_epoch: core.broker(2).unwrap().broker_epoch,
        topic: "t".into(),
        topic_id: TopicId(1),
        partition: 0,
        leader_epoch: 0,
        partition_epoch: 1,
        new_isr: vec![2],
        new_isr_broker_epochs: Default::default(),
    };
    assert_eq!(
        alter_result(&core.handle(Event::AlterPartition(from_follower), 0)),
        Err(ControllerError::NotLeaderOrFollower)
    );
}

// ----- reassignment --------------------------------------------------------------------

fn reassign(
    core: &mut ControllerCore,
    target: Option<Vec<i32>>,
) -> (Result<(), ControllerError>, Vec<Command>) {
    let commands = core.handle(
        Event::ReassignPartition {
            topic: "t".into(),
            partition: 0,
            target,
            throttled: false,
        },
        0,
    );
    match reply(&commands) {
        Reply::ReassignPartition { result, .. } => (result, commands),
        other => panic!("{other:?}"),
    }
}

#[test]
fn reassignment_adds_waits_for_isr_then_drops_old_replica() {
    let mut core = cluster(4);
    create(&mut core, "t", 1, 1, 3);
    assert_eq!(core.partition("t", 0).unwrap().replicas, vec![1, 2, 3]);

    let (result, commands) = reassign(&mut core, Some(vec![4, 2, 3]));
    assert_eq!(result, Ok(()));
    let s = core.partition("t", 0).unwrap().clone();
    assert_eq!(s.replicas, vec![4, 2, 3, 1]);
    assert_eq!(
        (s.adding_replicas.clone(), s.removing_replicas.clone()),
        (vec![4], vec![1])
    );
    assert_eq!(s.leader, 1, "leadership stays until the move completes");
    assert!(commands.iter().any(|c| matches!(
        c,
        Command::BecomeFollower {
            broker: 4,
            leader: 1,
            ..
        }
    )));
    let listed = core.reassignments();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].adding_replicas.clone(),
            listed[0].removing_replicas.clone()
        ),
        (vec![4], vec![1])
    );

    // 4 catches up: the leader adds it and the move completes.
    let commands = core.handle(propose_isr(&core, "t", 0, &[1, 2, 3, 4]), 0);
    let state = alter_result(&commands).unwrap();
    assert_eq!(state.replicas, vec![4, 2, 3]);
    assert_eq!(state.isr, vec![2, 3, 4]);
    assert_eq!(
        state.leader, 4,
        "leadership leaves the removed replica, to the preferred one"
    );
    assert!(state.leader_epoch > s.leader_epoch);
    assert!(commands.contains(&Command::StopReplica {
        broker: 1,
        topic: "t".into(),
        topic_id: TopicId(1),
        partition: 0,
        delete: true
    }));
    assert_eq!(leaders_told(&commands, "t", 0), vec![4]);
    assert!(core.reassignments().is_empty());
}

#[test]
fn shrinking_replicas_in_sync_completes_at_once() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 1, 3);
    let (result, commands) = reassign(&mut core, Some(vec![2, 3]));
    assert_eq!(result, Ok(()));
    let s = core.partition("t", 0).unwrap();
    assert_eq!(
        (s.replicas.clone(), s.isr.clone(), s.leader),
        (vec![2, 3], vec![2, 3], 2)
    );
    assert!(commands.iter().any(|c| matches!(
        c,
        Command::StopReplica {
            broker: 1,
            delete: true,
            ..
        }
    )));
}

#[test]
fn reassignment_cancel_and_errors() {
    let mut core = cluster(4);
    create(&mut core, "t", 1, 1, 2);
    assert_eq!(
        reassign(&mut core, None).0,
        Err(ControllerError::NoReassignmentInProgress)
    );
    assert_eq!(
        reassign(&mut core, Some(vec![3, 3]))
            .0
            .unwrap_err()
            .kafka_code(),
        39
    );
    assert_eq!(
        reassign(&mut core, Some(vec![9]))
            .0
            .unwrap_err()
            .kafka_code(),
        39
    );
    assert_eq!(
        reassign(&mut core, Some(vec![]))
            .0
            .unwrap_err()
            .kafka_code(),
        39
    );
    let original = core.partition("t", 0).unwrap().clone();
    assert_eq!(reassign(&mut core, Some(vec![3, 4])).0, Ok(()));
    let (result, commands) = reassign(&mut core, None);
    assert_eq!(result, Ok(()));
    let s = core.partition("t", 0).unwrap();
    assert_eq!(
        (s.replicas.clone(), s.isr.clone(), s.leader),
        (
            original.replicas.clone(),
            original.isr.clone(),
            original.leader
        )
    );
    assert!(!s.is_reassigning());
    let mut stopped: Vec<i32> = commands
        .iter()
        .filter_map(|c| match c {
            Command::StopReplica {
                broker,
                delete: true,
                ..
            } => Some(*broker),
            _ => None,
        })
        .collect();
    stopped.sort();
    assert_eq!(stopped, vec![3, 4]);
    assert_eq!(
        core.handle(
            Event::ReassignPartition {
                topic: "t".into(),
                partition: 5,
                target: Some(vec![1]),
                throttled: false,
            },
            0
        )
        .len(),
        1
    );
}

// ----- brokers ---------------------------------------------------------------------------

#[test]
fn controlled_shutdown_moves_leadership_first() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 3, 3);
    let epoch = core.broker(1).unwrap().broker_epoch;
    let led_before = core.partitions_led_by(1);
    assert!(!led_before.is_empty());
    let commands = core.handle(
        Event::ControlledShutdownRequested {
            broker: 1,
            broker_epoch: epoch,
        },
        0,
    );
    assert!(matches!(
        reply(&commands),
        Reply::ControlledShutdown { result: Ok(()), .. }
    ));
    assert!(core.partitions_led_by(1).is_empty());
    for p in 0..3 {
        let s = core.partition("t", p).unwrap();
        assert!(!s.isr.contains(&1), "left the ISR: {s:?}");
        assert!(commands.iter().any(|c| matches!(c, Command::StopReplica { broker: 1, partition, delete: false, .. } if *partition == p)));
    }
    assert!(!commands.iter().any(|c| matches!(
        c,
        Command::BecomeLeader { broker: 1, .. } | Command::BecomeFollower { broker: 1, .. }
    )));
    // A broker shutting down cannot rejoin an ISR.
    let err = alter_result(&core.handle(propose_isr(&core, "t", 0, &[2, 3, 1]), 0)).unwrap_err();
    let led = core.partition("t", 0).unwrap().leader;
    assert!(
        matches!(err, ControllerError::IneligibleReplica(1)),
        "{err:?} leader {led}"
    );
    // New topics avoid it.
    let err = create_result(&mut core, NewTopic::new("u", TopicId(2), 1, 3)).unwrap_err();
    assert_eq!(err.kafka_code(), 38);
    // Once it registers again it is a normal follower.
    core.handle(register(1, None), 0);
    assert!(!core.broker(1).unwrap().in_controlled_shutdown);
}

#[test]
fn controlled_shutdown_of_single_node_takes_partitions_offline_keeping_it_eligible() {
    let mut core = cluster(1);
    create(&mut core, "t", 1, 1, 1);
    let epoch = core.broker(1).unwrap().broker_epoch;
    let commands = core.handle(
        Event::ControlledShutdownRequested {
            broker: 1,
            broker_epoch: epoch,
        },
        0,
    );
    assert!(matches!(
        reply(&commands),
        Reply::ControlledShutdown { result: Ok(()), .. }
    ));
    let s = core.partition("t", 0).unwrap();
    assert_eq!(
        (s.leader, s.isr.clone(), s.elr.clone()),
        (NO_LEADER, vec![], vec![1])
    );
    lose(&mut core, 1);
    let commands = core.handle(register(1, None), 0);
    assert_eq!(leaders_told(&commands, "t", 0), vec![1]);
}

/// A heartbeat that arrived before a Tick but waited behind a long event
/// (the service notes its arrival outside the controller's lock) keeps its
/// broker alive; one naming an older registration does not.
#[test]
fn a_heartbeat_noted_on_arrival_counts_even_if_the_tick_runs_first() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let e1 = core.broker(1).unwrap().broker_epoch;
    let e2 = core.broker(2).unwrap().broker_epoch;
    // Both arrived at 900; neither event has run yet when the Tick does.
    core.note_contact(1, e1, 900);
    core.note_contact(2, e2 + 100, 900);
    core.handle(Event::Tick, 1_500);
    assert!(
        core.broker(1).unwrap().is_alive(),
        "its heartbeat arrived at 900"
    );
    assert!(
        core.broker(2).unwrap().fenced,
        "a heartbeat of another registration does not count"
    );
    // A fenced broker is not brought back by a late contact.
    core.note_contact(2, e2, 1_600);
    core.handle(Event::Tick, 1_700);
    assert!(core.broker(2).unwrap().fenced);
}

#[test]
fn missed_heartbeats_fence_a_broker_on_tick() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let e1 = core.broker(1).unwrap().broker_epoch;
    let e2 = core.broker(2).unwrap().broker_epoch;
    core.handle(
        Event::BrokerHeartbeat {
            broker: 1,
            broker_epoch: e1,
        },
        900,
    );
    core.handle(
        Event::BrokerHeartbeat {
            broker: 2,
            broker_epoch: e2,
        },
        900,
    );
    core.handle(Event::Tick, 1_500);
    assert!(core.broker(1).unwrap().is_alive() && core.broker(2).unwrap().is_alive());
    let commands = core.handle(
        Event::BrokerHeartbeat {
            broker: 2,
            broker_epoch: e2,
        },
        1_800,
    );
    assert!(matches!(
        reply(&commands),
        Reply::Heartbeat { result: Ok(()), .. }
    ));
    core.handle(Event::Tick, 1_950);
    assert!(core.broker(1).unwrap().fenced, "no heartbeat since 900");
    assert!(core.broker(2).unwrap().is_alive());
    assert_eq!(core.partition("t", 0).unwrap().leader, 2);
    // A fenced broker's heartbeat is refused: it must register again.
    let commands = core.handle(
        Event::BrokerHeartbeat {
            broker: 1,
            broker_epoch: e1,
        },
        2_000,
    );
    assert!(matches!(
        reply(&commands),
        Reply::Heartbeat {
            result: Err(ControllerError::StaleBrokerEpoch),
            ..
        }
    ));
    let commands = core.handle(
        Event::BrokerHeartbeat {
            broker: 9,
            broker_epoch: 1,
        },
        2_000,
    );
    assert!(matches!(
        reply(&commands),
        Reply::Heartbeat {
            result: Err(ControllerError::BrokerIdNotRegistered(9)),
            ..
        }
    ));
}

#[test]
fn re_registering_live_broker_is_treated_as_restart() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let epoch = core.broker(1).unwrap().broker_epoch;
    let commands = core.handle(register(1, None), 0);
    let new_epoch = match reply(&commands) {
        Reply::BrokerRegistered { result: Ok(e), .. } => e,
        other => panic!("{other:?}"),
    };
    assert!(new_epoch > epoch);
    let s = core.partition("t", 0).unwrap();
    assert_eq!(
        (s.leader, s.isr.clone()),
        (2, vec![2]),
        "the restarted broker must catch up again"
    );
    assert!(commands.iter().any(|c| matches!(
        c,
        Command::BecomeFollower {
            broker: 1,
            leader: 2,
            ..
        }
    )));
}

/// A registration from the same running broker (it names its current epoch
/// as the previous one, same directory) after a controller restart.
fn reattach(core: &ControllerCore, id: i32) -> Event {
    let info = core.broker(id).unwrap();
    Event::BrokerRegistered {
        broker: id,
        host: info.host.clone(),
        port: info.port,
        rack: info.rack.clone(),
        directory_id: info.directory_id,
        previous_broker_epoch: Some(info.broker_epoch),
        endpoints: info.endpoints.clone(),
        software: Default::default(),
    }
}

#[test]
fn controller_restart_moves_no_leader_when_running_brokers_reattach() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 6, 3);
    let before = core.image().clone();
    let mut restarted = ControllerCore::from_image(before.clone(), test_config()).unwrap();
    for id in [3, 1, 2] {
        let epoch = before.brokers[&id].broker_epoch;
        let commands = restarted.handle(reattach(&restarted, id), 10);
        assert!(
            matches!(reply(&commands), Reply::BrokerRegistered { result: Ok(e), .. } if e == epoch),
            "broker {id} keeps epoch {epoch}: {commands:?}"
        );
        // It is told its role in every partition it holds.
        for p in 0..6 {
            let s = restarted.partition("t", p).unwrap().clone();
            let told = commands.iter().any(|c| match c {
                Command::BecomeLeader {
                    broker,
                    topic,
                    partition,
                    ..
                } => *broker == id && topic == "t" && *partition == p,
                Command::BecomeFollower {
                    broker,
                    topic,
                    partition,
                    ..
                } => *broker == id && topic == "t" && *partition == p,
                _ => false,
            });
            assert!(told, "broker {id} not told its role in t-{p} ({s:?})");
        }
    }
    assert_eq!(
        restarted.image().topics,
        before.topics,
        "no leader, ISR or epoch changed"
    );
    assert_eq!(restarted.image().brokers, before.brokers);
    // The reattached brokers have sessions: heartbeats keep them alive.
    for now in [600, 1_200, 1_800] {
        for id in 1..=3 {
            let epoch = before.brokers[&id].broker_epoch;
            let c = restarted.handle(
                Event::BrokerHeartbeat {
                    broker: id,
                    broker_epoch: epoch,
                },
                now,
            );
            assert!(matches!(reply(&c), Reply::Heartbeat { result: Ok(()), .. }));
        }
    }
    assert!((1..=3).all(|id| restarted.broker(id).unwrap().is_alive()));
}

#[test]
fn reattaching_with_another_directory_or_an_older_epoch_is_a_restart() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    // Broker 1 leads t-0; it comes back with the right epoch but another
    // directory (its disk was replaced under it): fenced, out of the ISR.
    let leader = core.partition("t", 0).unwrap().leader;
    let mut event = reattach(&core, leader);
    if let Event::BrokerRegistered { directory_id, .. } = &mut event {
        *directory_id = Some(skein_controller::DirectoryId(999));
    }
    let epoch = core.broker(leader).unwrap().broker_epoch;
    let c = core.handle(event, 0);
    assert!(matches!(reply(&c), Reply::BrokerRegistered { result: Ok(e), .. } if e > epoch));
    let s = core.partition("t", 0).unwrap().clone();
    assert_ne!(s.leader, leader);
    assert!(!s.isr.contains(&leader));

    // The other one names an epoch older than its current one: a process
    // that died and was started again, so it is fenced and re-joins.
    let other = s.leader;
    let mut event = reattach(&core, other);
    let epoch = core.broker(other).unwrap().broker_epoch;
    if let Event::BrokerRegistered {
        previous_broker_epoch,
        ..
    } = &mut event
    {
        *previous_broker_epoch = Some(epoch - 1);
    }
    let c = core.handle(event, 0);
    assert!(matches!(reply(&c), Reply::BrokerRegistered { result: Ok(e), .. } if e > epoch));
    assert!(core.partition("t", 0).unwrap().leader_epoch > s.leader_epoch);
}

#[test]
fn assignments_stay_put_when_brokers_come_and_go() {
    let mut core = cluster(4);
    create(&mut core, "t", 1, 8, 2);
    let before: Vec<Vec<i32>> = (0..8)
        .map(|p| core.partition("t", p).unwrap().replicas.clone())
        .collect();
    lose(&mut core, 2);
    create(&mut core, "u", 2, 6, 2);
    for p in 0..6 {
        assert!(
            !core.partition("u", p).unwrap().replicas.contains(&2),
            "new replicas avoid the lost broker"
        );
    }
    core.handle(register(2, None), 0);
    lose(&mut core, 4);
    core.handle(register(4, None), 0);
    let after: Vec<Vec<i32>> = (0..8)
        .map(|p| core.partition("t", p).unwrap().replicas.clone())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn racks_are_respected_by_topic_creation() {
    let mut core = ControllerCore::new(test_config());
    for (id, rack) in [(1, "a"), (2, "a"), (3, "b"), (4, "b")] {
        core.handle(register(id, Some(rack)), 0);
    }
    create(&mut core, "t", 1, 8, 2);
    for p in 0..8 {
        let r = &core.partition("t", p).unwrap().replicas;
        let racks: std::collections::BTreeSet<_> = r
            .iter()
            .map(|b| core.broker(*b).unwrap().rack.clone())
            .collect();
        assert_eq!(racks.len(), 2, "{r:?}");
    }
}

// ----- producer ids and persistence ------------------------------------------------------------

fn allocate(
    core: &mut ControllerCore,
    broker: i32,
) -> Result<skein_controller::ProducerIdBlock, ControllerError> {
    let broker_epoch = core.broker(broker).map_or(0, |b| b.broker_epoch);
    match reply(&core.handle(
        Event::AllocateProducerIds {
            broker,
            broker_epoch,
        },
        0,
    )) {
        Reply::AllocateProducerIds { result, .. } => result,
        other => panic!("{other:?}"),
    }
}

#[test]
fn producer_id_blocks_survive_restart_and_are_never_reused() {
    let mut core = cluster(2);
    assert_eq!(allocate(&mut core, 1).unwrap().first_producer_id, 0);
    let b = allocate(&mut core, 2).unwrap();
    assert_eq!((b.first_producer_id, b.size), (1000, 1000));
    let mut core = ControllerCore::from_image(core.image().clone(), test_config()).unwrap();
    assert_eq!(allocate(&mut core, 1).unwrap().first_producer_id, 2000);
    assert_eq!(
        allocate(&mut core, 7),
        Err(ControllerError::BrokerIdNotRegistered(7))
    );
    let commands = core.handle(
        Event::AllocateProducerIds {
            broker: 1,
            broker_epoch: 0,
        },
        0,
    );
    assert!(matches!(
        reply(&commands),
        Reply::AllocateProducerIds {
            result: Err(ControllerError::StaleBrokerEpoch),
            ..
        }
    ));
    assert_eq!(core.image().cluster.next_producer_id, 3000);
}

#[test]
fn image_round_trips_through_json_and_rebuilds_the_core() {
    let mut core = cluster(4);
    let topic = NewTopic::new("t", TopicId(u128::MAX - 5), 3, 3).with_config("retention.ms", "5");
    assert!(create_result(&mut core, topic).is_ok());
    assert_eq!(reassign(&mut core, Some(vec![4, 2, 3])).0, Ok(()));
    lose(&mut core, 3);
    allocate(&mut core, 1).unwrap();
    let json = serde_json::to_string_pretty(core.image()).unwrap();
    assert!(
        json.contains(&format!("{:032x}", u128::MAX - 5)),
        "topic id stored as hex"
    );
    let image: MetadataImage = serde_json::from_str(&json).unwrap();
    assert_eq!(&image, core.image());
    let mut rebuilt = ControllerCore::from_image(image, test_config()).unwrap();
    assert_eq!(rebuilt.image(), core.image());
    assert_eq!(rebuilt.reassignments(), core.reassignments());
    // The rebuilt core carries on where the old one stopped.
    let a = core.handle(register(3, None), 0);
    let b = rebuilt.handle(register(3, None), 0);
    assert_eq!(a, b);
    assert_eq!(rebuilt.image(), core.image());
}

#[test]
fn rebuilt_core_gives_live_brokers_a_fresh_session() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let mut rebuilt = ControllerCore::from_image(core.image().clone(), test_config()).unwrap();
    rebuilt.handle(Event::Tick, 50_000);
    assert!(
        rebuilt.broker(1).unwrap().is_alive(),
        "grace period after restart"
    );
    rebuilt.handle(Event::Tick, 51_001);
    assert!(rebuilt.broker(1).unwrap().fenced);
}

#[test]
fn broken_image_is_refused() {
    let mut core = cluster(2);
    create(&mut core, "t", 1, 1, 2);
    let mut image = core.image().clone();
    image.topics.get_mut("t").unwrap().partitions[0].isr = vec![];
    assert!(matches!(
        ControllerCore::from_image(image, test_config()),
        Err(ControllerError::InvalidImage(_))
    ));
}

#[test]
fn commands_come_out_persist_first_publish_last() {
    let mut core = cluster(3);
    create(&mut core, "t", 1, 4, 3);
    let commands = lose(&mut core, 1);
    let rank = |c: &Command| match c {
        Command::PersistBroker(_)
        | Command::PersistTopic(_)
        | Command::PersistPartition { .. }
        | Command::DeleteTopic { .. }
        | Command::PersistCluster(_)
        | Command::PersistScramCredentials { .. }
        | Command::PersistDelegationToken { .. }
        | Command::PersistResourceConfigs { .. }
        | Command::PersistClientQuotas(_)
        | Command::PersistBrokerConfigs(_)
        | Command::PersistAcls(_) => 0,
        Command::BecomeLeader { .. }
        | Command::BecomeFollower { .. }
        | Command::StopReplica { .. } => 1,
        Command::UncleanLeaderElection { .. }
        | Command::UncleanRecovery { .. }
        | Command::BrokerStorageLost { .. }
        | Command::SelfHealing { .. }
        | Command::Reply(_) => 2,
        Command::PublishMetadata => 3,
    };
    let ranks: Vec<u8> = commands.iter().map(rank).collect();
    let mut sorted = ranks.clone();
    sorted.sort();
    assert_eq!(ranks, sorted, "{commands:#?}");
    assert_eq!(ranks.iter().filter(|r| **r == 3).count(), 1);
}

#[test]
fn a_batch_of_isr_proposals_is_one_commit_with_a_result_each_in_order() {
    let mut core = common::cluster(3);
    create(&mut core, "b", 42, 3, 3);
    // Every partition's ISR shrinks to its leader and one other; one
    // proposal in the batch is stale.
    let mut batch = Vec::new();
    for p in 0..3u32 {
        let state = core.partition("b", p).unwrap().clone();
        let keep: Vec<i32> = state.isr.iter().copied().take(2).collect();
        let Event::AlterPartition(mut req) = common::propose_isr(&core, "b", p, &keep) else {
            unreachable!()
        };
        if p == 1 {
            req.partition_epoch += 5;
        }
        batch.push(req);
    }
    let commands = core.handle(Event::AlterPartitions(batch), 10);
    let Reply::AlterPartitions(replies) = common::reply(&commands) else {
        panic!("one AlterPartitions reply")
    };
    let partitions: Vec<u32> = replies
        .iter()
        .map(|r| match r {
            Reply::AlterPartition { partition, .. } => *partition,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(partitions, vec![0, 1, 2]);
    let ok: Vec<bool> = replies
        .iter()
        .map(|r| matches!(r, Reply::AlterPartition { result: Ok(_), .. }))
        .collect();
    assert_eq!(ok, vec![true, false, true], "{replies:?}");
    assert_eq!(core.partition("b", 0).unwrap().isr.len(), 2);
    assert_eq!(core.partition("b", 1).unwrap().isr.len(), 3);
    let persisted = commands
        .iter()
        .filter(|c| matches!(c, Command::PersistPartition { .. }))
        .count();
    assert_eq!(
        persisted, 2,
        "the two accepted changes are persisted together"
    );
}
