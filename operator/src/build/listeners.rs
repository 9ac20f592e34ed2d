//! Client listeners (`spec.listeners.clients`): the broker settings that
//! serve them, the per-broker arguments that advertise them, and the
//! Services that reach them from outside (`nodeport`).
//!
//! The plaintext listener on `kafkaPort` stays what it was: Kafka's
//! `PLAINTEXT` listener, used for replication (`inter.broker.listener.name`)
//! and by in-cluster clients that need no security.
//!
//! A `nodeport` listener gets a NodePort Service per broker
//! (`<cluster>-<listener>-<id>`, selecting that broker's pod) and a bootstrap
//! one (`<cluster>-<listener>-bootstrap`). The node ports Kubernetes hands
//! out are written to the ConfigMap (key [`NODE_PORTS_KEY`], lines
//! `<listener>.<id>=<port>`); each broker advertises its node's address
//! (`status.hostIP`, from the downward API) with its own node port.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerPort, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skein_crds::{AuthenticationType, ClientListener, KafkaCluster, ListenerType};

use super::{owned_meta, selector_labels, ClusterNames};

/// Where the broker pods mount the Secret `<cluster>-listener-tls`.
pub const TLS_MOUNT_DIR: &str = "/etc/skein/listener-tls";
/// Keys of that Secret: the brokers' key and certificate chain, the
/// cluster CA, and the clients CA (trusted for client certificates).
pub const KEYSTORE_KEY: &str = "broker-keystore.pem";
pub const CA_KEY: &str = "ca.crt";
pub const CLIENTS_CA_KEY: &str = "clients-ca.crt";
/// ConfigMap key of the node ports of `nodeport` listeners.
pub const NODE_PORTS_KEY: &str = "node-ports";
/// Label on a listener's Services (the listener's name).
pub const LISTENER_LABEL: &str = "skein.dev/listener";
/// The label the StatefulSet controller puts on each pod: its name.
const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Env var holding the node's address (downward API `status.hostIP`).
pub const HOST_IP_ENV: &str = "SKEIN_HOST_IP";

fn clients(kc: &KafkaCluster) -> &[ClientListener] {
    &kc.spec.listeners.clients
}

/// Whether any client listener serves TLS (the brokers then mount the
/// listener certificate).
pub fn any_tls(kc: &KafkaCluster) -> bool {
    clients(kc).iter().any(|l| l.tls)
}

fn any_nodeport(kc: &KafkaCluster) -> bool {
    clients(kc)
        .iter()
        .any(|l| l.type_ == ListenerType::Nodeport)
}

/// Broker settings for the client listeners (none without any): the
/// protocol map, replication on `PLAINTEXT`, and per listener its
/// certificate, client-certificate check and SASL mechanism.
pub fn broker_config(kc: &KafkaCluster) -> BTreeMap<String, String> {
    let mut c = BTreeMap::new();
    if clients(kc).is_empty() {
        return c;
    }
    let map = std::iter::once("PLAINTEXT:PLAINTEXT".to_string())
        .chain(
            clients(kc)
                .iter()
                .map(|l| format!("{}:{}", l.kafka_name(), l.security_protocol())),
        )
        .collect::<Vec<_>>()
        .join(",");
    c.insert("listener.security.protocol.map".into(), map);
    c.insert("inter.broker.listener.name".into(), "PLAINTEXT".into());
    for l in clients(kc) {
        let key = |k: &str| format!("listener.name.{}.{k}", l.name);
        if l.tls {
            c.insert(key("ssl.keystore.type"), "PEM".into());
            c.insert(
                key("ssl.keystore.location"),
                format!("{TLS_MOUNT_DIR}/{KEYSTORE_KEY}"),
            );
        }
        match l.authentication.as_ref().map(|a| a.type_) {
            Some(AuthenticationType::Tls) => {
                c.insert(key("ssl.client.auth"), "required".into());
                c.insert(key("ssl.truststore.type"), "PEM".into());
                c.insert(
                    key("ssl.truststore.location"),
                    format!("{TLS_MOUNT_DIR}/{CLIENTS_CA_KEY}"),
                );
            }
            Some(t) => {
                let mechanism = t.mechanism().expect("a SASL type");
                c.insert(key("sasl.enabled.mechanisms"), mechanism.into());
            }
            None => {}
        }
    }
    c
}

/// The shell's part of the broker command for the client listeners: the
/// node port lookups (before `exec`) and the `listeners` /
/// `advertised.listeners` overrides (after it). Empty without listeners.
pub fn command_parts(kc: &KafkaCluster, names: &ClusterNames) -> (String, String) {
    if clients(kc).is_empty() {
        return (String::new(), String::new());
    }
    let kafka = kc.spec.listeners.kafka_port;
    let pod_host = format!(
        "${{HOSTNAME}}.{}.{}.svc",
        names.headless_service(),
        names.namespace
    );
    let mut prelude = String::new();
    let mut bind = vec![format!("PLAINTEXT://0.0.0.0:{kafka}")];
    let mut advertised = vec![format!("PLAINTEXT://{pod_host}:{kafka}")];
    for l in clients(kc) {
        let name = l.kafka_name();
        bind.push(format!("{name}://0.0.0.0:{}", l.port));
        match l.type_ {
            ListenerType::Internal => advertised.push(format!("{name}://{pod_host}:{}", l.port)),
            ListenerType::Nodeport => {
                let var = format!("SKEIN_NODE_PORT_{name}");
                prelude.push_str(&format!(
                    "{var}=$(sed -n \"s/^{}\\.${{HOSTNAME##*-}}=//p\" {}/{NODE_PORTS_KEY}); ",
                    l.name,
                    super::statefulset::CONFIG_DIR
                ));
                advertised.push(format!("{name}://${{{HOST_IP_ENV}}}:${{{var}}}"));
            }
        }
    }
    let overrides = format!(
        " --override \"listeners={}\" --override \"advertised.listeners={}\"",
        bind.join(","),
        advertised.join(",")
    );
    (prelude, overrides)
}

/// Container ports of the client listeners (named like them).
pub fn container_ports(kc: &KafkaCluster) -> Vec<ContainerPort> {
    clients(kc)
        .iter()
        .map(|l| ContainerPort {
            name: Some(l.name.clone()),
            container_port: l.port,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        })
        .collect()
}

/// Service ports of the `internal` listeners (on the headless and the
/// bootstrap Service).
pub fn internal_service_ports(kc: &KafkaCluster) -> Vec<ServicePort> {
    clients(kc)
        .iter()
        .filter(|l| l.type_ == ListenerType::Internal)
        .map(service_port)
        .collect()
}

fn service_port(l: &ClientListener) -> ServicePort {
    ServicePort {
        name: Some(l.name.clone()),
        port: l.port,
        target_port: Some(IntOrString::String(l.name.clone())),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    }
}

/// Name of a `nodeport` listener's Service of broker `id`.
pub fn broker_service(names: &ClusterNames, listener: &str, id: i32) -> String {
    format!("{}-{listener}-{id}", names.cluster)
}

/// Name of a `nodeport` listener's bootstrap Service.
pub fn bootstrap_service(names: &ClusterNames, listener: &str) -> String {
    format!("{}-{listener}-bootstrap", names.cluster)
}

/// The NodePort Services of every `nodeport` listener: one per broker of the
/// spec and a bootstrap one.
pub fn services(kc: &KafkaCluster, names: &ClusterNames) -> Vec<Service> {
    let mut out = Vec::new();
    for l in clients(kc)
        .iter()
        .filter(|l| l.type_ == ListenerType::Nodeport)
    {
        let service = |name: String, pod: Option<String>| {
            let mut metadata = owned_meta(kc, names, name);
            metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(LISTENER_LABEL.into(), l.name.clone());
            let mut selector = selector_labels(names);
            if let Some(pod) = pod {
                selector.insert(POD_NAME_LABEL.into(), pod);
            }
            Service {
                metadata,
                spec: Some(ServiceSpec {
                    type_: Some("NodePort".into()),
                    selector: Some(selector),
                    ports: Some(vec![service_port(l)]),
                    // Clients outside see the broker they asked for; no
                    // hop to another node and no source rewrite.
                    external_traffic_policy: Some("Local".into()),
                    ..ServiceSpec::default()
                }),
                ..Service::default()
            }
        };
        out.push(service(bootstrap_service(names, &l.name), None));
        for id in 0..kc.spec.replicas {
            out.push(service(
                broker_service(names, &l.name, id),
                Some(format!("{}-{id}", names.statefulset())),
            ));
        }
    }
    out
}

/// The node port Kubernetes gave a Service (its only port).
pub fn node_port(svc: &Service) -> Option<i32> {
    svc.spec.as_ref()?.ports.as_ref()?.first()?.node_port
}

/// The ConfigMap entries of the listeners: the node ports each broker
/// advertises, read from the applied `services` (empty without `nodeport`
/// listeners).
pub fn config_map_entries(
    kc: &KafkaCluster,
    names: &ClusterNames,
    applied: &[Service],
) -> BTreeMap<String, String> {
    if !any_nodeport(kc) {
        return BTreeMap::new();
    }
    let by_name: BTreeMap<&str, &Service> = applied
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect();
    let mut text = String::new();
    for l in clients(kc)
        .iter()
        .filter(|l| l.type_ == ListenerType::Nodeport)
    {
        for id in 0..kc.spec.replicas {
            let port = by_name
                .get(broker_service(names, &l.name, id).as_str())
                .and_then(|s| node_port(s));
            if let Some(port) = port {
                text.push_str(&format!("{}.{id}={port}\n", l.name));
            }
        }
    }
    BTreeMap::from([(NODE_PORTS_KEY.to_string(), text)])
}

/// `status.listeners`: the plaintext listener and every client listener,
/// with the address clients bootstrap from (`node_addresses`: the nodes the
/// brokers run on, for `nodeport` listeners).
pub fn statuses(
    kc: &KafkaCluster,
    names: &ClusterNames,
    applied: &[Service],
    node_addresses: &[String],
) -> Vec<skein_crds::ListenerStatus> {
    let mut out = vec![skein_crds::ListenerStatus {
        name: "plaintext".into(),
        type_: "internal".into(),
        bootstrap: names.bootstrap_address(kc.spec.listeners.kafka_port),
        security_protocol: "PLAINTEXT".into(),
    }];
    for l in clients(kc) {
        let bootstrap = match l.type_ {
            ListenerType::Internal => names.bootstrap_address(l.port),
            ListenerType::Nodeport => {
                let name = bootstrap_service(names, &l.name);
                let port = applied
                    .iter()
                    .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                    .and_then(node_port);
                match port {
                    Some(port) => node_addresses
                        .iter()
                        .map(|a| format!("{a}:{port}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    None => String::new(),
                }
            }
        };
        out.push(skein_crds::ListenerStatus {
            name: l.name.clone(),
            type_: match l.type_ {
                ListenerType::Internal => "internal".into(),
                ListenerType::Nodeport => "nodeport".into(),
            },
            bootstrap,
            security_protocol: l.security_protocol().into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::build::test_cluster as cluster;

    fn with_listeners() -> KafkaCluster {
        cluster(json!({"replicas": 2, "listeners": {"clients": [
            {"name": "tls", "port": 9093, "type": "internal", "tls": true,
             "authentication": {"type": "tls"}},
            {"name": "external", "port": 9094, "type": "nodeport", "tls": true,
             "authentication": {"type": "scram-sha-512"}},
        ]}}))
    }

    #[test]
    fn no_client_listeners_change_nothing() {
        let kc = cluster(json!({}));
        let names = ClusterNames::of(&kc);
        assert!(broker_config(&kc).is_empty());
        assert_eq!(command_parts(&kc, &names), (String::new(), String::new()));
        assert!(services(&kc, &names).is_empty());
        assert!(config_map_entries(&kc, &names, &[]).is_empty());
    }

    #[test]
    fn each_listener_gets_its_protocol_certificate_and_mechanism() {
        let c = broker_config(&with_listeners());
        assert_eq!(
            c["listener.security.protocol.map"],
            "PLAINTEXT:PLAINTEXT,TLS:SSL,EXTERNAL:SASL_SSL"
        );
        assert_eq!(c["inter.broker.listener.name"], "PLAINTEXT");
        assert_eq!(
            c["listener.name.tls.ssl.keystore.location"],
            "/etc/skein/listener-tls/broker-keystore.pem"
        );
        assert_eq!(c["listener.name.tls.ssl.client.auth"], "required");
        assert_eq!(
            c["listener.name.tls.ssl.truststore.location"],
            "/etc/skein/listener-tls/clients-ca.crt"
        );
        assert_eq!(
            c["listener.name.external.sasl.enabled.mechanisms"],
            "SCRAM-SHA-512"
        );
        assert!(!c.contains_key("listener.name.external.ssl.client.auth"));
    }

    #[test]
    fn nodeport_listeners_get_a_service_per_broker_and_their_ports_in_the_config() {
        let kc = with_listeners();
        let names = ClusterNames::of(&kc);
        let mut svcs = services(&kc, &names);
        let got: Vec<_> = svcs
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            got,
            [
                "demo-external-bootstrap",
                "demo-external-0",
                "demo-external-1"
            ]
        );
        let selector = svcs[2].spec.as_ref().unwrap().selector.clone().unwrap();
        assert_eq!(selector[POD_NAME_LABEL], "demo-1");
        // What the API server hands back: node ports assigned.
        for (i, s) in svcs.iter_mut().enumerate() {
            s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = Some(31000 + i as i32);
        }
        let entries = config_map_entries(&kc, &names, &svcs);
        assert_eq!(
            entries[NODE_PORTS_KEY],
            "external.0=31001\nexternal.1=31002\n"
        );
        let st = statuses(&kc, &names, &svcs, &["10.0.0.1".into(), "10.0.0.2".into()]);
        assert_eq!(st[0].bootstrap, "demo-bootstrap.ns.svc:9092");
        assert_eq!(st[1].bootstrap, "demo-bootstrap.ns.svc:9093");
        assert_eq!(st[2].bootstrap, "10.0.0.1:31000,10.0.0.2:31000");
        assert_eq!(st[2].security_protocol, "SASL_SSL");
    }
}
