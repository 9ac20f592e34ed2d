//! The `local` platform: the controller core and N `skein-broker` processes
//! on this machine, no Kubernetes. The controller runs in this process with
//! its metadata log in `<data-dir>/controller/cluster-metadata/` (written
//! atomically); each broker gets `<data-dir>/broker-<id>/`, a Kafka port, a
//! control port (the controller dials it) and a metrics port. A broker that
//! dies is started again, as a StatefulSet would; Ctrl-C or SIGTERM stops
//! the brokers one at a time (each moves its leadership away first), then
//! the controller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use prometheus::{IntGauge, IntGaugeVec, Opts, Registry};
use skein_controller::rpc::maintain_session;
use skein_controller::ControllerConfig;
use skein_controller::ControllerService;
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tracing::{error, info, warn};

/// How to run the local cluster.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    pub brokers: u32,
    pub data_dir: PathBuf,
    /// Host every listener binds and advertises.
    pub host: String,
    /// Kafka port of broker 1; broker `i` listens on `kafka_port + i - 1`.
    pub kafka_port: u16,
    /// Control port of broker 1 (the controller's sessions).
    pub control_port: u16,
    /// Metrics port of broker 1.
    pub broker_metrics_port: u16,
    /// The controller's `/metrics`.
    pub metrics_listen: SocketAddr,
    /// The `skein-broker` executable.
    pub broker_bin: PathBuf,
    /// Extra broker configs (`key=value`), passed to every broker, `{id}`
    /// replaced by its id.
    pub overrides: Vec<String>,
    /// `broker.session.timeout.ms`: a broker whose heartbeats stop this long is fenced.
    pub session_timeout_ms: u64,
    /// Per-broker host, `{id}` replaced by the broker id (overrides `host`
    /// for brokers; e.g. one network namespace per broker).
    pub broker_host_template: Option<String>,
    /// A command line that runs each broker, `{id}` replaced
    /// (e.g. `ip netns exec skein-{id}`); the broker's own command follows it.
    pub launcher: Option<String>,
    /// Kafka ports over TLS (client certificates required), replication
    /// too, with a throwaway CA under `<data_dir>/tls`.
    pub tls: bool,
    /// Self-healing's grace period; `None` leaves it off.
    pub broker_loss_grace_seconds: Option<u64>,
}

/// One broker this process supervises.
struct BrokerProcess {
    id: i32,
    kafka: String,
    control: String,
    metrics: String,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    restarts: u32,
    /// This broker's own configs (its TLS listener).
    own: Vec<String>,
}

impl BrokerProcess {
    fn spawn(&mut self, opts: &LocalOptions, extra: &[String]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.data_dir)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut cmd = match &opts.launcher {
            Some(l) => {
                let l = l.replace("{id}", &self.id.to_string());
                let mut words = l.split_whitespace();
                let mut cmd = Command::new(words.next().unwrap_or_default());
                cmd.args(words).arg(&opts.broker_bin);
                cmd
            }
            None => Command::new(&opts.broker_bin),
        };
        cmd.arg("--node-id")
            .arg(self.id.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen")
            .arg(&self.kafka)
            .arg("--control-listen")
            .arg(&self.control)
            .arg("--metrics-listen")
            .arg(&self.metrics);
        for o in extra.iter().chain(&self.own).chain(&opts.overrides) {
            // `{id}` makes a per-broker value (e.g. `broker.rack=zone-{id}`).
            cmd.arg("--override")
                .arg(o.replace("{id}", &self.id.to_string()));
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot start {}: {e}", opts.broker_bin.display()),
            )
        })?;
        info!(broker = self.id, pid = child.id(), kafka = %self.kafka, "broker started");
        self.child = Some(child);
        Ok(())
    }

    /// SIGTERM, then SIGKILL after `grace`.
    async fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
        }
        match tokio::time::timeout(grace, child.wait()).await {
            Ok(Ok(status)) => info!(broker = self.id, %status, "broker stopped"),
            _ => {
                warn!(broker = self.id, "broker did not stop in time; killing it");
                let _ = child.kill().await;
            }
        }
    }
}

/// Controller metrics of the local platform.
struct ControllerMetrics {
    sessions: IntGaugeVec,
    offline: IntGauge,
    under_replicated: IntGauge,
    below_replication_factor: IntGauge,
    broker_restarts: IntGaugeVec,
    reassigning: IntGauge,
}

impl ControllerMetrics {
    fn new(registry: &Registry) -> prometheus::Result<Self> {
        let sessions = IntGaugeVec::new(
            Opts::new(
                "skein_controller_broker_sessions",
                "1 while the controller has a session with the broker.",
            ),
            &["broker"],
        )?;
        let offline = IntGauge::new(
            "skein_controller_partitions_offline",
            "Partitions without a leader.",
        )?;
        let under_replicated = IntGauge::new(
            "skein_controller_partitions_under_replicated",
            "Partitions whose ISR is smaller than their replica set.",
        )?;
        let below_replication_factor = IntGauge::new(
            "skein_controller_partitions_below_replication_factor",
            "Partitions with fewer in-sync replicas on live brokers than their replication factor.",
        )?;
        registry.register(Box::new(below_replication_factor.clone()))?;
        let broker_restarts = IntGaugeVec::new(
            Opts::new(
                "skein_local_broker_restarts",
                "Times the local platform restarted a broker process that died.",
            ),
            &["broker"],
        )?;
        registry.register(Box::new(sessions.clone()))?;
        registry.register(Box::new(offline.clone()))?;
        registry.register(Box::new(under_replicated.clone()))?;
        registry.register(Box::new(broker_restarts.clone()))?;
        let reassigning = IntGauge::new(
            "skein_controller_reassignments_in_progress",
            "Partitions whose replicas are being moved.",
        )?;
        registry.register(Box::new(reassigning.clone()))?;
        Ok(Self {
            sessions,
            offline,
            under_replicated,
            below_replication_factor,
            broker_restarts,
            reassigning,
        })
    }

    fn observe(&self, controller: &ControllerService) {
        let health = controller.view().partition_health();
        self.offline.set(health.offline as i64);
        self.under_replicated.set(health.under_replicated as i64);
        self.below_replication_factor
            .set(health.below_replication_factor as i64);
        self.reassigning.set(health.reassigning as i64);
    }
}

/// The value of the last `--override KEY=VALUE` for `key`.
fn override_value<'a>(overrides: &'a [String], key: &str) -> Option<&'a str> {
    overrides
        .iter()
        .rev()
        .filter_map(|o| o.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
}

/// Runs the local cluster until `shutdown` completes.
pub async fn run_local(
    opts: LocalOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    anyhow::ensure!(opts.brokers >= 1, "--brokers must be at least 1");
    std::fs::create_dir_all(opts.data_dir.join("controller"))?;
    // The brokers' cluster-wide settings the controller acts on
    // (min.insync.replicas for the eligible leader replicas, unclean
    // elections, the preferred-leader rebalance).
    let config = ControllerConfig {
        broker_session_timeout_ms: opts.session_timeout_ms,
        self_healing: opts
            .broker_loss_grace_seconds
            .map(|s| skein_controller::SelfHealingConfig {
                broker_loss_grace_ms: s.saturating_mul(1000),
                excluded: Default::default(),
            }),
        ..Default::default()
    }
    .with_broker_settings(|k| override_value(&opts.overrides, k));
    let controller = ControllerService::open(
        Some(&opts.data_dir.join("controller").join("cluster-metadata")),
        config,
    )?;
    let ticker = controller.spawn_ticker(Duration::from_millis(250));
    let registry = Registry::new();
    let metrics = Arc::new(ControllerMetrics::new(&registry)?);
    registry.register(Box::new(controller.elections.clone()))?;
    registry.register(Box::new(controller.storage_lost.clone()))?;
    registry.register(Box::new(controller.self_healing.clone()))?;
    #[cfg(target_os = "linux")]
    registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))?;
    let metrics_task = {
        let registry = registry.clone();
        let addr = opts.metrics_listen;
        tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen for metrics on {addr}: {e}"))?;
        tokio::spawn(async move {
            if let Err(e) = crate::http::serve(addr, registry).await {
                error!(%addr, error = %e, "metrics endpoint failed");
            }
        })
    };
    let observer = {
        let (m, c) = (metrics.clone(), controller.clone());
        tokio::spawn(async move {
            loop {
                m.observe(&c);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };

    // The default replication factor follows the cluster size up to 3, and
    // so does `__consumer_offsets`'s: set, so it is only created once that
    // many brokers are up (a group's first request while brokers are still
    // starting would otherwise make it smaller for ever).
    let extra = vec![
        format!("default.replication.factor={}", opts.brokers.min(3)),
        format!("offsets.topic.replication.factor={}", opts.brokers.min(3)),
    ];
    let mut brokers: Vec<BrokerProcess> = (1..=opts.brokers as i32)
        .map(|id| {
            let off = (id - 1) as u16;
            let host = match &opts.broker_host_template {
                Some(t) => t.replace("{id}", &id.to_string()),
                None => opts.host.clone(),
            };
            BrokerProcess {
                id,
                kafka: format!("{host}:{}", opts.kafka_port + off),
                control: format!("{host}:{}", opts.control_port + off),
                metrics: format!("{host}:{}", opts.broker_metrics_port + off),
                data_dir: opts.data_dir.join(format!("broker-{id}")),
                log: opts.data_dir.join(format!("broker-{id}.log")),
                child: None,
                restarts: 0,
                own: Vec::new(),
            }
        })
        .collect();
    let pki = match opts.tls {
        true => {
            let hosts: Vec<(i32, String)> = brokers
                .iter()
                .map(|b| {
                    (
                        b.id,
                        b.kafka
                            .rsplit_once(':')
                            .map(|(h, _)| h.to_string())
                            .unwrap_or_default(),
                    )
                })
                .collect();
            let pki = crate::local_tls::make(&opts.data_dir.join("tls"), &hosts)?;
            for b in &mut brokers {
                b.own = pki.broker_overrides(b.id, &b.kafka);
            }
            Some(pki)
        }
        false => None,
    };
    // With --tls the control plane is mutual TLS too.
    let control_tls = match &pki {
        Some(p) => Some(
            skein_controller::rpc::tls::client_config(&p.controller_files())
                .map_err(|e| anyhow::anyhow!("control-plane TLS: {e}"))?,
        ),
        None => None,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut sessions = Vec::new();
    for b in &mut brokers {
        b.spawn(&opts, &extra)?;
        sessions.push(tokio::spawn(maintain_session(
            controller.clone(),
            format!("http://{}", b.control),
            Some(b.id),
            stop_rx.clone(),
            Some(metrics.sessions.clone()),
            skein_controller::rpc::tls::fixed_client_tls(control_tls.clone()),
        )));
    }
    let bootstrap: Vec<&str> = brokers.iter().map(|b| b.kafka.as_str()).collect();
    println!("skein local cluster: {} broker(s)", brokers.len());
    println!("  bootstrap servers: {}", bootstrap.join(","));
    for b in &brokers {
        println!(
            "  broker {}: kafka {}  metrics http://{}/metrics  log {}",
            b.id,
            b.kafka,
            b.metrics,
            b.log.display()
        );
    }
    println!(
        "  controller metrics: http://{}/metrics  metadata {}",
        opts.metrics_listen,
        opts.data_dir.join("controller").display()
    );
    if let Some(pki) = &pki {
        println!(
            "  TLS (client certificates required), CA and certificates in {}",
            pki.dir.display()
        );
        println!(
            "  client settings: {} (confluent-kafka, kcat -F), {} (Java tools --command-config)",
            pki.librdkafka_properties.display(),
            pki.java_properties.display()
        );
    }
    println!("Ctrl-C stops the cluster.");

    tokio::pin!(shutdown);
    let mut check = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = check.tick() => {
                for b in &mut brokers {
                    let exited = match b.child.as_mut().map(|c| c.try_wait()) {
                        Some(Ok(Some(status))) => Some(status.to_string()),
                        Some(Err(e)) => Some(e.to_string()),
                        _ => None,
                    };
                    if let Some(status) = exited {
                        b.restarts += 1;
                        warn!(broker = b.id, status, restarts = b.restarts, "broker exited; starting it again");
                        metrics.broker_restarts.with_label_values(&[&b.id.to_string()]).set(b.restarts as i64);
                        b.child = None;
                        if let Err(e) = b.spawn(&opts, &extra) {
                            error!(broker = b.id, error = %e, "cannot restart broker");
                        }
                    }
                }
            }
        }
    }

    info!("stopping the brokers one at a time");
    for b in &mut brokers {
        b.stop(Duration::from_secs(60)).await;
    }
    let _ = stop_tx.send(true);
    for s in sessions {
        let _ = tokio::time::timeout(Duration::from_secs(5), s).await;
    }
    ticker.abort();
    observer.abort();
    metrics_task.abort();
    info!("local cluster stopped");
    Ok(())
}

/// The `skein-broker` next to this executable, else the one on `PATH`.
pub fn default_broker_bin() -> PathBuf {
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("skein-broker")));
    match sibling {
        Some(p) if p.exists() => p,
        _ => PathBuf::from("skein-broker"),
    }
}
