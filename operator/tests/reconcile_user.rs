//! KafkaUser reconcile against a scripted API server: what it refuses to
//! read or write (issue #41). A request the script does not list — a write of
//! someone else's Secret above all — fails the test.

mod common;

use std::sync::Arc;

use common::*;
use http::Method;
use serde_json::{json, Value};
use skein_crds::KafkaUser;
use skein_operator::reconcile::kafka_user::{reconcile, USER_FINALIZER};

fn user(name: &str, spec: Value) -> Arc<KafkaUser> {
    let mut spec = spec;
    spec["clusterRef"] = json!({"name": "demo"});
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaUser",
            "metadata": {"name": name, "namespace": NS, "uid": "user-uid", "generation": 1,
                         "finalizers": [USER_FINALIZER]},
            "spec": spec,
        }))
        .unwrap(),
    )
}

fn get_cluster() -> Expect {
    Expect::get(format!("{BASE}/kafkaclusters/demo")).reply(json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": NS, "uid": "cluster-uid"},
        "spec": {"replicas": 1},
    }))
}

fn get_secret(name: &str, reply: Option<Value>) -> Expect {
    let e = Expect::get(format!("/api/v1/namespaces/{NS}/secrets/{name}"));
    match reply {
        Some(s) => e.reply(s),
        None => e.fail(404, "NotFound"),
    }
}

/// The cluster CA's Secret as the operator wrote it: owned by the cluster.
fn cluster_ca_secret() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "demo-cluster-ca", "namespace": NS, "resourceVersion": "7",
            "labels": {"app.kubernetes.io/managed-by": "skein-operator"},
            "ownerReferences": [{"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
                "name": "demo", "uid": "cluster-uid", "controller": true}]},
        "data": {"ca.crt": "Y2VydA==", "ca.key": "a2V5"},
    })
}

/// The user's status patch: Ready=False and Degraded=True for `reason`, the
/// message containing each of `says`.
fn refused(user: &str, reason: &'static str, says: &'static [&'static str]) -> Expect {
    Expect::apply(format!("{BASE}/kafkausers/{user}/status"))
        .check(move |b| {
            let s = &b["status"];
            for type_ in ["Ready", "Degraded"] {
                let c = condition(s, type_);
                assert_eq!(c["reason"], reason, "{type_}: {c}");
                let message = c["message"].as_str().unwrap();
                for part in says {
                    assert!(message.contains(part), "{message:?} lacks {part:?}");
                }
            }
            assert_eq!(condition(s, "Ready")["status"], "False");
        })
        .reply_with(|b| {
            json!({"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaUser",
                   "metadata": {"name": "u", "namespace": NS},
                   "spec": {"clusterRef": {"name": "demo"}}, "status": b["status"]})
        })
}

fn warning(reason: &'static str) -> Expect {
    Expect::new(
        Method::POST,
        format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"),
    )
    .check(move |b| {
        assert_eq!(b["type"], "Warning");
        assert_eq!(b["reason"], reason);
        assert_eq!(b["regarding"]["kind"], "KafkaUser");
    })
}

async fn run(user: Arc<KafkaUser>, script: Vec<Expect>) {
    let (ctx, server, _) = test_context();
    let mock = server.run(script);
    within(reconcile(user, ctx)).await.unwrap();
    finish(mock).await;
}

/// A KafkaUser named after the cluster CA's Secret is refused by its name:
/// no Secret is read, none written.
#[tokio::test]
async fn a_user_named_like_the_cluster_ca_secret_touches_no_secret() {
    let u = user(
        "demo-cluster-ca",
        json!({"authentication": {"type": "scram-sha-512"}}),
    );
    run(
        u,
        vec![
            refused(
                "demo-cluster-ca",
                "ReservedSecretName",
                &["\"demo-cluster-ca\"", "-cluster-ca"],
            ),
            warning("ReservedSecretName"),
        ],
    )
    .await;
}

/// `skein-broker` is the brokers' principal: a `tls` user of that name would
/// hold a certificate with the brokers' subject.
#[tokio::test]
async fn a_user_named_like_the_brokers_is_refused() {
    let u = user(
        "replicator",
        json!({"userName": "skein-broker", "authentication": {"type": "tls"}}),
    );
    run(
        u,
        vec![
            refused("replicator", "ReservedUserName", &["\"skein-broker\""]),
            warning("ReservedUserName"),
        ],
    )
    .await;
}

/// A Secret of the user's name that is not this KafkaUser's (an
/// application's, owned by nobody) is neither written nor read for its
/// password; the condition names it and its owner.
#[tokio::test]
async fn a_user_whose_secret_is_someone_elses_writes_nothing() {
    let u = user(
        "app-settings",
        json!({"authentication": {"type": "scram-sha-512"}}),
    );
    let app = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "app-settings", "namespace": NS, "resourceVersion": "3"},
        "data": {"password": "ZGItcGFzc3dvcmQ="},
    });
    run(
        u,
        vec![
            get_cluster(),
            get_secret("app-settings", Some(app)),
            refused(
                "app-settings",
                "SecretOwnedByAnother",
                &["Secret app-settings", "owner: no owner"],
            ),
            warning("SecretOwnedByAnother"),
        ],
    )
    .await;

    // Another KafkaUser's, left from an earlier one of the same name (another
    // uid): the same, until garbage collection removes it.
    let u = user("alice", json!({"authentication": {"type": "tls"}}));
    let old = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "alice", "namespace": NS, "resourceVersion": "9",
            "ownerReferences": [{"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaUser",
                "name": "alice", "uid": "earlier-uid", "controller": true}]},
    });
    run(
        u,
        vec![
            get_cluster(),
            get_secret("alice", Some(old)),
            refused("alice", "SecretOwnedByAnother", &["owner: KafkaUser/alice"]),
            warning("SecretOwnedByAnother"),
        ],
    )
    .await;
}

/// `password.valueFrom` may not name a Secret the operator manages: here the
/// cluster CA's key.
#[tokio::test]
async fn a_password_from_the_operators_secret_is_refused() {
    let u = user(
        "alice",
        json!({"authentication": {"type": "scram-sha-512",
            "password": {"valueFrom": {"secretKeyRef": {"name": "demo-cluster-ca", "key": "ca.key"}}}}}),
    );
    run(
        u,
        vec![
            get_cluster(),
            get_secret("alice", None),
            get_secret("demo-cluster-ca", Some(cluster_ca_secret())),
            refused(
                "alice",
                "PasswordSecretNotAllowed",
                &["\"demo-cluster-ca\"", "KafkaCluster \"demo\""],
            ),
            warning("PasswordSecretNotAllowed"),
        ],
    )
    .await;
}
