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

use crate::config::{broker_key, BrokerConfig, TopicConfigDef, Update, TOPIC_CONFIGS};

/// The broker configs that set topic defaults but that Skein does not
/// change at run time yet (Kafka does), and why. The others' line of the
/// broker config table says whether they are dynamic.
const TOPIC_DEFAULTS_NOT_YET: &[(&str, &str)] = &[(
    skein_controller::election::UNCLEAN_LEADER_ELECTION_ENABLE,
    "the controller reads it from its own settings; set it per topic instead",
)];

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
/// [`TOPIC_DEFAULTS_NOT_YET`].
pub fn sets_topic_default(key: &str) -> bool {
    topic_default_of(key).is_some()
}

/// Whether `key` may be set dynamically; why not, if it may not.
pub fn check_key(key: &str) -> Result<(), String> {
    let not_yet = TOPIC_DEFAULTS_NOT_YET.iter().find(|(k, _)| *k == key);
    let update = match (broker_key(key), not_yet) {
        (Some(k), _) => k.update,
        (None, Some((_, why))) => Update::NotYet(why),
        (None, None) if sets_topic_default(key) => Update::Dynamic,
        (None, None) => Update::Static,
    };
    match update {
        Update::Dynamic => return Ok(()),
        Update::NotYet(why) => {
            return Err(format!("Cannot update {key} dynamically in Skein: {why}"))
        }
        Update::Static => {}
    }
    Err(format!(
        "Cannot update these configs dynamically: Set({key}) (change the properties file or --override and restart)"
    ))
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
    fn static_and_unimplemented_keys_are_refused_by_name() {
        assert!(check_key("log.retention.ms").is_ok());
        assert!(check_key("log.cleaner.threads").is_ok());
        let e = check_key("num.partitions").unwrap_err();
        assert!(e.contains("Cannot update these configs dynamically"), "{e}");
        let e = check_key("max.connections").unwrap_err();
        assert!(e.contains("start-up only"), "{e}");
        let e = check_key("unclean.leader.election.enable").unwrap_err();
        assert!(e.contains("set it per topic instead"), "{e}");
        let dynamic: Vec<&str> = crate::config::BROKER_KEYS
            .iter()
            .filter(|k| check_key(k.name).is_ok())
            .map(|k| k.name)
            .collect();
        assert_eq!(
            dynamic,
            [
                "follower.replication.throttled.rate",
                "leader.replication.throttled.rate",
                "log.cleaner.backoff.ms",
                "log.cleaner.dedupe.buffer.size",
                "log.cleaner.io.max.bytes.per.second",
                "log.cleaner.threads",
                "log.flush.interval.ms",
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
