//! Broker configuration: command-line flags, a Kafka-style properties file and
//! `--override key=value`, all spelled with Apache Kafka's own config names so
//! users' knowledge carries over.
//!
//! The topic configs and the broker configs that set their defaults are one
//! table (`skein_controller::topic_config_table!`), bound to the partition
//! log's settings in `topic.rs`. The other broker configs are the lines of
//! another (`skein_controller::broker_config`: name, type, default,
//! minimum, whether dynamic), read into [`BrokerConfig`]'s fields here
//! (with [`ReadKey`], `values.rs`); the coordinators' in `coordinators.rs`,
//! the listeners' in `listeners`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use skein_storage::LogConfig;

mod coordinators;
mod error;
mod tokens;
mod topic;
mod values;

pub use error::{is_sensitive, ConfigError};
use skein_controller::broker_config as keys;
pub use skein_controller::broker_config::{broker_key, BrokerKey, Kind, Update, BROKER_KEYS};
pub use values::ReadKey;
use values::{parse_val, queued_max_request_bytes, rate, replica_selector, socket_buffer};

use coordinators::{
    group_config, share_config, share_coordinator_config, streams_config, txn_config,
};

use topic::log_config_from;
pub use topic::{
    broker_default_value, topic_config, validate_topic_config, ConfigKind, TopicConfigDef,
    TopicConfigError, KAFKA_TIMESTAMP_AFTER_MAX_MS, TOPIC_CONFIGS,
};

// Skein's own broker configs, which Kafka does not have (DescribeConfigs
// lists them when set, as other keys it does not know).

/// Where the Prometheus endpoint listens; empty: nowhere.
const METRICS_LISTEN: &str = "metrics.listen";
/// Where the controller's session arrives (cluster mode).
const CONTROL_LISTEN: &str = "control.listen";
/// The control port's key and certificate (mutual TLS).
const CONTROL_SSL_KEYSTORE_LOCATION: &str = "control.ssl.keystore.location";
/// `GET /readyz`: how many records a follower outside the ISR may be behind
/// its leader's high watermark and still count as caught up.
const READINESS_REPLICA_LAG_MAX_MESSAGES: &str = "readiness.replica.lag.max.messages";

/// Command-line interface of `skein-broker`.
#[derive(Debug, Parser, Clone)]
#[command(
    name = "skein-broker",
    version,
    about = "Skein: a Kafka-compatible broker. With no arguments it is a single-node cluster on 127.0.0.1:9092."
)]
pub struct Cli {
    /// Kafka-style properties file (`key=value` lines) read before the flags.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// This broker's id (`node.id`).
    #[arg(long)]
    pub node_id: Option<i32>,
    /// Directory that holds the partition logs and cluster metadata (`log.dirs`).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Address the Kafka listener binds (`listeners`).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Address clients are told to connect to (`advertised.listeners`); defaults to --listen.
    #[arg(long, value_name = "HOST:PORT")]
    pub advertised: Option<String>,
    /// Address of the Prometheus endpoint (`/metrics`); empty disables it.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// Join a multi-broker cluster: listen here for the controller's gRPC
    /// session (`control.listen`) instead of running a controller in this
    /// process. Unset: a single-node cluster.
    #[arg(long, value_name = "HOST:PORT")]
    pub control_listen: Option<String>,
    /// Any broker config by its Kafka name, e.g. `--override log.segment.bytes=1048576`. Repeatable.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Log format: `text` or `json`.
    #[arg(long, default_value = "text")]
    pub log_format: String,
    /// The `skein.version` a new single-node cluster starts at (its metadata
    /// log is made on first start), like `kafka-storage format
    /// --release-version`; default: the newest this release runs at. An
    /// existing cluster keeps its level (`kafka-features upgrade`).
    #[arg(long, value_name = "LEVEL")]
    pub feature_level: Option<i16>,
}

/// The resolved broker configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub data_dir: PathBuf,
    /// Bind address of the first listener (the one `run_until` is handed).
    pub listen: String,
    /// The inter-broker listener's advertised address: what the broker
    /// registers and followers fetch from.
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Every listener (`listeners`, `listener.security.protocol.map`, …).
    pub listeners: Vec<crate::listeners::ListenerConfig>,
    /// The client side of the inter-broker listener (replication).
    pub inter_broker_security: crate::inter_broker::InterBrokerSecurity,
    /// `inter.broker.listener.name`.
    pub inter_broker_listener: String,
    pub metrics_listen: Option<SocketAddr>,
    /// `readiness.replica.lag.max.messages` (Skein's): `GET /readyz` counts a
    /// follower outside the ISR as caught up within this many records.
    pub readiness_replica_lag_max_messages: i64,
    /// `control.listen`: where the controller's session arrives (cluster
    /// mode); `None` runs a controller in this process (single node).
    pub control_listen: Option<SocketAddr>,
    /// Mutual TLS on the control port (`control.ssl.*`).
    pub control_tls: Option<ControlTls>,
    pub rack: Option<String>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub message_max_bytes: u64,
    pub socket_request_max_bytes: usize,
    /// `sasl.server.max.receive.size`: the largest frame a SASL listener
    /// reads before the client has authenticated (Kafka's 512 KiB).
    pub sasl_server_max_receive_size: usize,
    /// `queued.max.request.bytes`: the broker-wide budget for request bytes
    /// in flight (`request_memory`); `None` (-1) unbounded.
    pub queued_max_request_bytes: Option<usize>,
    /// `socket.sendfile.enable` (Skein's own): plaintext fetches send large
    /// reads with `sendfile` instead of copying them (docs/performance.md).
    pub sendfile: bool,
    /// `telemetry.max.bytes`: the largest client telemetry push (KIP-714).
    pub telemetry_max_bytes: i32,
    /// `socket.send.buffer.bytes` / `socket.receive.buffer.bytes`: SO_SNDBUF
    /// and SO_RCVBUF of accepted client connections; `None` (-1) leaves the
    /// kernel's auto-tuning. Sending defaults to Kafka's 100 KiB (cheaper per
    /// byte fetched); receiving to -1, not Kafka's 100 KiB, which measured
    /// 1.5-2x the broker's CPU per GiB produced here (docs/performance.md).
    pub socket_send_buffer: Option<usize>,
    pub socket_receive_buffer: Option<usize>,
    /// `connections.max.idle.ms`: a client connection with no request for
    /// this long is closed (Kafka's default, 10 minutes).
    pub connections_max_idle_ms: u64,
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions (KIP-227)
    /// kept; 0 turns them off.
    pub fetch_session_cache_slots: usize,
    /// `replica.selector.class` is Kafka's `RackAwareReplicaSelector`
    /// (KIP-392): leaders send consumers to a follower in their rack.
    pub rack_aware_replica_selector: bool,
    /// `leader.replication.throttled.rate` and
    /// `follower.replication.throttled.rate` in bytes/s (`None`: unlimited).
    pub replication_throttle: (Option<f64>, Option<f64>),
    /// `max.connections`, `max.connections.per.ip(.overrides)`.
    pub connection_limits: crate::connection_quotas::ConnectionLimits,
    /// KIP-405: `remote.log.storage.system.enable`, the store and its tasks.
    pub tiered: TieredConfig,
    pub log_retention_check_interval_ms: u64,
    /// `log.cleaner.*`.
    pub cleaner: CleanerConfig,
    pub log_flush_scheduler_interval_ms: u64,
    pub min_insync_replicas: i32,
    /// `replica.lag.time.max.ms`: a follower that has not caught up for this
    /// long leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// `replica.fetch.wait.max.ms`
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.max.bytes`
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.backoff.ms`
    pub replica_fetch_backoff_ms: u64,
    /// `broker.heartbeat.interval.ms`
    pub broker_heartbeat_interval_ms: u64,
    /// How long a graceful stop waits for leadership to move away.
    pub controlled_shutdown_timeout_ms: u64,
    pub offsets_topic_num_partitions: i32,
    /// Group coordinator settings (`offsets.*`, `group.*`).
    pub groups: crate::group::GroupConfig,
    /// Transaction coordinator settings (`transaction.*`, `transactional.id.*`).
    pub txns: crate::txn::TxnConfig,
    /// Share-group settings (`group.share.*`).
    pub share: crate::share::settings::ShareConfig,
    /// The share coordinator's topic (`share.coordinator.state.topic.*`).
    pub share_coordinator: crate::share::settings::ShareCoordinatorConfig,
    /// Streams-group settings (`group.streams.*`).
    pub streams: crate::streams::settings::StreamsConfig,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: crate::authorizer_config::AuthorizerConfig,
    /// `producer.id.expiration.ms`: idle idempotent producers are forgotten after this.
    pub producer_id_expiration_ms: i64,
    /// `delegation.token.*`.
    pub delegation_tokens: crate::delegation_tokens::TokenConfig,
    pub log_format: String,
    /// `--feature-level`: the `skein.version` a new single-node cluster
    /// starts at.
    pub feature_level: i16,
    /// Defaults applied to every topic's log (topic configs override them).
    pub log_defaults: LogConfig,
    /// Every key that was set, for DescribeConfigs on the broker resource.
    pub raw: BTreeMap<String, String>,
}

impl BrokerConfig {
    /// Resolves flags, the optional properties file and overrides, in that
    /// order of increasing precedence: file < flags < overrides.
    pub fn from_cli(cli: &Cli) -> Result<Self, ConfigError> {
        let mut raw = BTreeMap::new();
        if let Some(path) = &cli.config {
            let text =
                std::fs::read_to_string(path).map_err(|e| ConfigError::File(path.clone(), e))?;
            for (k, v) in parse_properties(&text).map_err(|line| ConfigError::Syntax {
                file: path.clone(),
                line,
            })? {
                raw.insert(k, v);
            }
        }
        if let Some(id) = cli.node_id {
            raw.insert(keys::NODE_ID.name.into(), id.to_string());
        }
        if let Some(d) = &cli.data_dir {
            raw.insert(keys::LOG_DIRS.name.into(), d.display().to_string());
        }
        if let Some(l) = &cli.listen {
            raw.insert(keys::LISTENERS.name.into(), format!("PLAINTEXT://{l}"));
        }
        if let Some(a) = &cli.advertised {
            raw.insert(
                keys::ADVERTISED_LISTENERS.name.into(),
                format!("PLAINTEXT://{a}"),
            );
        }
        if let Some(m) = &cli.metrics_listen {
            raw.insert(METRICS_LISTEN.into(), m.clone());
        }
        if let Some(c) = &cli.control_listen {
            raw.insert(CONTROL_LISTEN.into(), c.clone());
        }
        for o in &cli.overrides {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| ConfigError::Override(o.clone()))?;
            raw.insert(k.trim().to_string(), v.trim().to_string());
        }
        let mut cfg = Self::from_map(raw)?;
        cfg.log_format = cli.log_format.clone();
        if let Some(level) = cli.feature_level {
            let (lo, hi) = (
                skein_controller::features::SKEIN_VERSION_MIN,
                skein_controller::features::SKEIN_VERSION_MAX,
            );
            if !(lo..=hi).contains(&level) {
                return Err(ConfigError::Value {
                    key: "--feature-level".into(),
                    value: level.to_string(),
                    reason: format!("this release runs at skein.version {lo} to {hi}"),
                });
            }
            cfg.feature_level = level;
        }
        Ok(cfg)
    }

    /// Builds the configuration from Kafka-named keys.
    pub fn from_map(raw: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let get = |k: &str| raw.get(k).map(|s| s.as_str());
        let (listeners, inter_broker_listener) = crate::listeners::parse(&raw)?;
        let listen = listeners[0].bind.clone();
        let inter = listeners
            .iter()
            .find(|l| l.name == inter_broker_listener)
            .expect("the inter-broker listener is one of the listeners");
        // How this broker connects to the others' inter-broker listener.
        let inter_broker_security = match control_mode(&raw) {
            true => crate::inter_broker::InterBrokerSecurity::from_config(&raw, inter).map_err(
                |(key, reason)| ConfigError::Value {
                    value: raw.get(&key).cloned().unwrap_or_default(),
                    key,
                    reason,
                },
            )?,
            false => Default::default(),
        };
        let (adv_host, adv_port) = (inter.advertised_host.clone(), inter.advertised_port);
        let metrics_listen = match get(METRICS_LISTEN) {
            Some("") => None,
            Some(m) => Some(parse_val::<SocketAddr>(METRICS_LISTEN, m)?),
            None => Some("127.0.0.1:9644".parse().expect("static address")),
        };
        let control_listen = match get(CONTROL_LISTEN) {
            None | Some("") => None,
            Some(c) => Some(parse_val::<SocketAddr>(CONTROL_LISTEN, c)?),
        };
        let control_tls = control_tls(&raw)?;
        let log_defaults = log_config_from(&raw, &topic::kafka_log_defaults(), true)?;
        let mut cfg = BrokerConfig {
            node_id: keys::NODE_ID.value(&raw)?,
            data_dir: PathBuf::from(
                get(keys::LOG_DIRS.name)
                    .or(get(keys::LOG_DIR.name))
                    .unwrap_or(keys::LOG_DIR.when_unset()),
            ),
            listen,
            advertised_host: adv_host,
            advertised_port: adv_port,
            listeners,
            inter_broker_listener,
            inter_broker_security,
            metrics_listen,
            readiness_replica_lag_max_messages: match get(READINESS_REPLICA_LAG_MAX_MESSAGES) {
                None | Some("") => 1000,
                Some(v) => parse_val::<u32>(READINESS_REPLICA_LAG_MAX_MESSAGES, v)? as i64,
            },
            control_listen,
            control_tls,
            rack: raw.get(keys::BROKER_RACK.name).cloned(),
            num_partitions: keys::NUM_PARTITIONS.value(&raw)?,
            default_replication_factor: keys::DEFAULT_REPLICATION_FACTOR.value(&raw)?,
            auto_create_topics_enable: keys::AUTO_CREATE_TOPICS_ENABLE.value(&raw)?,
            message_max_bytes: log_defaults.max_message_bytes,
            socket_request_max_bytes: keys::SOCKET_REQUEST_MAX_BYTES.value(&raw)?,
            sasl_server_max_receive_size: keys::SASL_SERVER_MAX_RECEIVE_SIZE.value(&raw)?,
            queued_max_request_bytes: queued_max_request_bytes(&raw)?,
            sendfile: keys::SOCKET_SENDFILE_ENABLE.value(&raw)?,
            telemetry_max_bytes: keys::TELEMETRY_MAX_BYTES.value(&raw)?,
            socket_send_buffer: socket_buffer(&raw, &keys::SOCKET_SEND_BUFFER_BYTES)?,
            socket_receive_buffer: socket_buffer(&raw, &keys::SOCKET_RECEIVE_BUFFER_BYTES)?,
            connections_max_idle_ms: keys::CONNECTIONS_MAX_IDLE_MS.value(&raw)?,
            rack_aware_replica_selector: replica_selector(
                raw.get(keys::REPLICA_SELECTOR_CLASS.name)
                    .map(String::as_str),
            )?,
            replication_throttle: (
                rate(&raw, keys::LEADER_REPLICATION_THROTTLED_RATE.name)?,
                rate(&raw, keys::FOLLOWER_REPLICATION_THROTTLED_RATE.name)?,
            ),
            fetch_session_cache_slots: keys::MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS
                .value(&raw)?,
            connection_limits: crate::connection_quotas::ConnectionLimits::from_config(&raw)?,
            tiered: TieredConfig::from_config(&raw)?,
            log_retention_check_interval_ms: keys::LOG_RETENTION_CHECK_INTERVAL_MS.value(&raw)?,
            cleaner: CleanerConfig {
                enable: keys::LOG_CLEANER_ENABLE.value(&raw)?,
                threads: keys::LOG_CLEANER_THREADS.value(&raw)?,
                backoff_ms: keys::LOG_CLEANER_BACKOFF_MS.value(&raw)?,
                dedupe_buffer_size: keys::LOG_CLEANER_DEDUPE_BUFFER_SIZE.value(&raw)?,
                io_max_bytes_per_second: keys::LOG_CLEANER_IO_MAX_BYTES_PER_SECOND
                    .value(&raw)
                    .map(|r: f64| (r < f64::MAX && r > 0.0).then_some(r))?,
            },
            log_flush_scheduler_interval_ms: keys::LOG_FLUSH_SCHEDULER_INTERVAL_MS.value(&raw)?,
            min_insync_replicas: topic::broker_value(
                &raw,
                skein_controller::election::MIN_INSYNC_REPLICAS,
            )?,
            replica_lag_time_max_ms: keys::REPLICA_LAG_TIME_MAX_MS.value(&raw)?,
            replica_fetch_wait_max_ms: keys::REPLICA_FETCH_WAIT_MAX_MS.value(&raw)?,
            replica_fetch_max_bytes: keys::REPLICA_FETCH_MAX_BYTES.value(&raw)?,
            replica_fetch_response_max_bytes: keys::REPLICA_FETCH_RESPONSE_MAX_BYTES.value(&raw)?,
            replica_fetch_backoff_ms: keys::REPLICA_FETCH_BACKOFF_MS.value(&raw)?,
            broker_heartbeat_interval_ms: keys::BROKER_HEARTBEAT_INTERVAL_MS.value(&raw)?,
            controlled_shutdown_timeout_ms: keys::CONTROLLED_SHUTDOWN_TIMEOUT_MS.value(&raw)?,
            offsets_topic_num_partitions: keys::OFFSETS_TOPIC_NUM_PARTITIONS.value(&raw)?,
            groups: group_config(&raw)?,
            txns: txn_config(&raw)?,
            share: share_config(&raw)?,
            share_coordinator: share_coordinator_config(&raw)?,
            streams: streams_config(&raw)?,
            authorizer: crate::authorizer_config::AuthorizerConfig::from_raw(&raw)?,
            producer_id_expiration_ms: keys::PRODUCER_ID_EXPIRATION_MS.value(&raw)?,
            delegation_tokens: tokens::token_config(&raw)?,
            log_format: "text".into(),
            feature_level: skein_controller::features::SKEIN_VERSION_MAX,
            log_defaults,
            raw,
        };
        if cfg.default_replication_factor < 1 {
            cfg.default_replication_factor = 1;
        }
        Ok(cfg)
    }

    /// Every listener as clients reach it, for the registration.
    pub fn endpoints(&self) -> Vec<skein_controller::Endpoint> {
        self.listeners
            .iter()
            .map(|l| skein_controller::Endpoint {
                name: l.name.clone(),
                host: l.advertised_host.clone(),
                port: l.advertised_port as u16,
            })
            .collect()
    }

    /// The log configuration of a topic: broker defaults overlaid with the
    /// topic's own configs (topic-level names such as `retention.ms`).
    pub fn topic_log_config(
        &self,
        topic_configs: &BTreeMap<String, String>,
    ) -> Result<LogConfig, ConfigError> {
        let mut c = log_config_from(topic_configs, &self.log_defaults, false)?;
        // Kafka's `isRemoteLogEnabled`: the broker's system on, the topic's
        // flag, and a delete-only policy (internal topics never set it).
        c.remote_storage_enable = c.remote_storage_enable
            && self.tiered.system_enable
            && c.cleanup_policy == skein_storage::CleanupPolicy::DELETE;
        Ok(c)
    }
}

impl BrokerConfig {
    /// Kafka's tiered-storage rules over a topic's configs as they would be
    /// (`new`) and as they are (`old`; `None` at creation), with Kafka's
    /// messages (`INVALID_CONFIG`).
    pub fn check_remote_storage(
        &self,
        old: Option<&BTreeMap<String, String>>,
        new: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        let lc = log_config_from(new, &self.log_defaults, false).map_err(|e| e.to_string())?;
        skein_controller::topic_config::validate_remote_storage(
            old,
            new,
            self.tiered.system_enable,
            lc.retention_ms,
            lc.retention_bytes,
        )
        .map_err(|e| e.to_string())
    }
}

/// The environment variable the store's access key id may come from.
pub const S3_ACCESS_KEY_ID_ENV: &str = "SKEIN_S3_ACCESS_KEY_ID";
/// The environment variable the store's secret access key may come from.
pub const S3_SECRET_ACCESS_KEY_ENV: &str = "SKEIN_S3_SECRET_ACCESS_KEY";

/// KIP-405 on this broker: whether it tiers, where to, and how often.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TieredConfig {
    /// `remote.log.storage.system.enable`.
    pub system_enable: bool,
    /// `rsm.config.storage.url`: a directory or `s3://bucket/prefix`.
    pub store_url: Option<String>,
    /// `rsm.config.s3.endpoint`.
    pub s3_endpoint: Option<String>,
    /// `rsm.config.s3.region`.
    pub s3_region: String,
    /// `rsm.config.s3.access.key.id`.
    pub s3_access_key_id: Option<String>,
    /// `rsm.config.s3.secret.access.key`.
    pub s3_secret_access_key: Option<String>,
    /// `remote.log.manager.task.interval.ms`.
    pub task_interval_ms: u64,
    /// `remote.fetch.max.wait.ms`.
    pub fetch_max_wait_ms: u64,
    /// `remote.list.offsets.request.timeout.ms`.
    pub list_offsets_timeout_ms: u64,
    /// `remote.log.reader.threads`: remote reads at once.
    pub reader_threads: usize,
    /// `rsm.config.cache.size.bytes`.
    pub cache_size_bytes: u64,
    /// `remote.log.manager.copy.max.bytes.per.second` (`None`: no limit).
    pub copy_max_bytes_per_second: Option<f64>,
    /// `remote.log.manager.fetch.max.bytes.per.second` (`None`: no limit).
    pub fetch_max_bytes_per_second: Option<f64>,
}

impl TieredConfig {
    fn from_config(raw: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let c = TieredConfig {
            system_enable: keys::REMOTE_LOG_STORAGE_SYSTEM_ENABLE.value(raw)?,
            store_url: keys::RSM_CONFIG_STORAGE_URL
                .get(raw)?
                .filter(|u: &String| !u.is_empty()),
            s3_endpoint: keys::RSM_CONFIG_S3_ENDPOINT.get(raw)?,
            s3_region: keys::RSM_CONFIG_S3_REGION.value(raw)?,
            // Else from the environment the operator gives the pod (its
            // Secret): explicit names, never AWS_* or instance metadata.
            s3_access_key_id: keys::RSM_CONFIG_S3_ACCESS_KEY_ID
                .get(raw)?
                .or_else(|| std::env::var(S3_ACCESS_KEY_ID_ENV).ok()),
            s3_secret_access_key: keys::RSM_CONFIG_S3_SECRET_ACCESS_KEY
                .get(raw)?
                .or_else(|| std::env::var(S3_SECRET_ACCESS_KEY_ENV).ok()),
            task_interval_ms: keys::REMOTE_LOG_MANAGER_TASK_INTERVAL_MS.value(raw)?,
            fetch_max_wait_ms: keys::REMOTE_FETCH_MAX_WAIT_MS.value(raw)?,
            list_offsets_timeout_ms: keys::REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS.value(raw)?,
            reader_threads: keys::REMOTE_LOG_READER_THREADS.value(raw)?,
            cache_size_bytes: keys::RSM_CONFIG_CACHE_SIZE_BYTES.value(raw)?,
            copy_max_bytes_per_second: rate(
                raw,
                keys::REMOTE_LOG_MANAGER_COPY_MAX_BYTES_PER_SECOND.name,
            )?,
            fetch_max_bytes_per_second: rate(
                raw,
                keys::REMOTE_LOG_MANAGER_FETCH_MAX_BYTES_PER_SECOND.name,
            )?,
        };
        if c.system_enable && c.store_url.is_none() {
            return Err(ConfigError::Value {
                key: keys::REMOTE_LOG_STORAGE_SYSTEM_ENABLE.name.into(),
                value: "true".into(),
                reason: format!(
                    "tiered storage needs a store: set {} (a directory or s3://bucket/prefix)",
                    keys::RSM_CONFIG_STORAGE_URL.name
                ),
            });
        }
        Ok(c)
    }
}

/// The cleaner's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    pub enable: bool,
    pub threads: usize,
    pub backoff_ms: u64,
    pub dedupe_buffer_size: usize,
    /// Bytes per second read and written by all cleaner threads; `None`:
    /// no limit.
    pub io_max_bytes_per_second: Option<f64>,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            enable: true,
            threads: 1,
            backoff_ms: 15_000,
            dedupe_buffer_size: 128 * 1024 * 1024,
            io_max_bytes_per_second: None,
        }
    }
}

/// The control port's TLS: the broker's certificate, the CA the
/// controller's certificate must chain to, and optionally the controller
/// certificate's exact subject (RFC 2253, as Java prints it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlTls {
    pub files: skein_controller::rpc::tls::ControlTlsFiles,
    pub controller_subject: Option<String>,
}

fn control_tls(raw: &BTreeMap<String, String>) -> Result<Option<ControlTls>, ConfigError> {
    let get = |k: &str| raw.get(k).map(|s| s.trim()).filter(|s| !s.is_empty());
    let keystore = get(CONTROL_SSL_KEYSTORE_LOCATION);
    let truststore = get("control.ssl.truststore.location");
    let subject = get("control.ssl.controller.subject").map(str::to_string);
    match (keystore, truststore) {
        (None, None) if subject.is_none() => Ok(None),
        (Some(k), Some(t)) => Ok(Some(ControlTls {
            files: skein_controller::rpc::tls::ControlTlsFiles {
                keystore: PathBuf::from(k),
                truststore: PathBuf::from(t),
            },
            controller_subject: subject,
        })),
        _ => Err(ConfigError::Value {
            key: CONTROL_SSL_KEYSTORE_LOCATION.into(),
            value: keystore.unwrap_or("").into(),
            reason: "control-plane TLS is mutual: set both control.ssl.keystore.location (this broker's key and certificate) and control.ssl.truststore.location (the controller's CA)".into(),
        }),
    }
}

/// Whether the broker joins a cluster (`control.listen`) and so replicates
/// over its inter-broker listener.
fn control_mode(raw: &BTreeMap<String, String>) -> bool {
    raw.get(CONTROL_LISTEN)
        .is_some_and(|c| !c.trim().is_empty())
}

/// Parses Java-properties-style `key=value` lines; returns the bad line number on error.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, usize> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .or_else(|| line.split_once(':'))
            .ok_or(i + 1)?;
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}

/// The effective value of a topic-level config for DescribeConfigs: the
/// topic's own value if set, else the broker default (and whether it was set).
pub fn effective_topic_config(
    broker: &BrokerConfig,
    topic_configs: &BTreeMap<String, String>,
    key: &str,
) -> (String, bool) {
    topic::effective_value(&broker.log_defaults, &broker.raw, topic_configs, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn raw(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_start_up_error_never_shows_a_jaas_text() {
        // The inter-broker login's entry lacks its final ';'.
        let err = BrokerConfig::from_map(raw(&[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:9092"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
            ("control.listen", "127.0.0.1:9093"),
            (
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required \
                 username=\"broker\" password=\"hunter2\"",
            ),
        ]))
        .map(|_| ())
        .unwrap_err()
        .to_string();
        assert!(err.contains("jaas.config"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn request_memory_is_bounded_by_default_and_holds_the_largest_request() {
        let c = BrokerConfig::from_map(BTreeMap::new()).unwrap();
        assert_eq!(c.queued_max_request_bytes, Some(512 << 20));
        assert_eq!(c.sasl_server_max_receive_size, 524_288);
        let unbounded = raw(&[("queued.max.request.bytes", "-1")]);
        assert_eq!(
            BrokerConfig::from_map(unbounded)
                .unwrap()
                .queued_max_request_bytes,
            None
        );
        // Smaller than socket.request.max.bytes: a largest request could never be read.
        let small = raw(&[("queued.max.request.bytes", "1048576")]);
        assert!(BrokerConfig::from_map(small).is_err());
    }

    fn cli(args: &[&str]) -> Cli {
        let mut v = vec!["skein-broker"];
        v.extend_from_slice(args);
        Cli::parse_from(v)
    }

    #[test]
    fn defaults_are_a_single_node_on_9092() {
        let c = BrokerConfig::from_cli(&cli(&[])).unwrap();
        assert_eq!(c.listen, "127.0.0.1:9092");
        assert_eq!(c.advertised_host, "127.0.0.1");
        assert_eq!(c.advertised_port, 9092);
        assert_eq!(c.node_id, 1);
        assert_eq!(c.data_dir, PathBuf::from("./skein-data"));
        assert_eq!(c.cleaner, CleanerConfig::default(), "no I/O limit either");
        assert_eq!(c.min_insync_replicas, 1);
        assert_eq!(c.log_defaults.segment_bytes, 1 << 30);
        assert_eq!(c.log_defaults.retention_ms, 7 * 24 * 3_600_000);
        assert_eq!(
            c.log_defaults.message_timestamp_after_max_ms, 3_600_000,
            "Kafka 4 (KIP-1030)"
        );
    }

    #[test]
    fn socket_buffers_default_to_a_fixed_send_buffer_and_an_auto_tuned_receive_buffer() {
        let c = BrokerConfig::from_cli(&cli(&[])).unwrap();
        assert_eq!(c.socket_send_buffer, Some(102_400));
        assert_eq!(c.socket_receive_buffer, None);
        assert!(c.sendfile);
        let c = BrokerConfig::from_cli(&cli(&[
            "--override",
            "socket.send.buffer.bytes=-1",
            "--override",
            "socket.receive.buffer.bytes=65536",
        ]))
        .unwrap();
        assert_eq!(
            (c.socket_send_buffer, c.socket_receive_buffer),
            (None, Some(65_536))
        );
        for bad in ["0", "-2", "lots"] {
            let r = BrokerConfig::from_cli(&cli(&[
                "--override",
                &format!("socket.send.buffer.bytes={bad}"),
            ]));
            assert!(r.is_err(), "socket.send.buffer.bytes={bad} was accepted");
        }
    }

    #[test]
    fn file_then_flags_then_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("server.properties");
        std::fs::write(
            &f,
            "# comment\nnode.id=7\nlog.segment.bytes=1000\nlisteners=PLAINTEXT://0.0.0.0:1234\nadvertised.listeners=PLAINTEXT://h:1\nnum.partitions=3\n",
        )
        .unwrap();
        let c = BrokerConfig::from_cli(&cli(&[
            "--config",
            f.to_str().unwrap(),
            "--node-id",
            "8",
            "--override",
            "log.segment.bytes=2048",
            "--advertised",
            "broker-0.example:9093",
        ]))
        .unwrap();
        assert_eq!(c.node_id, 8);
        assert_eq!(c.log_defaults.segment_bytes, 2048);
        assert_eq!(c.listen, "0.0.0.0:1234");
        assert_eq!(c.advertised_host, "broker-0.example");
        assert_eq!(c.advertised_port, 9093);
        assert_eq!(c.num_partitions, 3);
    }

    #[test]
    fn topic_configs_override_broker_defaults() {
        let c = BrokerConfig::from_cli(&cli(&["--override", "log.retention.hours=1"])).unwrap();
        assert_eq!(c.log_defaults.retention_ms, 3_600_000);
        let mut t = BTreeMap::new();
        t.insert("retention.ms".to_string(), "5000".to_string());
        t.insert("cleanup.policy".to_string(), "compact,delete".to_string());
        let lc = c.topic_log_config(&t).unwrap();
        assert_eq!(lc.retention_ms, 5000);
        assert!(lc.cleanup_policy.compact && lc.cleanup_policy.delete);
        assert_eq!(
            effective_topic_config(&c, &t, "retention.ms"),
            ("5000".into(), true)
        );
        assert_eq!(
            effective_topic_config(&c, &t, "segment.bytes"),
            ((1u64 << 30).to_string(), false)
        );
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(BrokerConfig::from_cli(&cli(&["--override", "log.segment.bytes=abc"])).is_err());
        assert!(BrokerConfig::from_cli(&cli(&["--override", "novalue"])).is_err());
        assert!(validate_topic_config("retention.ms", "x").is_err());
        assert!(validate_topic_config("no.such.config", "1").is_err());
        assert!(validate_topic_config("cleanup.policy", "shred").is_err());
        assert!(validate_topic_config("min.insync.replicas", "0").is_err());
        assert!(validate_topic_config("cleanup.policy", "compact").is_ok());
    }

    #[test]
    fn secrets_are_sensitive_whatever_their_listener_prefix() {
        for k in [
            "ssl.keystore.password",
            "ssl.key.password",
            "ssl.truststore.password",
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
            "ssl.truststore.certificates",
            "sasl.jaas.config",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
            "listener.name.external.ssl.keystore.password",
            "sasl.oauthbearer.client.credentials.client.secret",
            "password.encoder.secret",
        ] {
            assert!(is_sensitive(k), "{k}");
        }
        for k in [
            "listeners",
            "ssl.keystore.location",
            "log.dirs",
            "sasl.enabled.mechanisms",
        ] {
            assert!(!is_sensitive(k), "{k}");
        }
    }
}
