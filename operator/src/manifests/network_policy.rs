//! The brokers' NetworkPolicy (`skein-operator kubernetes
//! --network-policies`, on by default in the Helm chart): who may open a
//! connection to which port of a cluster's broker pods.
//!
//! - control port: only the operator's pods (its controller holds the
//!   sessions);
//! - the plaintext `kafkaPort` listener: the cluster's own brokers
//!   (replication without `replicationTls`; the operator speaks no Kafka
//!   protocol to its clusters). When the cluster has
//!   no client listeners it is also the clients' listener, and is then open
//!   as before (a policy must not cut off the only way in);
//! - each client listener: the peers of its `networkPolicyPeers`, or anyone
//!   when it names none;
//! - metrics port: anyone (Prometheus).
//!
//! Kubernetes enforces a NetworkPolicy only where the network plugin does.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skein_crds::KafkaCluster;

use super::{owned_meta, selector_labels, BuildOptions, ClusterNames};

/// The label Kubernetes puts on every namespace: its name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn port(p: i32) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(p)),
        protocol: Some("TCP".into()),
        ..NetworkPolicyPort::default()
    }
}

fn rule(ports: Vec<i32>, from: Option<Vec<NetworkPolicyPeer>>) -> NetworkPolicyIngressRule {
    NetworkPolicyIngressRule {
        ports: Some(ports.into_iter().map(port).collect()),
        from,
    }
}

/// The operator's pods: `opts.operator_pod_labels` in `opts.operator_namespace`.
fn operator_peer(opts: &BuildOptions) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(opts.operator_pod_labels.clone()),
            ..LabelSelector::default()
        }),
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_string(),
                opts.operator_namespace.clone(),
            )])),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// The cluster's own broker pods.
fn brokers_peer(names: &ClusterNames) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(selector_labels(names)),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// The policy, or `None` when the operator makes none.
pub fn build(
    kc: &KafkaCluster,
    names: &ClusterNames,
    opts: &BuildOptions,
) -> Option<NetworkPolicy> {
    if !opts.network_policies {
        return None;
    }
    let l = &kc.spec.listeners;
    let mut rules = vec![
        rule(vec![l.control_port], Some(vec![operator_peer(opts)])),
        rule(vec![l.metrics_port], None),
    ];
    if l.replicates_over_tls() {
        rules.push(rule(
            vec![l.replication_port],
            Some(vec![brokers_peer(names)]),
        ));
    }
    if l.clients.is_empty() {
        rules.push(rule(vec![l.kafka_port], None));
    } else {
        rules.push(rule(vec![l.kafka_port], Some(vec![brokers_peer(names)])));
        for c in &l.clients {
            let from = (!c.network_policy_peers.is_empty()).then(|| c.network_policy_peers.clone());
            rules.push(rule(vec![c.port], from));
        }
    }
    Some(NetworkPolicy {
        metadata: owned_meta(kc, names, names.network_policy()),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector_labels(names)),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(rules),
            ..NetworkPolicySpec::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::manifests::test_cluster as cluster;

    fn opts() -> BuildOptions {
        BuildOptions {
            network_policies: true,
            operator_namespace: "skein-system".into(),
            operator_pod_labels: BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "skein-operator".to_string(),
            )]),
            ..BuildOptions::default()
        }
    }

    fn ports_and_peers(np: &NetworkPolicy) -> Vec<(i32, usize)> {
        np.spec
            .as_ref()
            .unwrap()
            .ingress
            .as_ref()
            .unwrap()
            .iter()
            .map(|r| {
                let p = match r.ports.as_ref().unwrap()[0].port {
                    Some(IntOrString::Int(p)) => p,
                    _ => -1,
                };
                (p, r.from.as_ref().map_or(0, Vec::len))
            })
            .collect()
    }

    #[test]
    fn off_unless_asked_for() {
        let kc = cluster(json!({}));
        assert!(build(&kc, &ClusterNames::of(&kc), &BuildOptions::default()).is_none());
    }

    #[test]
    fn the_control_port_is_the_operators_and_replication_the_brokers() {
        let kc = cluster(json!({"listeners": {"clients": [
            {"name": "external", "port": 9094, "type": "nodeport",
             "networkPolicyPeers": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]},
            {"name": "secure", "port": 9093, "type": "internal"},
        ]}}));
        let np = build(&kc, &ClusterNames::of(&kc), &opts()).unwrap();
        assert_eq!(np.metadata.name.as_deref(), Some("demo-brokers"));
        // (port, number of allowed peers; 0 = anyone)
        assert_eq!(
            ports_and_peers(&np),
            [(9192, 1), (9644, 0), (9092, 1), (9094, 1), (9093, 0)]
        );
        let control = &np.spec.as_ref().unwrap().ingress.as_ref().unwrap()[0];
        let peer = &control.from.as_ref().unwrap()[0];
        assert_eq!(
            peer.namespace_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()[NAMESPACE_NAME_LABEL],
            "skein-system"
        );
    }

    #[test]
    fn without_client_listeners_the_plaintext_listener_stays_open() {
        let kc = cluster(json!({}));
        let np = build(&kc, &ClusterNames::of(&kc), &opts()).unwrap();
        assert_eq!(ports_and_peers(&np), [(9192, 1), (9644, 0), (9092, 0)]);
    }
}
