//! Every broker config Skein reads, as DescribeConfigs lists it for a
//! broker (`kafka-configs --describe --entity-type brokers --all`): Kafka's
//! name, type and default, whether Kafka lets it change without a restart,
//! and its synonyms (`log.retention.ms` > `.minutes` > `.hours`), read from
//! the two tables that define them: the broker config table
//! ([`crate::config::BROKER_KEYS`]) and, for the broker configs that set
//! topic defaults with their synonyms in other units, the topic config
//! table (`skein_controller::topic_config_table!`).
//!
//! A value comes from, highest first: this broker's dynamic value
//! (DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic default
//! (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file or `--override`
//! (STATIC_BROKER_CONFIG), each under the name or one of its synonyms, else
//! the default (DEFAULT_CONFIG). Secrets are never shown (PASSWORD, null).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::config::{broker_default_value, ConfigKind, BROKER_KEYS, TOPIC_CONFIGS};

pub use crate::config::Kind;
use Kind::*;

/// Kafka's `ConfigSource` codes.
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// One broker config.
#[derive(Debug, Clone)]
pub struct BrokerConfigDef {
    pub name: &'static str,
    pub kind: Kind,
    /// Kafka's (and Skein's) default; `None`: null.
    pub default: Option<Cow<'static, str>>,
    /// Lower-priority names for the same setting (Kafka's synonyms).
    pub synonyms: Cow<'static, [&'static str]>,
    /// What it sets (empty for the topic defaults, which the topic config
    /// table documents).
    pub doc: &'static str,
}

/// Every broker config: the broker config table's
/// ([`crate::config::BROKER_KEYS`]), then those that set topic defaults
/// that it does not list.
static ALL: LazyLock<Vec<BrokerConfigDef>> = LazyLock::new(|| {
    let mut all: Vec<BrokerConfigDef> = BROKER_KEYS
        .iter()
        .map(|k| BrokerConfigDef {
            name: k.name,
            kind: k.kind,
            default: k.default.map(Cow::Borrowed),
            synonyms: Cow::Borrowed(k.synonyms),
            doc: k.doc,
        })
        .collect();
    for def in topic_defaults() {
        if !all.iter().any(|d| d.name == def.name) {
            all.push(def);
        }
    }
    all
});

/// The broker configs that set topic defaults, from the topic config
/// table: each broker config with its type and default, then its synonyms
/// in other units (Int, as Kafka's hours and minutes). With synonyms, only
/// the coarsest has a default, as in Kafka (`log.retention.hours` 168,
/// `log.retention.minutes` and `log.retention.ms` null).
fn topic_defaults() -> impl Iterator<Item = BrokerConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .filter(|t| !t.broker_default.is_empty())
        .flat_map(|t| {
            let names: Vec<(&'static str, i64)> = std::iter::once((t.broker_default, 1))
                .chain(t.broker_synonyms.iter().copied())
                .collect();
            let default = broker_default_value(t);
            (0..names.len()).map(move |i| {
                let (name, unit) = names[i];
                let coarsest = i + 1 == names.len();
                let default = match (coarsest, i, &default) {
                    (false, _, _) | (_, _, None) => None,
                    (true, 0, Some(v)) => Some(v.clone()),
                    (true, _, Some(v)) => v.parse::<i64>().ok().map(|v| (v / unit).to_string()),
                };
                BrokerConfigDef {
                    name,
                    kind: if i == 0 { kind_of(t.kind) } else { Int },
                    default: default.map(Cow::Owned),
                    synonyms: names[i + 1..].iter().map(|(n, _)| *n).collect(),
                    doc: "",
                }
            })
        })
}

/// Kafka's type of a config of topic-config kind `kind`.
fn kind_of(kind: ConfigKind) -> Kind {
    match kind {
        ConfigKind::Boolean => Boolean,
        ConfigKind::Int { .. } => Int,
        ConfigKind::Long { .. } => Long,
        ConfigKind::Ratio => Double,
        ConfigKind::OneOf(_) => Str,
        ConfigKind::ListOf(_) | ConfigKind::ReplicaList => List,
    }
}

/// Kafka's type (`ConfigType`) of topic config `key`, as DescribeConfigs
/// reports it (an unknown one: Long).
pub fn topic_config_type(key: &str) -> Kind {
    crate::config::topic_config(key).map_or(Long, |d| kind_of(d.kind))
}

/// The definition of broker config `name`.
pub fn broker_config(name: &str) -> Option<&'static BrokerConfigDef> {
    ALL.iter().find(|d| d.name == name)
}

/// The default of broker config `name`; `None`: null or not a broker config.
pub fn default_of(name: &str) -> Option<&'static str> {
    broker_config(name).and_then(|d| d.default.as_deref())
}

/// One config as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub name: String,
    /// `None` for a secret or a null default.
    pub value: Option<String>,
    pub source: i8,
    pub kind: Kind,
    pub sensitive: bool,
    /// `(name, value, source)`, highest priority first.
    pub synonyms: Vec<(String, Option<String>, i8)>,
}

fn is_secret(name: &str, kind: Kind) -> bool {
    kind == Password || crate::config::is_sensitive(name)
}

/// Every broker config: the table's, then those set in the properties or
/// a dynamic layer that the table does not know (listener-prefixed
/// settings, Skein's own keys).
/// `default` and `own` are the dynamic layers (cluster-wide, this broker's).
pub fn describe(
    raw: &BTreeMap<String, String>,
    default: &BTreeMap<String, String>,
    own: &BTreeMap<String, String>,
) -> Vec<Described> {
    let layers = [
        (own, SOURCE_DYNAMIC_BROKER),
        (default, SOURCE_DYNAMIC_DEFAULT_BROKER),
        (raw, SOURCE_STATIC_BROKER),
    ];
    let mut out: Vec<Described> = ALL.iter().map(|d| describe_one(d, &layers)).collect();
    // Keys the table does not know, set in a layer (listener-prefixed
    // settings, Skein's own keys): shown from the highest layer setting them.
    for (layer, source) in layers {
        for (k, v) in layer {
            if broker_config(k).is_some() || out.iter().any(|d| &d.name == k) {
                continue;
            }
            let secret = crate::config::is_sensitive(k);
            let kind = if secret { Password } else { Str };
            let value = (!secret).then(|| v.clone());
            let synonyms = layers
                .iter()
                .filter_map(|(l, src)| {
                    l.get(k)
                        .map(|v| (k.clone(), (!secret).then(|| v.clone()), *src))
                })
                .collect();
            out.push(Described {
                name: k.clone(),
                value,
                source,
                kind,
                sensitive: secret,
                synonyms,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn describe_one(def: &BrokerConfigDef, layers: &[(&BTreeMap<String, String>, i8)]) -> Described {
    let secret = is_secret(def.name, def.kind);
    let shown = |v: &str| (!secret).then(|| v.to_string());
    let names = || std::iter::once(def.name).chain(def.synonyms.iter().copied());
    let mut synonyms = Vec::new();
    // Kafka's order (its ConfigHelper): by layer, then by name within a
    // layer, Kafka's defaults last.
    for (layer, source) in layers {
        for name in names() {
            if let Some(v) = layer.get(name) {
                synonyms.push((name.to_string(), shown(v), *source));
            }
        }
    }
    for name in names() {
        if let Some(v) = default_of(name) {
            synonyms.push((name.to_string(), shown(v), SOURCE_DEFAULT));
        }
    }
    // As Kafka, the list starts at the name's own first value: values of
    // synonyms in other units (minutes, hours) above it are left out, and
    // a name without a value of its own is null, from DEFAULT_CONFIG.
    let own = synonyms
        .iter()
        .position(|(name, _, _)| name == def.name)
        .unwrap_or(synonyms.len());
    synonyms.drain(..own);
    let (value, source) = match synonyms.first() {
        Some((_, v, src)) => (v.clone(), *src),
        None => (None, SOURCE_DEFAULT),
    };
    Described {
        name: def.name.to_string(),
        value,
        source,
        kind: if secret { Password } else { def.kind },
        sensitive: secret,
        synonyms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn describe_static(raw: &BTreeMap<String, String>) -> Vec<Described> {
        describe(raw, &BTreeMap::new(), &BTreeMap::new())
    }

    fn find<'a>(all: &'a [Described], name: &str) -> &'a Described {
        all.iter().find(|d| d.name == name).unwrap()
    }

    #[test]
    fn defaults_static_values_synonyms_and_secrets() {
        let all = describe_static(&raw(&[
            ("log.retention.hours", "24"),
            ("num.partitions", "3"),
            ("ssl.keystore.password", "hunter2"),
            ("listener.name.external.ssl.keystore.password", "hunter2"),
            ("control.listen", "127.0.0.1:9192"),
        ]));
        let np = find(&all, "num.partitions");
        assert_eq!(
            (np.value.as_deref(), np.source),
            (Some("3"), SOURCE_STATIC_BROKER)
        );
        assert_eq!(
            np.synonyms,
            vec![
                (
                    "num.partitions".into(),
                    Some("3".into()),
                    SOURCE_STATIC_BROKER
                ),
                ("num.partitions".into(), Some("1".into()), SOURCE_DEFAULT),
            ]
        );
        let seg = find(&all, "log.segment.bytes");
        assert_eq!(
            (seg.value.as_deref(), seg.source, seg.kind),
            (Some("1073741824"), SOURCE_DEFAULT, Int)
        );
        // log.retention.ms unset: null, and (as Kafka) no synonyms, the
        // hours being above its own (absent) value.
        let ms = find(&all, "log.retention.ms");
        assert_eq!((ms.value.as_deref(), ms.source), (None, SOURCE_DEFAULT));
        assert!(ms.synonyms.is_empty(), "{ms:?}");
        assert!(find(&describe_static(&raw(&[])), "log.retention.ms")
            .synonyms
            .is_empty());
        let hours = find(&all, "log.retention.hours");
        assert_eq!(
            (hours.value.as_deref(), hours.source),
            (Some("24"), SOURCE_STATIC_BROKER)
        );
        for name in [
            "ssl.keystore.password",
            "listener.name.external.ssl.keystore.password",
        ] {
            let p = find(&all, name);
            assert!(
                p.sensitive && p.value.is_none() && p.kind == Password,
                "{p:?}"
            );
            assert!(p.synonyms.iter().all(|(_, v, _)| v.is_none()), "{p:?}");
        }
        let own = find(&all, "control.listen");
        assert_eq!(own.value.as_deref(), Some("127.0.0.1:9192"));
        // Sorted, each name once.
        let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn dynamic_values_come_first_with_their_sources() {
        let file = raw(&[("log.retention.hours", "24"), ("message.max.bytes", "100")]);
        let default = raw(&[("log.retention.ms", "60000"), ("message.max.bytes", "200")]);
        let own = raw(&[("message.max.bytes", "300")]);
        let all = describe(&file, &default, &own);
        let m = find(&all, "message.max.bytes");
        assert_eq!(
            (m.value.as_deref(), m.source),
            (Some("300"), SOURCE_DYNAMIC_BROKER)
        );
        let sources: Vec<i8> = m.synonyms.iter().map(|s| s.2).collect();
        assert_eq!(
            sources,
            vec![
                SOURCE_DYNAMIC_BROKER,
                SOURCE_DYNAMIC_DEFAULT_BROKER,
                SOURCE_STATIC_BROKER,
                SOURCE_DEFAULT
            ]
        );
        let r = find(&all, "log.retention.ms");
        assert_eq!(
            (r.value.as_deref(), r.source),
            (Some("60000"), SOURCE_DYNAMIC_DEFAULT_BROKER)
        );
        // Below its own value, the synonyms in other units: the static
        // hours, then Kafka's default hours.
        let below: Vec<(&str, i8)> = r.synonyms[1..]
            .iter()
            .map(|(n, _, s)| (n.as_str(), *s))
            .collect();
        assert_eq!(
            below,
            vec![
                ("log.retention.hours", SOURCE_STATIC_BROKER),
                ("log.retention.hours", SOURCE_DEFAULT)
            ]
        );
    }

    #[test]
    fn the_broker_configs_that_set_topic_defaults_come_from_the_topic_table() {
        let hours = broker_config("log.retention.hours").unwrap();
        assert_eq!((hours.kind, hours.default.as_deref()), (Int, Some("168")));
        let ms = broker_config("log.retention.ms").unwrap();
        assert_eq!((ms.kind, ms.default.as_deref()), (Long, None));
        assert_eq!(
            ms.synonyms[..],
            ["log.retention.minutes", "log.retention.hours"]
        );
        assert_eq!(default_of("log.roll.jitter.hours"), Some("0"));
        assert_eq!(
            default_of("log.message.timestamp.after.max.ms"),
            Some("3600000")
        );
        assert_eq!(
            default_of("log.flush.interval.messages"),
            Some("9223372036854775807")
        );
        assert_eq!(default_of("log.cleanup.policy"), Some("delete"));
        assert_eq!(default_of("compression.type"), Some("producer"));
        assert_eq!(default_of("min.insync.replicas"), Some("1"));
        // Listed as Kafka lists it.
        assert_eq!(default_of("log.flush.interval.ms"), None);
        assert_eq!(
            broker_config("log.cleaner.min.cleanable.ratio")
                .unwrap()
                .kind,
            Double
        );
        for (key, kind) in [
            ("cleanup.policy", List),
            ("compression.type", Str),
            ("preallocate", Boolean),
            ("min.cleanable.dirty.ratio", Double),
            ("segment.bytes", Int),
            ("retention.ms", Long),
            ("no.such.config", Long),
        ] {
            assert_eq!(topic_config_type(key), kind, "{key}");
        }
    }

    #[test]
    fn every_config_that_sets_a_topic_default_is_described() {
        for t in crate::config::TOPIC_CONFIGS {
            let names =
                std::iter::once(t.broker_default).chain(t.broker_synonyms.iter().map(|s| s.0));
            for k in names.filter(|k| !k.is_empty()) {
                assert!(broker_config(k).is_some(), "{k}");
            }
        }
    }
}
