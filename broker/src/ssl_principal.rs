//! The principal of a client that presented a certificate (mutual TLS).
//!
//! As Kafka's default principal builder does: the certificate's subject as
//! an RFC 2253 distinguished name (`CN=alice,OU=eng,O=acme`, the most
//! specific name first, as Java's `X500Principal.getName()` writes it),
//! mapped by `ssl.principal.mapping.rules`, gives `User:<name>`.
//!
//! The rules are Kafka's: a comma-separated list of
//! `RULE:<pattern>/<replacement>/[L|U]` and `DEFAULT`, tried in order; the
//! first rule whose pattern matches the whole name gives the principal's
//! name (`$1` … refer to the pattern's groups; `L`/`U` lower- or
//! upper-case the result), `DEFAULT` gives the name unchanged. A name no
//! rule matches fails authentication.

use regex::Regex;
use x509_cert::der::{Decode, Encode, Tag, Tagged};
use x509_cert::Certificate;

/// `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        /// The pattern anchored at both ends: it must match the whole name.
        whole: Regex,
        pattern: Regex,
        /// In the regex crate's syntax (`${1}`, `$$`).
        replacement: String,
        case: Case,
        /// As written, for messages.
        text: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

impl Default for PrincipalMapper {
    fn default() -> Self {
        PrincipalMapper {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapper {
    /// Parses the rules; an empty value is `DEFAULT`.
    pub fn parse(rules: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        let mut rest = rules.trim_start();
        while !rest.is_empty() {
            let (rule, after) = parse_rule(rest)?;
            out.push(rule);
            rest = after.trim_start();
            if let Some(r) = rest.strip_prefix(',') {
                rest = r.trim_start();
            } else if !rest.is_empty() {
                return Err(format!(
                    "invalid rule at '{rest}': rules are separated by commas"
                ));
            }
        }
        if out.is_empty() {
            out.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules: out })
    }

    /// The principal name for a distinguished name.
    pub fn map(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace {
                    whole,
                    pattern,
                    replacement,
                    case,
                    ..
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                    return Ok(match case {
                        Case::Keep => name,
                        Case::Lower => name.to_lowercase(),
                        Case::Upper => name.to_uppercase(),
                    });
                }
            }
        }
        let rules: Vec<&str> = self
            .rules
            .iter()
            .map(|r| match r {
                Rule::Default => "DEFAULT",
                Rule::Replace { text, .. } => text.as_str(),
            })
            .collect();
        Err(format!(
            "no rule of ssl.principal.mapping.rules applies to {dn} (rules: {})",
            rules.join(",")
        ))
    }
}

/// One rule at the start of `s`, and what follows it.
fn parse_rule(s: &str) -> Result<(Rule, &str), String> {
    if let Some(rest) = s.strip_prefix("DEFAULT") {
        return Ok((Rule::Default, rest));
    }
    let Some(body) = s.strip_prefix("RULE:") else {
        return Err(format!(
            "invalid rule '{s}': expected RULE:pattern/replacement/[LU] or DEFAULT"
        ));
    };
    let (pattern, rest) =
        until_slash(body).ok_or_else(|| format!("invalid rule '{s}': no '/' after the pattern"))?;
    let (replacement, rest) = until_slash(rest)
        .ok_or_else(|| format!("invalid rule '{s}': no '/' after the replacement"))?;
    let (case, rest) = match rest.chars().next() {
        Some('L') => (Case::Lower, &rest[1..]),
        Some('U') => (Case::Upper, &rest[1..]),
        _ => (Case::Keep, rest),
    };
    // Kafka ignores whatever follows the flag up to the next comma.
    let rest = &rest[rest.find(',').unwrap_or(rest.len())..];
    let used = s.len() - rest.len();
    let bad = |e: regex::Error| format!("invalid rule '{}': {e}", &s[..used]);
    Ok((
        Rule::Replace {
            whole: Regex::new(&format!("^(?:{pattern})$")).map_err(bad)?,
            pattern: Regex::new(pattern).map_err(bad)?,
            replacement: replacement_syntax(replacement),
            case,
            text: s[..used].to_string(),
        },
        rest,
    ))
}

/// The text up to the first '/' not escaped by a backslash, and what
/// follows that '/'.
fn until_slash(s: &str) -> Option<(&str, &str)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'/' => return Some((&s[..i], &s[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

/// A Java replacement string (`$1`, `\$` for a literal) in the regex
/// crate's syntax (`${1}`, `$$`).
fn replacement_syntax(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The subject of a DER certificate as an RFC 2253 name, as Java's
/// `X500Principal.getName()` writes it: the last RDN first, the keywords
/// CN, C, L, ST, O, OU, STREET, DC and UID, other attribute types as a
/// dotted OID with the value's DER in hex.
pub fn subject_name(cert_der: &[u8]) -> Result<String, String> {
    let cert = Certificate::from_der(cert_der)
        .map_err(|e| format!("unreadable client certificate: {e}"))?;
    let mut rdns = Vec::new();
    for rdn in cert.tbs_certificate.subject.0.iter().rev() {
        let mut parts = Vec::new();
        for atv in rdn.0.iter() {
            let oid = atv.oid.to_string();
            let keyword = keyword(&oid);
            let text = keyword.and_then(|_| string_value(atv.value.tag(), atv.value.value()));
            parts.push(match (keyword, text) {
                (Some(k), Some(v)) => format!("{k}={}", escape(&v)),
                _ => {
                    let der = atv
                        .value
                        .to_der()
                        .map_err(|e| format!("unreadable subject: {e}"))?;
                    let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{}=#{hex}", keyword.unwrap_or(&oid))
                }
            });
        }
        rdns.push(parts.join("+"));
    }
    Ok(rdns.join(","))
}

fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// A directory string's text.
fn string_value(tag: Tag, bytes: &[u8]) -> Option<String> {
    match tag {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::VisibleString => {
            String::from_utf8(bytes.to_vec()).ok()
        }
        // T.61: Latin-1 is what Java reads it as.
        Tag::TeletexString => Some(bytes.iter().map(|&b| b as char).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// RFC 2253 escaping of an attribute value.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_keeps_the_name() {
        let m = PrincipalMapper::parse("DEFAULT").unwrap();
        assert_eq!(m.map("CN=alice,O=acme").unwrap(), "CN=alice,O=acme");
        assert_eq!(
            PrincipalMapper::parse("").unwrap().map("CN=x").unwrap(),
            "CN=x"
        );
    }

    #[test]
    fn kafka_documented_rules() {
        // The example of Kafka's documentation, in order.
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\n DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.map("CN=kafka-broker,OU=ServiceUsers,O=Acme").unwrap(),
            "kafka-broker"
        );
        assert_eq!(
            m.map("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US")
                .unwrap(),
            "duke@javasoft"
        );
        assert_eq!(m.map("O=Acme,CN=Some.Host").unwrap(), "some.host");
        assert_eq!(m.map("O=nothing").unwrap(), "O=nothing");
        let u = PrincipalMapper::parse("RULE:^CN=([a-z]+)x$/$1/U").unwrap();
        assert_eq!(u.map("CN=bobx").unwrap(), "BOB");
        // As in Kafka, anything between the flag and the next comma is ignored.
        let g = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/Lxyz, DEFAULT").unwrap();
        assert_eq!(g.map("CN=Ann").unwrap(), "ann");
    }

    #[test]
    fn no_matching_rule_fails_authentication() {
        // The pattern must match the whole name, not a part of it.
        let m = PrincipalMapper::parse("RULE:CN=([a-z]+)/$1/").unwrap();
        let e = m.map("CN=alice,O=acme").unwrap_err();
        assert!(
            e.contains("no rule") && e.contains("CN=alice,O=acme"),
            "{e}"
        );
    }

    #[test]
    fn replacements_follow_java_syntax() {
        let m = PrincipalMapper::parse(r"RULE:^CN=(\w+)$/$1x\$/").unwrap();
        assert_eq!(m.map("CN=bob").unwrap(), "bobx$");
        // An escaped slash belongs to the pattern.
        let m = PrincipalMapper::parse(r"RULE:^CN=a\/(\w+)$/$1/").unwrap();
        assert_eq!(m.map("CN=a/bob").unwrap(), "bob");
    }

    #[test]
    fn bad_rules_are_refused() {
        for bad in [
            "RULE:^CN=(.*$/$1/",
            "RULE:abc",
            "NONSENSE",
            "DEFAULT DEFAULT",
            "RULE:a",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }

    /// `openssl req -x509 -multivalue-rdn -subj "/C=US/ST=CA/O=Acme, Inc./OU=eng/OU=ops/CN= alice+UID=u1/emailAddress=a@b.c/DC=example"`
    const CERT: &str = "-----BEGIN CERTIFICATE-----\n\
MIICkzCCAjmgAwIBAgIUXlOhAGZE7FENtTE/XCjJBwumJKcwCgYIKoZIzj0EAwIw\n\
gZ0xCzAJBgNVBAYTAlVTMQswCQYDVQQIDAJDQTETMBEGA1UECgwKQWNtZSwgSW5j\n\
LjEMMAoGA1UECwwDZW5nMQwwCgYDVQQLDANvcHMxITANBgNVBAMMBiBhbGljZTAQ\n\
BgoJkiaJk/IsZAEBDAJ1MTEUMBIGCSqGSIb3DQEJARYFYUBiLmMxFzAVBgoJkiaJ\n\
k/IsZAEZFgdleGFtcGxlMCAXDTI2MTIwMjA3MDQxM1oYDzIxMjYxMTA4MDcwNDEz\n\
WjCBnTELMAkGA1UEBhMCVVMxCzAJBgNVBAgMAkNBMRMwEQYDVQQKDApBY21lLCBJ\n\
bmMuMQwwCgYDVQQLDANlbmcxDDAKBgNVBAsMA29wczEhMA0GA1UEAwwGIGFsaWNl\n\
MBAGCgmSJomT8ixkAQEMAnUxMRQwEgYJKoZIhvcNAQkBFgVhQGIuYzEXMBUGCgmS\n\
JomT8ixkARkWB2V4YW1wbGUwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATi10Le\n\
FVzxyhmdS5hERsXeYENzMiN6pIGdgCYpJlWUm51GO8yBNF1c0NJhQpJNsu0XczRG\n\
SeJg6QMxhr8gG8ZYo1MwUTAdBgNVHQ4EFgQUVD+jUtdC5m7vYAGU7SC1qz3SfPMw\n\
HwYDVR0jBBgwFoAUVD+jUtdC5m7vYAGU7SC1qz3SfPMwDwYDVR0TAQH/BAUwAwEB\n\
/zAKBggqhkjOPQQDAgNIADBFAiBPIhe0LexLyUbdLqfu9inQrLJ682g5jaWlDXQ9\n\
BaYqBwIhALjzU1nNLobw4vFEfG6GQEMm/v25H+9FOs3vWAUvt4HH\n\
-----END CERTIFICATE-----";

    #[test]
    fn subject_names_as_java_writes_them() {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap();
        // What X500Principal.getName() prints for this certificate (Java 17).
        assert_eq!(
            subject_name(&der).unwrap(),
            r"DC=example,1.2.840.113549.1.9.1=#16056140622e63,CN=\ alice+UID=u1,OU=ops,OU=eng,O=Acme\, Inc.,ST=CA,C=US"
        );
        assert!(subject_name(b"not a certificate").is_err());
    }

    #[test]
    fn escaping_as_rfc_2253() {
        assert_eq!(escape("a,b+c"), r"a\,b\+c");
        assert_eq!(escape(" #x "), r"\ #x\ ");
        assert_eq!(escape("#a"), r"\#a");
    }
}
