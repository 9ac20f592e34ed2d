//! Dynamic broker configs: values set with `kafka-configs --alter
//! --entity-type brokers` (`IncrementalAlterConfigs` / `AlterConfigs` on a
//! BROKER resource), for one broker (`--entity-name 1`, resource name
//! "1") or for every broker (`--entity-default`, resource name ""). The
//! controller stores them; each broker lays them over its properties file,
//! its own values above the cluster default, and checks which keys it can
//! change at run time before a change reaches the controller.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The resource name of the cluster-wide default.
pub const CLUSTER_DEFAULT: &str = "";

/// Resource ("" or a broker id) → key → value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BrokerConfigs(pub BTreeMap<String, BTreeMap<String, String>>);

impl BrokerConfigs {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The cluster-wide defaults.
    pub fn cluster_default(&self) -> Option<&BTreeMap<String, String>> {
        self.0.get(CLUSTER_DEFAULT)
    }

    /// Broker `id`'s own values.
    pub fn broker(&self, id: i32) -> Option<&BTreeMap<String, String>> {
        self.0.get(&id.to_string())
    }

    /// Applies changes already checked with [`check_change`].
    pub fn apply(&mut self, changes: Vec<BrokerConfigChange>) {
        for c in changes {
            match c.value {
                Some(v) => {
                    self.0.entry(c.resource).or_default().insert(c.key, v);
                }
                None => {
                    if let Some(values) = self.0.get_mut(&c.resource) {
                        values.remove(&c.key);
                        if values.is_empty() {
                            self.0.remove(&c.resource);
                        }
                    }
                }
            }
        }
    }
}

/// Set `key` of `resource` to `value`, or remove it (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfigChange {
    /// "" (every broker) or a broker id.
    pub resource: String,
    pub key: String,
    pub value: Option<String>,
}

/// The controller's own checks; which keys are dynamic and which values
/// are valid is the broker's to say (it parses them).
pub fn check_change(c: &BrokerConfigChange) -> Result<(), String> {
    if c.resource != CLUSTER_DEFAULT && c.resource.parse::<u32>().is_err() {
        return Err(format!(
            "'{}' is not a broker id (or \"\" for the cluster default)",
            c.resource
        ));
    }
    if c.key.trim().is_empty() {
        return Err("empty config name".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(resource: &str, key: &str, value: Option<&str>) -> BrokerConfigChange {
        BrokerConfigChange {
            resource: resource.into(),
            key: key.into(),
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn set_remove_and_round_trip() {
        let mut c = BrokerConfigs::default();
        c.apply(vec![
            change("", "log.retention.ms", Some("1000")),
            change("2", "message.max.bytes", Some("2048")),
            change("2", "log.cleaner.threads", Some("2")),
        ]);
        assert_eq!(
            c.cluster_default().unwrap()["log.retention.ms"],
            "1000".to_string()
        );
        assert_eq!(c.broker(2).unwrap().len(), 2);
        assert!(c.broker(1).is_none());
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<BrokerConfigs>(&json).unwrap(), c);
        c.apply(vec![
            change("2", "message.max.bytes", None),
            change("2", "log.cleaner.threads", None),
            change("7", "absent", None),
        ]);
        assert!(c.broker(2).is_none(), "an emptied resource is dropped");
        assert_eq!(c.0.len(), 1);
    }

    #[test]
    fn resources_are_brokers_or_the_default() {
        assert!(check_change(&change("", "a", Some("1"))).is_ok());
        assert!(check_change(&change("3", "a", None)).is_ok());
        assert!(check_change(&change("-1", "a", None)).is_err());
        assert!(check_change(&change("broker-1", "a", None)).is_err());
        assert!(check_change(&change("1", " ", None)).is_err());
    }
}
