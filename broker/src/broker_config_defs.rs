//! Every broker config Skein reads, as DescribeConfigs lists it for a
//! broker (`kafka-configs --describe --entity-type brokers --all`): Kafka's
//! name, type and default, whether Kafka lets it change without a restart,
//! and its synonyms (`log.retention.ms` > `.minutes` > `.hours`). The
//! broker configs that set topic defaults come from the topic config table
//! (`skein_controller::topic_config_table!`), with their defaults and
//! synonyms in other units; [`BROKER_CONFIGS`] lists the others.
//!
//! A value comes from, highest first: this broker's dynamic value
//! (DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic default
//! (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file or `--override`
//! (STATIC_BROKER_CONFIG), each under the name or one of its synonyms, else
//! the default (DEFAULT_CONFIG). Secrets are never shown (PASSWORD, null).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::config::{broker_default_value, ConfigKind, TOPIC_CONFIGS};

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
}

const fn d(name: &'static str, kind: Kind, default: Option<&'static str>) -> BrokerConfigDef {
    s(name, kind, default, &[])
}

const fn s(
    name: &'static str,
    kind: Kind,
    default: Option<&'static str>,
    synonyms: &'static [&'static str],
) -> BrokerConfigDef {
    BrokerConfigDef {
        name,
        kind,
        default: match default {
            Some(v) => Some(Cow::Borrowed(v)),
            None => None,
        },
        synonyms: Cow::Borrowed(synonyms),
    }
}

use Kind::*;

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: &str = "2147483647";

/// Every broker config Skein reads, by name, but those that set topic
/// defaults ([`broker_config`] has all).
pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    d("advertised.listeners", Str, None),
    d("allow.everyone.if.no.acl.found", Boolean, Some("false")),
    d("authorizer.class.name", Str, Some("")),
    d("auto.create.topics.enable", Boolean, Some("true")),
    d("auto.leader.rebalance.enable", Boolean, Some("true")),
    d("broker.heartbeat.interval.ms", Int, Some("2000")),
    d("broker.rack", Str, None),
    d("connections.max.idle.ms", Long, Some("600000")),
    d("connections.max.reauth.ms", Long, Some("0")),
    d("controlled.shutdown.timeout.ms", Long, Some("30000")),
    d("default.replication.factor", Int, Some("1")),
    d("follower.replication.throttled.rate", Long, Some(LONG_MAX)),
    d("group.consumer.heartbeat.interval.ms", Int, Some("5000")),
    d("group.consumer.session.timeout.ms", Int, Some("45000")),
    d("group.initial.rebalance.delay.ms", Int, Some("3000")),
    d("group.max.session.timeout.ms", Int, Some("1800000")),
    d("group.max.size", Int, Some(INT_MAX)),
    d("group.min.session.timeout.ms", Int, Some("6000")),
    d("inter.broker.listener.name", Str, None),
    d("leader.imbalance.check.interval.seconds", Long, Some("300")),
    d("leader.replication.throttled.rate", Long, Some(LONG_MAX)),
    d("listener.security.protocol.map", Str, None),
    d("listeners", Str, Some("PLAINTEXT://:9092")),
    d("log.cleaner.backoff.ms", Long, Some("15000")),
    d("log.cleaner.dedupe.buffer.size", Long, Some("134217728")),
    d("log.cleaner.enable", Boolean, Some("true")),
    d(
        "log.cleaner.io.max.bytes.per.second",
        Double,
        Some("1.7976931348623157E308"),
    ),
    d("log.cleaner.threads", Int, Some("1")),
    s("log.dirs", Str, None, &["log.dir"]),
    d("log.dir", Str, Some("/tmp/kafka-logs")),
    // Sets flush.ms's default, but listed as Kafka lists it: null, with
    // log.flush.scheduler.interval.ms (here the flush timer's period, not a
    // flush interval) as its synonym.
    s(
        "log.flush.interval.ms",
        Long,
        None,
        &["log.flush.scheduler.interval.ms"],
    ),
    d("log.flush.scheduler.interval.ms", Long, Some("1000")),
    d("log.retention.check.interval.ms", Long, Some("300000")),
    d("max.connections", Int, Some(INT_MAX)),
    d("max.connections.per.ip", Int, Some(INT_MAX)),
    d("max.connections.per.ip.overrides", Str, Some("")),
    d(
        "max.incremental.fetch.session.cache.slots",
        Int,
        Some("1000"),
    ),
    d("node.id", Int, Some("-1")),
    d("num.partitions", Int, Some("1")),
    d("offsets.retention.check.interval.ms", Long, Some("600000")),
    d("offsets.retention.minutes", Int, Some("10080")),
    d("offsets.topic.num.partitions", Int, Some("50")),
    d("offsets.topic.replication.factor", Short, Some("3")),
    d("producer.id.expiration.ms", Int, Some("86400000")),
    d("replica.fetch.backoff.ms", Int, Some("1000")),
    d("replica.fetch.max.bytes", Int, Some("1048576")),
    d("replica.fetch.response.max.bytes", Int, Some("10485760")),
    d("replica.fetch.wait.max.ms", Int, Some("500")),
    d("replica.lag.time.max.ms", Long, Some("30000")),
    d("replica.selector.class", Class, None),
    d("sasl.enabled.mechanisms", List, Some("GSSAPI")),
    d("security.inter.broker.protocol", Str, Some("PLAINTEXT")),
    d("socket.request.max.bytes", Int, Some("104857600")),
    d("sasl.server.max.receive.size", Int, Some("524288")),
    // Kafka's default is -1 (unbounded); Skein bounds the memory that
    // requests in flight may take (request_memory.rs).
    d("queued.max.request.bytes", Long, Some("536870912")),
    d("socket.receive.buffer.bytes", Int, Some("-1")),
    d("socket.send.buffer.bytes", Int, Some("102400")),
    d("socket.sendfile.enable", Boolean, Some("true")),
    d("ssl.client.auth", Str, Some("none")),
    d("ssl.enabled.protocols", List, Some("TLSv1.2,TLSv1.3")),
    d("ssl.key.password", Password, None),
    d("ssl.keystore.location", Str, None),
    d("ssl.keystore.password", Password, None),
    d("ssl.keystore.type", Str, Some("JKS")),
    d("ssl.principal.mapping.rules", Str, Some("DEFAULT")),
    d("ssl.truststore.location", Str, None),
    d("ssl.truststore.password", Password, None),
    d("ssl.truststore.type", Str, Some("JKS")),
    d("super.users", Str, None),
    d(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        Int,
        Some("10000"),
    ),
    d("transaction.max.timeout.ms", Int, Some("900000")),
    d(
        "transaction.partition.verification.enable",
        Boolean,
        Some("true"),
    ),
    d(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Int,
        Some("3600000"),
    ),
    d("transaction.state.log.min.isr", Int, Some("2")),
    d("transaction.state.log.num.partitions", Int, Some("50")),
    d("transaction.state.log.replication.factor", Short, Some("3")),
    d(
        "transaction.state.log.segment.bytes",
        Int,
        Some("104857600"),
    ),
    d("transactional.id.expiration.ms", Int, Some("604800000")),
];

/// Every broker config: [`BROKER_CONFIGS`], then those that set topic
/// defaults that it does not list.
static ALL: LazyLock<Vec<BrokerConfigDef>> = LazyLock::new(|| {
    let mut all = BROKER_CONFIGS.to_vec();
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

/// Every broker config: the table's, then those set in the properties that
/// the table does not know (listener-prefixed settings, Skein's own keys).
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
    for (k, v) in raw {
        if broker_config(k).is_some() {
            continue;
        }
        let secret = crate::config::is_sensitive(k);
        let kind = if secret { Password } else { Str };
        let value = (!secret).then(|| v.clone());
        out.push(Described {
            name: k.clone(),
            value: value.clone(),
            source: SOURCE_STATIC_BROKER,
            kind,
            sensitive: secret,
            synonyms: vec![(k.clone(), value, SOURCE_STATIC_BROKER)],
        });
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
        assert_eq!(default_of("log.flush.interval.messages"), Some(LONG_MAX));
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
    fn every_dynamic_config_is_described() {
        for k in crate::dynamic_config::DYNAMIC {
            assert!(broker_config(k).is_some(), "{k}");
        }
        for t in crate::config::TOPIC_CONFIGS {
            let names =
                std::iter::once(t.broker_default).chain(t.broker_synonyms.iter().map(|s| s.0));
            for k in names.filter(|k| !k.is_empty()) {
                assert!(broker_config(k).is_some(), "{k}");
            }
        }
    }
}
