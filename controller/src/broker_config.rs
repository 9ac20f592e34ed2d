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
    /// Dynamic in Kafka, not (yet) in Skein: why.
    NotYet(&'static str),
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
    /// What it sets.
    pub doc: &'static str,
}

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: &str = "2147483647";
const CONNECTION_LIMITS: &str = "connection limits are read at start-up only";

/// The table's lines as [`BrokerKey`] constants and [`BROKER_KEYS`]. A line:
///
/// ```text
/// /// Doc.
/// NAME = "kafka.name", Kind, default (or null), static | dynamic | not_yet("why")
///     [, unset "skein's value"] [, min N] [, synonyms [OTHER.name]];
/// ```
macro_rules! broker_config_table {
    ($($(#[doc = $doc:literal])* $id:ident = $name:literal, $kind:ident, $default:tt,
        $update:ident $(($why:expr))? $(, unset $unset:literal)? $(, min $min:literal)?
        $(, synonyms [$($syn:expr),*])?;)*) => {
        $($(#[doc = $doc])* pub const $id: BrokerKey = BrokerKey {
            name: $name,
            kind: Kind::$kind,
            default: default!($default),
            unset: some!($($unset)?),
            synonyms: &[$($($syn),*)?],
            min: some!($($min)?),
            update: update!($update $(($why))?),
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

macro_rules! update {
    (static) => {
        Update::Static
    };
    (dynamic) => {
        Update::Dynamic
    };
    (not_yet($why:expr)) => {
        Update::NotYet($why)
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
    /// Bytes/s this broker's followers may fetch for throttled replicas.
    FOLLOWER_REPLICATION_THROTTLED_RATE = "follower.replication.throttled.rate", Long, LONG_MAX, dynamic;
    /// The heartbeat interval of consumer-protocol group members (KIP-848).
    GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS = "group.consumer.heartbeat.interval.ms", Int, "5000", static;
    /// The session timeout of consumer-protocol group members (KIP-848).
    GROUP_CONSUMER_SESSION_TIMEOUT_MS = "group.consumer.session.timeout.ms", Int, "45000", static;
    /// How long a new classic group waits for more members before its first rebalance.
    GROUP_INITIAL_REBALANCE_DELAY_MS = "group.initial.rebalance.delay.ms", Int, "3000", static;
    /// The longest session timeout a member may ask for.
    GROUP_MAX_SESSION_TIMEOUT_MS = "group.max.session.timeout.ms", Int, "1800000", static;
    /// The most members a group may have.
    GROUP_MAX_SIZE = "group.max.size", Int, INT_MAX, static;
    /// The shortest session timeout a member may ask for.
    GROUP_MIN_SESSION_TIMEOUT_MS = "group.min.session.timeout.ms", Int, "6000", static;
    /// The listener brokers replicate over.
    INTER_BROKER_LISTENER_NAME = "inter.broker.listener.name", Str, null, static;
    /// How often the controller checks for imbalanced leadership.
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS = "leader.imbalance.check.interval.seconds", Long, "300", static;
    /// Bytes/s this broker's leaders may serve for throttled replicas.
    LEADER_REPLICATION_THROTTLED_RATE = "leader.replication.throttled.rate", Long, LONG_MAX, dynamic;
    /// Each listener's security protocol, by listener name.
    LISTENER_SECURITY_PROTOCOL_MAP = "listener.security.protocol.map", Str, null, static;
    /// The addresses the broker listens on, one per listener.
    LISTENERS = "listeners", Str, "PLAINTEXT://:9092", static, unset "PLAINTEXT://127.0.0.1:9092";
    /// How long a cleaner thread sleeps when no log needs cleaning.
    LOG_CLEANER_BACKOFF_MS = "log.cleaner.backoff.ms", Long, "15000", dynamic;
    /// The memory all cleaner threads use to deduplicate keys.
    LOG_CLEANER_DEDUPE_BUFFER_SIZE = "log.cleaner.dedupe.buffer.size", Long, "134217728", dynamic;
    /// Whether compacted topics are cleaned.
    LOG_CLEANER_ENABLE = "log.cleaner.enable", Boolean, "true", static;
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
    /// The most client connections the broker accepts.
    MAX_CONNECTIONS = "max.connections", Int, INT_MAX, not_yet(CONNECTION_LIMITS);
    /// The most client connections from one address.
    MAX_CONNECTIONS_PER_IP = "max.connections.per.ip", Int, INT_MAX, not_yet(CONNECTION_LIMITS);
    /// Per-address exceptions to `max.connections.per.ip` (`host:n,…`).
    MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides", Str, "",
        not_yet(CONNECTION_LIMITS);
    /// Fetch sessions (KIP-227) kept; 0 turns them off.
    MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS = "max.incremental.fetch.session.cache.slots", Int,
        "1000", static;
    /// This broker's id.
    NODE_ID = "node.id", Int, "-1", static, unset "1";
    /// The partition count of an auto-created topic.
    NUM_PARTITIONS = "num.partitions", Int, "1", static, min 1;
    /// How often expired committed offsets are removed.
    OFFSETS_RETENTION_CHECK_INTERVAL_MS = "offsets.retention.check.interval.ms", Long, "600000", static;
    /// How long the committed offsets of an empty group are kept.
    OFFSETS_RETENTION_MINUTES = "offsets.retention.minutes", Int, "10080", static;
    /// The partition count of `__consumer_offsets`.
    OFFSETS_TOPIC_NUM_PARTITIONS = "offsets.topic.num.partitions", Int, "50", static, min 1;
    /// The replication factor of `__consumer_offsets` (unset: the cluster's size, at most 3).
    OFFSETS_TOPIC_REPLICATION_FACTOR = "offsets.topic.replication.factor", Short, "3", static, min 1;
    /// Idle idempotent producers are forgotten after this.
    PRODUCER_ID_EXPIRATION_MS = "producer.id.expiration.ms", Int, "86400000", static;
    /// The broker-wide budget for request bytes in flight. Kafka's default
    /// is -1 (unbounded); Skein bounds the memory that requests in flight
    /// may take (request_memory.rs).
    QUEUED_MAX_REQUEST_BYTES = "queued.max.request.bytes", Long, "536870912", static;
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
    /// The SASL mechanisms the broker's listeners accept.
    SASL_ENABLED_MECHANISMS = "sasl.enabled.mechanisms", List, "GSSAPI", static;
    /// The largest frame a SASL listener reads before the client has authenticated.
    SASL_SERVER_MAX_RECEIVE_SIZE = "sasl.server.max.receive.size", Int, "524288", static;
    /// The inter-broker listener's security protocol, when it is not named.
    SECURITY_INTER_BROKER_PROTOCOL = "security.inter.broker.protocol", Str, "PLAINTEXT", static;
    /// SO_RCVBUF of client connections; -1: the kernel's auto-tuning.
    SOCKET_RECEIVE_BUFFER_BYTES = "socket.receive.buffer.bytes", Int, "-1", static;
    /// The largest request the broker reads.
    SOCKET_REQUEST_MAX_BYTES = "socket.request.max.bytes", Int, "104857600", static;
    /// SO_SNDBUF of client connections; -1: the kernel's auto-tuning.
    SOCKET_SEND_BUFFER_BYTES = "socket.send.buffer.bytes", Int, "102400", static;
    /// Skein's own: plaintext fetches send large reads with `sendfile`.
    SOCKET_SENDFILE_ENABLE = "socket.sendfile.enable", Boolean, "true", static;
    /// Whether TLS clients must present a certificate (`none`, `requested`, `required`).
    SSL_CLIENT_AUTH = "ssl.client.auth", Str, "none", static;
    /// The TLS versions accepted.
    SSL_ENABLED_PROTOCOLS = "ssl.enabled.protocols", List, "TLSv1.2,TLSv1.3", static;
    /// The password of the private key (refused: Skein reads unencrypted PEM keys).
    SSL_KEY_PASSWORD = "ssl.key.password", Password, null, static;
    /// The broker's certificate and key.
    SSL_KEYSTORE_LOCATION = "ssl.keystore.location", Str, null, static;
    /// The keystore's password.
    SSL_KEYSTORE_PASSWORD = "ssl.keystore.password", Password, null, static;
    /// The keystore's format.
    SSL_KEYSTORE_TYPE = "ssl.keystore.type", Str, "JKS", static;
    /// How a certificate's subject becomes a principal.
    SSL_PRINCIPAL_MAPPING_RULES = "ssl.principal.mapping.rules", Str, "DEFAULT", static;
    /// The CAs client certificates must chain to.
    SSL_TRUSTSTORE_LOCATION = "ssl.truststore.location", Str, null, static;
    /// The truststore's password.
    SSL_TRUSTSTORE_PASSWORD = "ssl.truststore.password", Password, null, static;
    /// The truststore's format.
    SSL_TRUSTSTORE_TYPE = "ssl.truststore.type", Str, "JKS", static;
    /// Principals allowed everything (`User:a;User:b`).
    SUPER_USERS = "super.users", Str, null, static;
    /// How often transactions past their timeout are aborted.
    TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS =
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, "10000", static, min 1;
    /// The longest timeout a producer may ask for.
    TRANSACTION_MAX_TIMEOUT_MS = "transaction.max.timeout.ms", Int, "900000", static, min 1;
    /// Whether a transactional write is checked against the coordinator first (KIP-890).
    TRANSACTION_PARTITION_VERIFICATION_ENABLE = "transaction.partition.verification.enable", Boolean,
        "true", static;
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
