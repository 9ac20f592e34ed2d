//! The broker configs that do not set a topic default, one line each:
//! Kafka's name, type and default (as DescribeConfigs lists them), the
//! value Skein uses when unset where that differs, the smallest value
//! accepted, whether it changes without a restart, and its documentation
//! (the line's doc comment). The broker's parsing, DescribeConfigs and
//! dynamic updates, the controller's settings ([`crate::config`]) and the
//! operator (the keys it reserves and writes) all read these lines, so a
//! key is spelled and defaulted once, as Kafka's `ConfigDef`. The broker
//! configs that set topic defaults are the topic config table's
//! ([`crate::topic_config_table!`]); one of them, `log.flush.interval.ms`,
//! has a line here too, because Kafka lists it unlike the others (its
//! line says how).

/// Kafka's `ConfigType` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum Kind {
    Boolean = 1,
    Str = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// A boolean config value as Kafka's `ConfigDef` reads it: `true` or
/// `false` in any case, around spaces.
pub fn parse_bool(value: &str) -> Option<bool> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Whether a broker config changes without a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// Read at start-up only, in Kafka too.
    Static,
    /// Applied to the running broker (`dynamic_config`).
    Dynamic,
    /// Dynamic in Kafka, where it is accepted by AlterConfigs, stored and
    /// described; Skein does the same (so tools and clients that set it
    /// work) but does not act on the value: why. DescribeConfigs'
    /// documentation of the key says so.
    Inert(&'static str),
}

/// Where a dynamic value of a broker config may be set (Kafka's
/// `DynamicBrokerConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// For one broker or as the cluster-wide default.
    Cluster,
    /// For one broker only (`--entity-name`), as Kafka's per-broker
    /// listener settings; also per listener (`listener.name.<l>.<key>`).
    PerBroker,
    /// For one broker and one listener only (`listener.name.<l>.<key>`):
    /// Kafka's keystore and truststore settings.
    PerListener,
}

/// One broker config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerKey {
    pub name: &'static str,
    pub kind: Kind,
    /// Kafka's default, as DescribeConfigs shows it; `None`: null.
    pub default: Option<&'static str>,
    /// What Skein uses when the key is unset, where it is not `default`.
    pub unset: Option<&'static str>,
    /// Lower-priority names for the same setting (Kafka's synonyms).
    pub synonyms: &'static [&'static str],
    /// The smallest value accepted, for a number.
    pub min: Option<i64>,
    pub update: Update,
    /// Where a dynamic value may be set.
    pub scope: Scope,
    /// What it sets.
    pub doc: &'static str,
}

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: &str = "2147483647";
const CONNECTION_LIMITS: &str = "Skein reads connection limits at start-up only";
const LISTENER_SETUP: &str = "Skein sets up its listeners at start-up only";
const KERBEROS: &str = "Skein has no Kerberos (GSSAPI)";
const LOGIN_REFRESH: &str = "Skein's brokers refresh no SASL login credential";
const THREAD_POOLS: &str = "Skein runs on one async runtime, not on thread pools of set sizes";
const REMOTE_INDEX_CACHE: &str =
    "Skein keeps remote segments' indexes with the segments in its read cache (rsm.config.cache.size.bytes)";
const REMOTE_TASKS: &str =
    "Skein copies and expires four partitions at a time on its async runtime, not on a thread pool";
const QUOTA_WINDOW: &str =
    "Skein measures the remote copy and fetch quotas over Kafka's default window, 11 samples of 1 s";

/// The table's lines as [`BrokerKey`] constants and [`BROKER_KEYS`]. A line:
///
/// ```text
/// /// Doc.
/// NAME = "kafka.name", Kind, default (or null), static | dynamic | inert("why")
///     [, unset "skein's value"] [, min N] [, synonyms [OTHER.name]] [, scope per_broker | per_listener];
/// ```
macro_rules! broker_config_table {
    ($($(#[doc = $doc:literal])* $id:ident = $name:literal, $kind:ident, $default:tt,
        $update:ident $(($why:expr))? $(, unset $unset:literal)? $(, min $min:literal)?
        $(, synonyms [$($syn:expr),*])? $(, scope $scope:ident)?;)*) => {
        $($(#[doc = $doc])* pub const $id: BrokerKey = BrokerKey {
            name: $name,
            kind: Kind::$kind,
            default: default!($default),
            unset: some!($($unset)?),
            synonyms: &[$($($syn),*)?],
            min: some!($($min)?),
            update: update!($update $(($why))?),
            scope: scope!($($scope)?),
            doc: concat!($($doc),*),
        };)*

        /// Every line of the table, sorted by name.
        pub const BROKER_KEYS: &[BrokerKey] = &[$($id),*];
    };
}

macro_rules! default {
    (null) => {
        None
    };
    ($d:expr) => {
        Some($d)
    };
}

macro_rules! some {
    () => {
        None
    };
    ($e:expr) => {
        Some($e)
    };
}

macro_rules! scope {
    () => {
        Scope::Cluster
    };
    (per_broker) => {
        Scope::PerBroker
    };
    (per_listener) => {
        Scope::PerListener
    };
}

macro_rules! update {
    (static) => {
        Update::Static
    };
    (dynamic) => {
        Update::Dynamic
    };
    (inert($why:expr)) => {
        Update::Inert($why)
    };
}

broker_config_table! {
    /// The addresses clients are told to connect to, per listener.
    ADVERTISED_LISTENERS = "advertised.listeners", Str, null, static;
    /// Without ACLs on a resource, whether everyone may use it.
    ALLOW_EVERYONE_IF_NO_ACL_FOUND = "allow.everyone.if.no.acl.found", Boolean, "false", static;
    /// The authorizer: empty (none) or Kafka's `StandardAuthorizer`.
    AUTHORIZER_CLASS_NAME = "authorizer.class.name", Str, "", static;
    /// Whether a request for an unknown topic creates it.
    AUTO_CREATE_TOPICS_ENABLE = "auto.create.topics.enable", Boolean, "true", static;
    /// Whether the controller moves leadership back to preferred replicas.
    AUTO_LEADER_REBALANCE_ENABLE = "auto.leader.rebalance.enable", Boolean, "true", static;
    /// Threads for background tasks.
    BACKGROUND_THREADS = "background.threads", Int, "10", inert(THREAD_POOLS), min 1;
    /// How often the broker heartbeats to the controller.
    BROKER_HEARTBEAT_INTERVAL_MS = "broker.heartbeat.interval.ms", Int, "2000", static;
    /// This broker's rack, for rack-aware placement and fetching.
    BROKER_RACK = "broker.rack", Str, null, static;
    /// A client connection with no request for this long is closed.
    CONNECTIONS_MAX_IDLE_MS = "connections.max.idle.ms", Long, "600000", static;
    /// How long a SASL session lasts before it must re-authenticate (0: forever).
    CONNECTIONS_MAX_REAUTH_MS = "connections.max.reauth.ms", Long, "0", static;
    /// How long a graceful stop waits for leadership to move away.
    CONTROLLED_SHUTDOWN_TIMEOUT_MS = "controlled.shutdown.timeout.ms", Long, "30000", static;
    /// The replication factor of an auto-created topic.
    DEFAULT_REPLICATION_FACTOR = "default.replication.factor", Int, "1", static;
    /// How often expired delegation tokens are removed.
    DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS = "delegation.token.expiry.check.interval.ms", Long, "3600000",
        static, min 1;
    /// How long a new or renewed delegation token lasts unless the client asks for less.
    DELEGATION_TOKEN_EXPIRY_TIME_MS = "delegation.token.expiry.time.ms", Long, "86400000", static, min 1;
    /// The longest a delegation token can be renewed to, from its creation.
    DELEGATION_TOKEN_MAX_LIFETIME_MS = "delegation.token.max.lifetime.ms", Long, "604800000", static, min 1;
    /// The secret delegation tokens' HMACs are made with; the same on every broker. Unset: no tokens.
    DELEGATION_TOKEN_SECRET_KEY = "delegation.token.secret.key", Password, null, static;
    /// Bytes/s this broker's followers may fetch for throttled replicas.
    FOLLOWER_REPLICATION_THROTTLED_RATE = "follower.replication.throttled.rate", Long, LONG_MAX, dynamic;
    /// The least time between two target assignments of a consumer group (KIP-848); the bound of the group config `consumer.assignment.interval.ms`.
    GROUP_CONSUMER_ASSIGNMENT_INTERVAL_MS =
        "group.consumer.assignment.interval.ms", Int, "1000", static;
    /// The heartbeat interval of consumer-protocol group members (KIP-848).
    GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS = "group.consumer.heartbeat.interval.ms", Int, "5000", static;
    /// The largest `consumer.assignment.interval.ms` a group config may set.
    GROUP_CONSUMER_MAX_ASSIGNMENT_INTERVAL_MS =
        "group.consumer.max.assignment.interval.ms", Int, "15000", static;
    /// The largest `consumer.heartbeat.interval.ms` a group config may set.
    GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS =
        "group.consumer.max.heartbeat.interval.ms", Int, "15000", static;
    /// The largest `consumer.session.timeout.ms` a group config may set.
    GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS =
        "group.consumer.max.session.timeout.ms", Int, "60000", static;
    /// The smallest `consumer.assignment.interval.ms` a group config may set.
    GROUP_CONSUMER_MIN_ASSIGNMENT_INTERVAL_MS =
        "group.consumer.min.assignment.interval.ms", Int, "0", static;
    /// The smallest `consumer.heartbeat.interval.ms` a group config may set.
    GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS =
        "group.consumer.min.heartbeat.interval.ms", Int, "5000", static;
    /// The smallest `consumer.session.timeout.ms` a group config may set.
    GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS =
        "group.consumer.min.session.timeout.ms", Int, "45000", static;
    /// The session timeout of consumer-protocol group members (KIP-848).
    GROUP_CONSUMER_SESSION_TIMEOUT_MS = "group.consumer.session.timeout.ms", Int, "45000", static;
    /// The group protocols served (deprecated in Kafka 4.4; `streams`
    /// gates streams groups together with the `streams.version` feature).
    GROUP_COORDINATOR_REBALANCE_PROTOCOLS =
        "group.coordinator.rebalance.protocols", List, "classic,consumer,streams", static;
    /// How long a new classic group waits for more members before its first rebalance.
    GROUP_INITIAL_REBALANCE_DELAY_MS = "group.initial.rebalance.delay.ms", Int, "3000", static;
    /// The longest session timeout a member may ask for.
    GROUP_MAX_SESSION_TIMEOUT_MS = "group.max.session.timeout.ms", Int, "1800000", static;
    /// The most members a group may have.
    GROUP_MAX_SIZE = "group.max.size", Int, INT_MAX, static;
    /// The shortest session timeout a member may ask for.
    GROUP_MIN_SESSION_TIMEOUT_MS = "group.min.session.timeout.ms", Int, "6000", static;
    /// Share groups (KIP-932): the least time between two target assignments.
    GROUP_SHARE_ASSIGNMENT_INTERVAL_MS = "group.share.assignment.interval.ms", Int, "1000", static;
    /// Share groups: the most deliveries of a record before it is archived.
    GROUP_SHARE_DELIVERY_COUNT_LIMIT = "group.share.delivery.count.limit", Int, "5", static;
    /// Share groups: the heartbeat interval of members.
    GROUP_SHARE_HEARTBEAT_INTERVAL_MS = "group.share.heartbeat.interval.ms", Int, "5000", static;
    /// The largest `share.assignment.interval.ms` a group config may set.
    GROUP_SHARE_MAX_ASSIGNMENT_INTERVAL_MS =
        "group.share.max.assignment.interval.ms", Int, "15000", static;
    /// The largest `share.delivery.count.limit` a group config may set.
    GROUP_SHARE_MAX_DELIVERY_COUNT_LIMIT =
        "group.share.max.delivery.count.limit", Int, "10", static;
    /// The largest `share.heartbeat.interval.ms` a group config may set.
    GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS =
        "group.share.max.heartbeat.interval.ms", Int, "15000", static;
    /// The largest `share.partition.max.record.locks` a group config may set.
    GROUP_SHARE_MAX_PARTITION_MAX_RECORD_LOCKS =
        "group.share.max.partition.max.record.locks", Int, "4000", static;
    /// The largest `share.record.lock.duration.ms` a group config may set.
    GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS =
        "group.share.max.record.lock.duration.ms", Int, "60000", static;
    /// The largest `share.session.timeout.ms` a group config may set.
    GROUP_SHARE_MAX_SESSION_TIMEOUT_MS = "group.share.max.session.timeout.ms", Int, "60000", static;
    /// Share groups: the most share sessions this broker keeps.
    GROUP_SHARE_MAX_SHARE_SESSIONS = "group.share.max.share.sessions", Int, "2000", static, min 1;
    /// Share groups: the most members of one share group.
    GROUP_SHARE_MAX_SIZE = "group.share.max.size", Short, "200", static, min 1;
    /// The smallest `share.assignment.interval.ms` a group config may set.
    GROUP_SHARE_MIN_ASSIGNMENT_INTERVAL_MS =
        "group.share.min.assignment.interval.ms", Int, "0", static;
    /// The smallest `share.delivery.count.limit` a group config may set.
    GROUP_SHARE_MIN_DELIVERY_COUNT_LIMIT = "group.share.min.delivery.count.limit", Int, "2", static;
    /// The smallest `share.heartbeat.interval.ms` a group config may set.
    GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS =
        "group.share.min.heartbeat.interval.ms", Int, "5000", static;
    /// The smallest `share.partition.max.record.locks` a group config may set.
    GROUP_SHARE_MIN_PARTITION_MAX_RECORD_LOCKS =
        "group.share.min.partition.max.record.locks", Int, "100", static;
    /// The smallest `share.record.lock.duration.ms` a group config may set.
    GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS =
        "group.share.min.record.lock.duration.ms", Int, "15000", static;
    /// The smallest `share.session.timeout.ms` a group config may set.
    GROUP_SHARE_MIN_SESSION_TIMEOUT_MS = "group.share.min.session.timeout.ms", Int, "45000", static;
    /// Share groups: the most records of a share-partition in flight.
    GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS =
        "group.share.partition.max.record.locks", Int, "2000", static;
    /// Share groups: how long a delivered record stays locked to its consumer.
    GROUP_SHARE_RECORD_LOCK_DURATION_MS =
        "group.share.record.lock.duration.ms", Int, "30000", static;
    /// Share groups: the session timeout of members.
    GROUP_SHARE_SESSION_TIMEOUT_MS = "group.share.session.timeout.ms", Int, "45000", static;
    /// Streams groups: how far a warm-up task may lag and count as caught up.
    GROUP_STREAMS_ACCEPTABLE_RECOVERY_LAG =
        "group.streams.acceptable.recovery.lag", Long, "10000", static, min 0;
    /// Streams groups (KIP-1071): the least time between two target assignments.
    GROUP_STREAMS_ASSIGNMENT_INTERVAL_MS =
        "group.streams.assignment.interval.ms", Int, "1000", static;
    /// Streams groups: the heartbeat interval of members.
    GROUP_STREAMS_HEARTBEAT_INTERVAL_MS =
        "group.streams.heartbeat.interval.ms", Int, "5000", static;
    /// Streams groups: how long a new group waits for more members.
    GROUP_STREAMS_INITIAL_REBALANCE_DELAY_MS =
        "group.streams.initial.rebalance.delay.ms", Int, "3000", static;
    /// The largest `streams.assignment.interval.ms` a group config may set.
    GROUP_STREAMS_MAX_ASSIGNMENT_INTERVAL_MS =
        "group.streams.max.assignment.interval.ms", Int, "15000", static;
    /// The largest `streams.heartbeat.interval.ms` a group config may set.
    GROUP_STREAMS_MAX_HEARTBEAT_INTERVAL_MS =
        "group.streams.max.heartbeat.interval.ms", Int, "15000", static;
    /// The largest `streams.session.timeout.ms` a group config may set.
    GROUP_STREAMS_MAX_SESSION_TIMEOUT_MS =
        "group.streams.max.session.timeout.ms", Int, "60000", static;
    /// Streams groups: the most members of a group.
    GROUP_STREAMS_MAX_SIZE = "group.streams.max.size", Int, "2147483647", static, min 1;
    /// The largest `streams.num.standby.replicas` a group config may set.
    GROUP_STREAMS_MAX_STANDBY_REPLICAS = "group.streams.max.standby.replicas", Int, "2", static;
    /// The smallest `streams.assignment.interval.ms` a group config may set.
    GROUP_STREAMS_MIN_ASSIGNMENT_INTERVAL_MS =
        "group.streams.min.assignment.interval.ms", Int, "0", static;
    /// The smallest `streams.heartbeat.interval.ms` a group config may set.
    GROUP_STREAMS_MIN_HEARTBEAT_INTERVAL_MS =
        "group.streams.min.heartbeat.interval.ms", Int, "5000", static;
    /// The smallest `streams.session.timeout.ms` a group config may set.
    GROUP_STREAMS_MIN_SESSION_TIMEOUT_MS =
        "group.streams.min.session.timeout.ms", Int, "45000", static;
    /// Streams groups: standby replicas of each task.
    GROUP_STREAMS_NUM_STANDBY_REPLICAS = "group.streams.num.standby.replicas", Int, "0", static;
    /// Streams groups: the session timeout of members.
    GROUP_STREAMS_SESSION_TIMEOUT_MS = "group.streams.session.timeout.ms", Int, "45000", static;
    /// Streams groups: how often members report their tasks' offsets.
    GROUP_STREAMS_TASK_OFFSET_INTERVAL_MS =
        "group.streams.task.offset.interval.ms", Int, "60000", static, min 1;
    /// The listener brokers replicate over.
    INTER_BROKER_LISTENER_NAME = "inter.broker.listener.name", Str, null, static;
    /// How often the controller checks for imbalanced leadership.
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS = "leader.imbalance.check.interval.seconds", Long, "300", static;
    /// Bytes/s this broker's leaders may serve for throttled replicas.
    LEADER_REPLICATION_THROTTLED_RATE = "leader.replication.throttled.rate", Long, LONG_MAX, dynamic;
    /// Each listener's security protocol, by listener name.
    LISTENER_SECURITY_PROTOCOL_MAP = "listener.security.protocol.map", Str, null, inert(LISTENER_SETUP),
        scope per_broker;
    /// The addresses the broker listens on, one per listener.
    LISTENERS = "listeners", Str, "PLAINTEXT://:9092", inert(LISTENER_SETUP), unset "PLAINTEXT://127.0.0.1:9092",
        scope per_broker;
    /// How long a cleaner thread sleeps when no log needs cleaning.
    LOG_CLEANER_BACKOFF_MS = "log.cleaner.backoff.ms", Long, "15000", dynamic;
    /// The memory all cleaner threads use to deduplicate keys.
    LOG_CLEANER_DEDUPE_BUFFER_SIZE = "log.cleaner.dedupe.buffer.size", Long, "134217728", dynamic;
    /// Whether compacted topics are cleaned.
    LOG_CLEANER_ENABLE = "log.cleaner.enable", Boolean, "true", static;
    /// How full the cleaner's dedupe buffer may get.
    LOG_CLEANER_IO_BUFFER_LOAD_FACTOR = "log.cleaner.io.buffer.load.factor", Double, "0.9",
        inert("Skein sizes its dedupe map from log.cleaner.dedupe.buffer.size alone");
    /// The cleaner's read and write buffer size.
    LOG_CLEANER_IO_BUFFER_SIZE = "log.cleaner.io.buffer.size", Int, "524288",
        inert("Skein's cleaner reads and writes whole batches"), min 0;
    /// Bytes per second read and written by all cleaner threads.
    LOG_CLEANER_IO_MAX_BYTES_PER_SECOND = "log.cleaner.io.max.bytes.per.second", Double,
        "1.7976931348623157E308", dynamic;
    /// How many threads clean logs.
    LOG_CLEANER_THREADS = "log.cleaner.threads", Int, "1", dynamic;
    /// `log.dirs` when that is unset.
    LOG_DIR = "log.dir", Str, "/tmp/kafka-logs", static, unset "./skein-data";
    /// The directory of partition logs and cluster metadata (Skein reads the first).
    LOG_DIRS = "log.dirs", Str, null, static, synonyms [LOG_DIR.name];
    /// Sets flush.ms's default (topic config table), but listed as Kafka
    /// lists it: null, with log.flush.scheduler.interval.ms (here the flush
    /// timer's period, not a flush interval) as its synonym.
    LOG_FLUSH_INTERVAL_MS = "log.flush.interval.ms", Long, null, dynamic,
        synonyms [LOG_FLUSH_SCHEDULER_INTERVAL_MS.name];
    /// How often the flush timer looks for logs to flush.
    LOG_FLUSH_SCHEDULER_INTERVAL_MS = "log.flush.scheduler.interval.ms", Long, "1000", static;
    /// How often logs are checked for segments to delete.
    LOG_RETENTION_CHECK_INTERVAL_MS = "log.retention.check.interval.ms", Long, "300000", static;
    /// The most new connections per second the broker accepts.
    MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate", Int, INT_MAX, inert(CONNECTION_LIMITS),
        min 0;
    /// The most client connections the broker accepts.
    MAX_CONNECTIONS = "max.connections", Int, INT_MAX, inert(CONNECTION_LIMITS);
    /// The most client connections from one address.
    MAX_CONNECTIONS_PER_IP = "max.connections.per.ip", Int, INT_MAX, inert(CONNECTION_LIMITS);
    /// Per-address exceptions to `max.connections.per.ip` (`host:n,…`).
    MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides", Str, "",
        inert(CONNECTION_LIMITS);
    /// Fetch sessions (KIP-227) kept; 0 turns them off.
    MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS = "max.incremental.fetch.session.cache.slots", Int,
        "1000", static;
    /// Java classes that report metrics.
    METRIC_REPORTERS = "metric.reporters", List, "org.apache.kafka.common.metrics.JmxReporter",
        inert("Skein exports its metrics on its Prometheus endpoint and loads no Java reporter");
    /// This broker's id.
    NODE_ID = "node.id", Int, "-1", static, unset "1";
    /// Threads that handle requests.
    NUM_IO_THREADS = "num.io.threads", Int, "8", inert(THREAD_POOLS), min 1;
    /// Threads that read and write the network.
    NUM_NETWORK_THREADS = "num.network.threads", Int, "3", inert(THREAD_POOLS), min 1;
    /// The partition count of an auto-created topic.
    NUM_PARTITIONS = "num.partitions", Int, "1", static, min 1;
    /// Threads per log directory that recover logs at start-up.
    NUM_RECOVERY_THREADS_PER_DATA_DIR = "num.recovery.threads.per.data.dir", Int, "2", inert(THREAD_POOLS),
        min 1;
    /// Fetcher threads per source broker.
    NUM_REPLICA_FETCHERS = "num.replica.fetchers", Int, "1", inert(THREAD_POOLS), min 1;
    /// How often expired committed offsets are removed.
    OFFSETS_RETENTION_CHECK_INTERVAL_MS = "offsets.retention.check.interval.ms", Long, "600000", static;
    /// How long the committed offsets of an empty group are kept.
    OFFSETS_RETENTION_MINUTES = "offsets.retention.minutes", Int, "10080", static;
    /// The partition count of `__consumer_offsets`.
    OFFSETS_TOPIC_NUM_PARTITIONS = "offsets.topic.num.partitions", Int, "50", static, min 1;
    /// The replication factor of `__consumer_offsets` (unset: the cluster's size, at most 3).
    OFFSETS_TOPIC_REPLICATION_FACTOR = "offsets.topic.replication.factor", Short, "3", static, min 1;
    /// How an authenticated connection becomes a principal.
    PRINCIPAL_BUILDER_CLASS = "principal.builder.class", Class,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", inert(LISTENER_SETUP),
        scope per_broker;
    /// Idle idempotent producers are forgotten after this.
    PRODUCER_ID_EXPIRATION_MS = "producer.id.expiration.ms", Int, "86400000", dynamic, min 1;
    /// The broker-wide budget for request bytes in flight. Kafka's default
    /// is -1 (unbounded); Skein bounds the memory that requests in flight
    /// may take (request_memory.rs).
    QUEUED_MAX_REQUEST_BYTES = "queued.max.request.bytes", Long, "536870912", static;
    /// How long a fetch of tiered data waits.
    REMOTE_FETCH_MAX_WAIT_MS = "remote.fetch.max.wait.ms", Int, "500", static, min 1;
    /// How long a ListOffsets of tiered data waits.
    REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS = "remote.list.offsets.request.timeout.ms", Long, "30000",
        static, min 1;
    /// The cache of tiered segments' indexes.
    REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES = "remote.log.index.file.cache.total.size.bytes", Long,
        "1073741824", inert(REMOTE_INDEX_CACHE), min 1;
    /// Threads that copy segments to tiered storage.
    REMOTE_LOG_MANAGER_COPIER_THREAD_POOL_SIZE = "remote.log.manager.copier.thread.pool.size", Int, "10",
        inert(REMOTE_TASKS), min 1;
    /// Bytes/s copied to tiered storage.
    REMOTE_LOG_MANAGER_COPY_MAX_BYTES_PER_SECOND = "remote.log.manager.copy.max.bytes.per.second", Long,
        LONG_MAX, dynamic, min 1;
    /// Samples of the remote copy quota's rate.
    REMOTE_LOG_MANAGER_COPY_QUOTA_WINDOW_NUM = "remote.log.manager.copy.quota.window.num", Int, "11",
        inert(QUOTA_WINDOW), min 1;
    /// Seconds of one sample of the remote copy quota's rate.
    REMOTE_LOG_MANAGER_COPY_QUOTA_WINDOW_SIZE_SECONDS = "remote.log.manager.copy.quota.window.size.seconds", Int,
        "1", inert(QUOTA_WINDOW), min 1;
    /// Threads that delete expired tiered segments.
    REMOTE_LOG_MANAGER_EXPIRATION_THREAD_POOL_SIZE = "remote.log.manager.expiration.thread.pool.size", Int,
        "10", inert(REMOTE_TASKS), min 1;
    /// Bytes/s read from tiered storage.
    REMOTE_LOG_MANAGER_FETCH_MAX_BYTES_PER_SECOND = "remote.log.manager.fetch.max.bytes.per.second", Long,
        LONG_MAX, dynamic, min 1;
    /// Samples of the remote fetch quota's rate.
    REMOTE_LOG_MANAGER_FETCH_QUOTA_WINDOW_NUM = "remote.log.manager.fetch.quota.window.num", Int, "11",
        inert(QUOTA_WINDOW), min 1;
    /// Seconds of one sample of the remote fetch quota's rate.
    REMOTE_LOG_MANAGER_FETCH_QUOTA_WINDOW_SIZE_SECONDS = "remote.log.manager.fetch.quota.window.size.seconds", Int,
        "1", inert(QUOTA_WINDOW), min 1;
    /// How often the leader copies closed segments to remote storage and
    /// applies remote retention (and followers learn what was copied).
    REMOTE_LOG_MANAGER_TASK_INTERVAL_MS = "remote.log.manager.task.interval.ms", Long, "30000", static, min 1;
    /// Threads that read tiered data.
    REMOTE_LOG_READER_THREADS = "remote.log.reader.threads", Int, "10", static, min 1;
    /// KIP-405: whether this broker tiers the topics with `remote.storage.enable`
    /// (Skein's built-in store: `rsm.config.storage.url`).
    REMOTE_LOG_STORAGE_SYSTEM_ENABLE = "remote.log.storage.system.enable", Boolean, "false", static;
    /// How long a follower waits after a failed fetch.
    REPLICA_FETCH_BACKOFF_MS = "replica.fetch.backoff.ms", Int, "1000", static;
    /// The most bytes a follower fetches per partition.
    REPLICA_FETCH_MAX_BYTES = "replica.fetch.max.bytes", Int, "1048576", static;
    /// The most bytes a follower fetches per request.
    REPLICA_FETCH_RESPONSE_MAX_BYTES = "replica.fetch.response.max.bytes", Int, "10485760", static;
    /// How long a follower's fetch waits for data.
    REPLICA_FETCH_WAIT_MAX_MS = "replica.fetch.wait.max.ms", Int, "500", static;
    /// A follower that has not caught up for this long leaves the ISR.
    REPLICA_LAG_TIME_MAX_MS = "replica.lag.time.max.ms", Long, "30000", static;
    /// Kafka's `RackAwareReplicaSelector` (KIP-392), or unset.
    REPLICA_SELECTOR_CLASS = "replica.selector.class", Class, null, static;
    /// Skein's own: the bytes of remote segments kept on local disk for
    /// reads below the local log start.
    RSM_CONFIG_CACHE_SIZE_BYTES = "rsm.config.cache.size.bytes", Long, "1073741824", static, min 1;
    /// Skein's own: the S3 access key id (the store's credentials are never
    /// read from the environment or instance metadata).
    RSM_CONFIG_S3_ACCESS_KEY_ID = "rsm.config.s3.access.key.id", Password, null, static;
    /// Skein's own: the S3 endpoint (`http://host:port`; unset: AWS).
    RSM_CONFIG_S3_ENDPOINT = "rsm.config.s3.endpoint", Str, null, static;
    /// Skein's own: the S3 region.
    RSM_CONFIG_S3_REGION = "rsm.config.s3.region", Str, "us-east-1", static;
    /// Skein's own: the S3 secret access key.
    RSM_CONFIG_S3_SECRET_ACCESS_KEY = "rsm.config.s3.secret.access.key", Password, null, static;
    /// Skein's own: where tiered segments go: a directory (`file:///dir`
    /// or a path) or `s3://bucket/prefix`.
    RSM_CONFIG_STORAGE_URL = "rsm.config.storage.url", Str, null, static;
    /// The SASL mechanisms the broker's listeners accept.
    SASL_ENABLED_MECHANISMS = "sasl.enabled.mechanisms", List, "GSSAPI", inert(LISTENER_SETUP),
        scope per_broker;
    /// The JAAS login configuration of a listener's mechanism.
    SASL_JAAS_CONFIG = "sasl.jaas.config", Password, null, inert(LISTENER_SETUP), scope per_broker;
    /// The kinit command.
    SASL_KERBEROS_KINIT_CMD = "sasl.kerberos.kinit.cmd", Str, "/usr/bin/kinit", inert(KERBEROS),
        scope per_broker;
    /// The least time between Kerberos refresh attempts.
    SASL_KERBEROS_MIN_TIME_BEFORE_RELOGIN = "sasl.kerberos.min.time.before.relogin", Long, "60000",
        inert(KERBEROS), scope per_broker;
    /// How Kerberos principals become short names.
    SASL_KERBEROS_PRINCIPAL_TO_LOCAL_RULES = "sasl.kerberos.principal.to.local.rules", List, "DEFAULT",
        inert(KERBEROS), scope per_broker;
    /// The Kerberos principal name Kafka runs as.
    SASL_KERBEROS_SERVICE_NAME = "sasl.kerberos.service.name", Str, null, inert(KERBEROS), scope per_broker;
    /// Random jitter added to the Kerberos renewal time.
    SASL_KERBEROS_TICKET_RENEW_JITTER = "sasl.kerberos.ticket.renew.jitter", Double, "0.05", inert(KERBEROS),
        scope per_broker;
    /// Share of a Kerberos ticket's lifetime after which it is renewed.
    SASL_KERBEROS_TICKET_RENEW_WINDOW_FACTOR = "sasl.kerberos.ticket.renew.window.factor", Double, "0.8",
        inert(KERBEROS), scope per_broker;
    /// Time kept before a login credential expires when refreshing it.
    SASL_LOGIN_REFRESH_BUFFER_SECONDS = "sasl.login.refresh.buffer.seconds", Short, "300",
        inert(LOGIN_REFRESH), scope per_broker;
    /// The least time between login credential refreshes.
    SASL_LOGIN_REFRESH_MIN_PERIOD_SECONDS = "sasl.login.refresh.min.period.seconds", Short, "60",
        inert(LOGIN_REFRESH), scope per_broker;
    /// Share of a login credential's lifetime after which it is refreshed.
    SASL_LOGIN_REFRESH_WINDOW_FACTOR = "sasl.login.refresh.window.factor", Double, "0.8",
        inert(LOGIN_REFRESH), scope per_broker;
    /// Random jitter added to the login refresh time.
    SASL_LOGIN_REFRESH_WINDOW_JITTER = "sasl.login.refresh.window.jitter", Double, "0.05",
        inert(LOGIN_REFRESH), scope per_broker;
    /// The SASL mechanism brokers replicate with.
    SASL_MECHANISM_INTER_BROKER_PROTOCOL = "sasl.mechanism.inter.broker.protocol", Str, "GSSAPI",
        inert(LISTENER_SETUP), scope per_broker;
    /// The largest frame a SASL listener reads before the client has authenticated.
    SASL_SERVER_MAX_RECEIVE_SIZE = "sasl.server.max.receive.size", Int, "524288", static;
    /// The inter-broker listener's security protocol, when it is not named.
    SECURITY_INTER_BROKER_PROTOCOL = "security.inter.broker.protocol", Str, "PLAINTEXT", static;
    /// The min.insync.replicas of `__share_group_state`.
    SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR = "share.coordinator.state.topic.min.isr", Short, "2", static;
    /// The partition count of `__share_group_state`.
    SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS =
        "share.coordinator.state.topic.num.partitions", Int, "50", static, min 1;
    /// The replication factor of `__share_group_state` (unset: the cluster's size, at most 3).
    SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR =
        "share.coordinator.state.topic.replication.factor", Short, "3", static, min 1;
    /// SO_RCVBUF of client connections; -1: the kernel's auto-tuning.
    SOCKET_RECEIVE_BUFFER_BYTES = "socket.receive.buffer.bytes", Int, "-1", static;
    /// The largest request the broker reads.
    SOCKET_REQUEST_MAX_BYTES = "socket.request.max.bytes", Int, "104857600", static;
    /// SO_SNDBUF of client connections; -1: the kernel's auto-tuning.
    SOCKET_SEND_BUFFER_BYTES = "socket.send.buffer.bytes", Int, "102400", static;
    /// Skein's own: plaintext fetches send large reads with `sendfile`.
    SOCKET_SENDFILE_ENABLE = "socket.sendfile.enable", Boolean, "true", static;
    /// The TLS cipher suites accepted (empty: the TLS library's).
    SSL_CIPHER_SUITES = "ssl.cipher.suites", List, "", inert(LISTENER_SETUP), scope per_broker;
    /// Whether TLS clients must present a certificate (`none`, `requested`, `required`).
    SSL_CLIENT_AUTH = "ssl.client.auth", Str, "none", inert(LISTENER_SETUP), scope per_broker;
    /// The TLS versions accepted.
    SSL_ENABLED_PROTOCOLS = "ssl.enabled.protocols", List, "TLSv1.2,TLSv1.3", inert(LISTENER_SETUP),
        scope per_broker;
    /// How a peer's host name is checked against its certificate.
    SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = "ssl.endpoint.identification.algorithm", Str, "https",
        inert(LISTENER_SETUP), scope per_broker;
    /// A Java class that makes TLS engines.
    SSL_ENGINE_FACTORY_CLASS = "ssl.engine.factory.class", Class, null, inert(LISTENER_SETUP),
        scope per_broker;
    /// The password of the private key (refused: Skein reads unencrypted PEM keys).
    SSL_KEY_PASSWORD = "ssl.key.password", Password, null, inert(LISTENER_SETUP), scope per_listener;
    /// The Java key manager algorithm.
    SSL_KEYMANAGER_ALGORITHM = "ssl.keymanager.algorithm", Str, "SunX509", inert(LISTENER_SETUP),
        scope per_broker;
    /// The broker's certificate chain in PEM, instead of a keystore file.
    SSL_KEYSTORE_CERTIFICATE_CHAIN = "ssl.keystore.certificate.chain", Password, null, inert(LISTENER_SETUP),
        scope per_listener;
    /// The broker's private key in PEM, instead of a keystore file.
    SSL_KEYSTORE_KEY = "ssl.keystore.key", Password, null, inert(LISTENER_SETUP), scope per_listener;
    /// The broker's certificate and key.
    SSL_KEYSTORE_LOCATION = "ssl.keystore.location", Str, null, inert(LISTENER_SETUP), scope per_listener;
    /// The keystore's password.
    SSL_KEYSTORE_PASSWORD = "ssl.keystore.password", Password, null, inert(LISTENER_SETUP),
        scope per_listener;
    /// The keystore's format.
    SSL_KEYSTORE_TYPE = "ssl.keystore.type", Str, "JKS", inert(LISTENER_SETUP), scope per_listener;
    /// How a certificate's subject becomes a principal.
    SSL_PRINCIPAL_MAPPING_RULES = "ssl.principal.mapping.rules", Str, "DEFAULT", static;
    /// The TLS protocol of the SSL context.
    SSL_PROTOCOL = "ssl.protocol", Str, "TLSv1.3", inert(LISTENER_SETUP), scope per_broker;
    /// The Java security provider of TLS.
    SSL_PROVIDER = "ssl.provider", Str, null, inert(LISTENER_SETUP), scope per_broker;
    /// The Java random number generator of TLS.
    SSL_SECURE_RANDOM_IMPLEMENTATION = "ssl.secure.random.implementation", Str, null, inert(LISTENER_SETUP),
        scope per_broker;
    /// The Java trust manager algorithm.
    SSL_TRUSTMANAGER_ALGORITHM = "ssl.trustmanager.algorithm", Str, "PKIX", inert(LISTENER_SETUP),
        scope per_broker;
    /// The trusted CAs in PEM, instead of a truststore file.
    SSL_TRUSTSTORE_CERTIFICATES = "ssl.truststore.certificates", Password, null, inert(LISTENER_SETUP),
        scope per_listener;
    /// The CAs client certificates must chain to.
    SSL_TRUSTSTORE_LOCATION = "ssl.truststore.location", Str, null, inert(LISTENER_SETUP), scope per_listener;
    /// The truststore's password.
    SSL_TRUSTSTORE_PASSWORD = "ssl.truststore.password", Password, null, inert(LISTENER_SETUP),
        scope per_listener;
    /// The truststore's format.
    SSL_TRUSTSTORE_TYPE = "ssl.truststore.type", Str, "JKS", inert(LISTENER_SETUP), scope per_listener;
    /// Principals allowed everything (`User:a;User:b`).
    SUPER_USERS = "super.users", Str, null, static;
    /// The largest client telemetry push (KIP-714) accepted, compressed and decompressed.
    TELEMETRY_MAX_BYTES = "telemetry.max.bytes", Int, "1048576", static, min 1;
    /// How often transactions past their timeout are aborted.
    TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS =
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, "10000", static, min 1;
    /// The longest timeout a producer may ask for.
    TRANSACTION_MAX_TIMEOUT_MS = "transaction.max.timeout.ms", Int, "900000", static, min 1;
    /// Whether a transactional write is checked against the coordinator first (KIP-890).
    TRANSACTION_PARTITION_VERIFICATION_ENABLE = "transaction.partition.verification.enable", Boolean,
        "true", inert("Skein reads it at start-up only");
    /// How often expired transactional ids are removed.
    TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS =
        "transaction.remove.expired.transaction.cleanup.interval.ms", Int, "3600000", static;
    /// The min.insync.replicas of `__transaction_state`.
    TRANSACTION_STATE_LOG_MIN_ISR = "transaction.state.log.min.isr", Int, "2", static;
    /// The partition count of `__transaction_state`.
    TRANSACTION_STATE_LOG_NUM_PARTITIONS = "transaction.state.log.num.partitions", Int, "50", static,
        min 1;
    /// The replication factor of `__transaction_state` (unset: the cluster's size, at most 3).
    TRANSACTION_STATE_LOG_REPLICATION_FACTOR = "transaction.state.log.replication.factor", Short, "3",
        static, min 1;
    /// The segment size of `__transaction_state`.
    TRANSACTION_STATE_LOG_SEGMENT_BYTES = "transaction.state.log.segment.bytes", Int, "104857600",
        static;
    /// A transactional id idle for this long is forgotten.
    TRANSACTIONAL_ID_EXPIRATION_MS = "transactional.id.expiration.ms", Int, "604800000", static, min 1;
    /// When the controller elects the longest log of a partition with no ISR or ELR member left
    /// (KIP-966): None, Balanced or Aggressive.
    UNCLEAN_RECOVERY_STRATEGY = "unclean.recovery.strategy", Str, "Balanced", static;
    /// How long Balanced unclean recovery waits for an ISR or ELR member to come back.
    UNCLEAN_RECOVERY_TIMEOUT_MS = "unclean.recovery.timeout.ms", Long, "300000", static, min 0;
}

/// The line of broker config `name`.
pub fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

impl BrokerKey {
    /// The value Skein uses when the key is unset; `None`: none.
    pub const fn unset_value(&self) -> Option<&'static str> {
        match self.unset {
            Some(v) => Some(v),
            None => self.default,
        }
    }

    /// The value Skein uses when the key is unset, for a key that has one.
    pub const fn when_unset(&self) -> &'static str {
        match self.unset_value() {
            Some(v) => v,
            None => panic!("a broker config without a default"),
        }
    }

    /// Whether `value` reads as this key's type and meets its minimum,
    /// and if not why (the operator refuses a `spec.config` value a broker
    /// would refuse at start-up). Strings, lists, classes and passwords
    /// have no shape checked here.
    pub fn check(&self, value: &str) -> Result<(), String> {
        let v = value.trim();
        let number = match self.kind {
            Kind::Boolean if parse_bool(v).is_some() => return Ok(()),
            Kind::Boolean => return Err("must be true or false".into()),
            Kind::Short => v.parse::<i16>().ok().map(f64::from),
            Kind::Int => v.parse::<i32>().ok().map(f64::from),
            Kind::Long => v.parse::<i64>().ok().map(|n| n as f64),
            Kind::Double => v.parse::<f64>().ok().filter(|n| n.is_finite()),
            Kind::Str | Kind::List | Kind::Class | Kind::Password => return Ok(()),
        };
        let Some(n) = number else {
            return Err(format!("not a valid {:?}", self.kind).to_lowercase());
        };
        match self.min {
            Some(min) if n < min as f64 => Err(format!("must be at least {min}")),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_checked_against_its_kind_and_minimum() {
        assert_eq!(NUM_PARTITIONS.check(" 3 "), Ok(()));
        assert_eq!(
            NUM_PARTITIONS.check("three"),
            Err("not a valid int".to_string())
        );
        assert_eq!(
            NUM_PARTITIONS.check("0"),
            Err("must be at least 1".to_string())
        );
        assert_eq!(
            AUTO_CREATE_TOPICS_ENABLE.check("yes"),
            Err("must be true or false".to_string())
        );
        assert_eq!(AUTO_CREATE_TOPICS_ENABLE.check("false"), Ok(()));
        // An int that does not fit 32 bits is refused, as Kafka's ConfigDef does.
        assert!(NUM_PARTITIONS.check("3000000000").is_err());
        // Every default passes its own check.
        for k in BROKER_KEYS {
            if let Some(v) = k.unset_value() {
                assert_eq!(k.check(v), Ok(()), "{} = {v:?}", k.name);
            }
        }
    }

    #[test]
    fn the_table_is_sorted_by_name_and_every_default_parses_as_its_kind() {
        let names: Vec<&str> = BROKER_KEYS.iter().map(|k| k.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
        for k in BROKER_KEYS {
            assert!(!k.doc.trim().is_empty(), "{} has no doc comment", k.name);
            for v in [k.default, k.unset].into_iter().flatten() {
                let ok = match k.kind {
                    Kind::Boolean => parse_bool(v).is_some(),
                    Kind::Int => v.parse::<i32>().is_ok(),
                    Kind::Short => v.parse::<i16>().is_ok(),
                    Kind::Long => v.parse::<i64>().is_ok(),
                    Kind::Double => v.parse::<f64>().is_ok(),
                    _ => true,
                };
                assert!(ok, "{} = {v:?}", k.name);
            }
        }
    }
}
