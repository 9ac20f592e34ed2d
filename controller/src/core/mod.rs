//! [`ControllerCore`]: the controller state machine. Events in, commands
//! out; no I/O, no clock (time comes with each event).

mod acls;
mod broker_configs;
mod brokers;
mod delegation_tokens;
mod features;
mod partitions;
mod quotas;
mod resource_configs;
mod scram;
mod self_healing;
mod topics;
mod unclean_recovery;

use std::collections::{BTreeMap, BTreeSet};

use crate::command::{Command, Reply};
use crate::config::ControllerConfig;
use crate::election::{self, ElectionOutcome};
use crate::error::ControllerError;
use crate::event::Event;
use crate::invariants;
use crate::model::{
    without, BrokerId, BrokerInfo, MetadataImage, OngoingReassignment, PartitionState, TopicImage,
    TopicPartition,
};
use crate::reassignment;

/// The controller core. Build it with [`ControllerCore::new`] (empty
/// cluster) or [`ControllerCore::from_image`] (after a restart), feed it
/// events with [`ControllerCore::handle`], and carry out the returned
/// commands in order.
#[derive(Debug)]
pub struct ControllerCore {
    config: ControllerConfig,
    image: MetadataImage,
    /// Last heartbeat per live broker. Not persisted: after a restart every
    /// live broker gets a fresh session from the first event's time.
    sessions: BTreeMap<BrokerId, u64>,
    now_ms: u64,
    last_rebalance_ms: Option<u64>,
    /// Brokers found in this event to have lost their disks: whatever ISR
    /// they were in, they never join an ELR.
    lost_storage: Vec<BrokerId>,
    /// Fenced brokers that may still be in the ISRs of partitions they did
    /// not lead. Fencing a broker is two steps: the partitions it led get
    /// new leaders at once, then it leaves the other ISRs
    /// ([`ControllerCore::finish_fencing`]). The service persists and
    /// publishes the first step before computing the second, so clients
    /// wait for a third of the changes of a broker loss, not all of them;
    /// a dead follower in an ISR for that moment only delays acks=all
    /// writes, as it would in Kafka until the ISR shrinks. Not persisted:
    /// [`ControllerCore::from_image`] starts with every fenced broker, so a
    /// crash between the steps is finished after the restart, and a broker
    /// registering again always finds the second step done.
    unfinished_fencing: BTreeSet<BrokerId>,
    /// Since when each fenced broker has been gone, for self-healing's
    /// grace period. Not persisted: after a restart the grace starts over
    /// (healing may come later, never earlier).
    lost_since: BTreeMap<BrokerId, u64>,
    /// Why each broker's latest registration was refused (its release
    /// cannot run at the finalized feature level), until it registers.
    /// Not persisted: a refused broker keeps retrying and is refused again.
    refused: BTreeMap<BrokerId, String>,
    /// The partitions self-healing last left alone, by reason (a notice
    /// only when this changes).
    heal_blocked: Vec<(String, u32)>,
    /// Partitions whose move the controller throttled (named in the
    /// topic's `*.replication.throttled.replicas`): their entries go when
    /// the move ends.
    throttled_moves: BTreeSet<(String, u32)>,
    /// Leaderless partitions whose replicas reported their logs, for
    /// unclean recovery ([`crate::unclean_recovery`]).
    leaderless: BTreeMap<(String, u32), unclean_recovery::Leaderless>,
    /// Replicas whose broker came back on a new, empty directory and that
    /// have not been in sync since: they hold nothing of the partition's
    /// past. Not persisted: a restarted controller knows of none, and so
    /// waits for them and compares their (empty) logs like any other's
    /// (per broker, `storage_lost` is too coarse: a replica it copied back
    /// holds the data while another of the broker's is still behind).
    empty_replicas: BTreeSet<(crate::model::TopicId, u32, BrokerId)>,
    out: Output,
}

/// Commands collected while handling one event, bucketed so they come out
/// in the documented order.
#[derive(Debug, Default)]
struct Output {
    persist: Vec<Command>,
    brokers: Vec<Command>,
    notices: Vec<Command>,
    publish: bool,
}

impl Output {
    fn take(&mut self) -> Vec<Command> {
        let mut all = std::mem::take(&mut self.persist);
        all.append(&mut self.brokers);
        all.append(&mut self.notices);
        if std::mem::take(&mut self.publish) {
            all.push(Command::PublishMetadata);
        }
        all
    }
}

/// Who changes a partition decides who must be told about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The controller changed it: every live replica is told.
    Controller,
    /// The leader's own ISR proposal: the reply tells the leader; others
    /// are told only if leadership or replicas changed as a result.
    LeaderProposal,
}

impl ControllerCore {
    /// A controller for an empty cluster.
    pub fn new(config: ControllerConfig) -> Self {
        ControllerCore {
            config,
            image: MetadataImage::default(),
            sessions: BTreeMap::new(),
            now_ms: 0,
            last_rebalance_ms: None,
            lost_storage: Vec::new(),
            unfinished_fencing: BTreeSet::new(),
            lost_since: BTreeMap::new(),
            refused: BTreeMap::new(),
            heal_blocked: Vec::new(),
            throttled_moves: BTreeSet::new(),
            leaderless: BTreeMap::new(),
            empty_replicas: BTreeSet::new(),
            out: Output::default(),
        }
    }

    /// Rebuilds the controller from a persisted image (controller restart
    /// or failover). Refuses an image that breaks a structural invariant.
    pub fn from_image(
        image: MetadataImage,
        config: ControllerConfig,
    ) -> Result<Self, ControllerError> {
        invariants::check_image(&image).map_err(ControllerError::InvalidImage)?;
        let mut core = ControllerCore::new(config);
        core.unfinished_fencing = image
            .brokers
            .values()
            .filter(|i| i.fenced)
            .map(|i| i.id)
            .collect();
        core.image = image;
        core.throttled_moves = core.moves_named_in_throttle_lists();
        Ok(core)
    }

    /// Handles one event at `now_ms` (any monotonic millisecond clock) and
    /// returns what the caller must do, in order: persist first, then tell
    /// brokers, then reply and publish.
    pub fn handle(&mut self, event: Event, now_ms: u64) -> Vec<Command> {
        self.handle_event(event, now_ms, false)
    }

    /// Like [`ControllerCore::handle`], but fencing a broker stops after
    /// its first step (new leaders for what it led): carry out the commands,
    /// then call [`ControllerCore::finish_fencing`] while
    /// [`ControllerCore::has_unfinished_fencing`].
    pub fn handle_first_step(&mut self, event: Event, now_ms: u64) -> Vec<Command> {
        self.handle_event(event, now_ms, true)
    }

    /// Whether a fenced broker may still be in an ISR.
    pub fn has_unfinished_fencing(&self) -> bool {
        !self.unfinished_fencing.is_empty()
    }

    /// The second step of fencing: fenced brokers leave every ISR they are
    /// still in (into the ELR where that leaves fewer than
    /// min.insync.replicas).
    pub fn finish_fencing(&mut self, now_ms: u64) -> Vec<Command> {
        self.now_ms = self.now_ms.max(now_ms);
        self.exit_fenced_from_isrs();
        self.out.take()
    }

    fn handle_event(&mut self, event: Event, now_ms: u64, staged: bool) -> Vec<Command> {
        self.now_ms = self.now_ms.max(now_ms);
        self.start_missing_sessions();
        self.last_rebalance_ms.get_or_insert(self.now_ms);
        // The requests of the table go to their handlers; the rest is here.
        match self.dispatch_request(event) {
            None => {}
            Some(Event::BrokerLost { broker }) => {
                self.fence_broker(broker);
            }
            Some(Event::CreateTopic(topic)) => self.on_create_topic(topic),
            Some(Event::AlterPartition(request)) => self.on_alter_partition(request),
            Some(Event::AlterPartitions(requests)) => self.on_alter_partitions(requests),
            Some(Event::ElectLeaders {
                election,
                partitions,
            }) => self.on_elect_leaders(election, partitions),
            Some(Event::Tick) => self.on_tick(),
            Some(other) => unreachable!("{} is in the table of requests", other.name()),
        }
        if !staged {
            self.exit_fenced_from_isrs();
        }
        self.recover_leaderless_partitions();
        self.lost_storage.clear();
        self.clear_recovered_brokers();
        self.clear_finished_throttles();
        self.out.take()
    }

    // ----- read accessors -------------------------------------------------

    /// The whole persisted state.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// The settings in use.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// All topics by name.
    pub fn topics(&self) -> &BTreeMap<String, TopicImage> {
        &self.image.topics
    }

    /// One topic.
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.image.topics.get(name)
    }

    /// One partition's state.
    pub fn partition(&self, topic: &str, partition: u32) -> Option<&PartitionState> {
        self.image
            .topics
            .get(topic)?
            .partitions
            .get(partition as usize)
    }

    /// All registered brokers, live or not.
    pub fn brokers(&self) -> &BTreeMap<BrokerId, BrokerInfo> {
        &self.image.brokers
    }

    /// One broker.
    pub fn broker(&self, id: BrokerId) -> Option<&BrokerInfo> {
        self.image.brokers.get(&id)
    }

    /// Running reassignments (answers `ListPartitionReassignments`).
    pub fn reassignments(&self) -> Vec<OngoingReassignment> {
        self.all_partitions()
            .filter(|(_, _, s)| s.is_reassigning())
            .map(|(topic, partition, s)| OngoingReassignment {
                topic: topic.to_owned(),
                partition,
                replicas: s.replicas.clone(),
                adding_replicas: s.adding_replicas.clone(),
                removing_replicas: s.removing_replicas.clone(),
            })
            .collect()
    }

    /// Partitions without a leader.
    pub fn offline_partitions(&self) -> Vec<TopicPartition> {
        self.all_partitions()
            .filter(|(_, _, s)| s.is_offline())
            .map(|(t, p, _)| TopicPartition::new(t, p))
            .collect()
    }

    /// Partitions whose ISR is smaller than their replica set.
    pub fn under_replicated_partitions(&self) -> Vec<TopicPartition> {
        self.all_partitions()
            .filter(|(_, _, s)| s.is_under_replicated())
            .map(|(t, p, _)| TopicPartition::new(t, p))
            .collect()
    }

    /// Partitions `broker` currently leads.
    pub fn partitions_led_by(&self, broker: BrokerId) -> Vec<TopicPartition> {
        self.all_partitions()
            .filter(|(_, _, s)| s.leader == broker)
            .map(|(t, p, _)| TopicPartition::new(t, p))
            .collect()
    }

    // ----- shared machinery ----------------------------------------------

    /// Every registered broker as a place for new replicas (fenced or
    /// shutting-down ones marked ineligible).
    fn replica_hosts(&self) -> Vec<crate::replication_factor::ReplicaHost> {
        self.image
            .brokers
            .values()
            .map(|b| {
                crate::replication_factor::ReplicaHost::new(
                    b.id,
                    b.rack.as_deref(),
                    b.is_eligible(),
                )
            })
            .collect()
    }

    fn all_partitions(&self) -> impl Iterator<Item = (&str, u32, &PartitionState)> {
        self.image.topics.iter().flat_map(|(name, t)| {
            t.partitions
                .iter()
                .enumerate()
                .map(move |(p, s)| (name.as_str(), p as u32, s))
        })
    }

    /// The partitions matching `pred` by topic, collected so they can be
    /// changed (one name per topic, not one per partition).
    fn partitions_by_topic_where(
        &self,
        pred: impl Fn(&PartitionState) -> bool,
    ) -> Vec<(String, Vec<u32>)> {
        self.image
            .topics
            .iter()
            .filter_map(|(name, t)| {
                let matching: Vec<u32> = t
                    .partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| pred(s))
                    .map(|(p, _)| p as u32)
                    .collect();
                (!matching.is_empty()).then(|| (name.clone(), matching))
            })
            .collect()
    }

    /// The partitions matching `pred`, collected so they can be changed.
    fn partitions_where(&self, pred: impl Fn(&PartitionState) -> bool) -> Vec<(String, u32)> {
        self.all_partitions()
            .filter(|(_, _, s)| pred(s))
            .map(|(t, p, _)| (t.to_owned(), p))
            .collect()
    }

    fn state(&self, topic: &str, partition: u32) -> &PartitionState {
        &self.image.topics[topic].partitions[partition as usize]
    }

    fn is_registered(&self, b: BrokerId) -> bool {
        self.image.brokers.contains_key(&b)
    }

    fn is_eligible(&self, b: BrokerId) -> bool {
        self.image
            .brokers
            .get(&b)
            .is_some_and(BrokerInfo::is_eligible)
    }

    fn is_alive(&self, b: BrokerId) -> bool {
        self.image.brokers.get(&b).is_some_and(BrokerInfo::is_alive)
    }

    /// Brokers that came back with an empty disk stop being reported as
    /// such once every replica they hold is in sync again.
    fn clear_recovered_brokers(&mut self) {
        let recovering: Vec<BrokerId> = self
            .image
            .brokers
            .values()
            .filter(|b| b.storage_lost)
            .map(|b| b.id)
            .collect();
        for b in recovering {
            let behind = self
                .all_partitions()
                .any(|(_, _, s)| s.replicas.contains(&b) && !s.isr.contains(&b));
            if !behind {
                let info = self.image.brokers.get_mut(&b).expect("listed above");
                info.storage_lost = false;
                let info = info.clone();
                self.out.persist.push(Command::PersistBroker(info));
                self.out.publish = true;
            }
        }
    }

    fn unclean_enabled(&self, topic: &str) -> bool {
        self.image.topics.get(topic).is_some_and(|t| {
            election::unclean_enabled(&t.spec.configs, self.config.unclean_leader_election_enable)
        })
    }

    fn reply(&mut self, reply: Reply) {
        self.out.notices.push(Command::Reply(reply));
    }

    /// Brokers alive before a controller restart get a session starting now.
    fn start_missing_sessions(&mut self) {
        for (id, info) in &self.image.brokers {
            if info.is_alive() {
                self.sessions.entry(*id).or_insert(self.now_ms);
            }
        }
    }

    /// Applies a change to one partition: completes a reassignment whose
    /// target is in sync, elects a leader if the current one is no longer
    /// valid, bumps the epochs, and emits persist and broker commands.
    /// Returns the partition's state afterwards (unchanged if `next` changed
    /// nothing).
    fn commit_partition(
        &mut self,
        topic: &str,
        partition: u32,
        mut next: PartitionState,
        allow_unclean: bool,
        origin: Origin,
    ) -> PartitionState {
        let t = &self.image.topics[topic];
        let old = t.partitions[partition as usize].clone();
        let topic_id = t.spec.topic_id;
        let min_isr =
            election::min_insync_replicas(&t.spec.configs, self.config.min_insync_replicas);
        reassignment::maybe_complete(&mut next);
        // Members that just left an ISR now below min.insync.replicas hold
        // everything committed: they join the ELR before the election so
        // the partition remembers them.
        election::update_elr(&mut next, &old.isr, min_isr, &self.lost_storage);
        let isr_before_election = next.isr.clone();
        let mut outcome = election::elect_leader(&mut next, |b| self.is_eligible(b), allow_unclean);
        // An unclean election resets the ISR, which can put the whole
        // reassignment target in sync; then the new leader may be removed.
        if reassignment::maybe_complete(&mut next) {
            let again = election::elect_leader(&mut next, |b| self.is_eligible(b), allow_unclean);
            if again != ElectionOutcome::Unchanged {
                outcome = again;
            }
        }
        if !matches!(outcome, ElectionOutcome::Unclean(_)) {
            // An ELR member elected rejoined the ISR; the ELR may be moot.
            election::update_elr(&mut next, &isr_before_election, min_isr, &self.lost_storage);
        }
        // A format of skein.version 4: an older level's log never holds it.
        if self
            .image
            .cluster
            .feature_level(crate::features::SKEIN_VERSION)
            >= crate::features::DELEGATION_TOKENS_LEVEL
        {
            let unclean = matches!(outcome, ElectionOutcome::Unclean(_));
            election::update_last_known_elr(&old, &mut next, min_isr, unclean, &self.lost_storage);
        } else {
            next.last_known_elr.clear();
        }
        self.note_in_sync(topic_id, partition, &next.isr);
        if next.same_assignment_and_leadership(&old) {
            return old;
        }
        let removed = without(&old.replicas, &next.replicas);
        // A new leader epoch fences the old leader; removed replicas are
        // fenced the same way so they stop fetching.
        let bump_leader = next.leader != old.leader || !removed.is_empty();
        next.leader_epoch = old.leader_epoch + i32::from(bump_leader);
        next.partition_epoch = old.partition_epoch + 1;

        self.image
            .topics
            .get_mut(topic)
            .expect("partition exists")
            .partitions[partition as usize] = next.clone();
        self.out.persist.push(Command::PersistPartition {
            topic: topic.to_owned(),
            topic_id,
            partition,
            state: next.clone(),
        });
        if let ElectionOutcome::Unclean(leader) = outcome {
            self.out.notices.push(Command::UncleanLeaderElection {
                topic: topic.to_owned(),
                topic_id,
                partition,
                leader,
                leader_epoch: next.leader_epoch,
                previous_isr: old.isr.clone(),
            });
        }
        // A new leader or new replicas change everyone's role. A change of
        // the controller's that keeps them (a replica leaving the ISR)
        // concerns the leader (its ISR and partition epoch) and replicas
        // shutting down (they stop); the other followers' roles are the
        // same, so they are not told: a broker loss at 100,000 partitions
        // would otherwise send every surviving replica an instruction.
        let roles_changed = bump_leader || next.replicas != old.replicas;
        if roles_changed {
            self.notify_replicas(topic, partition);
        } else if origin == Origin::Controller {
            self.notify_leader_and_stopping(topic, partition);
        }
        for b in removed {
            if self.is_alive(b) {
                self.out.brokers.push(Command::StopReplica {
                    broker: b,
                    topic: topic.to_owned(),
                    topic_id,
                    partition,
                    delete: true,
                });
            }
        }
        self.out.publish = true;
        next
    }

    /// Tells every live replica its role in the partition's current state.
    fn notify_replicas(&mut self, topic: &str, partition: u32) {
        let replicas = self.state(topic, partition).replicas.clone();
        for b in replicas {
            self.notify_replica(topic, partition, b);
        }
    }

    /// Tells the leader, and replicas in controlled shutdown, their roles
    /// in the partition's current state.
    fn notify_leader_and_stopping(&mut self, topic: &str, partition: u32) {
        let s = self.state(topic, partition);
        let leader = s.leader;
        let told: Vec<BrokerId> = s
            .replicas
            .iter()
            .copied()
            .filter(|b| {
                *b == leader
                    || self
                        .image
                        .brokers
                        .get(b)
                        .is_some_and(|i| i.in_controlled_shutdown)
            })
            .collect();
        for b in told {
            self.notify_replica(topic, partition, b);
        }
    }

    /// Tells one replica its role: leader, follower, or (shutting down)
    /// stop serving. Fenced brokers are told nothing; they learn their
    /// roles when they register again.
    fn notify_replica(&mut self, topic: &str, partition: u32, broker: BrokerId) {
        let Some(info) = self.image.brokers.get(&broker) else {
            return;
        };
        if info.fenced {
            return;
        }
        let t = &self.image.topics[topic];
        let topic_id = t.spec.topic_id;
        let s = &t.partitions[partition as usize];
        let command = if info.in_controlled_shutdown {
            Command::StopReplica {
                broker,
                topic: topic.to_owned(),
                topic_id,
                partition,
                delete: false,
            }
        } else if s.leader == broker {
            Command::BecomeLeader {
                broker,
                topic: topic.to_owned(),
                topic_id,
                partition,
                leader_epoch: s.leader_epoch,
                partition_epoch: s.partition_epoch,
                replicas: s.replicas.clone(),
                isr: s.isr.clone(),
                adding_replicas: s.adding_replicas.clone(),
                removing_replicas: s.removing_replicas.clone(),
            }
        } else {
            Command::BecomeFollower {
                broker,
                topic: topic.to_owned(),
                topic_id,
                partition,
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                partition_epoch: s.partition_epoch,
                replicas: s.replicas.clone(),
            }
        };
        self.out.brokers.push(command);
    }
}

/// `ControllerCore::dispatch_request`: every request of the table in
/// [`crate::requests::table`] handed to its handler, with its fields in order.
macro_rules! define_dispatch {
    ($(
        $(#[$doc:meta])*
        $name:ident => $event:ident {
            $( $(#[$field_doc:meta])* $field:ident : $ty:ty ),* $(,)?
        } handler $handler:ident
        wire $wire:tt
        reply $reply:ident { $( $reply_field:ident : $reply_ty:ty ),* $(,)? } -> $output:ty;
    )*) => {
        impl ControllerCore {
            /// Handles `event` if it is a request of the table; gives it
            /// back otherwise.
            fn dispatch_request(&mut self, event: Event) -> Option<Event> {
                match event {
                    $( Event::$event { $($field),* } => self.$handler($($field),*), )*
                    other => return Some(other),
                }
                None
            }
        }
    };
}

crate::requests::table::with_requests!(define_dispatch);
