//! Dynamic broker configs (Kafka's `DynamicBrokerConfig`): values set with
//! `kafka-configs --alter --entity-type brokers [--entity-name ID |
//! --entity-default]`, stored by the controller, laid over the properties
//! file without a restart. A value comes from, highest first: this
//! broker's own dynamic value (DYNAMIC_BROKER_CONFIG), the cluster-wide
//! dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file or
//! `--override` (STATIC_BROKER_CONFIG), Kafka's default. A dynamic value
//! of a setting with synonyms in other units (`log.retention.hours`)
//! replaces every lower layer's value of that setting, whatever its unit.
//!
//! Skein changes at run time the configs Kafka does that it implements:
//! the log defaults of topics (retention, segments, flush, cleanup,
//! message size and timestamps, `min.insync.replicas`, compression) —
//! applied to every hosted partition without a topic override — and the
//! log cleaner's threads, buffer, backoff and I/O rate, and the replication
//! throttles (`replication_throttle`). Keys Kafka treats
//! as static are refused with INVALID_CONFIG, as Kafka does; so are the
//! dynamic ones Skein does not implement yet, by name. Each line of the
//! broker config table (`skein_controller::broker_config`) says which it is.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use skein_controller::broker_configs::BrokerConfigs;

use skein_controller::broker_config::{self as keys, Scope};

use crate::config::{broker_key, BrokerConfig, TopicConfigDef, Update, TOPIC_CONFIGS};

/// The broker configs that set topic defaults that Skein accepts
/// dynamically but does not act on (Kafka does), and why. The others'
/// line of the broker config table says whether they are dynamic.
const TOPIC_DEFAULTS_INERT: &[(&str, &str)] = &[(
    skein_controller::election::UNCLEAN_LEADER_ELECTION_ENABLE,
    "the controller reads it from its own settings; set it per topic instead",
)];

/// The settings of a listener's SASL mechanism, which a listener prefix
/// names with the mechanism (`listener.name.<l>.<mechanism>.<key>`): Kafka's
/// `ListenerMechanismConfigs`.
const MECHANISM_KEYS: &[&str] = &[
    keys::SASL_JAAS_CONFIG.name,
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    keys::CONNECTIONS_MAX_REAUTH_MS.name,
];

/// The listener settings a cluster-wide default may set under a listener
/// prefix (Kafka's `ClusterLevelListenerConfigs`); every other
/// listener-prefixed key is per broker.
const CLUSTER_LEVEL_LISTENER_KEYS: &[&str] = &[
    keys::MAX_CONNECTIONS.name,
    keys::MAX_CONNECTION_CREATION_RATE.name,
    keys::NUM_NETWORK_THREADS.name,
];

/// The topic config whose default broker config `key` sets, under its
/// name or a synonym in another unit (`log.retention.hours`).
fn topic_default_of(key: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| {
        !d.broker_default.is_empty()
            && (d.broker_default == key || d.broker_synonyms.iter().any(|(s, _)| *s == key))
    })
}

/// Whether broker config `key` sets the default of a topic config (the log
/// defaults of topics, `min.insync.replicas`, …): all are dynamic, applied
/// to every hosted partition without a topic override, except those in
/// [`TOPIC_DEFAULTS_INERT`].
pub fn sets_topic_default(key: &str) -> bool {
    topic_default_of(key).is_some()
}

/// The key a listener-prefixed key sets (`listener.name.<l>.<key>`, or
/// `listener.name.<l>.<mechanism>.<key>` for a mechanism's settings), as
/// Kafka's `ListenerConfigRegex` reads it; `None` for any other key.
pub fn listener_base(key: &str) -> Option<&str> {
    let (_, base) = key.strip_prefix("listener.name.")?.split_once('.')?;
    Some(
        MECHANISM_KEYS
            .iter()
            .find(|k| base.ends_with(*k))
            .copied()
            .unwrap_or(base),
    )
}

/// How `key` may be updated (a listener-prefixed key as the key it sets):
/// `None` for a key Skein does not know.
fn update_of(key: &str) -> Option<Update> {
    if let Some(k) = broker_key(key) {
        return Some(k.update);
    }
    if let Some((_, why)) = TOPIC_DEFAULTS_INERT.iter().find(|(k, _)| *k == key) {
        return Some(Update::Inert(why));
    }
    sets_topic_default(key).then_some(Update::Dynamic)
}

/// Whether a dynamic value of `key` is shown as read-only by
/// DescribeConfigs: it is unless Kafka changes it at run time.
pub fn is_read_only(key: &str) -> bool {
    !matches!(update_of(key), Some(Update::Dynamic | Update::Inert(_)))
}

/// Whether `key` may be set dynamically, for one broker (`per_broker`) or
/// as the cluster-wide default, and if not why, in the words of Kafka's
/// `DynamicBrokerConfig.validateConfigs`. A listener-prefixed key may set
/// any setting Skein knows, for one broker only unless it is one of
/// [`CLUSTER_LEVEL_LISTENER_KEYS`], as in Kafka.
pub fn check_key(key: &str, per_broker: bool) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("{why}: Set({key})"));
    if let Some(base) = listener_base(key) {
        let known = MECHANISM_KEYS.contains(&base) || update_of(base).is_some();
        if !known {
            return refuse("Cannot update these configs dynamically");
        }
        if !per_broker && !CLUSTER_LEVEL_LISTENER_KEYS.contains(&base) {
            return refuse(
                "Cannot update these configs at default cluster level, broker id must be specified",
            );
        }
        return Ok(());
    }
    match update_of(key) {
        Some(Update::Dynamic | Update::Inert(_)) => {}
        Some(Update::Static) | None => return refuse("Cannot update these configs dynamically"),
    }
    match broker_key(key).map(|k| k.scope) {
        Some(Scope::PerListener) => refuse(
            "These security configs can be dynamically updated only per-listener using the listener prefix",
        ),
        Some(Scope::PerBroker) if !per_broker => refuse(
            "Cannot update these configs at default cluster level, broker id must be specified",
        ),
        _ => Ok(()),
    }
}

/// Checks a dynamic value of `key` (a listener-prefixed key's against the
/// key it sets) against its type and minimum, in the words of Kafka's
/// `ConfigDef`.
pub fn check_value(key: &str, value: &str) -> Result<(), String> {
    let base = listener_base(key).unwrap_or(key);
    match broker_key(base) {
        Some(k) => k
            .check(value)
            .map_err(|why| format!("Invalid value {value} for configuration {key}: {why}")),
        None => Ok(()),
    }
}

/// Why Skein does not act on a dynamic value of `key` that it accepts, if
/// it does not (DescribeConfigs' documentation says so).
pub fn inert_reason(key: &str) -> Option<&'static str> {
    match update_of(listener_base(key).unwrap_or(key)) {
        Some(Update::Inert(why)) => Some(why),
        _ => None,
    }
}

/// `key` and its synonyms in other units: a dynamic value of one replaces
/// the others below it.
fn family(key: &str) -> Vec<&'static str> {
    topic_default_of(key)
        .map(|d| {
            std::iter::once(d.broker_default)
                .chain(d.broker_synonyms.iter().map(|(s, _)| *s))
                .collect()
        })
        .unwrap_or_default()
}

/// Lays `layer` over `base`: each key replaces its whole family below.
fn overlay(base: &mut BTreeMap<String, String>, layer: &BTreeMap<String, String>) {
    for k in layer.keys() {
        for other in family(k) {
            base.remove(other);
        }
    }
    for (k, v) in layer {
        base.insert(k.clone(), v.clone());
    }
}

/// The dynamic layers that apply to broker `id`: (cluster default, own).
pub fn layers(
    configs: &BrokerConfigs,
    id: i32,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    (
        configs.cluster_default().cloned().unwrap_or_default(),
        configs.broker(id).cloned().unwrap_or_default(),
    )
}

/// The properties with the dynamic layers over them.
pub fn merged(
    static_raw: &BTreeMap<String, String>,
    configs: &BrokerConfigs,
    id: i32,
) -> BTreeMap<String, String> {
    let (default, own) = layers(configs, id);
    let mut raw = static_raw.clone();
    overlay(&mut raw, &default);
    overlay(&mut raw, &own);
    raw
}

/// The configuration in force: the static one with the dynamic layers
/// applied, and the layers it was built from.
pub struct DynamicConfig {
    current: RwLock<(Arc<BrokerConfigs>, Arc<BrokerConfig>)>,
}

impl DynamicConfig {
    pub fn new(config: &BrokerConfig) -> Self {
        Self {
            current: RwLock::new((Arc::default(), Arc::new(config.clone()))),
        }
    }

    /// The configuration in force.
    pub fn get(&self) -> Arc<BrokerConfig> {
        self.current.read().expect("dynamic config lock").1.clone()
    }

    /// The dynamic layers in force.
    pub fn layers(&self) -> Arc<BrokerConfigs> {
        self.current.read().expect("dynamic config lock").0.clone()
    }

    /// Builds the configuration for `configs` if they differ from the ones
    /// in force; `Ok(false)`: nothing changed. A layer that does not parse
    /// (set by a broker of another build) leaves the previous one in force.
    pub fn update(
        &self,
        base: &BrokerConfig,
        configs: &Arc<BrokerConfigs>,
    ) -> Result<bool, crate::config::ConfigError> {
        if **configs == *self.layers() {
            return Ok(false);
        }
        let built = build(base, configs);
        let mut cur = self.current.write().expect("dynamic config lock");
        cur.0 = configs.clone();
        cur.1 = Arc::new(built?);
        Ok(true)
    }
}

/// `base` with `configs`' layers for its broker.
pub fn build(
    base: &BrokerConfig,
    configs: &BrokerConfigs,
) -> Result<BrokerConfig, crate::config::ConfigError> {
    let mut cfg = BrokerConfig::from_map(merged(&base.raw, configs, base.node_id))?;
    cfg.log_format = base.log_format.clone();
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_controller::broker_configs::BrokerConfigChange;

    fn raw(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn configs(changes: &[(&str, &str, &str)]) -> BrokerConfigs {
        let mut c = BrokerConfigs::default();
        c.apply(
            changes
                .iter()
                .map(|(r, k, v)| BrokerConfigChange {
                    resource: r.to_string(),
                    key: k.to_string(),
                    value: Some(v.to_string()),
                })
                .collect(),
        );
        c
    }

    #[test]
    fn own_values_beat_the_default_which_beats_the_file_across_units() {
        let file = raw(&[
            ("log.retention.ms", "1000"),
            ("message.max.bytes", "100"),
            ("num.partitions", "3"),
        ]);
        let c = configs(&[
            ("", "log.retention.hours", "2"),
            ("", "message.max.bytes", "200"),
            ("1", "message.max.bytes", "300"),
            ("2", "message.max.bytes", "400"),
        ]);
        let m = merged(&file, &c, 1);
        assert_eq!(m.get("log.retention.ms"), None, "replaced by the hours");
        assert_eq!(m["log.retention.hours"], "2");
        assert_eq!(m["message.max.bytes"], "300");
        assert_eq!(m["num.partitions"], "3");
        assert_eq!(merged(&file, &c, 3)["message.max.bytes"], "200");

        let base = BrokerConfig::from_map(file).unwrap();
        let built = build(&base, &c).unwrap();
        assert_eq!(built.log_defaults.retention_ms, 2 * 3_600_000);
        assert_eq!(built.log_defaults.max_message_bytes, 300);
    }

    #[test]
    fn keys_are_refused_and_accepted_as_kafka_does() {
        let words = |key: &str, per_broker: bool| check_key(key, per_broker).unwrap_err();
        assert!(check_key("log.retention.ms", false).is_ok());
        assert!(check_key("log.cleaner.threads", false).is_ok());
        assert_eq!(
            words("num.partitions", true),
            "Cannot update these configs dynamically: Set(num.partitions)"
        );
        assert!(words("no.such.key", true).contains("Cannot update these configs dynamically"));
        // Dynamic in Kafka, accepted and stored even where Skein does not act on it.
        assert!(check_key("max.connections", false).is_ok());
        assert!(check_key("sasl.kerberos.min.time.before.relogin", true).is_ok());
        assert!(check_key("unclean.leader.election.enable", false).is_ok());
        assert!(inert_reason("max.connections")
            .unwrap()
            .contains("start-up only"));
        assert_eq!(inert_reason("log.retention.ms"), None);
        // Kafka's per-broker and per-listener settings.
        assert_eq!(
            words("sasl.kerberos.min.time.before.relogin", false),
            "Cannot update these configs at default cluster level, broker id must be specified: \
             Set(sasl.kerberos.min.time.before.relogin)"
        );
        assert!(words("ssl.keystore.location", true).contains("only per-listener"));
        assert!(check_key("listener.name.external.ssl.keystore.location", true).is_ok());
        assert!(check_key("listener.name.external.ssl.keystore.location", false).is_err());
        assert!(check_key("listener.name.external.max.connections", false).is_ok());
        assert!(check_key("listener.name.external.log.retention.ms", false).is_err());
        assert!(check_key("listener.name.external.log.retention.ms", true).is_ok());
        assert!(check_key("listener.name.sasl_ssl.plain.sasl.jaas.config", true).is_ok());
        assert!(check_key("listener.name.external.no.such.key", true).is_err());
        assert_eq!(
            listener_base("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"),
            Some("sasl.jaas.config")
        );
        // Values are checked against the type of the key they set.
        assert!(check_value("sasl.kerberos.min.time.before.relogin", "58000").is_ok());
        assert_eq!(
            check_value("listener.name.external.max.connections", "many").unwrap_err(),
            "Invalid value many for configuration listener.name.external.max.connections: not a valid int"
        );
        // The keys Skein changes at run time.
        let acted_on: Vec<&str> = crate::config::BROKER_KEYS
            .iter()
            .filter(|k| check_key(k.name, true).is_ok() && inert_reason(k.name).is_none())
            .map(|k| k.name)
            .collect();
        assert_eq!(
            acted_on,
            [
                "follower.replication.throttled.rate",
                "leader.replication.throttled.rate",
                "log.cleaner.backoff.ms",
                "log.cleaner.dedupe.buffer.size",
                "log.cleaner.io.max.bytes.per.second",
                "log.cleaner.threads",
                "log.flush.interval.ms",
                "producer.id.expiration.ms",
                "remote.log.manager.copy.max.bytes.per.second",
                "remote.log.manager.fetch.max.bytes.per.second",
            ]
        );
    }

    #[test]
    fn an_update_applies_once_and_a_bad_layer_keeps_the_last_good_one() {
        let base = BrokerConfig::from_map(raw(&[("node.id", "1")])).unwrap();
        let d = DynamicConfig::new(&base);
        let good = Arc::new(configs(&[("", "log.segment.bytes", "1048576")]));
        assert!(d.update(&base, &good).unwrap());
        assert!(!d.update(&base, &good).unwrap(), "the same layers again");
        assert_eq!(d.get().log_defaults.segment_bytes, 1_048_576);
        let bad = Arc::new(configs(&[("1", "log.segment.bytes", "many")]));
        assert!(d.update(&base, &bad).is_err());
        assert_eq!(d.get().log_defaults.segment_bytes, 1_048_576);
    }
}
