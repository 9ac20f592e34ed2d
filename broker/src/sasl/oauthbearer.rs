//! SASL OAUTHBEARER (RFC 7628, KIP-255) with Kafka's secured validator
//! (KIP-768): the client's JWT must be signed by a key of the configured
//! JWKS (`sasl.oauthbearer.jwks.endpoint.url`, a file; re-read when it
//! changes, so keys can rotate), unexpired (`exp`, with
//! `sasl.oauthbearer.clock.skew.seconds`), issued (`iat`), for the
//! expected audience and issuer when those are set; its
//! `sasl.oauthbearer.sub.claim.name` claim (`sub`) is the principal.
//! Unsigned tokens — Kafka's development default — are never accepted.
//!
//! A rejected token is answered as Kafka does: the server sends
//! `{"status":"invalid_token"}` as a challenge, the client answers with a
//! lone %x01, and the exchange fails with SASL_AUTHENTICATION_FAILED.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// The error challenge of RFC 7628 §3.2.2.
pub const INVALID_TOKEN: &[u8] = br#"{"status":"invalid_token"}"#;

/// A listener's OAUTHBEARER settings.
#[derive(Clone)]
pub struct OAuthSettings {
    /// The JWKS file.
    pub jwks: PathBuf,
    /// `sasl.oauthbearer.expected.audience`: the token's `aud` must name
    /// one of these (empty: not checked).
    pub audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub issuer: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name`.
    pub sub_claim: String,
    /// `sasl.oauthbearer.clock.skew.seconds`.
    pub clock_skew_s: u64,
    keys: Arc<Mutex<Option<LoadedKeys>>>,
}

type FileStamp = (SystemTime, u64);

/// The key set as last read, and what its file looked like then.
type LoadedKeys = (FileStamp, Arc<JwkSet>);

impl PartialEq for OAuthSettings {
    fn eq(&self, o: &Self) -> bool {
        (
            &self.jwks,
            &self.audience,
            &self.issuer,
            &self.sub_claim,
            self.clock_skew_s,
        ) == (
            &o.jwks,
            &o.audience,
            &o.issuer,
            &o.sub_claim,
            o.clock_skew_s,
        )
    }
}
impl Eq for OAuthSettings {}

impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("jwks", &self.jwks)
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .field("sub_claim", &self.sub_claim)
            .field("clock_skew_s", &self.clock_skew_s)
            .finish()
    }
}

/// A token that passed: who it is for and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validated {
    pub principal: String,
    /// `exp`, in milliseconds since the epoch.
    pub expires_ms: u64,
}

/// Why a client initial response was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not RFC 7628's form: the exchange fails at once.
    Malformed(String),
    /// A well-formed response whose token does not pass: answered with
    /// the error challenge first.
    InvalidToken(String),
}

/// Signature algorithms accepted: asymmetric only (an HMAC "key" in a
/// public JWKS would let anyone sign).
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl OAuthSettings {
    /// Settings whose JWKS is read now: a file that cannot be read or
    /// holds no usable key stops the start.
    pub fn new(
        jwks: PathBuf,
        audience: Vec<String>,
        issuer: Option<String>,
        sub_claim: String,
        clock_skew_s: u64,
    ) -> Result<Self, String> {
        let s = OAuthSettings {
            jwks,
            audience,
            issuer,
            sub_claim,
            clock_skew_s,
            keys: Arc::new(Mutex::new(None)),
        };
        s.keys()?;
        Ok(s)
    }

    /// The key set, read again when the file changed; a file that cannot be
    /// read now leaves the last good set in use.
    fn keys(&self) -> Result<Arc<JwkSet>, String> {
        let mut cached = self.keys.lock().expect("jwks lock");
        let stamp = std::fs::metadata(&self.jwks)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        if let (Some((s, keys)), Some(now)) = (cached.as_ref(), stamp) {
            if *s == now {
                return Ok(keys.clone());
            }
        }
        let loaded = std::fs::read(&self.jwks)
            .map_err(|e| format!("cannot read the JWKS {}: {e}", self.jwks.display()))
            .and_then(|bytes| {
                serde_json::from_slice::<JwkSet>(&bytes).map_err(|e| {
                    format!(
                        "the JWKS {} is not a JSON Web Key Set: {e}",
                        self.jwks.display()
                    )
                })
            })
            .and_then(|set| match set.keys.is_empty() {
                true => Err(format!("the JWKS {} holds no key", self.jwks.display())),
                false => Ok(set),
            });
        match (loaded, cached.as_ref(), stamp) {
            (Ok(set), _, Some(stamp)) => {
                let set = Arc::new(set);
                *cached = Some((stamp, set.clone()));
                Ok(set)
            }
            (Ok(set), _, None) => Ok(Arc::new(set)),
            (Err(e), Some((_, last)), _) => {
                tracing::warn!(error = %e, "JWKS changed but cannot be loaded; keeping the previous keys");
                Ok(last.clone())
            }
            (Err(e), None, _) => Err(e),
        }
    }

    /// One client initial response: its token checked, and the
    /// authorization id, if any, the token's principal.
    pub fn authenticate(&self, initial_response: &[u8]) -> Result<Validated, Refusal> {
        let (authzid, jwt) =
            parse_initial_response(initial_response).map_err(Refusal::Malformed)?;
        let v = self.validate(&jwt).map_err(Refusal::InvalidToken)?;
        match authzid.filter(|a| *a != v.principal) {
            Some(a) => Err(Refusal::InvalidToken(format!(
                "the authorization id {a} is not the token's principal {}",
                v.principal
            ))),
            None => Ok(v),
        }
    }

    /// Checks a token; Err says why (for the log and the client).
    pub fn validate(&self, token: &str) -> Result<Validated, String> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(format!(
                "signature algorithm {:?} is not accepted",
                header.alg
            ));
        }
        let keys = self.keys()?;
        let jwk = match &header.kid {
            Some(kid) => keys
                .find(kid)
                .ok_or_else(|| format!("no key with kid {kid} in the JWKS"))?,
            None if keys.keys.len() == 1 => &keys.keys[0],
            None => return Err("the token names no key (kid) and the JWKS holds several".into()),
        };
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            return Err("symmetric keys in the JWKS are not accepted".into());
        }
        let key =
            DecodingKey::from_jwk(jwk).map_err(|e| format!("unusable key in the JWKS: {e}"))?;
        let mut v = Validation::new(header.alg);
        v.leeway = self.clock_skew_s;
        // A token not valid yet is refused like an expired one (jose4j, which
        // Kafka's validator uses, checks `nbf` when the token has it).
        v.validate_nbf = true;
        let mut required = vec!["exp"];
        match self.audience.is_empty() {
            true => v.validate_aud = false,
            false => {
                v.set_audience(&self.audience);
                required.push("aud");
            }
        }
        if let Some(iss) = &self.issuer {
            v.set_issuer(&[iss]);
            required.push("iss");
        }
        v.set_required_spec_claims(&required);
        let data =
            jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(token, &key, &v)
                .map_err(|e| format!("invalid token: {e}"))?;
        let claims = data.claims;
        if !claims.get("iat").is_some_and(|v| v.is_number()) {
            return Err("invalid token: no iat (issued at) claim".into());
        }
        let principal = claims
            .get(&self.sub_claim)
            .and_then(|v| v.as_str())
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("invalid token: no {} claim", self.sub_claim))?;
        let exp = claims.get("exp").and_then(|v| v.as_f64()).unwrap_or(0.0);
        Ok(Validated {
            principal: principal.to_string(),
            expires_ms: (exp * 1000.0).max(0.0) as u64,
        })
    }
}

/// The client's initial response (RFC 7628 §3.1):
/// `n,[a=authzid],` %x01 `auth=Bearer <token>` %x01 [extensions] %x01.
/// Returns the authzid and the token.
pub fn parse_initial_response(bytes: &[u8]) -> Result<(Option<String>, String), String> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| "OAUTHBEARER message is not UTF-8".to_string())?;
    let bad = || "invalid OAUTHBEARER initial client response".to_string();
    let rest = text.strip_prefix("n,").ok_or_else(bad)?;
    let (authzid, rest) = rest.split_once(',').ok_or_else(bad)?;
    let authzid = match authzid {
        "" => None,
        a => Some(a.strip_prefix("a=").ok_or_else(bad)?.to_string()),
    };
    let body = rest.strip_prefix('\u{1}').ok_or_else(bad)?;
    let body = body.strip_suffix("\u{1}\u{1}").ok_or_else(bad)?;
    let mut token = None;
    for pair in body.split('\u{1}') {
        let (k, v) = pair.split_once('=').ok_or_else(bad)?;
        if k == "auth" {
            let t = v
                .strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
                .ok_or_else(bad)?;
            token = Some(t.trim().to_string());
        }
        // Other keys are SASL extensions (KIP-342); none is validated here,
        // and, as in Kafka, unvalidated extensions are ignored.
    }
    let token = token.filter(|t| !t.is_empty()).ok_or_else(bad)?;
    Ok((authzid, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_responses_as_clients_send_them() {
        let (a, t) = parse_initial_response(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01").unwrap();
        assert_eq!((a, t.as_str()), (None, "abc.def.ghi"));
        let (a, t) = parse_initial_response(
            b"n,a=alice,\x01host=h\x01auth=Bearer x.y.z\x01traceId=1\x01\x01",
        )
        .unwrap();
        assert_eq!((a.as_deref(), t.as_str()), (Some("alice"), "x.y.z"));
        for bad in [
            &b"y,,\x01auth=Bearer a\x01\x01"[..],
            b"n,,auth=Bearer a\x01\x01",
            b"n,,\x01auth=Bearer a\x01",
            b"n,,\x01auth=Basic a\x01\x01",
            b"n,,\x01host=h\x01\x01",
            b"\x01",
        ] {
            assert!(parse_initial_response(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_jwks_without_keys_or_unreadable_stops_the_start() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("jwks.json");
        std::fs::write(&p, r#"{"keys":[]}"#).unwrap();
        let new = |p: &std::path::Path| {
            OAuthSettings::new(p.to_path_buf(), vec![], None, "sub".into(), 30)
        };
        assert!(new(&p).unwrap_err().contains("no key"));
        assert!(new(&d.path().join("missing.json"))
            .unwrap_err()
            .contains("cannot read"));
        std::fs::write(&p, "not json").unwrap();
        assert!(new(&p).unwrap_err().contains("not a JSON Web Key Set"));
    }
}

#[cfg(test)]
mod token_tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
    use base64::Engine;
    use jsonwebtoken::{EncodingKey, Header};
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    /// An ES256 key: its signer and its JWK.
    fn key(kid: &str) -> (EncodingKey, serde_json::Value) {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let point = pair.public_key().as_ref();
        let jwk = serde_json::json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": B64URL.encode(&point[1..33]), "y": B64URL.encode(&point[33..65]),
        });
        (EncodingKey::from_ec_der(pkcs8.as_ref()), jwk)
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn token(k: &EncodingKey, kid: &str, claims: serde_json::Value) -> String {
        let mut h = Header::new(Algorithm::ES256);
        h.kid = Some(kid.into());
        jsonwebtoken::encode(&h, &claims, k).unwrap()
    }

    #[test]
    fn tokens_are_checked_as_kafkas_secured_validator_does() {
        let d = tempfile::tempdir().unwrap();
        let jwks = d.path().join("jwks.json");
        let (k1, j1) = key("k1");
        let (k2, j2) = key("k2");
        std::fs::write(&jwks, serde_json::json!({ "keys": [j1] }).to_string()).unwrap();
        let s = OAuthSettings::new(
            jwks.clone(),
            vec!["kafka".into()],
            Some("https://idp".into()),
            "sub".into(),
            30,
        )
        .unwrap();
        let t = now();
        let good = serde_json::json!({"sub": "alice", "iat": t, "exp": t + 600, "aud": "kafka", "iss": "https://idp"});
        let v = s.validate(&token(&k1, "k1", good.clone())).unwrap();
        assert_eq!(v.principal, "alice");
        assert_eq!(v.expires_ms, (t + 600) * 1000);

        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut c = good.clone();
            f(&mut c);
            c
        };
        let refused = [
            (
                "expired",
                token(&k1, "k1", with(&|c| c["exp"] = (t - 120).into())),
            ),
            (
                "another audience",
                token(&k1, "k1", with(&|c| c["aud"] = "other".into())),
            ),
            (
                "another issuer",
                token(&k1, "k1", with(&|c| c["iss"] = "https://evil".into())),
            ),
            (
                "no iat",
                token(
                    &k1,
                    "k1",
                    with(&|c| drop(c.as_object_mut().unwrap().remove("iat"))),
                ),
            ),
            (
                "no sub",
                token(
                    &k1,
                    "k1",
                    with(&|c| drop(c.as_object_mut().unwrap().remove("sub"))),
                ),
            ),
            (
                "not valid before a minute from now",
                token(&k1, "k1", with(&|c| c["nbf"] = (t + 120).into())),
            ),
            ("unknown kid", token(&k2, "k2", good.clone())),
            ("signed by another key", token(&k2, "k1", good.clone())),
        ];
        for (why, tok) in refused {
            assert!(s.validate(&tok).is_err(), "a token with {why} passed");
        }
        // A token that became valid a moment ago passes.
        assert!(s
            .validate(&token(&k1, "k1", with(&|c| c["nbf"] = (t - 5).into())))
            .is_ok());
        // Within the clock skew an expired token still passes (Kafka's default is 30 s).
        assert!(s
            .validate(&token(&k1, "k1", with(&|c| c["exp"] = (t - 10).into())))
            .is_ok());
        // Unsigned and HMAC tokens are never accepted.
        let none = format!(
            "{}.{}.",
            B64URL.encode(r#"{"alg":"none","typ":"JWT"}"#),
            B64URL.encode(good.to_string())
        );
        assert!(s.validate(&none).is_err());
        let hs = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &good,
            &EncodingKey::from_secret(b"k"),
        )
        .unwrap();
        assert!(s.validate(&hs).unwrap_err().contains("not accepted"));

        // Keys rotate: the file now holds k2; k2's tokens pass, k1's no longer.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(
            &jwks,
            serde_json::json!({ "keys": [j2, {"kty": "oct", "kid": "h", "k": "c2VjcmV0"}] })
                .to_string(),
        )
        .unwrap();
        assert!(s.validate(&token(&k2, "k2", good.clone())).is_ok());
        assert!(s.validate(&token(&k1, "k1", good.clone())).is_err());
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some("h".into());
        let sym = jsonwebtoken::encode(&h, &good, &EncodingKey::from_secret(b"secret")).unwrap();
        assert!(
            s.validate(&sym).is_err(),
            "an HMAC key of the JWKS was accepted"
        );
    }
}

/// A setting that stops the start: (key, value, reason).
pub type Invalid = (String, String, String);

/// The settings of listener `listener` from Kafka's keys, each looked up
/// as `listener.name.<l>.oauthbearer.<key>`, `listener.name.<l>.<key>`,
/// then `<key>`.
pub fn from_config(
    raw: &std::collections::BTreeMap<String, String>,
    listener: &str,
) -> Result<OAuthSettings, Invalid> {
    let l = listener.to_ascii_lowercase();
    let get = |k: &str| -> Option<(String, String)> {
        [
            format!("listener.name.{l}.oauthbearer.{k}"),
            format!("listener.name.{l}.{k}"),
            k.to_string(),
        ]
        .into_iter()
        .find_map(|key| {
            let v = raw.get(&key)?.trim().to_string();
            (!v.is_empty()).then_some((key, v))
        })
    };
    if let Some((key, class)) = get("sasl.server.callback.handler.class") {
        if class.contains("Unsecured") {
            return Err((
                key,
                class,
                "unsigned (unsecured) OAUTHBEARER tokens are not accepted; use org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler with sasl.oauthbearer.jwks.endpoint.url".into(),
            ));
        }
    }
    let Some((key, url)) = get("sasl.oauthbearer.jwks.endpoint.url") else {
        return Err((
            "sasl.oauthbearer.jwks.endpoint.url".into(),
            String::new(),
            format!("listener {listener} enables OAUTHBEARER: tokens are checked against a JSON Web Key Set, so set sasl.oauthbearer.jwks.endpoint.url to its file (file:///…)"),
        ));
    };
    let path = match url.strip_prefix("file://").or_else(|| url.strip_prefix("file:")) {
        Some(p) => PathBuf::from(p),
        None if url.starts_with("http://") || url.starts_with("https://") => {
            return Err((
                key,
                url,
                "JWKS over HTTP is not fetched by this version of Skein; save the key set to a file (file:///…), which is re-read when it changes".into(),
            ))
        }
        None => PathBuf::from(&url),
    };
    let audience = get("sasl.oauthbearer.expected.audience")
        .map(|(_, v)| {
            v.split(',')
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let issuer = get("sasl.oauthbearer.expected.issuer").map(|(_, v)| v);
    let sub_claim = get("sasl.oauthbearer.sub.claim.name")
        .map(|(_, v)| v)
        .unwrap_or_else(|| "sub".into());
    let clock_skew_s = match get("sasl.oauthbearer.clock.skew.seconds") {
        None => 30,
        Some((k, v)) => v
            .parse()
            .map_err(|_| (k, v.clone(), "not a number of seconds".to_string()))?,
    };
    OAuthSettings::new(path, audience, issuer, sub_claim, clock_skew_s).map_err(|e| (key, url, e))
}
