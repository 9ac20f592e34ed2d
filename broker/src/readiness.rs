//! `GET /readyz`: whether this broker carries its share of the cluster.
//!
//! Liveness (`/healthz`) only says the process answers. Readiness is what a
//! rolling restart must wait for before it takes the next broker down, and
//! what a Service should route by:
//!
//! - the broker is in session with the controller: registered, its
//!   registration is the one the controller's view holds, not fenced, and
//!   its last heartbeat answered within three heartbeat intervals (a broker
//!   cut off from the controller, or just resumed from a pause, holds a
//!   view that may say it is in sync when it is not);
//! - it is not in a controlled shutdown (its leaderships are moving away);
//! - every partition it follows is back in the ISR, or within
//!   `readiness.replica.lag.max.messages` records of the high watermark its
//!   leader last sent. Partitions without a live leader are left out: no
//!   follower can catch up with them, and a broker that waits for them
//!   would hold every roll while the cluster needs it most. So are replicas
//!   a reassignment is adding here (a balancer's or self-healing's copy):
//!   the partition keeps its old replicas until the copy is in sync, and a
//!   broker taking one on is not less able to serve.
//!
//! Kafka has no readiness endpoint; Strimzi's KafkaRoller asks the broker's
//! state over JMX and the admin API for the same facts. Here the broker
//! answers from its own metadata image.

use std::fmt::Write;

use skein_controller::ClusterView;

use crate::broker::Broker;

/// How many not-caught-up partitions `/readyz` names (the count is whole).
const NAMED: usize = 10;

/// The answer of `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Why the broker is not ready; empty when it is.
    pub reasons: Vec<String>,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.reasons.is_empty()
    }

    /// The response body: `ready`, or one reason per line.
    pub fn body(&self) -> String {
        match self.is_ready() {
            true => "ready\n".into(),
            false => self.reasons.iter().fold(String::new(), |mut s, r| {
                let _ = writeln!(s, "{r}");
                s
            }),
        }
    }
}

/// What a follower replica reports for the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerState {
    /// Records behind the leader's high watermark.
    Lag(i64),
    /// Not opened here yet, or no answer from the leader of its epoch.
    Unknown,
}

/// Evaluates readiness from `view` (the controller's image this broker
/// holds): `epoch` is this broker's registration epoch (0: none),
/// `stopping` whether its controlled shutdown has begun, `follower` the
/// state of a partition it follows.
pub fn evaluate(
    view: &ClusterView,
    node_id: i32,
    epoch: u64,
    stopping: bool,
    max_lag: i64,
    follower: impl Fn(&str, i32) -> FollowerState,
) -> Readiness {
    let mut reasons = Vec::new();
    if stopping {
        reasons.push("in controlled shutdown".to_string());
    }
    match view.brokers.get(&node_id) {
        _ if epoch == 0 => reasons.push("not registered with the controller".into()),
        None => reasons.push("the controller's metadata does not list this broker yet".into()),
        Some(b) if b.broker_epoch != epoch => reasons.push(format!(
            "the controller's metadata has broker epoch {}, this broker registered with {epoch}",
            b.broker_epoch
        )),
        Some(b) if !b.alive => reasons.push("fenced by the controller".into()),
        Some(b) if b.in_controlled_shutdown && !stopping => {
            reasons.push("the controller has it in controlled shutdown".into())
        }
        Some(_) => {}
    }
    let mut behind = Vec::new();
    for (name, t) in &view.topics {
        for (i, p) in t.partitions.iter().enumerate() {
            let i = i as i32;
            if p.leader == node_id
                || p.leader < 0
                || !p.replicas.contains(&node_id)
                || p.isr.contains(&node_id)
                || p.adding_replicas.contains(&node_id)
                || !view.is_alive(p.leader)
            {
                continue;
            }
            match follower(name, i) {
                FollowerState::Lag(lag) if lag <= max_lag => {}
                FollowerState::Lag(lag) => behind.push(format!("{name}-{i} ({lag} behind)")),
                FollowerState::Unknown => behind.push(format!("{name}-{i} (not fetched yet)")),
            }
        }
    }
    if !behind.is_empty() {
        let more = behind.len().saturating_sub(NAMED);
        let mut s = format!(
            "{} followed partition(s) out of the ISR and more than {max_lag} record(s) behind: {}",
            behind.len(),
            behind[..behind.len().min(NAMED)].join(", ")
        );
        if more > 0 {
            let _ = write!(s, " and {more} more");
        }
        reasons.push(s);
    }
    Readiness { reasons }
}

/// This broker's readiness now.
pub fn check(broker: &Broker) -> Readiness {
    let view = broker.metadata.image();
    let silent_ms = crate::system::now_ms() - broker.metadata.last_contact_ms();
    let bound_ms = 3 * broker.config.broker_heartbeat_interval_ms.max(10) as i64;
    let stopping = broker
        .shut_down_controlled
        .load(std::sync::atomic::Ordering::SeqCst);
    let epoch = match broker.combined {
        // Its own controller: in session as long as it runs.
        true => view
            .brokers
            .get(&broker.config.node_id)
            .map_or(0, |b| b.broker_epoch),
        false => broker.metadata.broker_epoch(),
    };
    let mut r = evaluate(
        &view,
        broker.config.node_id,
        epoch,
        stopping,
        broker.config.readiness_replica_lag_max_messages,
        |topic, index| match broker.replicas.get(topic, index) {
            Some(p) => p
                .follower_lag()
                .map_or(FollowerState::Unknown, FollowerState::Lag),
            None => FollowerState::Unknown,
        },
    );
    if !broker.combined && epoch != 0 && silent_ms > bound_ms {
        r.reasons.insert(
            0,
            format!("no heartbeat answered by the controller for {silent_ms} ms"),
        );
    }
    r
}

#[cfg(test)]
#[path = "readiness_tests.rs"]
mod tests;
