//! Client quotas (KIP-546): values per entity — a user, a client id, both,
//! their defaults, or an IP — as `kafka-configs --entity-type
//! users|clients|ips` sets them through `AlterClientQuotas`. The
//! controller stores them; brokers enforce them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The parts an entity is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum QuotaEntityType {
    #[serde(rename = "user")]
    User,
    #[serde(rename = "client-id")]
    ClientId,
    #[serde(rename = "ip")]
    Ip,
}

impl QuotaEntityType {
    /// Kafka's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::ClientId => "client-id",
            Self::Ip => "ip",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(Self::User),
            "client-id" => Some(Self::ClientId),
            "ip" => Some(Self::Ip),
            _ => None,
        }
    }
}

/// An entity: each part a name, or `None` for that type's default.
pub type QuotaEntity = BTreeMap<QuotaEntityType, Option<String>>;

/// A quota value. Compared by its bits, so images stay `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// Every entity's quotas: entity → key (`producer_byte_rate`, …) → value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientQuotas(pub BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>);

impl ClientQuotas {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `key` for exactly `entity`.
    pub fn get(&self, entity: &QuotaEntity, key: &str) -> Option<f64> {
        self.0.get(entity)?.get(key).map(|v| v.0)
    }
}

/// JSON has no maps with structured keys: stored as a list of entries.
#[derive(Serialize, Deserialize)]
struct Entry {
    entity: Vec<(QuotaEntityType, Option<String>)>,
    quotas: BTreeMap<String, QuotaValue>,
}

impl Serialize for ClientQuotas {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let entries: Vec<Entry> = self
            .0
            .iter()
            .map(|(e, q)| Entry {
                entity: e.iter().map(|(t, n)| (*t, n.clone())).collect(),
                quotas: q.clone(),
            })
            .collect();
        entries.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ClientQuotas {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries = Vec::<Entry>::deserialize(d)?;
        Ok(ClientQuotas(
            entries
                .into_iter()
                .map(|e| (e.entity.into_iter().collect(), e.quotas))
                .collect(),
        ))
    }
}

/// One change: set `key` of `entity` to `value`, or remove it (`None`).
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaChange {
    pub entity: QuotaEntity,
    pub key: String,
    pub value: Option<f64>,
}

impl Eq for QuotaChange {}

/// The quota keys Kafka knows, and whether each takes whole numbers.
const USER_CLIENT_KEYS: &[(&str, bool)] = &[
    ("producer_byte_rate", true),
    ("consumer_byte_rate", true),
    ("request_percentage", false),
    ("controller_mutation_rate", false),
];
const IP_KEYS: &[(&str, bool)] = &[("connection_creation_rate", true)];

/// Prints an entity as `kafka-configs` names it (`user=alice, client-id=<default>`).
pub struct EntityDisplay<'a>(pub &'a QuotaEntity);

impl fmt::Display for EntityDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (t, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}={}", t.name(), n.as_deref().unwrap_or("<default>"))?;
        }
        Ok(())
    }
}

/// Checks one change as Kafka's controller does: a valid entity (user
/// and/or client id, or an IP alone), a known key for it, a positive value
/// (a whole number for byte and connection rates).
pub fn check_change(c: &QuotaChange) -> Result<(), String> {
    let entity = EntityDisplay(&c.entity);
    if c.entity.is_empty() {
        return Err("the quota entity is empty".into());
    }
    if c.entity.contains_key(&QuotaEntityType::Ip) && c.entity.len() > 1 {
        return Err(format!(
            "invalid entity ({entity}): an ip quota cannot be combined with user or client-id"
        ));
    }
    if c.entity
        .values()
        .any(|n| n.as_deref().is_some_and(str::is_empty))
    {
        return Err(format!("invalid entity ({entity}): empty name"));
    }
    let keys = if c.entity.contains_key(&QuotaEntityType::Ip) {
        IP_KEYS
    } else {
        USER_CLIENT_KEYS
    };
    let Some((_, whole)) = keys.iter().find(|(k, _)| *k == c.key) else {
        return Err(format!(
            "unknown quota key '{}' for entity ({entity})",
            c.key
        ));
    };
    if let Some(v) = c.value {
        if !v.is_finite() || v <= 0.0 {
            return Err(format!(
                "quota {} of ({entity}) must be a positive number, not {v}",
                c.key
            ));
        }
        if *whole && v.fract() != 0.0 {
            return Err(format!(
                "quota {} of ({entity}) must be a whole number, not {v}",
                c.key
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(parts: &[(QuotaEntityType, Option<&str>)]) -> QuotaEntity {
        parts
            .iter()
            .map(|(t, n)| (*t, n.map(str::to_string)))
            .collect()
    }

    #[test]
    fn quotas_round_trip_through_json() {
        let mut q = ClientQuotas::default();
        q.0.entry(entity(&[
            (QuotaEntityType::User, Some("alice")),
            (QuotaEntityType::ClientId, None),
        ]))
        .or_default()
        .insert("producer_byte_rate".into(), QuotaValue(1024.0));
        let json = serde_json::to_string(&q).unwrap();
        assert!(json.contains("client-id"), "{json}");
        assert_eq!(serde_json::from_str::<ClientQuotas>(&json).unwrap(), q);
    }

    #[test]
    fn changes_are_checked_like_kafka() {
        let ok = QuotaChange {
            entity: entity(&[(QuotaEntityType::User, None)]),
            key: "producer_byte_rate".into(),
            value: Some(1048576.0),
        };
        assert_eq!(check_change(&ok), Ok(()));
        for (change, why) in [
            (
                QuotaChange {
                    key: "bytes_per_year".into(),
                    ..ok.clone()
                },
                "unknown quota key",
            ),
            (
                QuotaChange {
                    value: Some(-1.0),
                    ..ok.clone()
                },
                "positive",
            ),
            (
                QuotaChange {
                    value: Some(10.5),
                    ..ok.clone()
                },
                "whole number",
            ),
            (
                QuotaChange {
                    entity: entity(&[
                        (QuotaEntityType::Ip, Some("10.0.0.1")),
                        (QuotaEntityType::User, Some("a")),
                    ]),
                    key: "connection_creation_rate".into(),
                    value: Some(5.0),
                },
                "cannot be combined",
            ),
            (
                QuotaChange {
                    entity: entity(&[(QuotaEntityType::Ip, None)]),
                    ..ok.clone()
                },
                "unknown quota key",
            ),
        ] {
            let e = check_change(&change).unwrap_err();
            assert!(e.contains(why), "{change:?}: {e}");
        }
        let pct = QuotaChange {
            key: "request_percentage".into(),
            value: Some(12.5),
            ..ok
        };
        assert_eq!(check_change(&pct), Ok(()));
    }
}
