//! KafkaCluster reconcile against a scripted API server.

mod common;

use std::time::Duration;

use common::*;
use kube::runtime::controller::Action;
use serde_json::{json, Value};
use skein_crds::KafkaCluster;
use skein_operator::reconcile::kafka_cluster::{error_policy, reconcile_at, KIND};

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

/// The read of the current StatefulSet (none yet), then the six applies in
/// their fixed order; the StatefulSet answers with `sts_status`.
fn applies(replicas: i64, sts_status: Value) -> Vec<Expect> {
    vec![
        Expect::get(format!("/apis/apps/v1/namespaces/{NS}/statefulsets/demo"))
            .fail(404, "NotFound"),
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
        Expect::get(format!("/apis/apps/v1/namespaces/{NS}/statefulsets/demo"))
            .fail(404, "NotFound"),
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

/// A StatefulSet as the API server has it, its data claim template at `size`.
fn existing_sts(size: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "demo", "namespace": NS},
        "spec": {
            "replicas": 3, "serviceName": "demo-brokers",
            "selector": {"matchLabels": {"app.kubernetes.io/instance": "demo"}},
            "template": {"metadata": {}, "spec": {"containers": []}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"resources": {"requests": {"storage": size}}}}],
        },
    })
}

fn pvc(ordinal: i32, requested: &str, capacity: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": format!("data-demo-{ordinal}"), "namespace": NS},
        "spec": {"resources": {"requests": {"storage": requested}}},
        "status": {"phase": "Bound", "capacity": {"storage": capacity}},
    })
}

fn pvc_list(items: Vec<Value>) -> Expect {
    Expect::get(format!("/api/v1/namespaces/{NS}/persistentvolumeclaims"))
        .query("labelSelector=app.kubernetes.io%2Fcomponent%3Dbroker%2Capp.kubernetes.io%2Finstance%3Ddemo%2Capp.kubernetes.io%2Fname%3Dskein")
        .reply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaimList", "metadata": {}, "items": items}))
}

/// The applies after a StatefulSet read that found one with a `template_size` claim.
fn applies_keeping(template_size: &'static str) -> Vec<Expect> {
    let mut script = applies(3, json!({"replicas": 3, "readyReplicas": 3}));
    script[0] = Expect::get(format!("/apis/apps/v1/namespaces/{NS}/statefulsets/demo"))
        .reply(existing_sts(template_size));
    let sts = script.pop().unwrap();
    script.push(sts.check(move |b| {
        assert_eq!(
            b["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            template_size,
            "the claim template changed (the API server refuses that)"
        );
    }));
    script
}

#[tokio::test]
async fn growing_storage_keeps_the_claim_template_and_asks_each_claim_for_the_new_size() {
    let (ctx, server, _) = test_context();
    let status = json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 3});
    let kc = cluster(
        json!({"replicas": 3, "storage": {"size": "128Mi"}}),
        2,
        Some(status),
    );
    let mut script = vec![Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![]))];
    script.extend(applies_keeping("64Mi"));
    script.push(pvc_list(vec![
        pvc(0, "64Mi", "64Mi"),
        pvc(1, "128Mi", "64Mi"), // asked already, not there yet
        pvc(2, "64Mi", "64Mi"),
        pvc(3, "64Mi", "64Mi"), // a scaled-away broker's claim: left alone
    ]));
    for ordinal in [0, 2] {
        script.push(
            Expect::new(
                http::Method::PATCH,
                format!("/api/v1/namespaces/{NS}/persistentvolumeclaims/data-demo-{ordinal}"),
            )
            .check(|b| assert_eq!(b["spec"]["resources"]["requests"]["storage"], "128Mi")),
        );
    }
    script.push(event(
        "Normal",
        "ExpandingVolume",
        "requesting 128Mi for data-demo-0, data-demo-2",
    ));
    script.push(status_patch(|s| {
        let resizing = condition(s, "Resizing");
        assert_eq!(resizing["status"], "True");
        assert_eq!(resizing["reason"], "ResizingVolumes");
        assert_eq!(resizing["message"], "0 of 3 volumes have 128Mi");
        assert_eq!(
            condition(s, "Ready")["status"],
            "True",
            "brokers serve while volumes grow"
        );
    }));
    let mock = server.run(script);
    let action = within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(3)));
}

#[tokio::test]
async fn volumes_at_the_new_size_end_the_resize_and_a_refusal_is_degraded() {
    // Every claim has its new size: Resizing=False, one VolumesResized event.
    let (ctx, server, _) = test_context();
    let resizing = json!([{"type": "Resizing", "status": "True", "reason": "ResizingVolumes",
        "message": "", "lastTransitionTime": "2023-11-14T22:13:20Z"}]);
    let status =
        json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "conditions": resizing});
    let kc = cluster(
        json!({"replicas": 3, "storage": {"size": "128Mi"}}),
        2,
        Some(status.clone()),
    );
    let mut script = vec![Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![]))];
    script.extend(applies_keeping("64Mi"));
    script.push(pvc_list(
        (0..3).map(|o| pvc(o, "128Mi", "134217728")).collect(),
    ));
    script.push(event(
        "Normal",
        "VolumesResized",
        "all 3 broker volumes have 128Mi",
    ));
    script.push(status_patch(|s| {
        let resizing = condition(s, "Resizing");
        assert_eq!(resizing["status"], "False");
        assert_eq!(resizing["reason"], "VolumesAtSize");
        assert_eq!(condition(s, "Degraded")["status"], "False");
    }));
    let mock = server.run(script);
    within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;

    // A claim its StorageClass may not grow: Degraded with the API server's reason.
    let (ctx, server, _) = test_context();
    let kc = cluster(
        json!({"replicas": 3, "storage": {"size": "256Mi"}}),
        3,
        Some(status),
    );
    let mut script = vec![Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![]))];
    script.extend(applies_keeping("64Mi"));
    script.push(pvc_list((0..3).map(|o| pvc(o, "128Mi", "128Mi")).collect()));
    for ordinal in 0..3 {
        script.push(
            Expect::new(
                http::Method::PATCH,
                format!("/api/v1/namespaces/{NS}/persistentvolumeclaims/data-demo-{ordinal}"),
            )
            .fail(403, "Forbidden"),
        );
    }
    script.push(event("Warning", "VolumeExpansionRefused", "data-demo-0"));
    script.push(status_patch(|s| {
        let resizing = condition(s, "Resizing");
        assert_eq!(resizing["status"], "False");
        assert_eq!(resizing["reason"], "VolumeExpansionRefused");
        let degraded = condition(s, "Degraded");
        assert_eq!(degraded["status"], "True");
        assert_eq!(degraded["reason"], "VolumeExpansionRefused");
    }));
    script.push(event("Normal", "Applied", "3 brokers"));
    let mock = server.run(script);
    within(reconcile_at(&kc, &ctx, now_time())).await.unwrap();
    finish(mock).await;
}

const UID: &str = "0b1c2d3e-0000-4000-8000-000000000001";

fn tls_cluster() -> KafkaCluster {
    cluster(
        json!({"replicas": 1, "listeners": {"clients": [
            {"name": "secure", "port": 9093, "type": "internal", "tls": true}]}}),
        1,
        None,
    )
}

fn broker_pods() -> Expect {
    Expect::get(format!("/api/v1/namespaces/{NS}/pods"))
        .reply(json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}))
}

/// A Secret of the cluster's CA name made by a KafkaUser of that name (as an
/// operator before issue #41 would have written it) is neither read as the
/// CA nor overwritten: the cluster is refused with a condition naming it and
/// its owner, and looks again later.
#[tokio::test]
async fn a_ca_secret_someone_else_owns_is_neither_used_nor_overwritten() {
    let (ctx, server, _) = test_context();
    let foreign = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "demo-cluster-ca", "namespace": NS, "resourceVersion": "4",
            "ownerReferences": [{"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaUser",
                "name": "demo-cluster-ca", "uid": "a-user", "controller": true}]},
        "data": {"password": "c2VjcmV0"},
    });
    let script = vec![
        Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![])),
        broker_pods(),
        Expect::get(format!("/api/v1/namespaces/{NS}/secrets/demo-cluster-ca")).reply(foreign),
        status_patch(|s| {
            let degraded = condition(s, "Degraded");
            assert_eq!(degraded["status"], "True");
            assert_eq!(degraded["reason"], "SecretOwnedByAnother");
            let msg = degraded["message"].as_str().unwrap();
            assert!(
                msg.contains("Secret demo-cluster-ca") && msg.contains("KafkaUser/demo-cluster-ca"),
                "{msg}"
            );
            assert_eq!(condition(s, "Ready")["status"], "False");
        }),
        event("Warning", "SecretOwnedByAnother", "demo-cluster-ca"),
    ];
    let mock = server.run(script);
    let action = within(reconcile_at(&tls_cluster(), &ctx, now_time()))
        .await
        .unwrap();
    finish(mock).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
}

/// A new object of the cluster: created whole, content and all (a
/// concurrent creation makes the create fail instead of the object being
/// taken over, and nobody ever sees it without its content).
fn created_whole(
    plural: &str,
    name: &'static str,
    check: impl FnOnce(&Value) + Send + 'static,
) -> Vec<Expect> {
    let collection = format!("/api/v1/namespaces/{NS}/{plural}");
    vec![
        Expect::get(format!("{collection}/{name}")).fail(404, "NotFound"),
        Expect::new(http::Method::POST, collection.clone())
            .query(FIELD_MANAGER_QUERY)
            .check(move |b| {
                assert_eq!(b["metadata"]["name"], name);
                assert_eq!(b["metadata"]["ownerReferences"][0]["uid"], UID);
                assert_eq!(b["metadata"]["ownerReferences"][0]["controller"], true);
                check(b);
            })
            .reply_with(|b| {
                let mut created = b.clone();
                created["metadata"]["resourceVersion"] = json!("41");
                created
            }),
    ]
}

#[tokio::test]
async fn a_tls_clusters_secrets_are_created_whole() {
    let (ctx, server, _) = test_context();
    let mut script = vec![
        Expect::get(format!("{BASE}/topics")).reply(topic_list(vec![])),
        broker_pods(),
    ];
    let keys = |want: &'static [&'static str]| {
        move |b: &Value| {
            let mut have: Vec<&str> = b["data"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| k.as_str())
                .collect();
            have.sort();
            assert_eq!(have, want);
        }
    };
    script.extend(created_whole(
        "secrets",
        "demo-cluster-ca",
        keys(&["ca.crt", "ca.key"]),
    ));
    script.extend(created_whole(
        "secrets",
        "demo-clients-ca",
        keys(&["ca.crt", "ca.key"]),
    ));
    script.extend(created_whole(
        "secrets",
        "demo-cluster-ca-cert",
        keys(&["ca.crt"]),
    ));
    script.extend(created_whole(
        "configmaps",
        "demo-cluster-ca-cert",
        keys(&["ca.crt"]),
    ));
    script.extend(created_whole(
        "secrets",
        "demo-listener-tls",
        keys(&["broker-keystore.pem", "ca.crt", "clients-ca.crt"]),
    ));
    script.extend(applies(1, json!({"replicas": 1, "readyReplicas": 0})));
    script.push(status_patch(|s| {
        assert_eq!(s["certificateAuthorities"].as_array().unwrap().len(), 2);
    }));
    script.push(event("Normal", "Applied", "with 1 brokers"));
    let mock = server.run(script);
    within(reconcile_at(&tls_cluster(), &ctx, now_time()))
        .await
        .unwrap();
    finish(mock).await;
}
