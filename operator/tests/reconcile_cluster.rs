//! KafkaCluster reconcile against a scripted API server.

mod common;

use std::time::Duration;

use common::*;
use kube::runtime::controller::Action;
use serde_json::{json, Value};
use skein_crds::KafkaCluster;
use skein_operator::reconcile::kafka_cluster::{error_policy, reconcile_at, KIND};

const BASE: &str = "/apis/skein.dev/v1alpha1/namespaces/streaming";

fn cluster(spec: Value, generation: i64, status: Option<Value>) -> KafkaCluster {
    let mut obj = json!({
        "apiVersion": "skein.dev/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": NS, "uid": "0b1c2d3e-0000-4000-8000-000000000001", "generation": generation},
        "spec": spec,
    });
    if let Some(s) = status {
        obj["status"] = s;
    }
    serde_json::from_value(obj).unwrap()
}

fn topic_list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "skein.dev/v1alpha1", "kind": "TopicList", "metadata": {}, "items": items})
}

fn topic(name: &str, cluster: &str, rf: i32) -> Value {
    json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "Topic",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterRef": {"name": cluster}, "partitions": 3, "replicationFactor": rf},
    })
}

/// The six applies in their fixed order; the StatefulSet answers with `sts_status`.
fn applies(replicas: i64, sts_status: Value) -> Vec<Expect> {
    vec![
        Expect::apply(format!("/api/v1/namespaces/{NS}/configmaps/demo-config")).check(|b| {
            assert_eq!(b["kind"], "ConfigMap");
            assert!(b["data"]["server.properties"]
                .as_str()
                .unwrap()
                .contains("default.replication.factor="));
        }),
        Expect::apply(format!("/api/v1/namespaces/{NS}/services/demo-brokers")).check(|b| {
            assert_eq!(b["spec"]["clusterIP"], "None");
            assert_eq!(b["spec"]["publishNotReadyAddresses"], true);
        }),
        Expect::apply(format!("/api/v1/namespaces/{NS}/services/demo-bootstrap")),
        Expect::apply(format!(
            "/api/v1/namespaces/{NS}/serviceaccounts/demo-broker"
        )),
        Expect::apply(format!(
            "/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/demo"
        ))
        .check(|b| assert_eq!(b["spec"]["maxUnavailable"], 1)),
        Expect::apply(format!("/apis/apps/v1/namespaces/{NS}/statefulsets/demo"))
            .check(move |b| {
                assert_eq!(b["spec"]["replicas"], replicas);
                assert_eq!(b["spec"]["updateStrategy"]["type"], "OnDelete");
                assert_eq!(b["metadata"]["ownerReferences"][0]["kind"], "KafkaCluster");
                assert_eq!(b["metadata"]["ownerReferences"][0]["controller"], true);
            })
            .reply_with(move |b| {
                let mut sts = b.clone();
                sts["status"] = sts_status;
                sts
            }),
    ]
}

fn status_patch(check: impl FnOnce(&Value) + Send + 'static) -> Expect {
    Expect::apply(format!("{BASE}/kafkaclusters/demo/status"))
        .check(move |b| {
            assert_eq!(b["apiVersion"], "skein.dev/v1alpha1");
            assert_eq!(b["kind"], "KafkaCluster");
            check(&b["status"]);
        })
        // The API server answers with the whole object.
        .reply_with(|b| {
            json!({"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
                   "metadata": {"name": "demo", "namespace": NS}, "spec": {}, "status": b["status"]})
        })
}

fn event(type_: &'static str, reason: &'static str, note_contains: &'static str) -> Expect {
    Expect::new(
        http::Method::POST,
        format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"),
    )
    .check(move |b| {
        assert_eq!(b["type"], type_);
        assert_eq!(b["reason"], reason);
        let note = b["note"].as_str().unwrap_or_default();
        assert!(
            note.contains(note_contains),
            "event note {note:?} lacks {note_contains:?}"
        );
        assert_eq!(b["regarding"]["kind"], "KafkaCluster");
    })
}

#[tokio::test]
async fn create_applies_every_object_in_order_then_reports_reconciling() {
    let (ctx, server, _) = test_context();
    let kc = cluster(json!({"replicas": 3}), 1, None);
    let mut script = vec![Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![]))];
    script.extend(applies(3, json!({"replicas": 3, "readyReplicas": 1})));
    script.push(status_patch(|s| {
        assert_eq!(s["observedGeneration"], 1);
        assert_eq!(s["replicas"], 3);
        assert_eq!(s["readyReplicas"], 1);
        assert_eq!(s["bootstrap"], "demo-bootstrap.streaming.svc:9092");
        assert_eq!(
            s["selector"],
            "app.kubernetes.io/component=broker,app.kubernetes.io/instance=demo,app.kubernetes.io/name=skein"
        );
        let ready = condition(s, "Ready");
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "BrokersNotReady");
        assert_eq!(ready["message"], "1/3 brokers ready");
        assert_eq!(ready["observedGeneration"], 1);
        assert_eq!(condition(s, "Reconciling")["status"], "True");
        assert_eq!(condition(s, "Degraded")["status"], "False");
        // Fields owned by the cluster controller are never in our patch.
        assert!(s.get("underReplicatedPartitions").is_none());
        assert!(s.get("producerIdBlock").is_none());
    }));
    script.push(event("Normal", "Applied", "with 3 brokers"));
    let mock = server.run(script);
    let action = within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
}

#[tokio::test]
async fn all_brokers_ready_is_ready_and_a_seen_generation_sends_no_event() {
    let (ctx, server, _) = test_context();
    let status = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 1});
    let kc = cluster(json!({"replicas": 3}), 1, Some(status));
    let mut script = vec![Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![]))];
    script.extend(applies(3, json!({"replicas": 3, "readyReplicas": 3})));
    script.push(status_patch(|s| {
        let ready = condition(s, "Ready");
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["reason"], "AllBrokersReady");
        assert_eq!(condition(s, "Reconciling")["status"], "False");
    }));
    let mock = server.run(script);
    let action = within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
}

#[tokio::test]
async fn scaling_up_changes_the_statefulset_replicas() {
    let (ctx, server, _) = test_context();
    let status = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3});
    let kc = cluster(json!({"replicas": 5}), 2, Some(status));
    let mut script =
        vec![Expect::get(format!("{BASE}/topics"))
            .reply(topic_list(vec![topic("orders", "demo", 3)]))];
    script.extend(applies(5, json!({"replicas": 5, "readyReplicas": 3})));
    script.push(status_patch(|s| {
        assert_eq!(s["observedGeneration"], 2);
        assert_eq!(condition(s, "Ready")["message"], "3/5 brokers ready");
    }));
    script.push(event("Normal", "Applied", "scaled from 3 to 5 brokers"));
    let mock = server.run(script);
    within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;
}

#[tokio::test]
async fn scaling_below_a_topics_replication_factor_is_refused_with_a_condition() {
    let (ctx, server, _) = test_context();
    let status = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3});
    let kc = cluster(json!({"replicas": 2}), 2, Some(status));
    let topics = topic_list(vec![
        topic("orders", "demo", 3),
        topic("other", "elsewhere", 5),
    ]);
    let script = vec![
        Expect::get(format!("{BASE}/topics")).reply(topics),
        // Nothing is applied: straight to status.
        status_patch(|s| {
            let degraded = condition(s, "Degraded");
            assert_eq!(degraded["status"], "True");
            assert_eq!(degraded["reason"], "ReplicationFactorDoesNotFit");
            assert!(degraded["message"]
                .as_str()
                .unwrap()
                .contains("\"orders\" has replication factor 3"));
            assert_eq!(condition(s, "Ready")["status"], "False");
            assert_eq!(
                s["readyReplicas"], 3,
                "counts are kept from the last status"
            );
        }),
        event("Warning", "ReplicationFactorDoesNotFit", "orders"),
    ];
    let mock = server.run(script);
    let action = within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn invalid_config_gets_a_clear_reason_and_no_objects() {
    let (ctx, server, _) = test_context();
    let kc = cluster(json!({"replicas": 3, "config": {"node.id": "7"}}), 1, None);
    let script = vec![
        Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![])),
        status_patch(|s| {
            let degraded = condition(s, "Degraded");
            assert_eq!(degraded["reason"], "ReservedConfigKey");
            assert_eq!(
                degraded["message"],
                "spec.config sets \"node.id\", which the operator manages (it is the pod ordinal)"
            );
            assert_eq!(condition(s, "Reconciling")["status"], "False");
        }),
        event("Warning", "ReservedConfigKey", "node.id"),
    ];
    let mock = server.run(script);
    let action = within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn an_api_failure_is_an_error_counted_by_the_error_policy() {
    let (ctx, server, _) = test_context();
    let kc = cluster(json!({"replicas": 3}), 1, None);
    let script = vec![
        Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![])),
        Expect::apply(format!("/api/v1/namespaces/{NS}/configmaps/demo-config"))
            .fail(500, "InternalError"),
    ];
    let mock = server.run(script);
    let err = within(reconcile_at(&kc, &ctx, now_time()))
        .await
        .unwrap_err();
    finish(mock).await;
    assert!(
        err.to_string()
            .starts_with("applying ConfigMap demo-config"),
        "{err}"
    );
    let action = error_policy(std::sync::Arc::new(kc), &err, ctx.clone());
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    assert_eq!(
        ctx.metrics
            .failures
            .with_label_values(&[KIND, "apply"])
            .get(),
        1
    );
}
