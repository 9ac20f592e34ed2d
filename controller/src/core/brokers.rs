//! Broker lifecycle: registration, heartbeats, loss, controlled shutdown,
//! and producer-id blocks (which brokers ask for).

use super::{ControllerCore, Origin};
use crate::command::{Command, Reply};
use crate::error::ControllerError;
use crate::model::{BrokerId, BrokerInfo, BrokerSoftware, DirectoryId, Endpoint};
use crate::producer_ids;

impl ControllerCore {
    /// [`crate::Event::BrokerRegistered`], its fields in order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_broker_registered(
        &mut self,
        broker: BrokerId,
        host: String,
        port: u16,
        rack: Option<String>,
        directory_id: Option<DirectoryId>,
        previous_broker_epoch: Option<u64>,
        endpoints: Vec<Endpoint>,
        software: BrokerSoftware,
    ) {
        self.refused.remove(&broker);
        if broker < 0 {
            self.reply(Reply::BrokerRegistered {
                broker,
                result: Err(ControllerError::InvalidRequest(format!(
                    "broker id {broker} is negative"
                ))),
            });
            return;
        }
        // Its release cannot run at the finalized feature level: it stays
        // out (as it was: lost, or never there), and says why in its log.
        if let Some(refused) = self.refuse_registration(broker, &software) {
            tracing::warn!(broker, error = %refused, "registration refused");
            self.refused.insert(broker, refused.to_string());
            self.reply(Reply::BrokerRegistered {
                broker,
                result: Err(refused),
            });
            return;
        }
        // The same running process opening a new session (this controller
        // restarted, or took over): it lost nothing and keeps its epoch,
        // its leaderships and its ISR places. Fencing it here would move
        // every leader of the cluster on each controller restart, and the
        // brokers that learn of the moves late act as zombie leaders.
        if let Some(info) = self.image.brokers.get(&broker).filter(|i| {
            i.is_alive()
                && !i.in_controlled_shutdown
                && previous_broker_epoch == Some(i.broker_epoch)
                && directory_id.is_none_or(|d| i.directory_id == Some(d))
        }) {
            let epoch = info.broker_epoch;
            self.on_session_resumed(broker, host, port, rack, endpoints, software);
            self.reply(Reply::BrokerRegistered {
                broker,
                result: Ok(epoch),
            });
            return;
        }
        // Registering again while we think it alive means it restarted: its
        // old incarnation may have lost unflushed data, so it leaves every
        // ISR and leadership first, like any lost broker. A broker fenced
        // earlier has left them too (the second step of its fencing may
        // still be pending): it must not come back into an ISR it fell
        // behind in.
        if self.is_alive(broker) {
            self.fence_broker(broker);
        }
        self.exit_fenced_from_isrs();
        let previous = self.image.brokers.get(&broker).cloned();
        let previous_dir = previous.as_ref().and_then(|i| i.directory_id);
        let lost = match (previous_dir, directory_id) {
            (Some(before), Some(now)) if before != now => Some((before, now)),
            _ => None,
        };
        // KIP-966: a broker that did not stop cleanly (killed, crashed, the
        // machine lost power) may have lost records it had not flushed; it
        // is no longer known to hold everything committed.
        let unclean_shutdown = previous
            .as_ref()
            .is_some_and(|i| previous_broker_epoch != Some(i.broker_epoch));
        let broker_epoch = self.image.cluster.next_broker_epoch;
        self.image.cluster.next_broker_epoch += 1;
        self.out
            .persist
            .push(Command::PersistCluster(self.image.cluster.clone()));
        let info = BrokerInfo {
            id: broker,
            host,
            port,
            rack,
            broker_epoch,
            fenced: false,
            in_controlled_shutdown: false,
            directory_id: directory_id.or(previous_dir),
            storage_lost: lost.is_some() || previous.as_ref().is_some_and(|i| i.storage_lost),
            storage_losses: previous.as_ref().map_or(0, |i| i.storage_losses)
                + u32::from(lost.is_some()),
            endpoints,
            software,
        };
        self.image.brokers.insert(broker, info.clone());
        self.out.persist.push(Command::PersistBroker(info));
        self.sessions.insert(broker, self.now_ms);
        // Back: a later loss starts its own grace period.
        self.lost_since.remove(&broker);
        self.out.publish = true;

        // Another directory: every replica it had is gone, whatever the ISR
        // and ELR said. It leaves both (even as their last member: electing
        // it would make the replicas with data truncate to nothing) and
        // earns its way back by catching up from a leader.
        if let Some((previous, current)) = lost {
            self.lost_storage.push(broker);
            self.note_storage_lost(broker);
            let held = self.partitions_where(|s| s.replicas.contains(&broker));
            self.out.notices.push(Command::BrokerStorageLost {
                broker,
                previous,
                current,
                replicas: held.len() as u32,
            });
            for (topic, p) in held {
                let mut next = self.state(&topic, p).clone();
                next.isr.retain(|b| *b != broker);
                next.elr.retain(|b| *b != broker);
                let unclean = self.unclean_enabled(&topic);
                self.commit_partition(&topic, p, next, unclean, Origin::Controller);
            }
        } else if unclean_shutdown {
            // Unless it is the last replica known to hold everything (no ISR,
            // no other ELR member): then it stays electable, as Kafka's
            // last-known-leader rule has it; without it the partition would
            // stay offline for good (every RF 1 partition after a kill -9).
            let others_eligible = |s: &crate::model::PartitionState| {
                !s.isr.is_empty() || s.elr.iter().any(|b| *b != broker)
            };
            for (topic, p) in
                self.partitions_where(|s| s.elr.contains(&broker) && others_eligible(s))
            {
                let mut next = self.state(&topic, p).clone();
                next.elr.retain(|b| *b != broker);
                let unclean_election = self.unclean_enabled(&topic);
                self.commit_partition(&topic, p, next, unclean_election, Origin::Controller);
            }
        }

        // Re-join every assigned partition as a follower. An offline
        // partition may now get a leader: this broker if it was the last
        // in-sync replica, or (unclean topics) any out-of-sync replica.
        for (topic, p) in self.partitions_where(|s| s.replicas.contains(&broker)) {
            let current = self.state(&topic, p).clone();
            let before = current.leader_epoch;
            let unclean = self.unclean_enabled(&topic);
            let after = self.commit_partition(&topic, p, current, unclean, Origin::Controller);
            // A new leader told every replica its role; otherwise it is
            // told here (a leaderless partition's replica then reports its
            // log for unclean recovery).
            if after.leader_epoch == before {
                self.notify_replica(&topic, p, broker);
            }
        }
        self.reply(Reply::BrokerRegistered {
            broker,
            result: Ok(broker_epoch),
        });
    }

    /// A live broker's new session: its address may have changed; its
    /// session starts again and it is told its role in each partition.
    fn on_session_resumed(
        &mut self,
        broker: BrokerId,
        host: String,
        port: u16,
        rack: Option<String>,
        endpoints: Vec<crate::model::Endpoint>,
        software: crate::model::BrokerSoftware,
    ) {
        let info = self
            .image
            .brokers
            .get_mut(&broker)
            .expect("checked by caller");
        if (
            &info.host,
            info.port,
            &info.rack,
            &info.endpoints,
            &info.software,
        ) != (&host, port, &rack, &endpoints, &software)
        {
            info.host = host;
            info.port = port;
            info.rack = rack;
            info.endpoints = endpoints;
            info.software = software;
            let info = info.clone();
            self.out.persist.push(Command::PersistBroker(info));
            self.out.publish = true;
        }
        self.sessions.insert(broker, self.now_ms);
        for (topic, p) in self.partitions_where(|s| s.replicas.contains(&broker)) {
            self.notify_replica(&topic, p, broker);
        }
    }

    /// Checks that a request comes from the current, live incarnation.
    pub(super) fn check_broker_epoch(
        &self,
        broker: BrokerId,
        broker_epoch: u64,
    ) -> Result<(), ControllerError> {
        match self.image.brokers.get(&broker) {
            None => Err(ControllerError::BrokerIdNotRegistered(broker)),
            Some(info) if info.fenced || info.broker_epoch != broker_epoch => {
                Err(ControllerError::StaleBrokerEpoch)
            }
            Some(_) => Ok(()),
        }
    }

    pub(super) fn on_heartbeat(&mut self, broker: BrokerId, broker_epoch: u64) {
        let result = self.check_broker_epoch(broker, broker_epoch);
        if result.is_ok() {
            self.sessions.insert(broker, self.now_ms);
        }
        self.reply(Reply::Heartbeat { broker, result });
    }

    /// Fences a broker (lost or restarted): it leaves every ISR it is in
    /// (except as a last member) and every partition it led gets a new
    /// leader.
    pub(super) fn fence_broker(&mut self, broker: BrokerId) {
        self.fence_brokers(&[broker]);
    }

    /// Fences several brokers at once. All are marked first, so no partition
    /// is handed to a broker that is about to be fenced in the same batch.
    pub(super) fn fence_brokers(&mut self, brokers: &[BrokerId]) {
        let mut fenced = Vec::new();
        for b in brokers {
            let Some(info) = self.image.brokers.get_mut(b) else {
                continue;
            };
            if info.fenced {
                continue;
            }
            info.fenced = true;
            info.in_controlled_shutdown = false;
            let info = info.clone();
            self.out.persist.push(Command::PersistBroker(info));
            self.sessions.remove(b);
            self.lost_since.insert(*b, self.now_ms);
            fenced.push(*b);
        }
        if fenced.is_empty() {
            return;
        }
        self.out.publish = true;
        // First step: what they led gets a new leader. They leave the
        // other ISRs in the second (`exit_fenced_from_isrs`).
        let led = self.partitions_by_topic_where(|s| fenced.contains(&s.leader));
        self.unfinished_fencing.extend(fenced.iter().copied());
        self.remove_from_isrs(led, &fenced);
    }

    /// Fenced brokers leave every ISR they are still in.
    pub(super) fn exit_fenced_from_isrs(&mut self) {
        if self.unfinished_fencing.is_empty() {
            return;
        }
        let fenced: Vec<BrokerId> = std::mem::take(&mut self.unfinished_fencing)
            .into_iter()
            .filter(|b| self.image.brokers.get(b).is_some_and(|i| i.fenced))
            .collect();
        if fenced.is_empty() {
            return;
        }
        let touched = self.partitions_by_topic_where(|s| s.isr.iter().any(|b| fenced.contains(b)));
        self.remove_from_isrs(touched, &fenced);
    }

    fn remove_from_isrs(&mut self, touched: Vec<(String, Vec<u32>)>, fenced: &[BrokerId]) {
        for (topic, partitions) in touched {
            let unclean = self.unclean_enabled(&topic);
            for p in partitions {
                let mut next = self.state(&topic, p).clone();
                // Leaving an ISR that is then below min.insync.replicas puts
                // them in the ELR (commit_partition), so they stay electable.
                next.isr.retain(|b| !fenced.contains(b));
                self.commit_partition(&topic, p, next, unclean, Origin::Controller);
            }
        }
    }

    pub(super) fn on_controlled_shutdown(&mut self, broker: BrokerId, broker_epoch: u64) {
        if let Err(e) = self.check_broker_epoch(broker, broker_epoch) {
            self.reply(Reply::ControlledShutdown {
                broker,
                result: Err(e),
            });
            return;
        }
        let info = self.image.brokers.get_mut(&broker).expect("checked above");
        if !info.in_controlled_shutdown {
            info.in_controlled_shutdown = true;
            let info = info.clone();
            self.out.persist.push(Command::PersistBroker(info));
            self.out.publish = true;
        }
        // Leadership moves to another in-sync replica; the broker leaves the
        // ISRs (into the ELR when the ISR is then below min.insync.replicas,
        // which keeps its data electable) and stops serving its replicas.
        for (topic, partitions) in self.partitions_by_topic_where(|s| s.replicas.contains(&broker))
        {
            let unclean = self.unclean_enabled(&topic);
            for p in partitions {
                let mut next = self.state(&topic, p).clone();
                let before = next.partition_epoch;
                next.isr.retain(|b| *b != broker);
                let after = self.commit_partition(&topic, p, next, unclean, Origin::Controller);
                if after.partition_epoch == before {
                    self.notify_replica(&topic, p, broker);
                }
            }
        }
        let result = match self.partitions_led_by(broker).is_empty() {
            true => Ok(()),
            false => Err(ControllerError::InvalidRequest(
                "broker still leads partitions".into(),
            )),
        };
        self.reply(Reply::ControlledShutdown { broker, result });
    }

    /// A heartbeat of `broker`'s current registration arrived at `at_ms`
    /// (before its event was handled): its session counts from then.
    pub fn note_contact(&mut self, broker: BrokerId, broker_epoch: u64, at_ms: u64) {
        let current = self
            .image
            .brokers
            .get(&broker)
            .is_some_and(|i| !i.fenced && i.broker_epoch == broker_epoch);
        if let (true, Some(last)) = (current, self.sessions.get_mut(&broker)) {
            *last = (*last).max(at_ms);
        }
    }

    pub(super) fn on_tick(&mut self) {
        let timeout = self.config.broker_session_timeout_ms;
        let expired: Vec<BrokerId> = self
            .sessions
            .iter()
            .filter(|(_, last)| self.now_ms.saturating_sub(**last) > timeout)
            .map(|(b, _)| *b)
            .collect();
        self.fence_brokers(&expired);
        self.heal_lost_brokers();
        if self.config.auto_leader_rebalance_enable {
            let last = self.last_rebalance_ms.unwrap_or(self.now_ms);
            if self.now_ms.saturating_sub(last) >= self.config.leader_imbalance_check_interval_ms {
                self.last_rebalance_ms = Some(self.now_ms);
                self.rebalance_leaders();
            }
        }
    }

    pub(super) fn on_allocate_producer_ids(&mut self, broker: BrokerId, broker_epoch: u64) {
        let result = self
            .check_broker_epoch(broker, broker_epoch)
            .and_then(|()| {
                producer_ids::allocate_block(
                    &mut self.image.cluster,
                    self.config.producer_id_block_size,
                )
            });
        if result.is_ok() {
            self.out
                .persist
                .push(Command::PersistCluster(self.image.cluster.clone()));
        }
        self.reply(Reply::AllocateProducerIds { broker, result });
    }
}
