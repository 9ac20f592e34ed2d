//! SASL authentication of one connection, as Kafka does it: on a
//! `SASL_PLAINTEXT` or `SASL_SSL` listener a client may send ApiVersions,
//! then `SaslHandshake` (the mechanism) and, after a v1 handshake,
//! `SaslAuthenticate` requests carrying the mechanism's tokens (KIP-152);
//! after a v0 handshake the tokens come as bare size-prefixed frames, as
//! before KIP-152. Any other request before authentication completes
//! closes the connection.
//! With `connections.max.reauth.ms` the session lasts that long and the
//! client re-authenticates on the same connection (KIP-368) or is
//! disconnected at its next request.
//!
//! Mechanisms: PLAIN against the listener's JAAS users, SCRAM-SHA-256/512
//! against the controller's salted credentials ([`scram`]).

pub mod oauthbearer;
pub mod scram;
pub mod scram_client;

pub use scram::constant_time_eq;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use crate::broker::Broker;
use crate::listeners::{SaslMechanism, SaslSettings};
use crate::principal::Principal;
use scram::{ScramServer, Step};

/// How long a failed authentication holds the connection before it is
/// closed (Kafka's `connection.failed.authentication.delay.ms`): slows
/// down password guessing.
pub const FAILED_AUTHENTICATION_DELAY: Duration = Duration::from_millis(100);

fn strb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn str_opt(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

/// A connection's authentication state and principal.
pub struct Session {
    listener: Arc<str>,
    /// The client's address, for log lines.
    peer: Option<std::net::SocketAddr>,
    sasl: Option<Arc<SaslSettings>>,
    state: State,
    principal: Principal,
    /// The principal logged in with a delegation token (SCRAM
    /// `tokenauth=true`): it may not ask for tokens itself.
    token_authenticated: bool,
    close: bool,
    /// Throttled by a quota: read nothing more for this long.
    mute: Duration,
    /// The client software's name and version, from ApiVersions v3+
    /// (KIP-511), for client telemetry.
    client_software: Option<(String, String)>,
}

enum State {
    /// Before `SaslHandshake`: only ApiVersions and SaslHandshake.
    Handshake,
    /// A mechanism was chosen: only `SaslAuthenticate`.
    Authenticating {
        mechanism: SaslMechanism,
        scram: Option<Box<ScramServer>>,
        /// OAUTHBEARER: the token was refused and the error challenge sent;
        /// the client's next message ends the exchange with this.
        oauth_error: Option<String>,
        /// Re-authentication of an authenticated session (KIP-368).
        reauth: bool,
        /// After a v0 handshake: tokens are bare frames, not requests.
        raw: bool,
    },
    /// Authenticated, or a listener without SASL.
    Ready {
        mechanism: Option<SaslMechanism>,
        expires: Option<Instant>,
    },
}

impl Session {
    /// A new connection from `peer` on listener `listener`; `sasl` for
    /// SASL listeners.
    pub fn new(
        listener: Arc<str>,
        sasl: Option<Arc<SaslSettings>>,
        peer: Option<std::net::SocketAddr>,
    ) -> Self {
        let state = match sasl {
            Some(_) => State::Handshake,
            None => State::Ready {
                mechanism: None,
                expires: None,
            },
        };
        Session {
            listener,
            peer,
            sasl,
            state,
            principal: Principal::anonymous(),
            token_authenticated: false,
            close: false,
            mute: Duration::ZERO,
            client_software: None,
        }
    }

    /// A session on no listener (the fuzz harness, tests).
    pub fn unauthenticated() -> Self {
        Self::new("PLAINTEXT".into(), None, None)
    }

    /// The principal the transport established (a client certificate).
    pub fn set_principal(&mut self, principal: Principal) {
        self.principal = principal;
    }

    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Whether the principal logged in with a delegation token.
    pub fn token_authenticated(&self) -> bool {
        self.token_authenticated
    }

    /// The client's address (`None` outside a connection).
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.peer
    }

    /// Records the software the client named in ApiVersions.
    pub fn set_client_software(&mut self, name: &str, version: &str) {
        if !name.is_empty() || !version.is_empty() {
            self.client_software = Some((name.to_string(), version.to_string()));
        }
    }

    /// The client software's name and version, if it said.
    pub fn client_software(&self) -> Option<&(String, String)> {
        self.client_software.as_ref()
    }

    /// The name of the listener the connection arrived on.
    pub fn listener(&self) -> &str {
        &self.listener
    }

    /// Mutes the connection for `d` after the current response (a quota's
    /// throttle).
    pub fn mute_for(&mut self, d: Duration) {
        self.mute = self.mute.max(d);
    }

    /// How long to mute the connection now, and forget it.
    pub fn take_mute(&mut self) -> Duration {
        std::mem::take(&mut self.mute)
    }

    /// The connection is to be closed once the current response is written.
    pub fn close_after_response(&self) -> bool {
        self.close
    }

    /// Whether a request of `api` may be served now; `Err` (why) closes the
    /// connection, as Kafka does with a request out of the SASL sequence.
    pub fn admit(&self, api: ApiKey) -> Result<(), String> {
        match &self.state {
            State::Handshake => match api {
                ApiKey::ApiVersions | ApiKey::SaslHandshake => Ok(()),
                _ => Err(format!(
                    "{api:?} request before SASL authentication on listener {}",
                    self.listener
                )),
            },
            State::Authenticating { .. } => match api {
                ApiKey::SaslAuthenticate => Ok(()),
                _ => Err(format!(
                    "{api:?} request during SASL authentication on listener {}",
                    self.listener
                )),
            },
            State::Ready {
                expires: Some(at), ..
            } if Instant::now() >= *at && api != ApiKey::SaslHandshake => Err(format!(
                "the SASL session of {} expired (connections.max.reauth.ms) and the client did not re-authenticate",
                self.principal
            )),
            State::Ready { .. } => Ok(()),
        }
    }

    /// Whether the client has yet to authenticate (or is re-authenticating):
    /// its frames are then bounded by `sasl.server.max.receive.size`.
    pub fn authenticating(&self) -> bool {
        !matches!(self.state, State::Ready { .. })
    }

    /// After a v0 `SaslHandshake`, the next frame is a bare token for
    /// [`Session::raw_token`], not a request.
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Authenticating { raw: true, .. })
    }

    /// `SaslHandshake`: picks the mechanism (or starts re-authentication).
    pub fn handshake(&mut self, req: SaslHandshakeRequest, version: i16) -> SaslHandshakeResponse {
        let mut resp = SaslHandshakeResponse::default();
        let Some(sasl) = self.sasl.clone() else {
            // Kafka's answer on a listener without SASL.
            resp.error_code = ResponseError::IllegalSaslState.code();
            return resp;
        };
        resp.mechanisms = sasl.mechanisms.iter().map(|m| strb(m.name())).collect();
        let wanted =
            SaslMechanism::parse(req.mechanism.as_str()).filter(|m| sasl.mechanisms.contains(m));
        let reauth = match &self.state {
            State::Handshake => false,
            State::Ready { mechanism, .. } => {
                if wanted.is_some() && wanted != *mechanism {
                    // Re-authentication keeps the mechanism (KIP-368).
                    resp.error_code = ResponseError::IllegalSaslState.code();
                    self.close = true;
                    return resp;
                }
                true
            }
            State::Authenticating { .. } => unreachable!("admit() lets only SaslAuthenticate in"),
        };
        let Some(mechanism) = wanted else {
            resp.error_code = ResponseError::UnsupportedSaslMechanism.code();
            self.close = true;
            return resp;
        };
        self.state = State::Authenticating {
            mechanism,
            scram: match mechanism {
                SaslMechanism::Scram(m) => Some(Box::new(ScramServer::new(m))),
                SaslMechanism::Plain | SaslMechanism::OAuthBearer => None,
            },
            oauth_error: None,
            reauth,
            raw: version == 0,
        };
        resp
    }

    /// A bare token after a v0 handshake: the bytes to send back
    /// (size-prefixed by the caller), or `None` when authentication failed
    /// and the connection is to be closed (v0 has no way to say why).
    pub fn raw_token(&mut self, broker: &Broker, token: &[u8]) -> Option<Vec<u8>> {
        match self.step(broker, token) {
            Ok(Outcome::Challenge(c)) => Some(c),
            Ok(Outcome::Done { response, .. }) => Some(response),
            Err(_) => {
                self.close = true;
                None
            }
        }
    }

    /// `SaslAuthenticate`: one token of the chosen mechanism.
    pub fn authenticate(
        &mut self,
        broker: &Broker,
        req: SaslAuthenticateRequest,
    ) -> SaslAuthenticateResponse {
        let mut resp = SaslAuthenticateResponse::default();
        if !matches!(self.state, State::Authenticating { raw: false, .. }) {
            resp.error_code = ResponseError::IllegalSaslState.code();
            resp.error_message = str_opt(match self.sasl {
                Some(_) => "SaslAuthenticate request received after successful authentication",
                None => "SaslAuthenticate request received on a listener without SASL",
            });
            return resp;
        }
        match self.step(broker, &req.auth_bytes) {
            Ok(Outcome::Challenge(challenge)) => resp.auth_bytes = Bytes::from(challenge),
            Ok(Outcome::Done {
                response,
                lifetime_ms,
            }) => {
                resp.auth_bytes = Bytes::from(response);
                resp.session_lifetime_ms = lifetime_ms as i64;
            }
            Err(why) => {
                resp.error_code = ResponseError::SaslAuthenticationFailed.code();
                resp.error_message = str_opt(why);
            }
        }
        resp
    }

    /// Feeds one token to the exchange; on success the session is
    /// authenticated, on failure it is to be closed.
    fn step(&mut self, broker: &Broker, token: &[u8]) -> Result<Outcome, String> {
        let State::Authenticating {
            mechanism,
            scram,
            oauth_error,
            reauth,
            ..
        } = &mut self.state
        else {
            unreachable!("callers check the state");
        };
        let (mechanism, reauth) = (*mechanism, *reauth);
        let sasl = self
            .sasl
            .clone()
            .expect("authenticating on a SASL listener");
        // OAUTHBEARER and delegation tokens: when the credential expires
        // (milliseconds since the epoch).
        let mut token_expires_ms = None;
        let mut token_authenticated = false;
        let outcome = match (mechanism, scram.as_mut()) {
            (SaslMechanism::Plain, _) => {
                plain(&sasl, token).map(|user| (Principal::user(user), Vec::new()))
            }
            (SaslMechanism::OAuthBearer, _) => match oauth_error.take() {
                // The client's %x01 after the error challenge.
                Some(why) => Err(why),
                None => match sasl
                    .oauth
                    .as_ref()
                    .expect("checked at start-up")
                    .authenticate(token)
                {
                    Ok(v) => {
                        token_expires_ms = Some(v.expires_ms);
                        Ok((Principal::user(v.principal), Vec::new()))
                    }
                    Err(oauthbearer::Refusal::Malformed(why)) => Err(why),
                    Err(oauthbearer::Refusal::InvalidToken(why)) => {
                        // RFC 7628: the error goes as a challenge; the
                        // exchange fails on the client's answer.
                        *oauth_error = Some(format!("Authentication failed: {why}"));
                        return Ok(Outcome::Challenge(oauthbearer::INVALID_TOKEN.to_vec()));
                    }
                },
            },
            (SaslMechanism::Scram(m), Some(server)) => {
                let image = broker.metadata.image();
                let now = crate::system::now_ms();
                let lookup = |user: &str, token: bool| match token {
                    // A delegation token (KIP-48): its id is the user name.
                    true => broker.delegation_tokens.scram_credential(
                        &image.delegation_tokens,
                        user,
                        m,
                        now,
                    ),
                    false => image.scram_credentials.get(user)?.get(&m).cloned(),
                };
                match server.step(token, lookup) {
                    Ok(Step::Challenge(challenge)) => return Ok(Outcome::Challenge(challenge)),
                    Ok(Step::Done {
                        user,
                        token: false,
                        response,
                    }) => Ok((Principal::user(user), response)),
                    // The token's owner, as a user (Kafka keeps the name
                    // only), until the token expires.
                    Ok(Step::Done {
                        user,
                        token: true,
                        response,
                    }) => match image.delegation_tokens.get(&user) {
                        Some(t) => {
                            token_expires_ms = Some(t.expiry_ms.min(t.max_ms).max(0) as u64);
                            token_authenticated = true;
                            let owner = Principal::parse(&t.owner)
                                .map_or_else(|| t.owner.clone(), |p| p.name);
                            Ok((Principal::user(owner), response))
                        }
                        // Expired (or removed) during the exchange.
                        None => Err(format!(
                            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                            mechanism.name()
                        )),
                    },
                    Err(e) => Err(e.0),
                }
            }
            (SaslMechanism::Scram(_), None) => unreachable!("a SCRAM exchange has its server"),
        };
        let outcome = outcome.and_then(|(principal, response)| {
            if reauth
                && (principal != self.principal || token_authenticated != self.token_authenticated)
            {
                return Err(format!(
                    "Cannot change principals during re-authentication from {}: {principal}",
                    self.principal
                ));
            }
            Ok((principal, response))
        });
        let metric = |result: &str| {
            broker
                .metrics
                .sasl_authentications
                .with_label_values(&[&self.listener, mechanism.name(), result])
                .inc()
        };
        match outcome {
            Ok((principal, response)) => {
                metric("success");
                // KIP-368: a session lasts connections.max.reauth.ms, and
                // no longer than its credential (an OAUTHBEARER token, a
                // delegation token), which bounds it even without
                // connections.max.reauth.ms, as in Kafka.
                let remaining = |exp: u64| {
                    exp.saturating_sub(crate::system::now_ms().max(0) as u64)
                        .max(1)
                };
                let lifetime_ms = match (sasl.max_reauth_ms, token_expires_ms) {
                    (max, None) => max,
                    (0, Some(exp)) => remaining(exp),
                    (max, Some(exp)) => max.min(remaining(exp)),
                };
                self.principal = principal;
                self.token_authenticated = token_authenticated;
                self.state = State::Ready {
                    mechanism: Some(mechanism),
                    expires: (lifetime_ms > 0)
                        .then(|| Instant::now() + Duration::from_millis(lifetime_ms)),
                };
                Ok(Outcome::Done {
                    response,
                    lifetime_ms,
                })
            }
            Err(why) => {
                metric("failure");
                // No secret in the line: the user name at most.
                if let Some(left_out) = broker
                    .warn_throttle
                    .allow(&format!("sasl {}", self.listener))
                {
                    info!(listener = %self.listener, mechanism = mechanism.name(), peer = ?self.peer, error = %why, left_out, "SASL authentication failed");
                }
                self.close = true;
                Err(why)
            }
        }
    }
}

/// What one token led to.
enum Outcome {
    /// Send this and wait for the next token.
    Challenge(Vec<u8>),
    /// Authenticated; send `response` (SCRAM's server-final message).
    Done { response: Vec<u8>, lifetime_ms: u64 },
}

/// PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`; returns the user.
fn plain(sasl: &SaslSettings, token: &[u8]) -> Result<String, String> {
    let invalid = || "Authentication failed: Invalid username or password".to_string();
    let mut parts = token.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("Invalid SASL/PLAIN response: expected 3 tokens".into());
    };
    let (Ok(authzid), Ok(user)) = (std::str::from_utf8(authzid), std::str::from_utf8(user)) else {
        return Err("Invalid SASL/PLAIN response: not UTF-8".into());
    };
    if user.is_empty() {
        return Err("Authentication failed: username not specified".into());
    }
    if !authzid.is_empty() && authzid != user {
        return Err(
            "Authentication failed: Client requested an authorization id that is different from username"
                .into(),
        );
    }
    // Digests of equal length are compared in constant time, and an unknown
    // user is compared against a digest too: the time taken tells neither
    // the password's length nor whether the user exists.
    let digest = |b: &[u8]| ring::digest::digest(&ring::digest::SHA256, b);
    let given = digest(password);
    let (known, expected) = match sasl.plain_users.get(user) {
        Some(expected) => (true, digest(expected.as_bytes())),
        None => (false, digest(b"\0no such user\0")),
    };
    if constant_time_eq(expected.as_ref(), given.as_ref()) & known {
        Ok(user.to_string())
    } else {
        Err(invalid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn settings() -> SaslSettings {
        SaslSettings {
            mechanisms: vec![SaslMechanism::Plain],
            plain_users: BTreeMap::from([("alice".to_string(), "alice-secret".to_string())]),
            max_reauth_ms: 0,
            oauth: None,
        }
    }

    #[test]
    fn plain_tokens() {
        let s = settings();
        assert_eq!(plain(&s, b"\0alice\0alice-secret").unwrap(), "alice");
        assert_eq!(plain(&s, b"alice\0alice\0alice-secret").unwrap(), "alice");
        for (token, why) in [
            (&b"\0alice\0wrong"[..], "Invalid username or password"),
            (b"\0bob\0alice-secret", "Invalid username or password"),
            (b"\0alice\0alice-secret\0", "expected 3 tokens"),
            (b"alice-secret", "expected 3 tokens"),
            (b"bob\0alice\0alice-secret", "authorization id"),
            (b"\0\0x", "username not specified"),
        ] {
            let e = plain(&s, token).unwrap_err();
            assert!(e.contains(why), "{token:?}: {e}");
        }
    }

    #[test]
    fn requests_out_of_the_sasl_sequence_are_refused() {
        let mut s = Session::new("SASL".into(), Some(Arc::new(settings())), None);
        assert!(s.admit(ApiKey::ApiVersions).is_ok());
        assert!(s.admit(ApiKey::Metadata).is_err());
        assert!(s.admit(ApiKey::SaslAuthenticate).is_err());
        let mut hs = SaslHandshakeRequest::default();
        hs.mechanism = strb("SCRAM-SHA-256");
        let r = s.handshake(hs.clone(), 1);
        assert_eq!(r.error_code, ResponseError::UnsupportedSaslMechanism.code());
        assert_eq!(r.mechanisms, vec![strb("PLAIN")]);
        assert!(s.close_after_response());

        let mut s = Session::new("SASL".into(), Some(Arc::new(settings())), None);
        hs.mechanism = strb("PLAIN");
        assert_eq!(s.handshake(hs, 1).error_code, 0);
        assert!(s.admit(ApiKey::Produce).is_err());
        assert!(s.admit(ApiKey::SaslAuthenticate).is_ok());

        let plaintext = Session::unauthenticated();
        assert!(plaintext.admit(ApiKey::Produce).is_ok());
        assert_eq!(plaintext.principal().to_string(), "User:ANONYMOUS");
    }
}
