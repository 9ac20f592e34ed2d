//! Configs of resources that are neither topics nor brokers: Kafka's
//! CLIENT_METRICS resources (KIP-714 client-metrics subscriptions, set with
//! `kafka-client-metrics.sh` or `kafka-configs --entity-type
//! client-metrics`) and GROUP resources (KIP-848's per-group configs).
//!
//! As with dynamic broker configs, brokers parse and check the values (they
//! know the keys and their types); the controller stores each resource's
//! whole set of values, written only from `skein.version` 5 on (a
//! controller of an older release could not read the records).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The kind of resource a config set belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigResourceKind {
    /// A client-metrics subscription (Kafka's resource type 16).
    ClientMetrics,
    /// A consumer, share or streams group (Kafka's resource type 32).
    Group,
}

impl ConfigResourceKind {
    /// Kafka's `ConfigResource.Type` id.
    pub fn kafka_type(self) -> i8 {
        match self {
            ConfigResourceKind::ClientMetrics => 16,
            ConfigResourceKind::Group => 32,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<Self> {
        match t {
            16 => Some(ConfigResourceKind::ClientMetrics),
            32 => Some(ConfigResourceKind::Group),
            _ => None,
        }
    }
}

/// Resource name → key → value, for one kind.
pub type ConfigSets = BTreeMap<String, BTreeMap<String, String>>;

/// Every stored config set, by kind. A resource with no values is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceConfigs {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client_metrics: ConfigSets,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: ConfigSets,
}

impl ResourceConfigs {
    pub fn is_empty(&self) -> bool {
        self.client_metrics.is_empty() && self.groups.is_empty()
    }

    pub fn of(&self, kind: ConfigResourceKind) -> &ConfigSets {
        match kind {
            ConfigResourceKind::ClientMetrics => &self.client_metrics,
            ConfigResourceKind::Group => &self.groups,
        }
    }

    fn of_mut(&mut self, kind: ConfigResourceKind) -> &mut ConfigSets {
        match kind {
            ConfigResourceKind::ClientMetrics => &mut self.client_metrics,
            ConfigResourceKind::Group => &mut self.groups,
        }
    }

    /// The values of one resource (`None`: it has none).
    pub fn get(&self, kind: ConfigResourceKind, name: &str) -> Option<&BTreeMap<String, String>> {
        self.of(kind).get(name)
    }

    /// Replaces a resource's values; an empty set removes the resource.
    pub fn set(&mut self, kind: ConfigResourceKind, name: &str, values: BTreeMap<String, String>) {
        if values.is_empty() {
            self.of_mut(kind).remove(name);
        } else {
            self.of_mut(kind).insert(name.to_string(), values);
        }
    }

    /// Every (kind, name, values), kinds in order.
    pub fn iter(
        &self,
    ) -> impl Iterator<Item = (ConfigResourceKind, &String, &BTreeMap<String, String>)> {
        let cm = self
            .client_metrics
            .iter()
            .map(|(n, v)| (ConfigResourceKind::ClientMetrics, n, v));
        let groups = self
            .groups
            .iter()
            .map(|(n, v)| (ConfigResourceKind::Group, n, v));
        cm.chain(groups)
    }
}

/// The controller's own checks of a new set; what the keys and values mean
/// is the broker's to say.
pub fn check_set(name: &str, values: &BTreeMap<String, String>) -> Result<(), String> {
    if name.is_empty() {
        return Err("the resource name is empty".into());
    }
    if values.keys().any(|k| k.trim().is_empty()) {
        return Err("empty config name".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replace_remove_and_round_trip() {
        let mut c = ResourceConfigs::default();
        let cm = ConfigResourceKind::ClientMetrics;
        c.set(cm, "all", [("metrics".to_string(), "*".to_string())].into());
        c.set(
            ConfigResourceKind::Group,
            "g",
            [(
                "consumer.session.timeout.ms".to_string(),
                "50000".to_string(),
            )]
            .into(),
        );
        assert_eq!(c.get(cm, "all").unwrap()["metrics"], "*");
        assert!(c.get(ConfigResourceKind::Group, "all").is_none());
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<ResourceConfigs>(&json).unwrap(), c);
        c.set(
            cm,
            "all",
            [("interval.ms".to_string(), "1000".to_string())].into(),
        );
        assert!(
            !c.get(cm, "all").unwrap().contains_key("metrics"),
            "replaced whole"
        );
        c.set(cm, "all", BTreeMap::new());
        assert!(
            c.get(cm, "all").is_none(),
            "an empty set removes the resource"
        );
        assert_eq!(c.iter().count(), 1);
    }

    #[test]
    fn kafka_types_round_trip_and_names_are_checked() {
        for k in [ConfigResourceKind::ClientMetrics, ConfigResourceKind::Group] {
            assert_eq!(ConfigResourceKind::from_kafka_type(k.kafka_type()), Some(k));
        }
        assert_eq!(ConfigResourceKind::from_kafka_type(2), None);
        assert!(check_set("", &BTreeMap::new()).is_err());
        assert!(check_set("s", &[(" ".to_string(), "1".to_string())].into()).is_err());
        assert!(check_set("s", &BTreeMap::new()).is_ok());
    }
}
