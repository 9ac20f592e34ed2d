//! Single steps of the KafkaCluster reconcile, each run alone against a
//! scripted API server (or none, for the pure ones): a step sends only its
//! own requests, reads what earlier steps found from `Found`, and leaves its
//! part there.

mod common;

use std::time::Duration;

use common::*;
use kube::runtime::controller::Action;
use serde_json::json;
use skein_crds::Topic;
use skein_operator::manifests::cluster_objects;
use skein_operator::reconcile::brokers::Progress;
use skein_operator::reconcile::kafka_cluster::report::{cluster_status, requeue};
use skein_operator::reconcile::kafka_cluster::{Cx, Found, Outcome, Step};
use skein_operator::status::cluster_applied;

fn topic(name: &str, rf: i32) -> Topic {
    serde_json::from_value(json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "Topic",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterRef": {"name": "demo"}, "partitions": 3, "replicationFactor": rf},
    }))
    .unwrap()
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
    })
}

#[tokio::test]
async fn validate_alone_refuses_from_the_topics_an_earlier_step_found() {
    let (ctx, server, _) = test_context();
    let status = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3});
    let kc = cluster(json!({"replicas": 2}), 2, Some(status));
    let cx = Cx::new(&kc, &ctx, now_time()).unwrap();
    // The Topics step's part, filled by hand: no list request is sent.
    let mut found = Found {
        topics: vec![topic("orders", 3)],
        ..Found::default()
    };
    let mock = server.run(vec![
        Expect::apply(format!("{BASE}/kafkaclusters/demo/status")).check(|b| {
            let degraded = condition(&b["status"], "Degraded");
            assert_eq!(degraded["reason"], "ReplicationFactorDoesNotFit");
        })
        .reply_with(|b| {
            json!({"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
                   "metadata": {"name": "demo", "namespace": NS}, "spec": {}, "status": b["status"]})
        }),
        event("Warning", "ReplicationFactorDoesNotFit", "orders"),
    ]);
    let outcome = within(Step::Validate.run(&cx, &mut found)).await.unwrap();
    finish(mock).await;
    assert_eq!(outcome, Outcome::Done(Action::await_change()));
}

#[tokio::test]
async fn validate_alone_lets_a_fitting_spec_continue_without_a_request() {
    let (ctx, server, _) = test_context();
    let kc = cluster(json!({"replicas": 3}), 1, None);
    let cx = Cx::new(&kc, &ctx, now_time()).unwrap();
    let mut found = Found {
        topics: vec![topic("orders", 3)],
        ..Found::default()
    };
    let mock = server.run(vec![]);
    let outcome = within(Step::Validate.run(&cx, &mut found)).await.unwrap();
    finish(mock).await;
    assert_eq!(outcome, Outcome::Continue);
}

#[tokio::test]
async fn apply_alone_writes_the_built_objects_in_their_fixed_order() {
    let (ctx, server, _) = test_context();
    let kc = cluster(json!({"replicas": 3}), 1, None);
    let cx = Cx::new(&kc, &ctx, now_time()).unwrap();
    let mut objects = cluster_objects(&kc, &ctx.options, &[]);
    // What the Scale step decided (a drain keeps the old size).
    objects.statefulset.spec.as_mut().unwrap().replicas = Some(5);
    let mut found = Found {
        objects: Some(objects),
        ..Found::default()
    };
    let mock = server.run(vec![
        Expect::apply(format!("/api/v1/namespaces/{NS}/configmaps/demo-config")),
        Expect::apply(format!("/api/v1/namespaces/{NS}/services/demo-brokers")),
        Expect::apply(format!("/api/v1/namespaces/{NS}/services/demo-bootstrap")),
        Expect::apply(format!(
            "/api/v1/namespaces/{NS}/serviceaccounts/demo-broker"
        )),
        Expect::apply(format!(
            "/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/demo"
        )),
        Expect::apply(format!("/apis/apps/v1/namespaces/{NS}/statefulsets/demo"))
            .check(|b| assert_eq!(b["spec"]["replicas"], 5))
            .reply_with(|b| {
                let mut sts = b.clone();
                sts["status"] = json!({"replicas": 5, "readyReplicas": 4});
                sts
            }),
    ]);
    let outcome = within(Step::Apply.run(&cx, &mut found)).await.unwrap();
    finish(mock).await;
    assert_eq!(outcome, Outcome::Continue);
    let applied = found.applied_sts.expect("the applied StatefulSet is kept");
    assert_eq!(applied.status.unwrap().ready_replicas, Some(4));
}

#[tokio::test]
async fn events_alone_say_once_per_generation_how_far_the_cluster_scaled() {
    let status = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3});

    let (ctx, server, _) = test_context();
    let kc = cluster(json!({"replicas": 5}), 2, Some(status.clone()));
    let cx = Cx::new(&kc, &ctx, now_time()).unwrap();
    let mock = server.run(vec![event(
        "Normal",
        "Applied",
        "scaled from 3 to 5 brokers",
    )]);
    let outcome = within(Step::Events.run(&cx, &mut Found::default()))
        .await
        .unwrap();
    finish(mock).await;
    assert_eq!(outcome, Outcome::Continue);

    // The same generation again: nothing to say.
    let (ctx, server, _) = test_context();
    let kc = cluster(json!({"replicas": 5}), 1, Some(status));
    let cx = Cx::new(&kc, &ctx, now_time()).unwrap();
    let mock = server.run(vec![]);
    within(Step::Events.run(&cx, &mut Found::default()))
        .await
        .unwrap();
    finish(mock).await;
}

#[test]
fn the_status_reports_a_steps_progress_and_the_requeue_follows_it() {
    let kc = cluster(json!({"replicas": 3}), 1, None);
    let names = skein_operator::manifests::ClusterNames::of(&kc);
    let desired = skein_operator::reconcile::desired_cluster::DesiredCluster::of(&kc);
    let sts: k8s_openapi::api::apps::v1::StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "demo"},
        "status": {"replicas": 3, "readyReplicas": 3},
    }))
    .unwrap();
    let mut found = Found {
        applied_sts: Some(sts),
        ..Found::default()
    };

    // Every broker ready and nothing in progress: Ready, back in 5 minutes.
    let status = cluster_status(&kc, &names, &desired, &found, "img", now_time());
    assert_eq!(
        status.conditions,
        cluster_applied(
            &kc,
            &desired,
            found.applied_sts.as_ref().unwrap().status.as_ref(),
            now_time()
        )
        .conditions
    );
    found.status = Some(status);
    assert_eq!(
        requeue(&desired, &found),
        Action::requeue(Duration::from_secs(300))
    );

    // A drain in progress: not Ready, Reconciling for its reason, back in 3 s.
    found.progress = Some(Progress {
        reason: "DrainingBrokers",
        message: "moving replicas off broker(s) 3..4".into(),
    });
    let status = cluster_status(&kc, &names, &desired, &found, "img", now_time());
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "DrainingBrokers")
    );
    let reconciling = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Reconciling")
        .unwrap();
    assert_eq!(reconciling.status, "True");
    found.status = Some(status);
    assert_eq!(
        requeue(&desired, &found),
        Action::requeue(Duration::from_secs(3))
    );

    // A balancer plan due sooner wins.
    found.balance.requeue = Some(Duration::from_secs(1));
    assert_eq!(
        requeue(&desired, &found),
        Action::requeue(Duration::from_secs(1))
    );
}
