//! Client listeners (`spec.listeners.clients`): the broker settings that
//! serve them, the per-broker arguments that advertise them, and the
//! Services that reach them from outside (`nodeport`).
//!
//! The plaintext listener on `kafkaPort` stays what it was: Kafka's
//! `PLAINTEXT` listener, used for replication (`inter.broker.listener.name`)
//! and by in-cluster clients that need no security.
//!
//! An external listener gets a Service per broker
//! (`<cluster>-<listener>-<id>`, selecting that broker's pod) and a bootstrap
//! one (`<cluster>-<listener>-bootstrap`):
//!
//! - `nodeport`: NodePort Services. The node ports Kubernetes hands out are
//!   written to the ConfigMap (key [`NODE_PORTS_KEY`], lines
//!   `<listener>.<id>=<port>`); each broker advertises its node's address
//!   (`status.hostIP`, from the downward API) with its own node port.
//! - `loadbalancer`: LoadBalancer Services. The addresses the cloud assigns
//!   are written to the ConfigMap (key [`ADVERTISED_HOSTS_KEY`], lines
//!   `<listener>.<id>=<host>`); each broker advertises its own with the
//!   listener's port (its pod DNS name until one is assigned: the ConfigMap
//!   then changes and the brokers roll once to take it).
//! - `ingress`: ClusterIP Services and an Ingress per host (TLS
//!   passthrough: the controller routes by SNI); each broker advertises its
//!   host on port 443.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, ContainerPort, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skein_crds::{ClientListener, KafkaCluster, ListenerAuthenticationType, ListenerType};

use super::{owned_meta, selector_labels, ClusterNames};
use skein_controller::broker_config as keys;

/// The common name of the brokers' certificate.
pub const BROKER_CN: &str = "skein-broker";
/// Where the broker pods mount the Secret `<cluster>-listener-tls`.
pub const TLS_MOUNT_DIR: &str = "/etc/skein/listener-tls";
/// Keys of that Secret: the brokers' key and certificate chain, the
/// cluster CA, and the clients CA (trusted for client certificates).
pub const KEYSTORE_KEY: &str = "broker-keystore.pem";
pub const CA_KEY: &str = "ca.crt";
pub const CLIENTS_CA_KEY: &str = "clients-ca.crt";
/// ConfigMap key of the node ports of `nodeport` listeners.
pub const NODE_PORTS_KEY: &str = "node-ports";
/// ConfigMap key of the load balancers' addresses of `loadbalancer` listeners.
pub const ADVERTISED_HOSTS_KEY: &str = "advertised-hosts";
/// The port an ingress controller serves TLS on.
const INGRESS_PORT: i32 = 443;
/// ingress-nginx's annotation for TLS passthrough (routing by SNI).
const SSL_PASSTHROUGH: &str = "nginx.ingress.kubernetes.io/ssl-passthrough";
/// Label on a listener's Services (the listener's name).
pub const LISTENER_LABEL: &str = "skein.dev/listener";
/// The label the StatefulSet controller puts on each pod: its name.
const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Env var holding the node's address (downward API `status.hostIP`).
pub const HOST_IP_ENV: &str = "SKEIN_HOST_IP";

fn clients(kc: &KafkaCluster) -> &[ClientListener] {
    &kc.spec.listeners.clients
}

/// Whether any listener serves TLS, a client listener or the replication
/// one (the brokers then mount the listener certificate).
pub fn any_tls(kc: &KafkaCluster) -> bool {
    kc.spec.listeners.replicates_over_tls() || clients(kc).iter().any(|l| l.tls)
}

/// Kafka's name of the replication listener (`replicationTls`).
pub const REPLICATION_LISTENER: &str = "REPLICATION";
/// The brokers' principal on the replication listener: no KafkaUser can
/// have it (their names allow no `#`).
pub const BROKER_PRINCIPAL: &str = "User:skein-broker#replication";

/// The listeners' settings besides the client listeners': none without
/// client listeners or replication TLS.
fn uses_listener_settings(kc: &KafkaCluster) -> bool {
    kc.spec.listeners.replicates_over_tls() || !clients(kc).is_empty()
}

/// The brokers that get per-broker Services, Ingresses and names: those of
/// the spec and, during a scale-down, those still running (a leaving broker
/// keeps its address until it has drained and its pod is gone).
fn brokers(kc: &KafkaCluster) -> i32 {
    let running = kc.status.as_ref().map_or(0, |s| s.replicas);
    kc.spec.replicas.max(running)
}

fn of_type(kc: &KafkaCluster, t: ListenerType) -> impl Iterator<Item = &ClientListener> {
    clients(kc).iter().filter(move |l| l.type_ == t)
}

/// Broker settings for the client listeners (none without any): the
/// protocol map, replication on `PLAINTEXT`, and per listener its
/// certificate, client-certificate check and SASL mechanism.
pub fn broker_config(kc: &KafkaCluster) -> BTreeMap<String, String> {
    let mut c = BTreeMap::new();
    if !uses_listener_settings(kc) {
        return c;
    }
    let replication = kc.spec.listeners.replicates_over_tls();
    let map = std::iter::once("PLAINTEXT:PLAINTEXT".to_string())
        .chain(replication.then(|| format!("{REPLICATION_LISTENER}:SSL")))
        .chain(
            clients(kc)
                .iter()
                .map(|l| format!("{}:{}", l.kafka_name(), l.security_protocol())),
        )
        .collect::<Vec<_>>()
        .join(",");
    c.insert(keys::LISTENER_SECURITY_PROTOCOL_MAP.name.into(), map);
    c.insert(
        keys::INTER_BROKER_LISTENER_NAME.name.into(),
        if replication {
            REPLICATION_LISTENER
        } else {
            "PLAINTEXT"
        }
        .into(),
    );
    if replication {
        // Mutual TLS with the brokers' certificate both ways, the cluster
        // CA's bundle (both CAs during a replacement) trusted; only the
        // brokers' subject maps to a principal.
        let key = |k: &str| format!("listener.name.replication.{k}");
        for (k, v) in [
            (keys::SSL_KEYSTORE_TYPE.name, "PEM".to_string()),
            (
                keys::SSL_KEYSTORE_LOCATION.name,
                format!("{TLS_MOUNT_DIR}/{KEYSTORE_KEY}"),
            ),
            (keys::SSL_TRUSTSTORE_TYPE.name, "PEM".to_string()),
            (
                keys::SSL_TRUSTSTORE_LOCATION.name,
                format!("{TLS_MOUNT_DIR}/{CA_KEY}"),
            ),
            (keys::SSL_CLIENT_AUTH.name, "required".to_string()),
            (
                keys::SSL_PRINCIPAL_MAPPING_RULES.name,
                format!(
                    "RULE:^CN={BROKER_CN}$/{}/",
                    BROKER_PRINCIPAL.trim_start_matches("User:")
                ),
            ),
        ] {
            c.insert(key(k), v);
        }
        let supers = kc
            .spec
            .config
            .get(keys::SUPER_USERS.name)
            .map(|s| s.trim().trim_end_matches(';').to_string())
            .filter(|s| !s.is_empty());
        c.insert(
            keys::SUPER_USERS.name.into(),
            match supers {
                Some(s) => format!("{s};{BROKER_PRINCIPAL}"),
                None => BROKER_PRINCIPAL.into(),
            },
        );
    }
    for l in clients(kc) {
        let key = |k: &str| format!("listener.name.{}.{k}", l.name);
        if l.tls {
            c.insert(key(keys::SSL_KEYSTORE_TYPE.name), "PEM".into());
            c.insert(
                key(keys::SSL_KEYSTORE_LOCATION.name),
                format!("{TLS_MOUNT_DIR}/{KEYSTORE_KEY}"),
            );
        }
        match l.authentication.as_ref().map(|a| a.type_) {
            Some(ListenerAuthenticationType::Tls) => {
                c.insert(key(keys::SSL_CLIENT_AUTH.name), "required".into());
                c.insert(key(keys::SSL_TRUSTSTORE_TYPE.name), "PEM".into());
                c.insert(
                    key(keys::SSL_TRUSTSTORE_LOCATION.name),
                    format!("{TLS_MOUNT_DIR}/{CLIENTS_CA_KEY}"),
                );
            }
            Some(t) => {
                let mechanism = t.mechanism().expect("a SASL type");
                c.insert(key(keys::SASL_ENABLED_MECHANISMS.name), mechanism.into());
            }
            None => {}
        }
        if let Some(o) = l.authentication.as_ref().and_then(|a| a.oauth.as_ref()) {
            let key = |k: &str| format!("listener.name.{}.oauthbearer.{k}", l.name);
            c.insert(
                key("sasl.server.callback.handler.class"),
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
                    .into(),
            );
            c.insert(
                key("sasl.oauthbearer.jwks.endpoint.url"),
                format!("file://{}/{}", oauth_mount_dir(l), o.jwks_config_map.key),
            );
            for (k, v) in [
                ("sasl.oauthbearer.expected.issuer", &o.issuer),
                ("sasl.oauthbearer.expected.audience", &o.audience),
                ("sasl.oauthbearer.sub.claim.name", &o.sub_claim_name),
            ] {
                if let Some(v) = v {
                    c.insert(key(k), v.clone());
                }
            }
        }
    }
    c
}

/// Where the broker pods mount an `oauth` listener's JWKS ConfigMap.
fn oauth_mount_dir(l: &ClientListener) -> String {
    format!("/etc/skein/oauth-{}", l.name)
}

/// The volumes and mounts of the `oauth` listeners' JWKS ConfigMaps.
pub fn oauth_volumes(kc: &KafkaCluster) -> Vec<(Volume, VolumeMount)> {
    clients(kc)
        .iter()
        .filter_map(|l| {
            let o = l.authentication.as_ref()?.oauth.as_ref()?;
            let name = format!("oauth-{}", l.name);
            Some((
                Volume {
                    name: name.clone(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: o.jwks_config_map.name.clone(),
                        ..ConfigMapVolumeSource::default()
                    }),
                    ..Volume::default()
                },
                VolumeMount {
                    name,
                    mount_path: oauth_mount_dir(l),
                    read_only: Some(true),
                    ..VolumeMount::default()
                },
            ))
        })
        .collect()
}

/// The shell's part of the broker command for the client listeners: the
/// node port lookups (before `exec`) and the `listeners` /
/// `advertised.listeners` overrides (after it). Empty without listeners.
pub fn command_parts(kc: &KafkaCluster, names: &ClusterNames) -> (String, String) {
    if !uses_listener_settings(kc) {
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
    if kc.spec.listeners.replicates_over_tls() {
        let port = kc.spec.listeners.replication_port;
        bind.push(format!("{REPLICATION_LISTENER}://0.0.0.0:{port}"));
        advertised.push(format!("{REPLICATION_LISTENER}://{pod_host}:{port}"));
    }
    for l in clients(kc) {
        let name = l.kafka_name();
        bind.push(format!("{name}://0.0.0.0:{}", l.port));
        match l.type_ {
            ListenerType::Internal => advertised.push(format!("{name}://{pod_host}:{}", l.port)),
            ListenerType::Nodeport | ListenerType::Loadbalancer => {
                let (var, key) = if l.type_ == ListenerType::Nodeport {
                    (format!("SKEIN_NODE_PORT_{name}"), NODE_PORTS_KEY)
                } else {
                    (format!("SKEIN_LB_HOST_{name}"), ADVERTISED_HOSTS_KEY)
                };
                prelude.push_str(&format!(
                    "{var}=$(sed -n \"s/^{}\\.${{HOSTNAME##*-}}=//p\" {}/{key}); ",
                    l.name,
                    super::statefulset::CONFIG_DIR
                ));
                advertised.push(if l.type_ == ListenerType::Nodeport {
                    format!("{name}://${{{HOST_IP_ENV}}}:${{{var}}}")
                } else {
                    format!("{name}://${{{var}:-{pod_host}}}:{}", l.port)
                });
            }
            ListenerType::Ingress => {
                let host = l.ingress.as_ref().map_or_else(
                    || pod_host.clone(),
                    |i| i.broker_host_template.replace("{id}", "${HOSTNAME##*-}"),
                );
                advertised.push(format!("{name}://{host}:{INGRESS_PORT}"));
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

/// Container ports of the replication listener and the client listeners
/// (named like them).
pub fn container_ports(kc: &KafkaCluster) -> Vec<ContainerPort> {
    let port = |name: &str, port: i32| ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    };
    let l = &kc.spec.listeners;
    l.replicates_over_tls()
        .then(|| port("replication", l.replication_port))
        .into_iter()
        .chain(clients(kc).iter().map(|c| port(&c.name, c.port)))
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

/// Name of an external listener's Service (and Ingress) of broker `id`.
pub fn broker_service(names: &ClusterNames, listener: &str, id: i32) -> String {
    format!("{}-{listener}-{id}", names.cluster)
}

/// Name of an external listener's bootstrap Service (and Ingress).
pub fn bootstrap_service(names: &ClusterNames, listener: &str) -> String {
    format!("{}-{listener}-bootstrap", names.cluster)
}

/// Every external listener with the names of its Services: the bootstrap
/// one (no pod) first, then broker `id`'s (selecting pod `<sts>-<id>`).
fn external_services<'a>(
    kc: &'a KafkaCluster,
    names: &ClusterNames,
) -> Vec<(&'a ClientListener, String, Option<i32>)> {
    let mut out = Vec::new();
    for l in clients(kc).iter().filter(|l| l.type_.external()) {
        out.push((l, bootstrap_service(names, &l.name), None));
        for id in 0..brokers(kc) {
            out.push((l, broker_service(names, &l.name, id), Some(id)));
        }
    }
    out
}

fn listener_meta(
    kc: &KafkaCluster,
    names: &ClusterNames,
    l: &ClientListener,
    name: String,
    annotations: BTreeMap<String, String>,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    let mut metadata = owned_meta(kc, names, name);
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(LISTENER_LABEL.into(), l.name.clone());
    if !annotations.is_empty() {
        metadata.annotations = Some(annotations);
    }
    metadata
}

/// The Services of every external listener: one per broker of the spec and
/// a bootstrap one; NodePort, LoadBalancer (with the listener's
/// annotations) or, behind an ingress, ClusterIP.
pub fn services(kc: &KafkaCluster, names: &ClusterNames) -> Vec<Service> {
    external_services(kc, names)
        .into_iter()
        .map(|(l, name, id)| {
            let mut selector = selector_labels(names);
            if let Some(id) = id {
                selector.insert(
                    POD_NAME_LABEL.into(),
                    format!("{}-{id}", names.statefulset()),
                );
            }
            let (type_, annotations) = match l.type_ {
                ListenerType::Nodeport => ("NodePort", BTreeMap::new()),
                ListenerType::Loadbalancer => ("LoadBalancer", l.annotations.clone()),
                _ => ("ClusterIP", BTreeMap::new()),
            };
            Service {
                metadata: listener_meta(kc, names, l, name, annotations),
                spec: Some(ServiceSpec {
                    type_: Some(type_.into()),
                    selector: Some(selector),
                    ports: Some(vec![service_port(l)]),
                    // Clients outside see the broker they asked for; no
                    // hop to another node and no source rewrite.
                    external_traffic_policy: (type_ != "ClusterIP").then(|| "Local".into()),
                    // A broker's own Service reaches it while it is not
                    // ready (catching up on the partitions it follows): it
                    // may lead others meanwhile, and clients are sent to it
                    // by metadata, not by readiness. The bootstrap Service
                    // routes to ready brokers only.
                    publish_not_ready_addresses: id.map(|_| true),
                    ..ServiceSpec::default()
                }),
                ..Service::default()
            }
        })
        .collect()
}

/// The Ingresses of every `ingress` listener: one per broker host and one
/// for the bootstrap host, each passing TLS through to its Service.
pub fn ingresses(kc: &KafkaCluster, names: &ClusterNames) -> Vec<Ingress> {
    external_services(kc, names)
        .into_iter()
        .filter_map(|(l, name, id)| {
            let spec = l.ingress.as_ref()?;
            let host = match id {
                Some(id) => spec.broker_host(id),
                None => spec.bootstrap_host.clone(),
            };
            let mut annotations =
                BTreeMap::from([(SSL_PASSTHROUGH.to_string(), "true".to_string())]);
            annotations.extend(l.annotations.clone());
            let backend = IngressBackend {
                service: Some(IngressServiceBackend {
                    name: name.clone(),
                    port: Some(ServiceBackendPort {
                        number: Some(l.port),
                        ..ServiceBackendPort::default()
                    }),
                }),
                ..IngressBackend::default()
            };
            Some(Ingress {
                metadata: listener_meta(kc, names, l, name, annotations),
                spec: Some(IngressSpec {
                    ingress_class_name: spec.class_name.clone(),
                    rules: Some(vec![IngressRule {
                        host: Some(host),
                        http: Some(HTTPIngressRuleValue {
                            paths: vec![HTTPIngressPath {
                                path: Some("/".into()),
                                path_type: "Prefix".into(),
                                backend,
                            }],
                        }),
                    }]),
                    ..IngressSpec::default()
                }),
                ..Ingress::default()
            })
        })
        .collect()
}

/// The node port Kubernetes gave a Service (its only port).
pub fn node_port(svc: &Service) -> Option<i32> {
    svc.spec.as_ref()?.ports.as_ref()?.first()?.node_port
}

/// The address a cloud's load balancer got for a Service (IP or host name).
pub fn load_balancer_address(svc: &Service) -> Option<String> {
    let ingress = svc
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?;
    let first = ingress.first()?;
    first.ip.clone().or_else(|| first.hostname.clone())
}

fn by_name(applied: &[Service]) -> BTreeMap<&str, &Service> {
    applied
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect()
}

/// The ConfigMap entries of the listeners, read from the applied
/// `services`: the node ports each broker advertises, the load balancers'
/// addresses (each key only with listeners of its type).
pub fn config_map_entries(
    kc: &KafkaCluster,
    names: &ClusterNames,
    applied: &[Service],
) -> BTreeMap<String, String> {
    let applied = by_name(applied);
    let mut out = BTreeMap::new();
    for (t, key) in [
        (ListenerType::Nodeport, NODE_PORTS_KEY),
        (ListenerType::Loadbalancer, ADVERTISED_HOSTS_KEY),
    ] {
        if of_type(kc, t).next().is_none() {
            continue;
        }
        let mut text = String::new();
        for l in of_type(kc, t) {
            for id in 0..brokers(kc) {
                let svc = applied.get(broker_service(names, &l.name, id).as_str());
                let value = match t {
                    ListenerType::Nodeport => svc.and_then(|s| node_port(s)).map(|p| p.to_string()),
                    _ => svc.and_then(|s| load_balancer_address(s)),
                };
                if let Some(v) = value {
                    text.push_str(&format!("{}.{id}={v}\n", l.name));
                }
            }
        }
        out.insert(key.to_string(), text);
    }
    out
}

/// The names and addresses clients outside use besides the nodes' (which
/// the reconciler reads from the pods): the load balancers' addresses and
/// the ingress hosts. The brokers' certificate must hold them.
pub fn external_names(kc: &KafkaCluster, applied: &[Service]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in of_type(kc, ListenerType::Ingress) {
        if let Some(i) = &l.ingress {
            out.push(i.bootstrap_host.clone());
            out.extend((0..brokers(kc)).map(|id| i.broker_host(id)));
        }
    }
    let applied = by_name(applied);
    let names = ClusterNames::of(kc);
    out.extend(
        external_services(kc, &names)
            .into_iter()
            .filter(|(l, _, _)| l.type_ == ListenerType::Loadbalancer)
            .filter_map(|(_, name, _)| load_balancer_address(applied.get(name.as_str())?)),
    );
    out
}

/// `status.listeners`: the plaintext listener and every client listener,
/// with the address clients bootstrap from (`node_addresses`: the nodes the
/// brokers run on, for `nodeport` listeners; empty for a `loadbalancer`
/// one until its address is assigned).
pub fn statuses(
    kc: &KafkaCluster,
    names: &ClusterNames,
    applied: &[Service],
    node_addresses: &[String],
) -> Vec<skein_crds::ListenerStatus> {
    let applied = by_name(applied);
    let mut out = vec![skein_crds::ListenerStatus {
        name: "plaintext".into(),
        type_: "internal".into(),
        bootstrap: names.bootstrap_address(kc.spec.listeners.kafka_port),
        security_protocol: "PLAINTEXT".into(),
    }];
    for l in clients(kc) {
        let boot = applied.get(bootstrap_service(names, &l.name).as_str());
        let bootstrap = match l.type_ {
            ListenerType::Internal => names.bootstrap_address(l.port),
            ListenerType::Nodeport => match boot.and_then(|s| node_port(s)) {
                Some(port) => node_addresses
                    .iter()
                    .map(|a| format!("{a}:{port}"))
                    .collect::<Vec<_>>()
                    .join(","),
                None => String::new(),
            },
            ListenerType::Loadbalancer => boot
                .and_then(|s| load_balancer_address(s))
                .map(|a| format!("{a}:{}", l.port))
                .unwrap_or_default(),
            ListenerType::Ingress => l
                .ingress
                .as_ref()
                .map(|i| format!("{}:{INGRESS_PORT}", i.bootstrap_host))
                .unwrap_or_default(),
        };
        out.push(skein_crds::ListenerStatus {
            name: l.name.clone(),
            type_: l.type_.as_str().into(),
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

    use crate::manifests::test_cluster as cluster;

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
        // TLS client listeners: replication moves to mutual TLS unless
        // replicationTls says otherwise.
        assert_eq!(
            c["listener.security.protocol.map"],
            "PLAINTEXT:PLAINTEXT,REPLICATION:SSL,TLS:SSL,EXTERNAL:SASL_SSL"
        );
        assert_eq!(c["inter.broker.listener.name"], "REPLICATION");
        let mut plain = with_listeners();
        plain.spec.listeners.replication_tls = Some(false);
        let p = broker_config(&plain);
        assert_eq!(p["inter.broker.listener.name"], "PLAINTEXT");
        assert!(!p.contains_key("super.users"));
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

    fn with_external_listeners() -> KafkaCluster {
        cluster(json!({"replicas": 2, "listeners": {"clients": [
            {"name": "lb", "port": 9094, "type": "loadbalancer", "tls": true,
             "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}},
            {"name": "edge", "port": 9095, "type": "ingress", "tls": true,
             "ingress": {"className": "nginx", "bootstrapHost": "kafka.example.com",
                         "brokerHostTemplate": "broker-{id}.kafka.example.com"}},
        ]}}))
    }

    /// A loadbalancer listener: LoadBalancer Services with the listener's
    /// annotations; each broker advertises its load balancer's address once
    /// assigned (from the ConfigMap), its pod name before; the status gives
    /// the bootstrap load balancer's address. An ingress listener: ClusterIP
    /// Services and an Ingress per host passing TLS through; brokers
    /// advertise their host on 443. Both kinds of name go in the certificate.
    #[test]
    fn loadbalancer_and_ingress_listeners_advertise_what_clients_outside_reach() {
        let kc = with_external_listeners();
        let names = ClusterNames::of(&kc);
        let mut svcs = services(&kc, &names);
        let kinds: Vec<(String, String)> = svcs
            .iter()
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap(),
                    s.spec.as_ref().unwrap().type_.clone().unwrap(),
                )
            })
            .collect();
        let kind = |n: &str, t: &str| (n.to_string(), t.to_string());
        assert_eq!(
            kinds,
            [
                kind("demo-lb-bootstrap", "LoadBalancer"),
                kind("demo-lb-0", "LoadBalancer"),
                kind("demo-lb-1", "LoadBalancer"),
                kind("demo-edge-bootstrap", "ClusterIP"),
                kind("demo-edge-0", "ClusterIP"),
                kind("demo-edge-1", "ClusterIP"),
            ]
        );
        assert_eq!(
            svcs[1].metadata.annotations.as_ref().unwrap()
                ["service.beta.kubernetes.io/aws-load-balancer-type"],
            "nlb"
        );

        let ings = ingresses(&kc, &names);
        let hosts: Vec<_> = ings
            .iter()
            .map(|i| {
                let rule = &i.spec.as_ref().unwrap().rules.as_ref().unwrap()[0];
                let backend = &rule.http.as_ref().unwrap().paths[0].backend;
                (
                    rule.host.clone().unwrap(),
                    backend.service.as_ref().unwrap().name.clone(),
                )
            })
            .collect();
        assert_eq!(
            hosts,
            [
                (
                    "kafka.example.com".to_string(),
                    "demo-edge-bootstrap".to_string()
                ),
                ("broker-0.kafka.example.com".into(), "demo-edge-0".into()),
                ("broker-1.kafka.example.com".into(), "demo-edge-1".into()),
            ]
        );
        assert_eq!(
            ings[0].metadata.annotations.as_ref().unwrap()[SSL_PASSTHROUGH],
            "true"
        );
        assert_eq!(
            ings[0].spec.as_ref().unwrap().ingress_class_name.as_deref(),
            Some("nginx")
        );

        let (prelude, overrides) = command_parts(&kc, &names);
        assert!(
            prelude.contains("SKEIN_LB_HOST_LB=$(sed -n \"s/^lb\\.${HOSTNAME##*-}=//p\" /etc/skein/advertised-hosts)"),
            "{prelude}"
        );
        assert!(
            overrides.contains("LB://${SKEIN_LB_HOST_LB:-${HOSTNAME}.demo-brokers.ns.svc}:9094"),
            "{overrides}"
        );
        assert!(
            overrides.contains("EDGE://broker-${HOSTNAME##*-}.kafka.example.com:443"),
            "{overrides}"
        );

        // Before the cloud assigned addresses: no entry, no bootstrap.
        assert_eq!(
            config_map_entries(&kc, &names, &svcs)[ADVERTISED_HOSTS_KEY],
            ""
        );
        assert_eq!(statuses(&kc, &names, &svcs, &[])[1].bootstrap, "");
        for (i, s) in svcs.iter_mut().take(3).enumerate() {
            s.status = Some(k8s_openapi::api::core::v1::ServiceStatus {
                load_balancer: Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
                    ingress: Some(vec![k8s_openapi::api::core::v1::LoadBalancerIngress {
                        ip: Some(format!("203.0.113.{}", 10 + i)),
                        ..Default::default()
                    }]),
                }),
                ..Default::default()
            });
        }
        let entries = config_map_entries(&kc, &names, &svcs);
        assert_eq!(
            entries[ADVERTISED_HOSTS_KEY],
            "lb.0=203.0.113.11\nlb.1=203.0.113.12\n"
        );
        assert!(!entries.contains_key(NODE_PORTS_KEY));
        let st = statuses(&kc, &names, &svcs, &[]);
        assert_eq!(
            (st[1].type_.as_str(), st[1].bootstrap.as_str()),
            ("loadbalancer", "203.0.113.10:9094")
        );
        assert_eq!(
            (st[2].type_.as_str(), st[2].bootstrap.as_str()),
            ("ingress", "kafka.example.com:443")
        );
        let mut names_in_cert = external_names(&kc, &svcs);
        names_in_cert.sort();
        assert_eq!(
            names_in_cert,
            [
                "203.0.113.10",
                "203.0.113.11",
                "203.0.113.12",
                "broker-0.kafka.example.com",
                "broker-1.kafka.example.com",
                "kafka.example.com"
            ]
        );
    }

    /// An `oauth` listener: OAUTHBEARER with Kafka's secured validator, the
    /// JWKS from its ConfigMap (mounted), issuer and audience expected.
    #[test]
    fn an_oauth_listener_checks_tokens_against_its_jwks_config_map() {
        let kc = cluster(json!({"listeners": {"clients": [
            {"name": "sso", "port": 9096, "type": "internal", "tls": true,
             "authentication": {"type": "oauth", "oauth": {
                 "jwksConfigMap": {"name": "idp-keys", "key": "jwks.json"},
                 "issuer": "https://idp.example.com", "audience": "kafka"}}},
        ]}}));
        let c = broker_config(&kc);
        assert_eq!(
            c["listener.security.protocol.map"],
            "PLAINTEXT:PLAINTEXT,REPLICATION:SSL,SSO:SASL_SSL"
        );
        assert_eq!(
            c["listener.name.sso.sasl.enabled.mechanisms"],
            "OAUTHBEARER"
        );
        let o = |k: &str| c[&format!("listener.name.sso.oauthbearer.{k}")].clone();
        assert_eq!(
            o("sasl.oauthbearer.jwks.endpoint.url"),
            "file:///etc/skein/oauth-sso/jwks.json"
        );
        assert_eq!(
            o("sasl.oauthbearer.expected.issuer"),
            "https://idp.example.com"
        );
        assert_eq!(o("sasl.oauthbearer.expected.audience"), "kafka");
        assert!(o("sasl.server.callback.handler.class")
            .ends_with("OAuthBearerValidatorCallbackHandler"));
        assert!(!c.contains_key("listener.name.sso.oauthbearer.sasl.oauthbearer.sub.claim.name"));
        let vols = oauth_volumes(&kc);
        assert_eq!(vols.len(), 1);
        assert_eq!(vols[0].0.config_map.as_ref().unwrap().name, "idp-keys");
        assert_eq!(vols[0].1.mount_path, "/etc/skein/oauth-sso");
    }

    /// replicationTls: a REPLICATION listener with mutual TLS carries the
    /// replication; the brokers' subject alone maps to their principal,
    /// which joins the spec's super users.
    #[test]
    fn replication_tls_moves_replication_to_a_mutual_tls_listener() {
        let kc = cluster(json!({"replicas": 2,
            "listeners": {"replicationTls": true},
            "config": {"super.users": "User:ANONYMOUS;"}}));
        let names = ClusterNames::of(&kc);
        let c = broker_config(&kc);
        assert_eq!(
            c["listener.security.protocol.map"],
            "PLAINTEXT:PLAINTEXT,REPLICATION:SSL"
        );
        assert_eq!(c["inter.broker.listener.name"], "REPLICATION");
        assert_eq!(c["listener.name.replication.ssl.client.auth"], "required");
        assert_eq!(
            c["listener.name.replication.ssl.truststore.location"],
            "/etc/skein/listener-tls/ca.crt"
        );
        assert_eq!(
            c["listener.name.replication.ssl.principal.mapping.rules"],
            "RULE:^CN=skein-broker$/skein-broker#replication/"
        );
        assert_eq!(
            c["super.users"],
            "User:ANONYMOUS;User:skein-broker#replication"
        );
        assert!(any_tls(&kc));
        let (_, overrides) = command_parts(&kc, &names);
        assert!(
            overrides.contains("listeners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091"),
            "{overrides}"
        );
        assert!(
            overrides.contains(",REPLICATION://${HOSTNAME}.demo-brokers.ns.svc:9091"),
            "{overrides}"
        );
        assert_eq!(container_ports(&kc)[0].name.as_deref(), Some("replication"));
    }

    /// While a scale-down drains, the leaving broker keeps its Service (the
    /// status still counts its pod); once the pod is gone it goes.
    #[test]
    fn a_leaving_broker_keeps_its_service_until_its_pod_is_gone() {
        let mut kc = with_listeners();
        let names = ClusterNames::of(&kc);
        kc.spec.replicas = 1;
        kc.status = Some(skein_crds::KafkaClusterStatus {
            replicas: 2,
            ..Default::default()
        });
        let svc_names = |kc: &KafkaCluster| -> Vec<String> {
            services(kc, &names)
                .iter()
                .map(|s| s.metadata.name.clone().unwrap())
                .collect()
        };
        assert!(svc_names(&kc).contains(&"demo-external-1".to_string()));
        kc.status.as_mut().unwrap().replicas = 1;
        assert!(!svc_names(&kc).contains(&"demo-external-1".to_string()));
    }
}
