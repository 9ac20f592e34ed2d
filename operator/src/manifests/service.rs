//! The two Services: a headless one that gives every broker a stable DNS name
//! (the advertised listener), and the bootstrap Service clients start from.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skein_crds::KafkaCluster;

use super::{owned_meta, selector_labels, ClusterNames};

fn ports(kc: &KafkaCluster) -> Vec<ServicePort> {
    let l = &kc.spec.listeners;
    [
        ServicePort {
            name: Some("kafka".into()),
            port: l.kafka_port,
            target_port: Some(IntOrString::String("kafka".into())),
            protocol: Some("TCP".into()),
            ..ServicePort::default()
        },
        ServicePort {
            name: Some("metrics".into()),
            port: l.metrics_port,
            target_port: Some(IntOrString::String("metrics".into())),
            protocol: Some("TCP".into()),
            ..ServicePort::default()
        },
    ]
    .into_iter()
    .chain(super::listeners::internal_service_ports(kc))
    .collect()
}

/// Headless Service. `publishNotReadyAddresses` so brokers can reach each
/// other (replication, controller sessions) before they report ready.
pub fn build_headless(kc: &KafkaCluster, names: &ClusterNames) -> Service {
    Service {
        metadata: owned_meta(kc, names, names.headless_service()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector_labels(names)),
            ports: Some(ports(kc)),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Bootstrap Service: only ready brokers, of the type the spec asks for.
pub fn build_bootstrap(kc: &KafkaCluster, names: &ClusterNames) -> Service {
    let mut metadata = owned_meta(kc, names, names.bootstrap_service());
    let annotations = &kc.spec.listeners.bootstrap_service_annotations;
    if !annotations.is_empty() {
        metadata.annotations = Some(annotations.clone());
    }
    // Kafka's ports only: the plaintext one and the internal listeners'.
    let kafka_only = ports(kc)
        .into_iter()
        .filter(|p| p.name.as_deref() != Some("metrics"))
        .collect();
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: Some(kc.spec.listeners.bootstrap_service_type.as_str().into()),
            selector: Some(selector_labels(names)),
            ports: Some(kafka_only),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}
