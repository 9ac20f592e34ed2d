//! Topic reconcile and its finalizer against a scripted API server.

mod common;

use std::sync::Arc;

use common::*;
use http::Method;
use kube::runtime::controller::Action;
use serde_json::{json, Value};
use skein_crds::Topic;
use skein_operator::reconcile::topic::{reconcile_at, TOPIC_FINALIZER};

fn topic(rf: i32, finalized: bool, deleted_secs_ago: Option<i64>) -> Topic {
    let mut meta = json!({"name": "orders", "namespace": NS, "uid": "7e57-0001", "generation": 1});
    if finalized {
        meta["finalizers"] = json!([TOPIC_FINALIZER]);
    }
    if let Some(ago) = deleted_secs_ago {
        let at = now() - k8s_openapi::jiff::SignedDuration::from_secs(ago);
        meta["deletionTimestamp"] = json!(at.to_string());
    }
    serde_json::from_value(json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "Topic", "metadata": meta,
        "spec": {"clusterRef": {"name": "demo"}, "partitions": 6, "replicationFactor": rf,
                 "config": {"retention.ms": "86400000", "cleanup.policy": "delete"}},
    }))
    .unwrap()
}

fn cluster_json() -> Value {
    json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": NS, "uid": "c1"},
        "spec": {"replicas": 3},
    })
}

fn get_cluster() -> Expect {
    Expect::get(format!("{BASE}/kafkaclusters/demo")).reply(cluster_json())
}

fn status_patch(check: impl FnOnce(&Value) + Send + 'static) -> Expect {
    Expect::apply(format!("{BASE}/topics/orders/status"))
        .check(move |b| {
            assert_eq!(b["kind"], "Topic");
            check(&b["status"]);
        })
        // The API server answers with the whole object.
        .reply_with(|b| {
            let mut t = serde_json::to_value(topic(3, true, None)).unwrap();
            t["status"] = b["status"].clone();
            t
        })
}

fn event(type_: &'static str, reason: &'static str) -> Expect {
    Expect::new(
        Method::POST,
        format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"),
    )
    .check(move |b| {
        assert_eq!(b["type"], type_);
        assert_eq!(b["reason"], reason);
        assert_eq!(b["regarding"]["kind"], "Topic");
    })
}

/// The finalizer's JSON patch that drops our finalizer.
fn finalizer_removed(t: &Topic) -> Expect {
    let mut released = t.clone();
    released.metadata.finalizers = None;
    let reply = serde_json::to_value(&released).unwrap();
    Expect::new(Method::PATCH, format!("{BASE}/topics/orders"))
        .check(|b| {
            let ops = b.as_array().expect("a JSON patch");
            assert!(ops.iter().any(|op| op["op"] == "remove"), "{b}");
        })
        .reply(reply)
}

#[tokio::test]
async fn a_new_topic_first_gets_the_finalizer() {
    let (ctx, server, _) = test_context();
    let t = topic(3, false, None);
    let mut finalized = t.clone();
    finalized.metadata.finalizers = Some(vec![TOPIC_FINALIZER.into()]);
    let script = vec![Expect::new(Method::PATCH, format!("{BASE}/topics/orders"))
        .check(|b| {
            let ops = b.as_array().expect("a JSON patch");
            assert!(
                ops.iter()
                    .any(|op| op["op"] == "add" && op["value"] == json!([TOPIC_FINALIZER])),
                "{b}"
            );
        })
        .reply(serde_json::to_value(&finalized).unwrap())];
    let mock = server.run(script);
    let action = within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn an_accepted_topic_waits_for_placement() {
    let (ctx, server, _) = test_context();
    let t = topic(3, true, None);
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            assert_eq!(s["observedGeneration"], 1);
            let ready = condition(s, "Ready");
            assert_eq!(ready["status"], "False");
            assert_eq!(ready["reason"], "AwaitingPlacement");
            assert_eq!(
                ready["message"],
                "0/6 partition(s) placed by the cluster controller"
            );
            assert_eq!(condition(s, "Reconciling")["status"], "True");
            assert!(
                s.get("partitions").is_none(),
                "partitions belong to the cluster controller"
            );
        }),
        event("Normal", "Accepted"),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
}

#[tokio::test]
async fn a_topic_placed_by_the_controller_is_ready() {
    let (ctx, server, _) = test_context();
    let mut t = topic(3, true, None);
    t.spec.partitions = 2;
    t.status = Some(serde_json::from_value(json!({
        "observedGeneration": 1,
        "partitions": [
            {"partition": 0, "leader": 1, "replicas": [1, 2, 0], "isr": [1, 2, 0], "leaderEpoch": 0},
            {"partition": 1, "leader": 2, "replicas": [2, 0, 1], "isr": [2, 0, 1], "leaderEpoch": 3},
        ],
    })).unwrap());
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            assert_eq!(condition(s, "Ready")["status"], "True");
            assert_eq!(condition(s, "Ready")["reason"], "PartitionsOnline");
            assert_eq!(condition(s, "Degraded")["status"], "False");
        }),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
}

#[tokio::test]
async fn a_replication_factor_larger_than_the_cluster_is_refused() {
    let (ctx, server, _) = test_context();
    let t = topic(5, true, None);
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            let degraded = condition(s, "Degraded");
            assert_eq!(degraded["status"], "True");
            assert_eq!(degraded["reason"], "ReplicationFactorTooLarge");
            assert_eq!(
                degraded["message"],
                "replication factor 5 is more than the 3 brokers of cluster \"demo\""
            );
        }),
        event("Warning", "ReplicationFactorTooLarge"),
    ];
    let mock = server.run(script);
    let action = within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn a_missing_cluster_is_reported() {
    let (ctx, server, _) = test_context();
    let t = topic(3, true, None);
    let script = vec![
        Expect::get(format!("{BASE}/kafkaclusters/demo")).fail(404, "NotFound"),
        status_patch(|s| assert_eq!(condition(s, "Ready")["reason"], "ClusterNotFound")),
        event("Warning", "ClusterNotFound"),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
}

#[tokio::test]
async fn deleting_removes_the_topic_through_the_clusters_controller_then_the_finalizer() {
    let (ctx, server, remover) = test_context();
    let t = topic(3, true, Some(1));
    let script = vec![
        get_cluster(),
        event("Normal", "TopicDeleted"),
        finalizer_removed(&t),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
    assert_eq!(
        *remover.calls.lock().unwrap(),
        vec![("streaming/demo".to_string(), "orders".to_string())]
    );
}

#[tokio::test]
async fn deleting_when_the_cluster_is_gone_releases_at_once() {
    let (ctx, server, remover) = test_context();
    let t = topic(3, true, Some(1));
    let script = vec![
        Expect::get(format!("{BASE}/kafkaclusters/demo")).fail(404, "NotFound"),
        event("Normal", "ClusterGone"),
        finalizer_removed(&t),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
    assert!(remover.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_unreachable_cluster_is_retried_within_the_grace_period() {
    let (ctx, server, remover) = test_context();
    *remover.fail_with.lock().unwrap() =
        Some("no controller runs for cluster streaming/demo".into());
    let t = topic(3, true, Some(10));
    let mock = server.run(vec![get_cluster()]);
    let err = within(reconcile_at(Arc::new(t), ctx, now()))
        .await
        .unwrap_err();
    finish(mock).await;
    assert_eq!(err.metric_label(), "topic_removal");
    assert!(err.to_string().contains("no controller runs"), "{err}");
}

#[tokio::test]
async fn an_unreachable_cluster_never_blocks_deletion_past_the_grace_period() {
    let (ctx, server, remover) = test_context();
    *remover.fail_with.lock().unwrap() =
        Some("no controller runs for cluster streaming/demo".into());
    let t = topic(3, true, Some(3600));
    let script = vec![
        get_cluster(),
        event("Warning", "TopicDataNotRemoved"),
        finalizer_removed(&t),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
}

/// A Topic at replication factor 3 (generation 2, the change not yet
/// looked at) whose mirrored status has these partitions and conditions.
fn changed_topic(partitions: Value, conditions: Value, observed: i64) -> Topic {
    let mut t = topic(3, true, None);
    t.metadata.generation = Some(2);
    t.spec.partitions = partitions.as_array().unwrap().len() as i32;
    t.status = Some(
        serde_json::from_value(json!({
            "observedGeneration": observed, "partitions": partitions, "conditions": conditions,
        }))
        .unwrap(),
    );
    t
}

#[tokio::test]
async fn a_topic_changing_its_replication_factor_is_reconciling_until_every_partition_has_it() {
    let (ctx, server, _) = test_context();
    let t = changed_topic(
        json!([
            // Not reassigned yet (the controller's placement is older).
            {"partition": 0, "leader": 1, "replicas": [1], "isr": [1], "leaderEpoch": 0},
            // Two new replicas catching up.
            {"partition": 1, "leader": 2, "replicas": [2, 0, 1], "isr": [2], "leaderEpoch": 0,
             "addingReplicas": [0, 1]},
            // Done.
            {"partition": 2, "leader": 0, "replicas": [0, 1, 2], "isr": [0, 1, 2], "leaderEpoch": 0},
        ]),
        json!([]),
        1,
    );
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            assert_eq!(s["observedGeneration"], 2);
            let ready = condition(s, "Ready");
            assert_eq!(ready["status"], "False");
            assert_eq!(ready["reason"], "ReplicationFactorChanging");
            let msg = ready["message"].as_str().unwrap();
            assert!(
                msg.starts_with("2/3 partition(s) being reassigned to replication factor 3"),
                "{msg}"
            );
            let reconciling = condition(s, "Reconciling");
            assert_eq!(reconciling["status"], "True");
            assert_eq!(reconciling["reason"], "ReplicationFactorChanging");
            assert_eq!(condition(s, "Degraded")["status"], "False");
        }),
        event("Normal", "Accepted"),
    ];
    let mock = server.run(script);
    let action = within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
    assert_eq!(
        action,
        Action::requeue(std::time::Duration::from_secs(30)),
        "looked at again soon"
    );
}

#[tokio::test]
async fn a_shrink_waiting_for_the_replicas_that_stay_is_still_changing() {
    let (ctx, server, _) = test_context();
    let mut t = changed_topic(
        json!([
            {"partition": 0, "leader": 1, "replicas": [1, 2, 0], "isr": [1], "leaderEpoch": 0,
             "removingReplicas": [0]},
        ]),
        json!([]),
        2,
    );
    t.spec.replication_factor = 2;
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            assert_eq!(condition(s, "Ready")["reason"], "ReplicationFactorChanging");
            assert_eq!(condition(s, "Ready")["status"], "False");
        }),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
}

#[tokio::test]
async fn a_replica_move_that_keeps_the_factor_leaves_the_topic_ready() {
    let (ctx, server, _) = test_context();
    // A scale-up filling a new broker: 3 replaces 0, still three replicas.
    let t = changed_topic(
        json!([
            {"partition": 0, "leader": 1, "replicas": [3, 1, 2, 0], "isr": [1, 2, 0], "leaderEpoch": 0,
             "addingReplicas": [3], "removingReplicas": [0]},
        ]),
        json!([]),
        2,
    );
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            assert_eq!(condition(s, "Ready")["status"], "True");
            assert_eq!(condition(s, "Ready")["reason"], "PartitionsOnline");
        }),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
}

#[tokio::test]
async fn the_end_of_a_replication_factor_change_is_ready_with_an_event() {
    let (ctx, server, _) = test_context();
    let was = json!({"type": "Ready", "status": "False", "reason": "ReplicationFactorChanging",
                     "message": "1/1 partition(s) being reassigned", "observedGeneration": 2,
                     "lastTransitionTime": "2023-11-14T22:00:00Z"});
    let t = changed_topic(
        json!([
            {"partition": 0, "leader": 1, "replicas": [1, 2, 0], "isr": [1, 2, 0], "leaderEpoch": 1},
        ]),
        json!([was]),
        2,
    );
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            assert_eq!(condition(s, "Ready")["status"], "True");
            assert_eq!(condition(s, "Reconciling")["status"], "False");
        }),
        event("Normal", "ReplicationFactorChanged"),
    ];
    let mock = server.run(script);
    within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
}

#[tokio::test]
async fn a_replication_factor_below_one_is_refused() {
    let (ctx, server, _) = test_context();
    let t = topic(0, true, None);
    let script = vec![
        get_cluster(),
        status_patch(|s| {
            let degraded = condition(s, "Degraded");
            assert_eq!(degraded["status"], "True");
            assert_eq!(degraded["reason"], "ReplicationFactorTooSmall");
        }),
        event("Warning", "ReplicationFactorTooSmall"),
    ];
    let mock = server.run(script);
    let action = within(reconcile_at(Arc::new(t), ctx, now())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::await_change());
}
