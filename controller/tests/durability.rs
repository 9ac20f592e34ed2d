//! Deterministic simulation of durability: the controller core driven by
//! brokers that hold real (if tiny) logs. Brokers are killed, paused (a
//! zombie leader that has not heard it was replaced), shut down cleanly,
//! restarted, and restarted on an empty disk (a new directory id); leaders
//! take `acks=all` writes, followers fetch and truncate a divergent tail,
//! leaders propose ISR changes; the controller restarts from its image.
//!
//! The invariant, after every step: a record acknowledged with `acks=all`
//! is in the log of the partition's current leader, as long as one broker
//! that held it when it was acknowledged still has its disk. With the
//! controller of before (no directory ids, no eligible leader replicas) a
//! broker back on an empty disk could be elected and the intact replicas
//! truncated to its empty log.
//!
//! `SKEIN_DURABILITY_SEED=N` replays one seed; `SKEIN_DURABILITY_RUNS=N`
//! sets how many seeds run.

mod common;

use std::collections::{BTreeMap, VecDeque};

use common::{test_config, Rng};
use skein_controller::{
    AlterPartitionRequest, BrokerId, Command, ControllerCore, DirectoryId, Event, MetadataImage,
    NewTopic, Reply, TopicId, NO_LEADER,
};

const TOPIC: &str = "t";
const TOPIC_ID: TopicId = TopicId(7);
const DEFAULT_RUNS: u64 = 400;
const STEPS: usize = 400;

/// What a broker believes about one partition (its `Partition`).
#[derive(Debug, Clone, Default)]
struct Replica {
    /// The leader epoch of each record, by offset.
    log: Vec<i32>,
    /// `Some(epoch)` while it leads at that epoch.
    leading: Option<i32>,
    /// `Some((leader, epoch))` while it follows.
    following: Option<(BrokerId, i32)>,
    partition_epoch: i32,
    isr: Vec<BrokerId>,
    /// As leader: each follower's log end offset from its last fetch.
    follower_leo: BTreeMap<BrokerId, usize>,
    hw: usize,
    /// As leader: where its leader epoch starts.
    epoch_start: usize,
}

#[derive(Debug, Clone)]
struct Broker {
    /// The process is up.
    running: bool,
    /// SIGSTOPped: up, but it neither heartbeats nor serves.
    paused: bool,
    /// The disk's directory id; a new disk gets a new one.
    dir: u128,
    /// Instructions that reached it while paused.
    inbox: Vec<Command>,
    replicas: BTreeMap<u32, Replica>,
    epoch: u64,
    /// The epoch it held when it last stopped cleanly (its clean-shutdown
    /// marker); a kill leaves none.
    clean_stop: Option<u64>,
}

/// A write the client is waiting on.
#[derive(Debug, Clone)]
struct Pending {
    partition: u32,
    leader: BrokerId,
    epoch: i32,
    end: usize,
}

/// An acknowledged record and the disks it was on when acknowledged.
#[derive(Debug, Clone)]
struct Acked {
    partition: u32,
    offset: usize,
    epoch: i32,
    holders: Vec<(BrokerId, u128)>,
}

struct Sim {
    rng: Rng,
    core: ControllerCore,
    now: u64,
    brokers: BTreeMap<BrokerId, Broker>,
    partitions: u32,
    min_isr: usize,
    pending: Vec<Pending>,
    acked: Vec<Acked>,
    next_dir: u128,
    recent: VecDeque<String>,
    /// How often the paths that matter were reached.
    wipes: u64,
    elr_elections_checked: u64,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed);
        let n = 3 + rng.below(2) as BrokerId;
        let partitions = 1 + rng.below(3) as u32;
        let min_isr = 1 + rng.below(3) as usize;
        let mut brokers = BTreeMap::new();
        for id in 1..=n {
            brokers.insert(
                id,
                Broker {
                    running: false,
                    paused: false,
                    dir: id as u128,
                    inbox: Vec::new(),
                    replicas: BTreeMap::new(),
                    epoch: 0,
                    clean_stop: None,
                },
            );
        }
        Sim {
            rng,
            core: ControllerCore::new(test_config()),
            now: 0,
            brokers,
            partitions,
            min_isr,
            pending: Vec::new(),
            acked: Vec::new(),
            next_dir: 1000,
            recent: VecDeque::new(),
            wipes: 0,
            elr_elections_checked: 0,
        }
    }

    fn log(&mut self, line: String) {
        if self.recent.len() == 40 {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }

    fn ids(&self) -> Vec<BrokerId> {
        self.brokers.keys().copied().collect()
    }

    fn run(&mut self, steps: usize) -> Result<(), String> {
        for id in self.ids() {
            self.start(id)?;
        }
        let topic = NewTopic::new(TOPIC, TOPIC_ID, self.partitions, 3)
            .with_config("min.insync.replicas", self.min_isr.to_string());
        self.handle(Event::CreateTopic(topic))?;
        for _ in 0..steps {
            self.now += 1 + self.rng.below(300);
            self.step()?;
            self.settle_acks();
            self.check()?;
        }
        Ok(())
    }

    /// Sends an event to the controller and delivers its instructions.
    fn handle(&mut self, event: Event) -> Result<Vec<Reply>, String> {
        self.log(format!("t={} {event:?}", self.now));
        let commands = self.core.handle(event, self.now);
        skein_controller::invariants::check_settled(self.core.image())?;
        let mut replies = Vec::new();
        for c in commands {
            match c {
                Command::Reply(r) => replies.push(r),
                Command::BecomeLeader { broker, .. }
                | Command::BecomeFollower { broker, .. }
                | Command::StopReplica { broker, .. } => {
                    let b = self.brokers.get_mut(&broker).expect("known broker");
                    if !b.running {
                        continue;
                    }
                    // Instructions apply in order; a broker just resumed
                    // may serve clients before it reads them (a zombie).
                    if b.paused || !b.inbox.is_empty() {
                        b.inbox.push(c);
                    } else {
                        Self::apply(b, &c);
                    }
                }
                _ => {}
            }
        }
        Ok(replies)
    }

    /// A broker carries out one instruction (its `Partition::make_*`).
    fn apply(b: &mut Broker, c: &Command) {
        match c {
            Command::BecomeLeader {
                partition,
                leader_epoch,
                partition_epoch,
                isr,
                ..
            } => {
                let r = b.replicas.entry(*partition).or_default();
                if r.leading != Some(*leader_epoch) {
                    r.epoch_start = r.log.len();
                    r.follower_leo.clear();
                }
                r.leading = Some(*leader_epoch);
                r.following = None;
                r.partition_epoch = *partition_epoch;
                r.isr = isr.clone();
                r.hw = r.hw.min(r.log.len());
            }
            Command::BecomeFollower {
                partition,
                leader,
                leader_epoch,
                ..
            } => {
                let r = b.replicas.entry(*partition).or_default();
                r.leading = None;
                r.following = Some((*leader, *leader_epoch));
            }
            Command::StopReplica { partition, .. } => {
                let r = b.replicas.entry(*partition).or_default();
                r.leading = None;
                r.following = None;
            }
            _ => {}
        }
    }

    /// The broker process starts: it knows no roles until told.
    fn start(&mut self, id: BrokerId) -> Result<(), String> {
        let b = self.brokers.get_mut(&id).unwrap();
        b.running = true;
        b.paused = false;
        b.inbox.clear();
        for r in b.replicas.values_mut() {
            r.leading = None;
            r.following = None;
            r.isr.clear();
            r.follower_leo.clear();
        }
        let previous = b.clean_stop.take();
        self.register(id, previous)
    }

    /// Registers (at start, or again after the controller fenced it).
    fn register(&mut self, id: BrokerId, previous: Option<u64>) -> Result<(), String> {
        let dir = self.brokers[&id].dir;
        let replies = self.handle(Event::BrokerRegistered {
            broker: id,
            host: format!("b{id}"),
            port: 9092,
            rack: None,
            directory_id: Some(DirectoryId(dir)),
            previous_broker_epoch: previous,
            endpoints: vec![],
            software: Default::default(),
        })?;
        match replies.first() {
            Some(Reply::BrokerRegistered {
                result: Ok(epoch), ..
            }) => {
                self.brokers.get_mut(&id).unwrap().epoch = *epoch;
                Ok(())
            }
            other => Err(format!("registration of {id} failed: {other:?}")),
        }
    }

    fn usable(&self, id: BrokerId) -> bool {
        self.brokers
            .get(&id)
            .is_some_and(|b| b.running && !b.paused)
    }

    fn step(&mut self) -> Result<(), String> {
        let ids = self.ids();
        let up: Vec<BrokerId> = ids.iter().copied().filter(|b| self.usable(*b)).collect();
        let down: Vec<BrokerId> = ids
            .iter()
            .copied()
            .filter(|b| !self.brokers[b].running)
            .collect();
        let paused: Vec<BrokerId> = ids
            .iter()
            .copied()
            .filter(|b| self.brokers[b].running && self.brokers[b].paused)
            .collect();
        match self.rng.below(100) {
            0..=24 => self.produce(),
            25..=49 => self.replicate(),
            50..=56 => self.shrink_isr(),
            57..=66 => {
                // Heartbeats (and a tick that fences the quiet ones); a
                // broker reads its instructions before it heartbeats.
                for b in up {
                    if self.brokers[&b].inbox.is_empty() {
                        self.heartbeat(b)?;
                    } else {
                        self.deliver(b)?;
                    }
                }
                self.handle(Event::Tick).map(|_| ())
            }
            67..=71 => match self.rng.pick(&up) {
                Some(b) => self.kill(b),
                None => Ok(()),
            },
            72..=74 => match self.rng.pick(&up) {
                Some(b) => {
                    self.log(format!("pause {b}"));
                    self.brokers.get_mut(&b).unwrap().paused = true;
                    Ok(())
                }
                None => Ok(()),
            },
            75..=77 => match self.rng.pick(&paused) {
                Some(b) => self.resume(b),
                None => Ok(()),
            },
            78..=79 => {
                let behind: Vec<BrokerId> = up
                    .iter()
                    .copied()
                    .filter(|b| !self.brokers[b].inbox.is_empty())
                    .collect();
                match self.rng.pick(&behind) {
                    Some(b) => self.deliver(b),
                    None => Ok(()),
                }
            }
            80..=82 => match self.rng.pick(&up) {
                Some(b) => self.controlled_shutdown(b),
                None => Ok(()),
            },
            83..=92 => match self.rng.pick(&down) {
                Some(b) => {
                    if self.rng.chance(35) {
                        self.wipe(b);
                    }
                    self.start(b)
                }
                None => Ok(()),
            },
            93..=95 => self.restart_controller(),
            _ => {
                self.handle(Event::Tick)?;
                Ok(())
            }
        }
    }

    fn heartbeat(&mut self, b: BrokerId) -> Result<(), String> {
        let epoch = self.brokers[&b].epoch;
        let replies = self.handle(Event::BrokerHeartbeat {
            broker: b,
            broker_epoch: epoch,
        })?;
        match replies.first() {
            Some(Reply::Heartbeat { result: Ok(()), .. }) => Ok(()),
            // Fenced meanwhile: it registers again, as a broker does (the
            // same process: nothing lost).
            _ => self.register(b, Some(epoch)),
        }
    }

    fn kill(&mut self, b: BrokerId) -> Result<(), String> {
        self.log(format!("kill -9 {b}"));
        {
            let broker = self.brokers.get_mut(&b).unwrap();
            broker.running = false;
            broker.paused = false;
            broker.inbox.clear();
            broker.clean_stop = None;
        }
        if self.rng.chance(60) {
            self.handle(Event::BrokerLost { broker: b })?;
        }
        Ok(())
    }

    /// SIGCONT: it serves again at once; what the controller sent meanwhile
    /// is read a little later (`deliver`).
    fn resume(&mut self, b: BrokerId) -> Result<(), String> {
        self.log(format!("resume {b}"));
        self.brokers.get_mut(&b).unwrap().paused = false;
        Ok(())
    }

    /// A broker reads the instructions that queued up while it was paused.
    fn deliver(&mut self, b: BrokerId) -> Result<(), String> {
        let broker = self.brokers.get_mut(&b).unwrap();
        let inbox = std::mem::take(&mut broker.inbox);
        for c in &inbox {
            Self::apply(broker, c);
        }
        self.heartbeat(b)
    }

    fn controlled_shutdown(&mut self, b: BrokerId) -> Result<(), String> {
        let epoch = self.brokers[&b].epoch;
        self.handle(Event::ControlledShutdownRequested {
            broker: b,
            broker_epoch: epoch,
        })?;
        let broker = self.brokers.get_mut(&b).unwrap();
        broker.running = false;
        broker.inbox.clear();
        broker.clean_stop = Some(epoch);
        self.handle(Event::BrokerLost { broker: b })?;
        Ok(())
    }

    /// The disk of a stopped broker is replaced by an empty one.
    fn wipe(&mut self, b: BrokerId) {
        self.next_dir += 1;
        self.wipes += 1;
        let dir = self.next_dir;
        self.log(format!("wipe {b}: new directory {dir}"));
        let broker = self.brokers.get_mut(&b).unwrap();
        broker.dir = dir;
        broker.replicas.clear();
    }

    fn restart_controller(&mut self) -> Result<(), String> {
        self.log("controller restart".into());
        let json = serde_json::to_string(self.core.image()).map_err(|e| e.to_string())?;
        let image: MetadataImage = serde_json::from_str(&json).map_err(|e| e.to_string())?;
        self.core = ControllerCore::from_image(image, test_config()).map_err(|e| e.to_string())?;
        // Running brokers open a session with the new controller and
        // register again from the same process (their epoch as the
        // previous one). A paused one only heartbeats when it wakes: in
        // time, or it is fenced when the grace period ends.
        let reattaching: Vec<(BrokerId, u64)> = self
            .brokers
            .iter()
            .filter(|(id, _)| self.usable(**id))
            .map(|(id, b)| (*id, b.epoch))
            .collect();
        for (id, epoch) in reattaching {
            self.register(id, Some(epoch))?;
        }
        Ok(())
    }

    /// The broker that believes it leads `p`, if usable.
    fn acting_leaders(&self, p: u32) -> Vec<BrokerId> {
        self.brokers
            .iter()
            .filter(|(id, b)| {
                self.usable(**id) && b.replicas.get(&p).is_some_and(|r| r.leading.is_some())
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn effective_min_isr(&self) -> usize {
        self.min_isr.min(3)
    }

    /// An `acks=all` write to a broker that believes it leads (maybe a
    /// zombie). Refused when its ISR is below `min.insync.replicas`.
    fn produce(&mut self) -> Result<(), String> {
        let p = self.rng.below(u64::from(self.partitions)) as u32;
        let Some(leader) = self.rng.pick(&self.acting_leaders(p)) else {
            return Ok(());
        };
        let count = 1 + self.rng.below(3) as usize;
        let min = self.effective_min_isr();
        let r = self
            .brokers
            .get_mut(&leader)
            .unwrap()
            .replicas
            .get_mut(&p)
            .unwrap();
        if r.isr.len() < self.min_isr {
            return Ok(()); // NOT_ENOUGH_REPLICAS
        }
        let epoch = r.leading.unwrap();
        for _ in 0..count {
            r.log.push(epoch);
        }
        let end = r.log.len();
        if r.isr.len() >= min {
            advance_hw(r, leader);
        }
        self.log(format!(
            "produce {count} to {leader} p{p} at epoch {epoch}, end {end}"
        ));
        self.pending.push(Pending {
            partition: p,
            leader,
            epoch,
            end,
        });
        Ok(())
    }

    /// A follower fetches once from the leader it follows: it truncates a
    /// divergent tail, copies some records, and the leader records its
    /// progress, moves its high watermark and may propose it for the ISR.
    fn replicate(&mut self) -> Result<(), String> {
        let p = self.rng.below(u64::from(self.partitions)) as u32;
        let followers: Vec<(BrokerId, BrokerId, i32)> = self
            .brokers
            .iter()
            .filter(|(id, _)| self.usable(**id))
            .filter_map(|(id, b)| {
                let (leader, epoch) = b.replicas.get(&p)?.following?;
                Some((*id, leader, epoch))
            })
            .collect();
        let Some((f, l, epoch)) = self.rng.pick(&followers) else {
            return Ok(());
        };
        if !self.usable(l) {
            return Ok(());
        }
        let leader_replica = self.brokers[&l]
            .replicas
            .get(&p)
            .cloned()
            .unwrap_or_default();
        if leader_replica.leading != Some(epoch) {
            return Ok(()); // FENCED / UNKNOWN_LEADER_EPOCH: wait for news
        }
        let copy = 1 + self.rng.below(4) as usize;
        let leo = {
            let r = self
                .brokers
                .get_mut(&f)
                .unwrap()
                .replicas
                .entry(p)
                .or_default();
            let common = r
                .log
                .iter()
                .zip(&leader_replica.log)
                .take_while(|(a, b)| a == b)
                .count();
            r.log.truncate(common);
            let end = (common + copy).min(leader_replica.log.len());
            r.log.extend_from_slice(&leader_replica.log[common..end]);
            r.hw = leader_replica.hw.min(r.log.len());
            r.log.len()
        };
        let min = self.effective_min_isr();
        let proposal = {
            let lr = self
                .brokers
                .get_mut(&l)
                .unwrap()
                .replicas
                .get_mut(&p)
                .unwrap();
            lr.follower_leo.insert(f, leo);
            if lr.isr.len() >= min {
                advance_hw(lr, l);
            }
            let joins = !lr.isr.contains(&f) && leo >= lr.hw && leo >= lr.epoch_start;
            joins.then(|| {
                let mut isr = lr.isr.clone();
                isr.push(f);
                (lr.partition_epoch, isr)
            })
        };
        if let Some((partition_epoch, isr)) = proposal {
            self.alter(l, p, epoch, partition_epoch, isr)?;
        }
        Ok(())
    }

    /// A leader drops followers that stopped fetching.
    fn shrink_isr(&mut self) -> Result<(), String> {
        let p = self.rng.below(u64::from(self.partitions)) as u32;
        let Some(l) = self.rng.pick(&self.acting_leaders(p)) else {
            return Ok(());
        };
        let r = self.brokers[&l].replicas[&p].clone();
        let lagging: Vec<BrokerId> = r
            .isr
            .iter()
            .copied()
            .filter(|b| *b != l && (!self.usable(*b) || self.rng.chance(10)))
            .collect();
        if lagging.is_empty() {
            return Ok(());
        }
        let isr = r
            .isr
            .iter()
            .copied()
            .filter(|b| !lagging.contains(b))
            .collect();
        self.alter(l, p, r.leading.unwrap(), r.partition_epoch, isr)
    }

    fn alter(
        &mut self,
        leader: BrokerId,
        p: u32,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: Vec<BrokerId>,
    ) -> Result<(), String> {
        let broker_epoch = self.brokers[&leader].epoch;
        let replies = self.handle(Event::AlterPartition(AlterPartitionRequest {
            broker: leader,
            broker_epoch,
            topic: TOPIC.into(),
            topic_id: TOPIC_ID,
            partition: p,
            leader_epoch,
            partition_epoch,
            new_isr,
            new_isr_broker_epochs: Default::default(),
        }))?;
        if let Some(Reply::AlterPartition {
            result: Ok(state), ..
        }) = replies.first()
        {
            let min = self.effective_min_isr();
            let r = self
                .brokers
                .get_mut(&leader)
                .unwrap()
                .replicas
                .get_mut(&p)
                .unwrap();
            if r.leading == Some(state.leader_epoch) && state.partition_epoch >= r.partition_epoch {
                r.isr = state.isr.clone();
                r.partition_epoch = state.partition_epoch;
                if r.isr.len() >= min {
                    advance_hw(r, leader);
                }
            }
        }
        Ok(())
    }

    /// Writes whose leader's high watermark passed them are acknowledged
    /// (`check_replicated`); writes whose leader moved on are failed.
    fn settle_acks(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for w in pending {
            let b = &self.brokers[&w.leader];
            let Some(r) = b.replicas.get(&w.partition) else {
                continue;
            };
            if !b.running || r.leading != Some(w.epoch) {
                continue;
            }
            if b.paused || r.hw < w.end {
                self.pending.push(w);
                continue;
            }
            if r.isr.len() < self.min_isr {
                continue; // NOT_ENOUGH_REPLICAS_AFTER_APPEND
            }
            let leader_log = r.log.clone();
            for (offset, &epoch) in leader_log.iter().enumerate().take(w.end) {
                if self
                    .acked
                    .iter()
                    .any(|a| a.partition == w.partition && a.offset == offset)
                {
                    continue;
                }
                let holders = self
                    .brokers
                    .iter()
                    .filter(|(_, hb)| {
                        hb.replicas
                            .get(&w.partition)
                            .is_some_and(|hr| hr.log.get(offset) == Some(&epoch))
                    })
                    .map(|(id, hb)| (*id, hb.dir))
                    .collect();
                self.acked.push(Acked {
                    partition: w.partition,
                    offset,
                    epoch,
                    holders,
                });
            }
        }
    }

    /// No acknowledged record is missing from a leader's log while a disk
    /// that held it survives.
    fn check(&mut self) -> Result<(), String> {
        for p in 0..self.partitions {
            let state = self.core.partition(TOPIC, p).unwrap().clone();
            if state.leader == NO_LEADER {
                continue;
            }
            let leader = &self.brokers[&state.leader];
            let Some(r) = leader.replicas.get(&p) else {
                // Told to lead, not running to hear it: nothing served yet.
                continue;
            };
            if r.leading != Some(state.leader_epoch) {
                continue;
            }
            for a in self.acked.iter().filter(|a| a.partition == p) {
                let survives = a
                    .holders
                    .iter()
                    .any(|(id, dir)| self.brokers[id].dir == *dir);
                if survives && r.log.get(a.offset) != Some(&a.epoch) {
                    return Err(format!(
                        "acknowledged record p{p}@{} (epoch {}) missing on leader {} at epoch {} (log {:?}); held by {:?}; partition {state:?}",
                        a.offset, a.epoch, state.leader, state.leader_epoch, r.log, a.holders
                    ));
                }
            }
            if !state.elr.is_empty() || state.isr.len() == 1 {
                self.elr_elections_checked += 1;
            }
        }
        Ok(())
    }
}

/// The leader's high watermark: the smallest log end offset over the ISR
/// (its own included; a member that has not fetched counts as 0); it never
/// goes back.
fn advance_hw(r: &mut Replica, own_id: BrokerId) {
    let own = r.log.len();
    let min = r
        .isr
        .iter()
        .map(|b| match *b == own_id {
            true => own,
            false => r.follower_leo.get(b).copied().unwrap_or(0),
        })
        .min()
        .unwrap_or(own);
    r.hw = r.hw.max(min.min(own));
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn run_seed(seed: u64) -> Result<(u64, u64, usize), String> {
    let mut sim = Sim::new(seed);
    match sim.run(STEPS) {
        Ok(()) => Ok((sim.wipes, sim.elr_elections_checked, sim.acked.len())),
        Err(e) => Err(format!(
            "seed {seed} (min ISR {}): {e}\nrerun: SKEIN_DURABILITY_SEED={seed} cargo test -p skein-controller --test durability\nlast events:\n  {}",
            sim.min_isr,
            sim.recent.iter().cloned().collect::<Vec<_>>().join("\n  ")
        )),
    }
}

#[test]
fn acknowledged_records_survive_disk_loss_and_crashes() {
    let seeds: Vec<u64> = match env_u64("SKEIN_DURABILITY_SEED") {
        Some(s) => vec![s],
        None => (0..env_u64("SKEIN_DURABILITY_RUNS").unwrap_or(DEFAULT_RUNS)).collect(),
    };
    let (mut wipes, mut checked, mut acked) = (0, 0, 0);
    for seed in seeds {
        match run_seed(seed) {
            Ok((w, c, a)) => {
                wipes += w;
                checked += c;
                acked += a;
            }
            Err(report) => panic!("{report}"),
        }
    }
    // The runs must reach what they are about.
    assert!(wipes > 0, "no disk was wiped");
    assert!(checked > 0, "no ELR or last-member state was checked");
    assert!(acked > 0, "nothing was acknowledged");
}

#[test]
fn a_wiped_last_replica_is_not_elected_and_the_intact_ones_are() {
    // The scenario from the issue: RF 3, min ISR 2, everything written to
    // all three, brokers stopped cleanly one after the other (3, 2, then the
    // leader 1), broker 1's disk lost, everything started again.
    let mut core = ControllerCore::new(test_config());
    let reg_after = |id: BrokerId, dir: u128, previous: Option<u64>| Event::BrokerRegistered {
        broker: id,
        host: format!("b{id}"),
        port: 9092,
        rack: None,
        directory_id: Some(DirectoryId(dir)),
        previous_broker_epoch: previous,
        endpoints: vec![],
        software: Default::default(),
    };
    let reg = |id: BrokerId, dir: u128| reg_after(id, dir, None);
    for id in 1..=3 {
        core.handle(reg(id, id as u128), 0);
    }
    core.handle(
        Event::CreateTopic(
            NewTopic::new(TOPIC, TOPIC_ID, 1, 3).with_config("min.insync.replicas", "2"),
        ),
        0,
    );
    assert_eq!(core.partition(TOPIC, 0).unwrap().leader, 1);
    for id in [3, 2, 1] {
        let epoch = core.broker(id).unwrap().broker_epoch;
        core.handle(
            Event::ControlledShutdownRequested {
                broker: id,
                broker_epoch: epoch,
            },
            1,
        );
        core.handle(Event::BrokerLost { broker: id }, 1);
    }
    let s = core.partition(TOPIC, 0).unwrap().clone();
    assert_eq!(s.leader, NO_LEADER);
    assert!(s.isr.is_empty(), "{s:?}");
    assert_eq!(
        s.elr,
        vec![1, 2],
        "the last two in-sync replicas are remembered"
    );
    // Broker 1 returns first, on an empty disk: it must not lead.
    let commands = core.handle(reg(1, 99), 2);
    assert!(commands
        .iter()
        .any(|c| matches!(c, Command::BrokerStorageLost { broker: 1, .. })));
    let s = core.partition(TOPIC, 0).unwrap().clone();
    assert_eq!(s.leader, NO_LEADER, "an empty replica was elected: {s:?}");
    assert_eq!(s.elr, vec![2]);
    assert!(core.broker(1).unwrap().storage_lost);
    assert_eq!(core.broker(1).unwrap().storage_losses, 1);
    assert_eq!(core.broker(2).unwrap().storage_losses, 0);
    // Broker 2, which holds everything and stopped cleanly, returns and leads.
    let clean_stop = core.broker(2).unwrap().broker_epoch;
    core.handle(reg_after(2, 2, Some(clean_stop)), 3);
    let s = core.partition(TOPIC, 0).unwrap().clone();
    assert_eq!(s.leader, 2);
    assert_eq!(s.isr, vec![2]);
    // Broker 1 catches up and rejoins; it is then whole again.
    let epoch = core.broker(2).unwrap().broker_epoch;
    core.handle(
        Event::AlterPartition(AlterPartitionRequest {
            broker: 2,
            broker_epoch: epoch,
            topic: TOPIC.into(),
            topic_id: TOPIC_ID,
            partition: 0,
            leader_epoch: s.leader_epoch,
            partition_epoch: s.partition_epoch,
            new_isr: vec![2, 1],
            new_isr_broker_epochs: BTreeMap::from([(1, core.broker(1).unwrap().broker_epoch)]),
        }),
        4,
    );
    let s = core.partition(TOPIC, 0).unwrap().clone();
    assert_eq!(s.isr, vec![2, 1]);
    assert!(s.elr.is_empty(), "ISR back at min.insync.replicas");
    assert!(!core.broker(1).unwrap().storage_lost, "recovered");
    assert_eq!(
        core.broker(1).unwrap().storage_losses,
        1,
        "the count outlives the recovery (the operator's Event relies on it)"
    );
    // Registering again on the same directory is no loss.
    core.handle(reg(1, 99), 5);
    assert_eq!(core.broker(1).unwrap().storage_losses, 1);
}

#[test]
fn a_restarted_member_proposed_with_its_old_epoch_is_refused() {
    let mut core = common::cluster(3);
    core.handle(Event::CreateTopic(NewTopic::new(TOPIC, TOPIC_ID, 1, 3)), 0);
    let epoch1 = core.broker(1).unwrap().broker_epoch;
    core.handle(Event::BrokerLost { broker: 3 }, 1);
    let old3 = core.broker(3).unwrap().broker_epoch;
    core.handle(common::register(3, None), 2);
    let s = core.partition(TOPIC, 0).unwrap().clone();
    let propose = |epoch3: u64| {
        Event::AlterPartition(AlterPartitionRequest {
            broker: 1,
            broker_epoch: epoch1,
            topic: TOPIC.into(),
            topic_id: TOPIC_ID,
            partition: 0,
            leader_epoch: s.leader_epoch,
            partition_epoch: s.partition_epoch,
            new_isr: vec![1, 2, 3],
            new_isr_broker_epochs: BTreeMap::from([(3, epoch3)]),
        })
    };
    let refused = common::reply(&core.handle(propose(old3), 3));
    assert!(
        matches!(
            refused,
            Reply::AlterPartition {
                result: Err(skein_controller::ControllerError::IneligibleReplica(3)),
                ..
            }
        ),
        "{refused:?}"
    );
    let new3 = core.broker(3).unwrap().broker_epoch;
    let accepted = common::reply(&core.handle(propose(new3), 4));
    assert!(
        matches!(accepted, Reply::AlterPartition { result: Ok(_), .. }),
        "{accepted:?}"
    );
}

/// KIP-966: a broker that registers without the epoch of a clean stop (it
/// was killed or crashed, and may have lost records it had not flushed) is
/// no longer an eligible leader replica; one that stopped cleanly stays one,
/// and so does a running broker that registers again.
#[test]
fn an_unclean_stop_leaves_the_elr_and_a_clean_one_does_not() {
    let reg = |id: BrokerId, previous: Option<u64>| Event::BrokerRegistered {
        broker: id,
        host: format!("b{id}"),
        port: 9092,
        rack: None,
        directory_id: Some(DirectoryId(id as u128)),
        previous_broker_epoch: previous,
        endpoints: vec![],
        software: Default::default(),
    };
    for (clean, expect_elr) in [(true, vec![1, 2]), (false, vec![1])] {
        let mut core = ControllerCore::new(test_config());
        for id in 1..=3 {
            core.handle(reg(id, None), 0);
        }
        core.handle(
            Event::CreateTopic(
                NewTopic::new(TOPIC, TOPIC_ID, 1, 3).with_config("min.insync.replicas", "2"),
            ),
            0,
        );
        // 3, then 2 stop (2 cleanly or killed): the ISR falls below
        // min.insync.replicas and 2 is remembered in the ELR.
        core.handle(Event::BrokerLost { broker: 3 }, 1);
        let epoch2 = core.broker(2).unwrap().broker_epoch;
        core.handle(Event::BrokerLost { broker: 2 }, 2);
        let s = core.partition(TOPIC, 0).unwrap().clone();
        assert_eq!(s.isr, vec![1], "{s:?}");
        assert_eq!(s.elr, vec![2], "{s:?}");
        // 2 comes back.
        core.handle(reg(2, clean.then_some(epoch2)), 3);
        let mut elr = core.partition(TOPIC, 0).unwrap().elr.clone();
        elr.extend(core.partition(TOPIC, 0).unwrap().isr.iter());
        elr.sort();
        assert_eq!(elr, expect_elr, "clean stop: {clean}");
        // A running broker registering again (same process) keeps its place.
        let s = core.partition(TOPIC, 0).unwrap().clone();
        let epoch1 = core.broker(1).unwrap().broker_epoch;
        core.handle(reg(1, Some(epoch1)), 4);
        let after = core.partition(TOPIC, 0).unwrap().clone();
        assert!(
            after.isr.contains(&1) || after.elr.contains(&1),
            "{s:?} -> {after:?}"
        );
    }
}

/// KIP-966's last known ELR: at `skein.version` 4 a member an unclean stop
/// takes out of the ELR is remembered there while the ISR stays below
/// min.insync.replicas; at an older level (whose metadata log older
/// releases read) it is never kept.
#[test]
fn an_elr_member_lost_to_an_unclean_stop_is_the_last_known_elr_from_level_4() {
    let reg = |id: BrokerId| Event::BrokerRegistered {
        broker: id,
        host: format!("b{id}"),
        port: 9092,
        rack: None,
        directory_id: Some(DirectoryId(id as u128)),
        previous_broker_epoch: None,
        endpoints: vec![],
        software: skein_controller::BrokerSoftware {
            version: Some("0.2.0".into()),
            features: skein_controller::features::supported(),
        },
    };
    for (level, expect) in [(4, vec![2]), (1, vec![])] {
        let mut core = ControllerCore::new(test_config());
        core.handle(
            Event::UpdateFeature {
                feature: "skein.version".into(),
                level,
                validate_only: false,
            },
            0,
        );
        for id in 1..=3 {
            core.handle(reg(id), 0);
        }
        core.handle(
            Event::CreateTopic(
                NewTopic::new(TOPIC, TOPIC_ID, 1, 3).with_config("min.insync.replicas", "2"),
            ),
            0,
        );
        core.handle(Event::BrokerLost { broker: 3 }, 1);
        core.handle(Event::BrokerLost { broker: 2 }, 2);
        assert!(core.partition(TOPIC, 0).unwrap().last_known_elr.is_empty());
        // 2 was killed: it comes back without a clean stop's epoch.
        core.handle(reg(2), 3);
        let s = core.partition(TOPIC, 0).unwrap().clone();
        assert_eq!(s.isr, vec![1], "{s:?}");
        assert!(s.elr.is_empty(), "{s:?}");
        assert_eq!(s.last_known_elr, expect, "level {level}: {s:?}");
        // Round trip through the persisted records.
        let mut rebuilt = skein_controller::MetadataImage::default();
        for r in skein_controller::MetadataRecord::snapshot(core.image()) {
            r.apply(&mut rebuilt).unwrap();
        }
        assert_eq!(rebuilt.topics[TOPIC].partitions[0].last_known_elr, expect);
    }
}
