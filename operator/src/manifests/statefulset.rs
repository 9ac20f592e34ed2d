//! The brokers' StatefulSet: one pod and one PersistentVolumeClaim per broker.
//!
//! - broker id = pod ordinal, taken from the hostname (`<cluster>-<ordinal>`)
//!   by the container's shell, so every pod shares one template;
//! - advertised listener = the pod's stable DNS name under the headless Service;
//! - `updateStrategy: OnDelete`: the operator rolls brokers itself, one at a
//!   time, after moving leadership off them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    SecretVolumeSource, SecurityContext, TCPSocketAction, TopologySpreadConstraint, Volume,
    VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skein_crds::KafkaCluster;

use super::config_map::PROPERTIES_KEY;
use super::{
    common_labels, owned_meta, selector_labels, BuildOptions, ClusterNames, CONFIG_HASH_ANNOTATION,
};

/// Where each broker keeps its logs (the PVC mount).
pub const DATA_DIR: &str = "/var/lib/skein";
/// Where `server.properties` is mounted.
pub const CONFIG_DIR: &str = "/etc/skein";
/// Name of the broker container.
pub const CONTAINER: &str = "broker";
/// The volume of the brokers' control-plane certificate (Secret).
const CONTROL_TLS_VOLUME: &str = "control-tls";
/// The volume of the client listeners' certificate (Secret).
const LISTENER_TLS_VOLUME: &str = "listener-tls";

/// Name of the data volume claim template (PVCs are `data-<pod>`).
pub const DATA_VOLUME: &str = "data";
/// UID/GID the broker runs as (matches the broker image).
pub const BROKER_UID: i64 = 65532;

/// The shell line that starts the broker. The ordinal is the hostname's last
/// `-`-separated field; `exec` makes the broker PID 1 so it gets SIGTERM.
pub fn broker_command(kc: &KafkaCluster, names: &ClusterNames) -> String {
    let l = &kc.spec.listeners;
    let (prelude, listener_overrides) = super::listeners::command_parts(kc, names);
    let mut cmd = format!(
        "{prelude}exec skein-broker --node-id \"${{HOSTNAME##*-}}\" --data-dir {DATA_DIR} \
         --listen 0.0.0.0:{kafka} --advertised \"${{HOSTNAME}}.{headless}.{ns}.svc:{kafka}\" \
         --metrics-listen 0.0.0.0:{metrics} --control-listen 0.0.0.0:{control} \
         --config {CONFIG_DIR}/{PROPERTIES_KEY}",
        kafka = l.kafka_port,
        metrics = l.metrics_port,
        control = l.control_port,
        headless = names.headless_service(),
        ns = names.namespace,
    );
    cmd.push_str(&listener_overrides);
    if kc.spec.rack.is_some() {
        // Empty when the pod lacks the topology label: then no rack is set.
        cmd.push_str(" ${SKEIN_RACK:+--override broker.rack=${SKEIN_RACK}}");
    }
    cmd
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(k8s_openapi::api::core::v1::SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn container(kc: &KafkaCluster, names: &ClusterNames, opts: &BuildOptions) -> Container {
    let l = &kc.spec.listeners;
    let mut env = vec![
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
    ];
    if !kc.spec.listeners.clients.is_empty() {
        env.push(field_env(super::listeners::HOST_IP_ENV, "status.hostIP"));
    }
    if let Some(rack) = &kc.spec.rack {
        env.push(field_env(
            "SKEIN_RACK",
            &format!("metadata.labels['{}']", rack.topology_key),
        ));
    }
    if let Some(t) = &kc.spec.tiered_storage {
        // The broker reads the store's credentials from these (never from
        // AWS_* nor instance metadata): docs/tiered-storage.md.
        let c = &t.credentials_secret;
        env.push(secret_env(
            "SKEIN_S3_ACCESS_KEY_ID",
            &c.name,
            &c.access_key_id_key,
        ));
        env.push(secret_env(
            "SKEIN_S3_SECRET_ACCESS_KEY",
            &c.name,
            &c.secret_access_key_key,
        ));
    }
    if kc.delegation_tokens_enabled() {
        // The broker reads `delegation.token.secret.key` from it: the
        // secret stays out of the ConfigMap and the spec.
        env.push(secret_env(
            crate::delegation_token_key::ENV,
            &names.delegation_token_secret(),
            crate::delegation_token_key::KEY,
        ));
    }
    let image = broker_image(kc, opts);
    let healthz = |port: &str| HTTPGetAction {
        path: Some("/healthz".into()),
        port: IntOrString::String(port.into()),
        ..HTTPGetAction::default()
    };
    Container {
        name: CONTAINER.into(),
        image: Some(image.clone()),
        image_pull_policy: kc.spec.image_pull_policy.clone(),
        command: Some(vec!["/bin/sh".into(), "-c".into()]),
        args: Some(vec![broker_command(kc, names)]),
        env: Some(env),
        ports: Some(
            [
                ContainerPort {
                    name: Some("kafka".into()),
                    container_port: l.kafka_port,
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                },
                ContainerPort {
                    name: Some("metrics".into()),
                    container_port: l.metrics_port,
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                },
                ContainerPort {
                    name: Some("control".into()),
                    container_port: l.control_port,
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                },
            ]
            .into_iter()
            .chain(super::listeners::container_ports(kc))
            .collect(),
        ),
        // Log recovery after a crash can take minutes: liveness waits for this.
        startup_probe: Some(Probe {
            http_get: Some(healthz("metrics")),
            period_seconds: Some(10),
            failure_threshold: Some(90),
            ..Probe::default()
        }),
        liveness_probe: Some(Probe {
            http_get: Some(healthz("metrics")),
            period_seconds: Some(10),
            timeout_seconds: Some(5),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        readiness_probe: Some(readiness_probe(&image)),
        resources: kc.spec.resources.clone(),
        volume_mounts: Some(
            vec![
                VolumeMount {
                    name: DATA_VOLUME.into(),
                    mount_path: DATA_DIR.into(),
                    ..VolumeMount::default()
                },
                VolumeMount {
                    name: "config".into(),
                    mount_path: CONFIG_DIR.into(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                },
            ]
            .into_iter()
            .chain([VolumeMount {
                name: CONTROL_TLS_VOLUME.into(),
                mount_path: super::control_tls::MOUNT_DIR.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            }])
            .chain(super::listeners::any_tls(kc).then(|| VolumeMount {
                name: LISTENER_TLS_VOLUME.into(),
                mount_path: super::listeners::TLS_MOUNT_DIR.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            }))
            .chain(
                super::listeners::oauth_volumes(kc)
                    .into_iter()
                    .map(|(_, m)| m),
            )
            .collect(),
        ),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

/// Spread brokers over nodes when the user gave no affinity of their own.
fn default_affinity(names: &ClusterNames) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        topology_key: "kubernetes.io/hostname".into(),
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector_labels(names)),
                            ..LabelSelector::default()
                        }),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

fn pod_template(
    kc: &KafkaCluster,
    names: &ClusterNames,
    opts: &BuildOptions,
    config_hash: &str,
) -> PodTemplateSpec {
    let pt = &kc.spec.pod_template;
    let mut pod_labels = pt.labels.clone();
    pod_labels.extend(common_labels(names)); // ours win: the selector must match
    let mut annotations = pt.annotations.clone();
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), config_hash.into());
    let topology_spread_constraints = kc.spec.rack.as_ref().map(|rack| {
        vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: rack.topology_key.clone(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            label_selector: Some(LabelSelector {
                match_labels: Some(selector_labels(names)),
                ..LabelSelector::default()
            }),
            ..TopologySpreadConstraint::default()
        }]
    });
    let non_empty = |m: &BTreeMap<String, String>| (!m.is_empty()).then(|| m.clone());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            service_account_name: Some(names.service_account()),
            automount_service_account_token: Some(false),
            // Room for a controlled shutdown: leadership moves off before exit.
            termination_grace_period_seconds: Some(60),
            containers: vec![container(kc, names, opts)],
            volumes: Some(
                [Volume {
                    name: "config".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: names.config_map(),
                        ..ConfigMapVolumeSource::default()
                    }),
                    ..Volume::default()
                }]
                .into_iter()
                // The control plane's certificate, always: no broker
                // serves its control port in plaintext.
                .chain([Volume {
                    name: CONTROL_TLS_VOLUME.into(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(names.control_tls_secret()),
                        default_mode: Some(0o440),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                }])
                .chain(super::listeners::any_tls(kc).then(|| Volume {
                    name: LISTENER_TLS_VOLUME.into(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(names.listener_tls_secret()),
                        default_mode: Some(0o440),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                }))
                .chain(
                    super::listeners::oauth_volumes(kc)
                        .into_iter()
                        .map(|(v, _)| v),
                )
                .collect(),
            ),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(BROKER_UID),
                run_as_group: Some(BROKER_UID),
                fs_group: Some(BROKER_UID),
                ..PodSecurityContext::default()
            }),
            node_selector: non_empty(&pt.node_selector),
            tolerations: (!pt.tolerations.is_empty()).then(|| pt.tolerations.clone()),
            affinity: Some(
                pt.affinity
                    .clone()
                    .unwrap_or_else(|| default_affinity(names)),
            ),
            topology_spread_constraints,
            priority_class_name: pt.priority_class_name.clone(),
            ..PodSpec::default()
        }),
    }
}

fn data_claim(kc: &KafkaCluster, names: &ClusterNames) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(DATA_VOLUME.into()),
            labels: Some(selector_labels(names)),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: kc.spec.storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    kc.spec.storage.size.clone(),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}

/// The image the brokers run: the spec's (or the operator's default),
/// except while a roll to it has been undone (`status.imageRollback`): then
/// the image they ran before.
pub fn broker_image(kc: &KafkaCluster, opts: &BuildOptions) -> String {
    match kc.image_rollback_in_effect(&opts.default_broker_image) {
        Some(r) => r.restored_image.clone(),
        None => kc.image_or(&opts.default_broker_image).to_string(),
    }
}

/// Whether the broker of `image` answers `GET /readyz` (0.2.0 and later).
/// An image tagged with an older release gets the probe those releases
/// had (the Kafka port accepts connections); any other tag, a digest or no
/// tag is taken to be a current one.
pub fn serves_readyz(image: &str) -> bool {
    let name = image.rsplit('/').next().unwrap_or(image);
    if name.contains('@') {
        return true;
    }
    let Some((_, tag)) = name.rsplit_once(':') else {
        return true;
    };
    let mut parts = tag.trim_start_matches('v').split(['.', '-', '+']);
    let mut num = || parts.next().and_then(|p| p.parse::<u64>().ok());
    match (num(), num(), num()) {
        (Some(major), Some(minor), Some(_)) => (major, minor) >= (0, 2),
        _ => true,
    }
}

/// Ready when `/readyz` says so: in session with the controller, not
/// shutting down, and in the ISR of every partition it follows (or within
/// `readiness.replica.lag.max.messages`). Rolls wait for it.
fn readiness_probe(image: &str) -> Probe {
    match serves_readyz(image) {
        true => Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/readyz".into()),
                port: IntOrString::String("metrics".into()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(5),
            timeout_seconds: Some(3),
            failure_threshold: Some(3),
            ..Probe::default()
        },
        false => Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("kafka".into()),
                ..TCPSocketAction::default()
            }),
            period_seconds: Some(5),
            failure_threshold: Some(3),
            ..Probe::default()
        },
    }
}

/// Builds the StatefulSet. `config_hash` is the ConfigMap's hash (see
/// [`super::config_map::properties_hash`]).
pub fn build(
    kc: &KafkaCluster,
    names: &ClusterNames,
    opts: &BuildOptions,
    config_hash: &str,
) -> StatefulSet {
    StatefulSet {
        metadata: owned_meta(kc, names, names.statefulset()),
        spec: Some(StatefulSetSpec {
            replicas: Some(kc.spec.replicas),
            service_name: Some(names.headless_service()),
            selector: LabelSelector {
                match_labels: Some(selector_labels(names)),
                ..LabelSelector::default()
            },
            // Brokers find each other through the controller; no need to start in order.
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".into()),
                ..StatefulSetUpdateStrategy::default()
            }),
            template: pod_template(kc, names, opts, config_hash),
            volume_claim_templates: Some(vec![data_claim(kc, names)]),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn cluster(spec: serde_json::Value) -> KafkaCluster {
        serde_json::from_value(json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": "my-cluster", "namespace": "ns"}, "spec": spec,
        }))
        .unwrap()
    }

    /// Runs the container's shell line with `echo` in place of the broker.
    fn expand(kc: &KafkaCluster, hostname: &str, rack: Option<&str>) -> String {
        let names = ClusterNames::of(kc);
        let line = broker_command(kc, &names).replacen("exec skein-broker", "echo", 1);
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(line).env("HOSTNAME", hostname);
        match rack {
            Some(r) => cmd.env("SKEIN_RACK", r),
            None => cmd.env("SKEIN_RACK", ""),
        };
        String::from_utf8(cmd.output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn node_id_is_the_pod_ordinal_and_the_advertised_name_is_stable() {
        let kc = cluster(json!({}));
        let args = expand(&kc, "my-cluster-12", None);
        assert!(
            args.starts_with("--node-id 12 --data-dir /var/lib/skein"),
            "{args}"
        );
        assert!(
            args.contains("--advertised my-cluster-12.my-cluster-brokers.ns.svc:9092"),
            "{args}"
        );
        assert!(
            args.ends_with("--config /etc/skein/server.properties"),
            "{args}"
        );
    }

    /// The broker command as `sh` runs it in pod `hostname`, with the
    /// ConfigMap's listener files.
    fn run_command(kc: &KafkaCluster, hostname: &str) -> String {
        let names = ClusterNames::of(kc);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("node-ports"),
            "external.0=31000\nexternal.12=31012\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("advertised-hosts"), "lb.12=203.0.113.7\n").unwrap();
        let line = broker_command(kc, &names)
            .replacen("exec skein-broker", "echo", 1)
            .replace(CONFIG_DIR, dir.path().to_str().unwrap());
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(line)
            .env("HOSTNAME", hostname)
            .env("SKEIN_HOST_IP", "10.1.2.3")
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn client_listeners_bind_and_advertise_per_pod() {
        let kc = cluster(json!({"listeners": {"clients": [
            {"name": "tls", "port": 9093, "type": "internal", "tls": true},
            {"name": "external", "port": 9094, "type": "nodeport"},
            {"name": "lb", "port": 9095, "type": "loadbalancer"},
        ]}}));
        let args = run_command(&kc, "my-cluster-12");
        assert!(
            args.contains(
                "--override listeners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091,TLS://0.0.0.0:9093,EXTERNAL://0.0.0.0:9094,LB://0.0.0.0:9095"
            ),
            "{args}"
        );
        assert!(
            args.contains("--override advertised.listeners=PLAINTEXT://my-cluster-12.my-cluster-brokers.ns.svc:9092,REPLICATION://my-cluster-12.my-cluster-brokers.ns.svc:9091,TLS://my-cluster-12.my-cluster-brokers.ns.svc:9093,EXTERNAL://10.1.2.3:31012,LB://203.0.113.7:9095"),
            "{args}"
        );
        // No load balancer address yet for broker 0: its pod name meanwhile.
        let args = run_command(&kc, "my-cluster-0");
        assert!(
            args.contains(
                "EXTERNAL://10.1.2.3:31000,LB://my-cluster-0.my-cluster-brokers.ns.svc:9095"
            ),
            "{args}"
        );
    }

    /// With delegation tokens on, the broker gets their key from the
    /// cluster's Secret through the environment; off, no such variable.
    #[test]
    fn delegation_tokens_give_the_broker_the_key_from_the_secret() {
        let env_of = |spec| {
            let kc = cluster(spec);
            let names = ClusterNames::of(&kc);
            let sts = build(&kc, &names, &BuildOptions::default(), "h");
            let pod = sts.spec.unwrap().template.spec.unwrap();
            pod.containers[0].env.clone().unwrap_or_default()
        };
        let env = env_of(json!({"delegationTokens": {"enabled": true}}));
        let var = env
            .iter()
            .find(|e| e.name == crate::delegation_token_key::ENV)
            .expect("the key's variable");
        let from = var
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
            .expect("from a Secret");
        assert_eq!(
            (from.name.as_str(), from.key.as_str()),
            ("my-cluster-delegation-token-key", "secret-key")
        );
        assert!(var.value.is_none(), "never the key itself");
        for spec in [json!({}), json!({"delegationTokens": {"enabled": false}})] {
            assert!(!env_of(spec)
                .iter()
                .any(|e| e.name == crate::delegation_token_key::ENV));
        }
    }

    /// Every broker pod mounts the control plane's certificate, whatever
    /// the deprecated `controlPlaneTls` says, and the operator reads it as a
    /// pod that serves mutual TLS.
    #[test]
    fn every_pod_mounts_the_control_plane_certificate() {
        for spec in [json!({}), json!({"listeners": {"controlPlaneTls": false}})] {
            let kc = cluster(spec);
            let names = ClusterNames::of(&kc);
            let sts = build(&kc, &names, &BuildOptions::default(), "h");
            let pod = sts.spec.unwrap().template.spec.unwrap();
            let volume = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == CONTROL_TLS_VOLUME)
                .expect("control-tls volume");
            assert_eq!(
                volume.secret.as_ref().unwrap().secret_name.as_deref(),
                Some("my-cluster-control-tls")
            );
            let mount = pod.containers[0]
                .volume_mounts
                .iter()
                .flatten()
                .find(|m| m.name == CONTROL_TLS_VOLUME)
                .expect("control-tls mount");
            assert_eq!(mount.mount_path, super::super::control_tls::MOUNT_DIR);
            let as_pod = Pod {
                spec: Some(pod),
                ..Pod::default()
            };
            assert!(!crate::control_tls::serves_plaintext(&as_pod, &names));
        }
    }

    #[test]
    fn rack_comes_from_the_pod_label_when_present() {
        let kc = cluster(json!({"rack": {}}));
        assert!(expand(&kc, "my-cluster-0", Some("eu-west-1a"))
            .ends_with("--override broker.rack=eu-west-1a"));
        assert!(expand(&kc, "my-cluster-0", None).ends_with("server.properties"));
    }

    #[test]
    fn readiness_is_the_brokers_readyz_except_for_releases_before_it() {
        for image in [
            "ghcr.io/skein-dev/skein-broker:0.2.0",
            "skein-broker:v1.0.0-rc1",
            "registry:5000/skein-broker:latest",
            "skein-broker",
            "skein-broker@sha256:0123",
        ] {
            assert!(serves_readyz(image), "{image}");
        }
        for image in [
            "ghcr.io/skein-dev/skein-broker:0.1.0",
            "registry:5000/skein:v0.1.7",
        ] {
            assert!(!serves_readyz(image), "{image}");
        }
        let opts = BuildOptions::default();
        let kc = cluster(json!({"image": "skein-broker:0.3.0"}));
        let sts = build(&kc, &ClusterNames::of(&kc), &opts, "h");
        let c = &sts.spec.unwrap().template.spec.unwrap().containers[0];
        let probe = c
            .readiness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap();
        assert_eq!(probe.path.as_deref(), Some("/readyz"));
        assert_eq!(probe.port, IntOrString::String("metrics".into()));
        let old = cluster(json!({"image": "skein-broker:0.1.0"}));
        let sts = build(&old, &ClusterNames::of(&old), &opts, "h");
        let c = &sts.spec.unwrap().template.spec.unwrap().containers[0];
        assert!(c.readiness_probe.as_ref().unwrap().tcp_socket.is_some());
    }

    #[test]
    fn an_undone_image_roll_keeps_the_image_before_it_until_the_spec_names_another() {
        let opts = BuildOptions::default();
        let mut kc = cluster(json!({"image": "skein-broker:bad"}));
        assert_eq!(broker_image(&kc, &opts), "skein-broker:bad");
        kc.status = Some(skein_crds::KafkaClusterStatus {
            image_rollback: Some(skein_crds::ImageRollbackStatus {
                failed_image: "skein-broker:bad".into(),
                restored_image: "skein-broker:good".into(),
                pod: "my-cluster-2".into(),
                time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                message: String::new(),
            }),
            ..Default::default()
        });
        assert_eq!(broker_image(&kc, &opts), "skein-broker:good");
        let sts = build(&kc, &ClusterNames::of(&kc), &opts, "h");
        let c = &sts.spec.unwrap().template.spec.unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some("skein-broker:good"));
        kc.spec.image = Some("skein-broker:fixed".into());
        assert_eq!(broker_image(&kc, &opts), "skein-broker:fixed");
    }
}
