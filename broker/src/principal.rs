//! Who a connection acts for: Kafka's `KafkaPrincipal` (`User:alice`).
//! A SASL login gives `User:<name>`; a connection that did not
//! authenticate is `User:ANONYMOUS`, as in Kafka.

use std::fmt;

/// A principal: a type (`User`) and a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    pub fn user(name: impl Into<String>) -> Self {
        Principal {
            kind: "User".into(),
            name: name.into(),
        }
    }

    /// Kafka's principal for connections that did not authenticate.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }

    /// Parses `Type:name` (the name may itself hold `:`).
    pub fn parse(s: &str) -> Option<Self> {
        let (kind, name) = s.trim().split_once(':')?;
        (!kind.is_empty() && !name.is_empty()).then(|| Principal {
            kind: kind.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_print_and_parse_as_kafka_writes_them() {
        assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
        let p = Principal::parse("User:CN=broker-0,O=skein").unwrap();
        assert_eq!(p, Principal::user("CN=broker-0,O=skein"));
        assert_eq!(Principal::parse("User:a:b").unwrap().name, "a:b");
        assert!(Principal::parse("alice").is_none());
        assert!(Principal::parse("User:").is_none());
    }
}
