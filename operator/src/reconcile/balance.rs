//! The balancer's step of a KafkaCluster reconcile: when every broker of
//! the spec is up and nothing moves, read each partition's bytes on disk
//! from the brokers (`skein_log_size_bytes` on their metrics port), plan
//! moves with [`skein_controller::balance`], show the plan in
//! `status.balance`, and run it once approved (`spec.balancer.approval`:
//! `Auto` after `planDelaySeconds`, `Manual` on the annotation
//! `skein.dev/approve-balance-plan: <plan id>`) as throttled reassignments.
//! A shown plan stays as it is while it still applies, so its id does not
//! change under an approval as partitions grow.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use skein_controller::balance::{self, Plan};
use skein_controller::scaling::{assignment, Assignment};
use skein_crds::{BalanceApproval, BalanceMove, BalanceStatus, BrokerBalance, KafkaCluster};
use tracing::{info, warn};

use super::brokers::Progress;
use super::desired_cluster::DesiredCluster;
use crate::broker_metrics;
use crate::cluster_controllers::ClusterController;

/// The annotation that approves a `Manual` plan.
pub const APPROVE: &str = "skein.dev/approve-balance-plan";
const PROPOSED: &str = "Proposed";
const RUNNING: &str = "Running";
/// Moves listed in the status (all are counted).
const LISTED: usize = 50;

/// What the step decided.
#[derive(Debug, Default)]
pub struct BalanceStep {
    /// `status.balance` to write (none: balanced, or the balancer is off).
    pub status: Option<BalanceStatus>,
    /// An Event to publish: reason and note.
    pub event: Option<(&'static str, String)>,
    /// The `Balanced` condition: balanced?, reason, message.
    pub condition: Option<(bool, &'static str, String)>,
    /// Come back this soon (a plan waiting for its delay).
    pub requeue: Option<Duration>,
    /// Moves running.
    pub progress: Option<Progress>,
}

/// What to do with a plan, given the one shown before.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// Show this plan (new, or replacing one that no longer applies).
    Propose,
    /// Keep showing the previous plan; check again after this long.
    Wait(Duration),
    /// Carry out the previous plan now.
    Run,
}

/// Decides between showing, waiting and running. `shown` is the plan in
/// the status, `now` and its `proposed_at` in seconds.
pub fn decide(
    kc: &KafkaCluster,
    shown: Option<&BalanceStatus>,
    plan_id: &str,
    still_applies: bool,
    now_s: i64,
) -> Decision {
    let Some(shown) = shown.filter(|s| s.state == PROPOSED) else {
        return Decision::Propose;
    };
    if shown.plan_id != plan_id && !still_applies {
        return Decision::Propose;
    }
    match kc.spec.balancer.approval {
        BalanceApproval::Manual => {
            let approved = kc
                .annotations()
                .get(APPROVE)
                .is_some_and(|v| v.trim() == shown.plan_id);
            if approved {
                Decision::Run
            } else {
                Decision::Wait(Duration::from_secs(30))
            }
        }
        BalanceApproval::Auto => {
            let since = shown
                .proposed_at
                .parse::<Timestamp>()
                .map(|t| t.as_second())
                .unwrap_or(now_s);
            let left = kc.spec.balancer.plan_delay_seconds - (now_s - since);
            if left <= 0 {
                Decision::Run
            } else {
                Decision::Wait(Duration::from_secs(left as u64))
            }
        }
    }
}

/// A short id for a plan: FNV-1a of its moves.
pub fn plan_id(moves: &[BalanceMove]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for m in moves {
        let kind = if m.leader { "L" } else { "" };
        let text = format!(
            "{}/{}:{}>{}{kind};",
            m.topic, m.partition, m.from_broker, m.to_broker
        );
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{:012x}", h & 0xffff_ffff_ffff)
}

/// Whether the moves of a shown plan can still be made (each replica still
/// where it was, each target free and up) and it was made for the brokers
/// there are now (a scale since voids it).
pub fn still_applies(shown: &BalanceStatus, asg: &Assignment, hosts: &[i32]) -> bool {
    let moves = &shown.moves;
    let planned_for: Vec<i32> = shown.brokers.iter().map(|b| b.id).collect();
    if planned_for != hosts || moves.is_empty() {
        return false;
    }
    // In order: a partition may move twice.
    let mut after: Assignment = BTreeMap::new();
    moves.iter().all(|m| {
        let key = (m.topic.clone(), m.partition);
        let Some(mut r) = after.get(&key).or_else(|| asg.get(&key)).cloned() else {
            return false;
        };
        let ok = hosts.contains(&m.to_broker)
            && if m.leader {
                r.first() == Some(&m.from_broker) && r.contains(&m.to_broker)
            } else {
                r.contains(&m.from_broker) && !r.contains(&m.to_broker)
            };
        balance::apply_move(&mut r, m.from_broker, m.to_broker, m.leader);
        after.insert(key, r);
        ok
    })
}

/// The status that shows `plan`.
pub fn plan_status(plan: &Plan, state: &str, proposed_at: String) -> BalanceStatus {
    let moves: Vec<BalanceMove> = plan
        .moves
        .iter()
        .map(|m| BalanceMove {
            topic: m.topic.clone(),
            partition: m.partition,
            from_broker: m.from,
            to_broker: m.to,
            bytes: m.bytes as i64,
            leader: m.leader,
        })
        .collect();
    BalanceStatus {
        plan_id: plan_id(&moves),
        state: state.to_string(),
        proposed_at,
        bytes_to_move: plan.bytes_to_move() as i64,
        move_count: moves.len() as i32,
        moves: moves.into_iter().take(LISTED).collect(),
        brokers: plan
            .before
            .iter()
            .map(|(id, bytes)| BrokerBalance {
                id: *id,
                bytes: *bytes as i64,
                bytes_after: plan.after.get(id).copied().unwrap_or(0) as i64,
                replicas_after: plan.replicas_after.get(id).copied().unwrap_or(0) as i32,
            })
            .collect(),
    }
}

/// The moves of a shown plan as replica lists (all of them: the status
/// lists only the first 50, so a plan with more is planned again from the
/// same inputs, and its id checked).
fn targets_of(shown: &BalanceStatus, plan: &Plan, asg: &Assignment) -> Option<Assignment> {
    let status = plan_status(plan, RUNNING, String::new());
    (status.plan_id == shown.plan_id)
        .then(|| plan.targets(asg))
        .or_else(|| {
            (shown.move_count as usize == shown.moves.len()).then(|| {
                let mut out: Assignment = BTreeMap::new();
                for m in &shown.moves {
                    let key = (m.topic.clone(), m.partition);
                    let r = out
                        .entry(key.clone())
                        .or_insert_with(|| asg.get(&key).cloned().unwrap_or_default());
                    balance::apply_move(r, m.from_broker, m.to_broker, m.leader);
                }
                out
            })
        })
}

/// The balancer's step; `None` from the caller's side when a scale, a move
/// or a restart is in progress (the plan in the status is kept then).
pub async fn balance_step(
    rt: &ClusterController,
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    now: Timestamp,
) -> BalanceStep {
    let spec = &kc.spec.balancer;
    let shown = kc.status.as_ref().and_then(|s| s.balance.as_ref());
    if !spec.enabled {
        return BalanceStep::default();
    }
    let view = rt.controller.view();
    let want = desired.replicas;
    let health = view.partition_health();
    if health.reassigning > 0 {
        // Ours or another's: keep what is shown until it ends.
        return BalanceStep {
            status: shown.cloned(),
            progress: shown.filter(|s| s.state == RUNNING).map(|s| Progress {
                reason: "Balancing",
                message: format!(
                    "balance plan {}: {} replica move(s), {} partition(s) still moving",
                    s.plan_id, s.move_count, health.reassigning
                ),
            }),
            ..Default::default()
        };
    }
    let hosts: BTreeMap<i32, Option<String>> = (0..want)
        .filter_map(|id| {
            view.brokers
                .get(&id)
                .filter(|b| b.alive)
                .map(|b| (id, b.rack.clone()))
        })
        .collect();
    if hosts.len() != want as usize {
        // A broker of the spec is missing: self-healing's time, not the
        // balancer's (brokers a scale-down removed do not count).
        return BalanceStep {
            status: shown.filter(|s| s.state == PROPOSED).cloned(),
            ..Default::default()
        };
    }
    let asg = assignment(&view);
    let sizes = match log_sizes(rt, want, kc.spec.listeners.metrics_port).await {
        Ok(s) => s,
        Err(e) => {
            warn!(cluster = %kc.name_any(), error = %e, "balancer: partition sizes unknown");
            return BalanceStep {
                status: shown.filter(|s| s.state == PROPOSED).cloned(),
                requeue: Some(Duration::from_secs(30)),
                ..Default::default()
            };
        }
    };
    let threshold = balance::Threshold {
        percent: spec.threshold_percent.clamp(1, 100) as u32,
        min_bytes: spec.minimum_imbalance_bytes.max(0) as u64,
    };
    let plan = balance::plan(
        &asg,
        &sizes,
        &hosts,
        threshold,
        spec.max_moves_per_plan.max(1) as usize,
    );
    if plan.moves.is_empty() {
        let was_running = shown.is_some_and(|s| s.state == RUNNING);
        let (reason, message) = if balance::within(&plan.before, threshold) {
            (
                "BrokersBalanced",
                format!(
                    "bytes on every broker within {}% (or {} MiB) of their mean",
                    spec.threshold_percent,
                    spec.minimum_imbalance_bytes >> 20
                ),
            )
        } else {
            (
                "NoBetterPlacement",
                "bytes per broker differ by more than the threshold, but no replica move would make it better (a few partitions hold most bytes)".to_string(),
            )
        };
        return BalanceStep {
            status: None,
            condition: Some((true, reason, message)),
            event: was_running.then(|| {
                (
                    "BalanceCompleted",
                    format!(
                        "balance plan {} completed",
                        shown.map_or("", |s| &s.plan_id)
                    ),
                )
            }),
            ..Default::default()
        };
    }
    let proposed = plan_status(&plan, PROPOSED, now.to_string());
    let host_ids: Vec<i32> = hosts.keys().copied().collect();
    let applies = shown.is_some_and(|s| still_applies(s, &asg, &host_ids));
    match decide(kc, shown, &proposed.plan_id, applies, now.as_second()) {
        Decision::Propose => {
            let note = format!(
                "balance plan {}: {} replica move(s), {} MiB to copy; {}",
                proposed.plan_id,
                proposed.move_count,
                proposed.bytes_to_move >> 20,
                match spec.approval {
                    BalanceApproval::Auto => format!("runs in {} s", spec.plan_delay_seconds),
                    BalanceApproval::Manual => format!(
                        "approve with kubectl annotate kafkacluster {} {APPROVE}={}",
                        kc.name_any(),
                        proposed.plan_id
                    ),
                }
            );
            info!(cluster = %kc.name_any(), "{note}");
            BalanceStep {
                requeue: Some(Duration::from_secs(
                    spec.plan_delay_seconds.clamp(1, 30) as u64
                )),
                condition: Some((false, "PlanProposed", note.clone())),
                event: Some(("BalancePlanProposed", note)),
                status: Some(proposed),
                progress: None,
            }
        }
        Decision::Wait(after) => {
            let shown = shown.cloned().expect("a shown plan");
            BalanceStep {
                condition: Some((
                    false,
                    "PlanProposed",
                    format!(
                        "balance plan {} ({} replica move(s)) waits for {}",
                        shown.plan_id,
                        shown.move_count,
                        match spec.approval {
                            BalanceApproval::Auto => "its delay".to_string(),
                            BalanceApproval::Manual => format!("the annotation {APPROVE}"),
                        }
                    ),
                )),
                status: Some(shown),
                requeue: Some(after.min(Duration::from_secs(30))),
                ..Default::default()
            }
        }
        Decision::Run => {
            let shown = shown.cloned().expect("a shown plan");
            let Some(targets) = targets_of(&shown, &plan, &asg) else {
                // Too long to list and planned differently now: show anew.
                return BalanceStep {
                    status: Some(proposed),
                    requeue: Some(Duration::from_secs(5)),
                    ..Default::default()
                };
            };
            let started = super::brokers::reassign(rt, &targets);
            let note = format!(
                "balance plan {}: {started} partition(s) moving, {} MiB to copy (throttled to {} B/s per broker)",
                shown.plan_id,
                shown.bytes_to_move >> 20,
                kc.spec.reassignment_throttle_bytes_per_second
            );
            info!(cluster = %kc.name_any(), "{note}");
            BalanceStep {
                status: Some(BalanceStatus {
                    state: RUNNING.to_string(),
                    ..shown
                }),
                condition: Some((false, "Balancing", note.clone())),
                event: Some(("BalanceStarted", note.clone())),
                progress: Some(Progress {
                    reason: "Balancing",
                    message: note,
                }),
                requeue: Some(Duration::from_secs(3)),
            }
        }
    }
}

/// Each partition's bytes on disk: the largest of its replicas, read from
/// every broker's `skein_log_size_bytes`.
async fn log_sizes(
    rt: &ClusterController,
    brokers: i32,
    port: i32,
) -> Result<BTreeMap<(String, i32), u64>, String> {
    let mut sizes = BTreeMap::new();
    for id in 0..brokers {
        let addr = rt.broker_host_port(id, port);
        let text = broker_metrics::get_metrics(&addr, Duration::from_secs(5)).await?;
        broker_metrics::merge_max(
            &mut sizes,
            broker_metrics::partition_gauge(&text, broker_metrics::LOG_SIZE),
        );
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(balancer: serde_json::Value, annotations: serde_json::Value) -> KafkaCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": "c", "namespace": "n", "annotations": annotations},
            "spec": {"replicas": 3, "storage": {"size": "1Gi"}, "balancer": balancer},
        }))
        .unwrap()
    }

    fn shown(id: &str, at: &str) -> BalanceStatus {
        BalanceStatus {
            plan_id: id.into(),
            state: PROPOSED.into(),
            proposed_at: at.into(),
            bytes_to_move: 0,
            moves: vec![],
            move_count: 1,
            brokers: vec![],
        }
    }

    #[test]
    fn an_auto_plan_runs_after_its_delay() {
        let kc = cluster(
            serde_json::json!({"planDelaySeconds": 30}),
            serde_json::json!({}),
        );
        let t0: Timestamp = "2026-12-05T00:00:00Z".parse().unwrap();
        let s = shown("abc", &t0.to_string());
        assert_eq!(
            decide(&kc, None, "abc", false, t0.as_second()),
            Decision::Propose
        );
        assert_eq!(
            decide(&kc, Some(&s), "abc", true, t0.as_second() + 10),
            Decision::Wait(Duration::from_secs(20))
        );
        assert_eq!(
            decide(&kc, Some(&s), "abc", true, t0.as_second() + 30),
            Decision::Run
        );
        // Another plan now, and the shown one no longer applies: shown anew.
        assert_eq!(
            decide(&kc, Some(&s), "def", false, t0.as_second() + 30),
            Decision::Propose
        );
        // Another plan now, but the shown one still applies: it stays.
        assert_eq!(
            decide(&kc, Some(&s), "def", true, t0.as_second() + 30),
            Decision::Run
        );
    }

    #[test]
    fn a_manual_plan_runs_only_with_its_id_in_the_annotation() {
        let t0: Timestamp = "2026-12-05T00:00:00Z".parse().unwrap();
        let s = shown("abc", &t0.to_string());
        let kc = cluster(
            serde_json::json!({"approval": "Manual"}),
            serde_json::json!({}),
        );
        assert!(matches!(
            decide(&kc, Some(&s), "abc", true, t0.as_second() + 999),
            Decision::Wait(_)
        ));
        let kc = cluster(
            serde_json::json!({"approval": "Manual"}),
            serde_json::json!({APPROVE: "old"}),
        );
        assert!(matches!(
            decide(&kc, Some(&s), "abc", true, t0.as_second()),
            Decision::Wait(_)
        ));
        let kc = cluster(
            serde_json::json!({"approval": "Manual"}),
            serde_json::json!({APPROVE: "abc"}),
        );
        assert_eq!(
            decide(&kc, Some(&s), "abc", true, t0.as_second()),
            Decision::Run
        );
    }

    #[test]
    fn a_plan_id_names_its_moves_and_a_moved_replica_voids_it() {
        let m = |from, to| BalanceMove {
            topic: "t".into(),
            partition: 0,
            from_broker: from,
            to_broker: to,
            bytes: 1,
            leader: false,
        };
        assert_eq!(plan_id(&[m(0, 3)]), plan_id(&[m(0, 3)]));
        assert_ne!(plan_id(&[m(0, 3)]), plan_id(&[m(0, 4)]));
        let asg: Assignment = [(("t".to_string(), 0), vec![0, 1])].into();
        let plan = |moves: Vec<BalanceMove>, brokers: &[i32]| BalanceStatus {
            moves,
            brokers: brokers
                .iter()
                .map(|id| BrokerBalance {
                    id: *id,
                    bytes: 0,
                    bytes_after: 0,
                    replicas_after: 0,
                })
                .collect(),
            ..shown("x", "")
        };
        let all = [0, 1, 2, 3];
        assert!(still_applies(&plan(vec![m(0, 3)], &all), &asg, &all));
        assert!(!still_applies(&plan(vec![m(0, 1)], &all), &asg, &all));
        assert!(!still_applies(&plan(vec![m(2, 3)], &all), &asg, &all));
        // Broker 3 went away, or was added since the plan was made.
        assert!(!still_applies(&plan(vec![m(0, 3)], &all), &asg, &[0, 1, 2]));
        assert!(!still_applies(&plan(vec![m(0, 2)], &[0, 1, 2]), &asg, &all));
    }
}
