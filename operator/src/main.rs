//! `skein-operator`: print the CRDs, or run the operator on Kubernetes.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use skein_operator::kubernetes::{run, KubernetesOptions};
use skein_operator::leader::LeaseConfig;
use skein_operator::manifests::BuildOptions;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(name = "skein-operator", version, about = "Skein's control plane")]
struct Cli {
    /// Log format: `text` or `json`.
    #[arg(long, global = true, default_value = "text")]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the KafkaCluster and Topic CRDs as YAML.
    Crds,
    /// Run the operator against the Kubernetes API (in-cluster or kubeconfig).
    Kubernetes(KubernetesArgs),
    /// Run a cluster on this machine without Kubernetes: the controller in
    /// this process and N `skein-broker` processes on loopback.
    Local(LocalArgs),
    /// Print the controller's committed metadata (cluster id and image) as
    /// JSON, read from a metadata log directory without changing it, e.g.
    /// `skein-data/controller/cluster-metadata` or a lone broker's
    /// `<data-dir>/cluster-metadata`.
    Metadata {
        /// The metadata log directory.
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct LocalArgs {
    /// Number of brokers (ids 1..=N).
    #[arg(long, default_value_t = 3)]
    brokers: u32,
    /// Where the controller's metadata and each broker's logs live.
    #[arg(long, default_value = "./skein-data")]
    data_dir: PathBuf,
    /// Host every listener binds and advertises.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Kafka port of broker 1; broker N listens on this + N - 1.
    #[arg(long, default_value_t = 9092)]
    kafka_port: u16,
    /// Control port (gRPC, dialled by the controller) of broker 1.
    #[arg(long, default_value_t = 9192)]
    control_port: u16,
    /// Metrics port of broker 1.
    #[arg(long, default_value_t = 9644)]
    broker_metrics_port: u16,
    /// Address of the controller's `/metrics`.
    #[arg(long, default_value = "127.0.0.1:9643")]
    metrics_listen: SocketAddr,
    /// The `skein-broker` executable (default: next to this one, else on PATH).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// `broker.session.timeout.ms`: a broker whose heartbeats stop this long is fenced.
    #[arg(long, default_value_t = 6000)]
    session_timeout_ms: u64,
    /// A broker config for every broker, by its Kafka name; `{id}` in the
    /// value becomes the broker's id (`broker.rack=zone-{id}`). Repeatable.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Host of each broker with `{id}` for its id, instead of --host
    /// (e.g. `10.77.0.{id}`, one network namespace per broker).
    #[arg(long, value_name = "TEMPLATE")]
    broker_host_template: Option<String>,
    /// Command that runs each broker, `{id}` for its id
    /// (e.g. `ip netns exec skein-{id}`).
    #[arg(long, value_name = "COMMAND")]
    launcher: Option<String>,
    /// Serve the Kafka ports over TLS with client certificates required
    /// and replicate over TLS: a throwaway CA and certificates are made
    /// under <data-dir>/tls, and the client settings are printed.
    #[arg(long)]
    tls: bool,
    /// Self-healing: the replicas of a broker gone (fenced) this long are
    /// re-created on the other brokers. Off unless given (the local
    /// platform restarts dead broker processes itself).
    #[arg(long, value_name = "SECONDS")]
    broker_loss_grace_seconds: Option<u64>,
    /// Tiered storage (KIP-405) on every broker: closed segments of topics
    /// with `remote.storage.enable=true` are copied to this store, a
    /// directory or `s3://bucket[/prefix]` (then give
    /// `--tiered-storage-endpoint` for a non-AWS server and the credentials
    /// as `--override rsm.config.s3.access.key.id=…` and
    /// `rsm.config.s3.secret.access.key=…`).
    #[arg(long, value_name = "DIR|s3://BUCKET[/PREFIX]")]
    tiered_storage: Option<String>,
    /// The S3 endpoint of `--tiered-storage s3://…` (e.g. `http://127.0.0.1:8333`).
    #[arg(long, value_name = "URL", requires = "tiered_storage")]
    tiered_storage_endpoint: Option<String>,
}

/// The broker configs `--tiered-storage` stands for (a relative directory
/// is made absolute: brokers may run elsewhere).
fn tiered_storage_overrides(store: Option<&str>, endpoint: Option<&str>) -> Vec<String> {
    let Some(store) = store else {
        return Vec::new();
    };
    let url = if store.contains("://") || std::path::Path::new(store).is_absolute() {
        store.to_string()
    } else {
        std::env::current_dir()
            .map(|d| d.join(store).display().to_string())
            .unwrap_or_else(|_| store.to_string())
    };
    let mut o = vec![
        "remote.log.storage.system.enable=true".to_string(),
        format!("rsm.config.storage.url={url}"),
    ];
    if let Some(e) = endpoint {
        o.push(format!("rsm.config.s3.endpoint={e}"));
    }
    o
}

#[derive(clap::Args)]
struct KubernetesArgs {
    /// Address of `/metrics` and `/healthz`.
    #[arg(long, env = "SKEIN_METRICS_LISTEN", default_value = "0.0.0.0:9645")]
    metrics_listen: SocketAddr,
    /// Namespace to watch (repeatable, or comma-separated); all namespaces when unset.
    #[arg(
        long = "namespace",
        env = "SKEIN_WATCH_NAMESPACES",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Broker image for clusters that do not name one.
    #[arg(long, env = "SKEIN_DEFAULT_BROKER_IMAGE")]
    default_broker_image: Option<String>,
    /// Elect a leader through a Lease so several replicas can run.
    #[arg(long, env = "SKEIN_LEADER_ELECTION", default_value_t = false)]
    leader_election: bool,
    /// Name of the Lease.
    #[arg(long, env = "SKEIN_LEASE_NAME", default_value = "skein-operator")]
    lease_name: String,
    /// Namespace of the Lease (the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Seconds a Lease stays valid without renewal.
    #[arg(long, default_value_t = 15)]
    lease_duration_seconds: u64,
    /// Give every cluster a NetworkPolicy: the control port only from the
    /// operator's pods, replication only between brokers, client listeners
    /// from their `networkPolicyPeers`.
    #[arg(long, env = "SKEIN_NETWORK_POLICIES", default_value_t = false)]
    network_policies: bool,
    /// Shortest phase of a certificate authority's replacement, in seconds:
    /// the time for kubelets to update mounted Secrets, brokers to reload
    /// them and clients to take the new CA bundle.
    #[arg(long, env = "SKEIN_CA_PHASE_SECONDS", default_value_t = 300)]
    ca_phase_seconds: u64,
    /// Seconds in a day of `spec.certificates.validityDays` and
    /// `renewalDays`. Only for testing rotation on a short clock (e.g. 2:
    /// `validityDays: 60` lasts two minutes); keep the default otherwise.
    #[arg(long, env = "SKEIN_CERTIFICATE_DAY_SECONDS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    certificate_day_seconds: u64,
    /// Lifetime of the control planes' leaf certificates (the brokers' and
    /// the controller's), in seconds; renewed with a third left. The CA
    /// lives ten years. Keep a third of it well above the time kubelets
    /// take to update a mounted Secret (about a minute).
    #[arg(long, env = "SKEIN_CONTROL_CERT_SECONDS", default_value_t = 90 * 86_400,
          value_parser = clap::value_parser!(u64).range(30..))]
    control_cert_seconds: u64,
    /// Labels of the operator's pods (`k=v,k=v`), the peers of the brokers'
    /// control port under a NetworkPolicy.
    #[arg(
        long,
        env = "SKEIN_OPERATOR_POD_LABELS",
        value_delimiter = ',',
        default_value = "app.kubernetes.io/name=skein-operator"
    )]
    operator_pod_labels: Vec<String>,
    /// `broker.session.timeout.ms` of every cluster's controller: a broker
    /// whose session stays broken this long is fenced.
    #[arg(long, env = "SKEIN_BROKER_SESSION_TIMEOUT_MS", default_value_t = 9000)]
    session_timeout_ms: u64,
}

fn init_logging(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only on a terminal: a log file or a container log must not carry escape codes.
    let ansi = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds => {
            print!("{}", skein_crds::crd_yaml());
            ExitCode::SUCCESS
        }
        Command::Metadata { dir } => {
            let read = skein_controller::FileBlobStore::open_existing(&dir)
                .and_then(|store| skein_controller::MetadataLog::read(Box::new(store)));
            match read {
                Ok(Some((cluster_id, image))) => {
                    let out = serde_json::json!({ "cluster_id": cluster_id, "image": image });
                    println!("{out:#}");
                    ExitCode::SUCCESS
                }
                Ok(None) => {
                    eprintln!(
                        "skein-operator metadata: no metadata log in {}",
                        dir.display()
                    );
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("skein-operator metadata: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Local(args) => {
            init_logging(&cli.log_format);
            let opts = skein_operator::local::LocalOptions {
                brokers: args.brokers,
                data_dir: args.data_dir,
                host: args.host,
                kafka_port: args.kafka_port,
                control_port: args.control_port,
                broker_metrics_port: args.broker_metrics_port,
                metrics_listen: args.metrics_listen,
                broker_bin: args
                    .broker_bin
                    .unwrap_or_else(skein_operator::local::default_broker_bin),
                // The user's own overrides come last: they win.
                overrides: tiered_storage_overrides(
                    args.tiered_storage.as_deref(),
                    args.tiered_storage_endpoint.as_deref(),
                )
                .into_iter()
                .chain(args.overrides)
                .collect(),
                session_timeout_ms: args.session_timeout_ms,
                broker_host_template: args.broker_host_template,
                launcher: args.launcher,
                tls: args.tls,
                broker_loss_grace_seconds: args.broker_loss_grace_seconds,
            };
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("skein-operator: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(skein_operator::local::run_local(opts, shutdown_signal())) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("skein-operator local: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Kubernetes(args) => {
            init_logging(&cli.log_format);
            let mut build = BuildOptions::default();
            if let Some(image) = args.default_broker_image {
                build.default_broker_image = image;
            }
            build.network_policies = args.network_policies;
            build.certificates = skein_operator::ca::Timing {
                phase: std::time::Duration::from_secs(args.ca_phase_seconds),
                day: std::time::Duration::from_secs(args.certificate_day_seconds),
            };
            build.operator_namespace = args.lease_namespace.clone();
            let labels: Option<std::collections::BTreeMap<String, String>> = args
                .operator_pod_labels
                .iter()
                .map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                })
                .collect();
            match labels {
                Some(labels) if !labels.is_empty() => build.operator_pod_labels = labels,
                _ => {
                    eprintln!(
                        "--operator-pod-labels: expected k=v[,k=v…], got {:?}",
                        args.operator_pod_labels
                    );
                    return ExitCode::FAILURE;
                }
            }
            let lease = args.leader_election.then(|| {
                let identity = args
                    .identity
                    .clone()
                    .unwrap_or_else(|| format!("skein-operator-{}", std::process::id()));
                let duration = Duration::from_secs(args.lease_duration_seconds.max(2));
                LeaseConfig {
                    name: args.lease_name.clone(),
                    namespace: args.lease_namespace.clone(),
                    identity,
                    lease_duration: duration,
                    renew_every: duration / 3,
                }
            });
            let opts = KubernetesOptions {
                metrics_listen: args.metrics_listen,
                namespaces: args.namespaces,
                build,
                lease,
                session_timeout_ms: args.session_timeout_ms,
                control_certs: skein_operator::control_tls::Lifetimes {
                    leaf: Duration::from_secs(args.control_cert_seconds),
                    ..Default::default()
                },
            };
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("skein-operator: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(run(opts)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
