//! What the generated CRDs promise users: names, subresources, printer
//! columns and the validation rules the API server enforces.

use kube::CustomResourceExt;
use serde_json::{json, Value};
use skein_crds::{KafkaCluster, KafkaClusterSpec, KafkaUser, Topic};

fn schema_of<K: CustomResourceExt>() -> Value {
    let crd = K::crd();
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

fn cluster_spec() -> KafkaClusterSpec {
    serde_json::from_value(json!({})).unwrap()
}

#[test]
fn self_healing_is_on_with_a_30_minute_grace_period_by_default() {
    let spec = cluster_spec();
    assert!(spec.self_healing.enabled);
    assert_eq!(spec.self_healing.broker_loss_grace_seconds, 1800);
    let kc = schema_of::<KafkaCluster>();
    let grace = &kc["properties"]["spec"]["properties"]["selfHealing"]["properties"]
        ["brokerLossGraceSeconds"];
    assert_eq!(grace["minimum"].as_f64(), Some(10.0));
    // Copies of moving replicas are throttled to 50 MiB/s unless the spec says otherwise.
    assert_eq!(spec.reassignment_throttle_bytes_per_second, 52_428_800);
    let throttle = &kc["properties"]["spec"]["properties"]["reassignmentThrottleBytesPerSecond"];
    assert_eq!(throttle["minimum"].as_f64(), Some(0.0));
}

#[test]
fn the_balancer_is_on_with_automatic_approval_by_default() {
    let spec = cluster_spec();
    let b = &spec.balancer;
    assert!(b.enabled);
    assert_eq!(b.approval, skein_crds::BalanceApproval::Auto);
    assert_eq!((b.threshold_percent, b.plan_delay_seconds), (10, 30));
    assert_eq!(b.minimum_imbalance_bytes, 1 << 30);
    let kc = schema_of::<KafkaCluster>();
    let approval = &kc["properties"]["spec"]["properties"]["balancer"]["properties"]["approval"];
    assert_eq!(approval["enum"], json!(["Auto", "Manual"]));
    let balance = &kc["properties"]["status"]["properties"]["balance"]["properties"];
    for field in ["planId", "state", "moves", "brokers", "bytesToMove"] {
        assert!(balance.get(field).is_some(), "status.balance.{field}");
    }
}

#[test]
fn names_scope_and_short_names() {
    let kc = KafkaCluster::crd();
    assert_eq!(kc.metadata.name.as_deref(), Some("kafkaclusters.skein.dev"));
    assert_eq!(kc.spec.scope, "Namespaced");
    assert_eq!(kc.spec.names.short_names, Some(vec!["kc".to_string()]));
    assert_eq!(kc.spec.versions[0].name, "v1alpha1");
    let t = Topic::crd();
    assert_eq!(t.metadata.name.as_deref(), Some("topics.skein.dev"));
    assert_eq!(t.spec.names.short_names, Some(vec!["kt".to_string()]));
}

#[test]
fn status_and_scale_subresources() {
    let kc = KafkaCluster::crd();
    let sub = kc.spec.versions[0].subresources.as_ref().unwrap();
    assert!(sub.status.is_some());
    let scale = sub.scale.as_ref().unwrap();
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert_eq!(scale.status_replicas_path, ".status.readyReplicas");
    assert_eq!(
        scale.label_selector_path.as_deref(),
        Some(".status.selector")
    );
    let t = Topic::crd();
    assert!(t.spec.versions[0]
        .subresources
        .as_ref()
        .unwrap()
        .status
        .is_some());
}

#[test]
fn printer_columns() {
    let names = |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(KafkaCluster::crd()),
        [
            "Replicas",
            "Ready Brokers",
            "Bootstrap",
            "Ready",
            "Roll",
            "Age"
        ]
    );
    assert_eq!(
        names(Topic::crd()),
        [
            "Cluster",
            "Partitions",
            "Replication Factor",
            "Ready",
            "Under Replicated",
            "Remote Bytes",
            "Age"
        ]
    );
}

#[test]
fn minimums_are_in_the_schema() {
    let t = schema_of::<Topic>();
    let spec = &t["properties"]["spec"]["properties"];
    assert_eq!(spec["partitions"]["minimum"].as_f64(), Some(1.0));
    assert_eq!(spec["replicationFactor"]["minimum"].as_f64(), Some(1.0));
    let kc = schema_of::<KafkaCluster>();
    assert_eq!(
        kc["properties"]["spec"]["properties"]["replicas"]["minimum"].as_f64(),
        Some(1.0)
    );
}

#[test]
fn defaults_fill_an_empty_cluster_spec() {
    let spec = cluster_spec();
    assert_eq!(spec.replicas, 3);
    assert_eq!(spec.storage.size.0, "10Gi");
    assert_eq!(spec.listeners.kafka_port, 9092);
    assert_eq!(spec.listeners.metrics_port, 9644);
    let kc = schema_of::<KafkaCluster>();
    assert_eq!(
        kc["properties"]["spec"]["properties"]["replicas"]["default"],
        json!(3)
    );
}

fn rules(v: &Value) -> Vec<String> {
    v["x-kubernetes-validations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["rule"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn transition_rules_are_in_the_schema() {
    let t = schema_of::<Topic>();
    let spec = &t["properties"]["spec"];
    assert_eq!(
        rules(&spec["properties"]["partitions"]),
        ["self >= oldSelf"]
    );
    assert_eq!(
        rules(&spec["properties"]["clusterRef"]),
        ["self == oldSelf"]
    );
    assert!(rules(spec)[0].contains("self.topicName == oldSelf.topicName"));
    let kc = schema_of::<KafkaCluster>();
    let storage = &kc["properties"]["spec"]["properties"]["storage"];
    assert!(rules(storage)[0].contains("self.storageClassName == oldSelf.storageClassName"));
    let size = rules(&storage["properties"]["size"]);
    assert_eq!(size[0], "isQuantity(string(self))");
    assert!(size[1].contains("quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0"));
}

#[test]
fn kafka_user_names_columns_and_schema() {
    let u = KafkaUser::crd();
    assert_eq!(u.metadata.name.as_deref(), Some("kafkausers.skein.dev"));
    assert_eq!(u.spec.names.short_names, Some(vec!["ku".to_string()]));
    assert!(u.spec.versions[0]
        .subresources
        .as_ref()
        .unwrap()
        .status
        .is_some());
    let columns: Vec<String> = u.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        columns,
        ["Cluster", "Authentication", "Principal", "Ready", "Age"]
    );
    let s = schema_of::<KafkaUser>();
    let spec = &s["properties"]["spec"];
    assert_eq!(
        rules(&spec["properties"]["clusterRef"]),
        ["self == oldSelf"]
    );
    assert!(rules(spec)[0].contains("self.userName == oldSelf.userName"));
    let auth = &spec["properties"]["authentication"]["properties"]["type"];
    assert_eq!(
        auth["enum"],
        json!(["scram-sha-512", "scram-sha-256", "tls"])
    );
    assert_eq!(
        rules(&spec["properties"]["authentication"]),
        ["!has(self.password) || self.type != 'tls'"]
    );
    let rule = &spec["properties"]["authorization"]["properties"]["acls"]["items"]["properties"];
    assert_eq!(
        rule["resource"]["properties"]["type"]["enum"],
        json!(["topic", "group", "cluster", "transactionalId"])
    );
    assert_eq!(rule["operations"]["minItems"].as_u64(), Some(1));
    assert_eq!(
        spec["properties"]["quotas"]["properties"]["producerByteRate"]["minimum"].as_f64(),
        Some(1.0)
    );
}
