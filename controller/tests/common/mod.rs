//! Helpers shared by the integration tests.
#![allow(dead_code)]

use skein_controller::{
    AlterPartitionRequest, BrokerId, Command, ControllerConfig, ControllerCore, Event, Reply,
};

/// A config with leader rebalance on every tick, so tests need not wait.
pub fn test_config() -> ControllerConfig {
    ControllerConfig {
        broker_session_timeout_ms: 1_000,
        leader_imbalance_check_interval_ms: 0,
        ..ControllerConfig::default()
    }
}

pub fn register(id: BrokerId, rack: Option<&str>) -> Event {
    Event::BrokerRegistered {
        broker: id,
        host: format!("broker-{id}"),
        port: 9092,
        rack: rack.map(str::to_owned),
        directory_id: Some(skein_controller::DirectoryId(id as u128)),
        previous_broker_epoch: None,
        endpoints: vec![],
        software: Default::default(),
    }
}

/// [`register`] as a broker of this release, which a new cluster (at
/// this release's levels, `transaction.version` 2) takes.
pub fn register_current(id: BrokerId, rack: Option<&str>) -> Event {
    let mut event = register(id, rack);
    if let Event::BrokerRegistered { software, .. } = &mut event {
        *software = skein_controller::BrokerSoftware {
            version: Some(env!("CARGO_PKG_VERSION").into()),
            features: skein_controller::features::supported(),
        };
    }
    event
}

/// A core with brokers `1..=n` registered (no racks).
pub fn cluster(n: BrokerId) -> ControllerCore {
    let mut core = ControllerCore::new(test_config());
    for id in 1..=n {
        core.handle(register(id, None), 0);
    }
    core
}

/// The reply among `commands`; panics unless there is exactly one.
pub fn reply(commands: &[Command]) -> Reply {
    let replies: Vec<&Reply> = commands
        .iter()
        .filter_map(|c| match c {
            Command::Reply(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(replies.len(), 1, "expected one reply in {commands:#?}");
    replies[0].clone()
}

/// An ISR proposal from the partition's current leader at its current epochs.
pub fn propose_isr(core: &ControllerCore, topic: &str, partition: u32, isr: &[BrokerId]) -> Event {
    let state = core.partition(topic, partition).expect("partition exists");
    Event::AlterPartition(AlterPartitionRequest {
        broker: state.leader,
        broker_epoch: core
            .broker(state.leader)
            .expect("leader registered")
            .broker_epoch,
        topic: topic.to_owned(),
        topic_id: core.topic(topic).unwrap().spec.topic_id,
        partition,
        leader_epoch: state.leader_epoch,
        partition_epoch: state.partition_epoch,
        new_isr: isr.to_vec(),
        new_isr_broker_epochs: Default::default(),
    })
}

/// Brokers told to lead `topic`-`partition` by `commands`.
pub fn leaders_told(commands: &[Command], topic: &str, partition: u32) -> Vec<BrokerId> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::BecomeLeader {
                broker,
                topic: t,
                partition: p,
                ..
            } if t == topic && *p == partition => Some(*broker),
            _ => None,
        })
        .collect()
}

/// SplitMix64: tiny, seedable, good enough for choosing events.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        (!items.is_empty()).then(|| items[self.below(items.len() as u64) as usize].clone())
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}
