//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka serves
//! them: the server side of the two-round exchange against the salted
//! credentials the controller stores, and the derivation of those
//! credentials from a salted password (`AlterUserScramCredentials`).
//! Channel binding is not offered (Kafka does not either): a client asking
//! for it (`p=`) is refused.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::{digest, rand::SecureRandom};
use skein_controller::{ScramCredential, ScramMechanism};

/// Why an exchange failed; the text goes to the client (it never holds a
/// secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScramError(pub String);

/// Equality that takes as long for every pair of equal-length inputs.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn fail<T>(why: impl Into<String>) -> Result<T, ScramError> {
    Err(ScramError(why.into()))
}

pub use skein_controller::scram::{
    credential_from_salted_password, digest_alg, mac, salt_password,
};

/// The server side of one exchange.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

// One exchange lives a moment, boxed whole in its session
// (`sasl::Session`): the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum State {
    First,
    Final {
        user: String,
        token: bool,
        gs2_header: String,
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: ScramCredential,
    },
    Done,
}

/// What a step produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge and wait for the client's next message.
    Challenge(Vec<u8>),
    /// Authenticated as `user` (a delegation token's id when `token`);
    /// send the server-final message.
    Done {
        user: String,
        token: bool,
        response: Vec<u8>,
    },
}

/// `saslname` decoding: `=2C` is `,` and `=3D` is `=`; any other `=` is
/// malformed.
fn decode_saslname(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i + 1..i + 3) {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer {
            mechanism,
            state: State::First,
        }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Feeds the client's next message. `lookup` finds a user's
    /// credential for this mechanism, or a delegation token's (its id as
    /// the user name) when the second argument is true: the client sent
    /// Kafka's `tokenauth=true` extension.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str, bool) -> Option<ScramCredential>,
    ) -> Result<Step, ScramError> {
        let Ok(text) = std::str::from_utf8(message) else {
            return fail("SCRAM message is not UTF-8");
        };
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => self.client_first(text, lookup),
            State::Final {
                user,
                token,
                gs2_header,
                client_first_bare,
                server_first,
                nonce,
                credential,
            } => {
                let auth = FinalCheck {
                    mechanism: self.mechanism,
                    gs2_header: &gs2_header,
                    client_first_bare: &client_first_bare,
                    server_first: &server_first,
                    nonce: &nonce,
                    credential: &credential,
                };
                let response = auth.check(text)?;
                Ok(Step::Done {
                    user,
                    token,
                    response,
                })
            }
            State::Done => fail("SCRAM exchange already finished"),
        }
    }

    fn client_first(
        &mut self,
        text: &str,
        lookup: impl FnOnce(&str, bool) -> Option<ScramCredential>,
    ) -> Result<Step, ScramError> {
        // gs2-header: "n," or "y," (no channel binding), then an optional
        // "a=authzid", then ",".
        let mut parts = text.splitn(3, ',');
        let (Some(cb), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return fail("invalid SCRAM client-first message");
        };
        match cb {
            "n" | "y" => {}
            c if c.starts_with("p=") => {
                return fail("SCRAM channel binding is not supported");
            }
            _ => return fail("invalid SCRAM client-first message (gs2 header)"),
        }
        let authzid = match authzid {
            "" => None,
            a => match a.strip_prefix("a=").and_then(decode_saslname) {
                Some(a) => Some(a),
                None => return fail("invalid SCRAM authorization id"),
            },
        };
        let mut user = None;
        let mut client_nonce = None;
        let mut token = false;
        for attr in bare.split(',') {
            match attr.split_once('=') {
                Some(("n", v)) if user.is_none() => user = decode_saslname(v),
                Some(("r", v)) if client_nonce.is_none() => client_nonce = Some(v.to_string()),
                Some(("m", _)) => return fail("SCRAM mandatory extensions are not supported"),
                // Kafka's token authentication extension (read as Java's
                // `Boolean.parseBoolean`): the user name is a delegation
                // token's id.
                Some(("tokenauth", v)) => token = v.eq_ignore_ascii_case("true"),
                Some(_) => {}
                None => return fail("invalid SCRAM client-first message"),
            }
        }
        let (Some(user), Some(client_nonce)) = (user, client_nonce) else {
            return fail("SCRAM client-first message lacks the user name or nonce");
        };
        if user.is_empty() || client_nonce.is_empty() {
            return fail("SCRAM client-first message lacks the user name or nonce");
        }
        if authzid.as_ref().is_some_and(|a| *a != user) {
            return fail("Authentication failed: Client requested an authorization id that is different from username");
        }
        // An unknown token gets the message of a wrong password, as in
        // Kafka: a client learns nothing of which token ids exist.
        let Some(credential) = lookup(&user, token) else {
            return fail(format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                self.mechanism
            ));
        };
        let mut random = [0u8; 18];
        ring::rand::SystemRandom::new()
            .fill(&mut random)
            .map_err(|_| ScramError("no randomness for the server nonce".into()))?;
        let nonce = format!("{client_nonce}{}", B64.encode(random));
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let gs2_header = text[..text.len() - bare.len()].to_string();
        let challenge = server_first.clone().into_bytes();
        self.state = State::Final {
            user,
            token,
            gs2_header,
            client_first_bare: bare.to_string(),
            server_first,
            nonce,
            credential,
        };
        Ok(Step::Challenge(challenge))
    }
}

struct FinalCheck<'a> {
    mechanism: ScramMechanism,
    gs2_header: &'a str,
    client_first_bare: &'a str,
    server_first: &'a str,
    nonce: &'a str,
    credential: &'a ScramCredential,
}

impl FinalCheck<'_> {
    /// Verifies the client-final message; returns the server-final one.
    fn check(&self, text: &str) -> Result<Vec<u8>, ScramError> {
        let invalid = || {
            ScramError(format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                self.mechanism
            ))
        };
        let Some(at) = text.rfind(",p=") else {
            return fail("invalid SCRAM client-final message (no proof)");
        };
        let without_proof = &text[..at];
        let Ok(proof) = B64.decode(&text[at + 3..]) else {
            return fail("invalid SCRAM client-final message (proof is not base64)");
        };
        let mut binding = None;
        let mut nonce = None;
        for attr in without_proof.split(',') {
            match attr.split_once('=') {
                Some(("c", v)) if binding.is_none() => binding = Some(v),
                Some(("r", v)) if nonce.is_none() => nonce = Some(v),
                Some(_) => {}
                None => return fail("invalid SCRAM client-final message"),
            }
        }
        let binding_ok = binding
            .and_then(|c| B64.decode(c).ok())
            .is_some_and(|c| c == self.gs2_header.as_bytes());
        if !binding_ok {
            return fail("invalid SCRAM client-final message (channel binding)");
        }
        if nonce != Some(self.nonce) {
            return fail("invalid SCRAM client-final message (nonce)");
        }
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let m = self.mechanism;
        let signature = mac(m, &self.credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(invalid());
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored = digest::digest(digest_alg(m), &client_key);
        if !constant_time_eq(stored.as_ref(), &self.credential.stored_key) {
            return Err(invalid());
        }
        let server_signature = mac(m, &self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(m: ScramMechanism, password: &str) -> ScramCredential {
        let salt = b"0123456789abcdef";
        credential_from_salted_password(m, &salt_password(m, password, salt, 4096), salt, 4096)
    }

    fn exchange(m: ScramMechanism, stored_for: &str, tried: &str) -> Result<Step, ScramError> {
        let mut server = ScramServer::new(m);
        let first_bare = "n=al=3Dice,r=fyko+d2lbbFgONRv9qkxdawL";
        let Step::Challenge(server_first) = server
            .step(format!("n,,{first_bare}").as_bytes(), |u, token| {
                assert_eq!(u, "al=ice");
                assert!(!token);
                Some(credential(m, stored_for))
            })
            .unwrap()
        else {
            panic!("a challenge first")
        };
        assert!(server_first.starts_with(b"r=fyko+d2lbbFgONRv9qkxdawL"));
        let mut client = super::super::scram_client::ScramClient::with_nonce(
            m,
            "al=ice",
            tried,
            "fyko+d2lbbFgONRv9qkxdawL",
        );
        assert_eq!(client.first(), format!("n,,{first_bare}").into_bytes());
        let final_msg = client.respond(&server_first).unwrap();
        let out = server.step(&final_msg, |_, _| unreachable!());
        if let Ok(Step::Done { response, .. }) = &out {
            client.verify(response).expect("server signature");
        }
        out
    }

    #[test]
    fn a_right_password_authenticates_and_the_server_proves_itself() {
        for m in ScramMechanism::ALL {
            match exchange(m, "s3cret", "s3cret").unwrap() {
                Step::Done { user, .. } => assert_eq!(user, "al=ice"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_wrong_password_fails_with_kafkas_message() {
        for m in ScramMechanism::ALL {
            let e = exchange(m, "s3cret", "guess").unwrap_err();
            assert!(
                e.0.contains("invalid credentials with SASL mechanism"),
                "{e}"
            );
            assert!(e.0.contains(m.name()));
        }
    }

    #[test]
    fn malformed_and_unsupported_first_messages_are_refused() {
        let m = ScramMechanism::Sha256;
        for (msg, why) in [
            ("p=tls-unique,,n=a,r=x", "channel binding"),
            ("n,,r=x", "lacks the user name"),
            ("n,a=bob,n=alice,r=x", "authorization id"),
            ("n,,n=a=ZZ,r=x", "lacks the user name"),
            ("garbage", "invalid"),
        ] {
            let e = ScramServer::new(m)
                .step(msg.as_bytes(), |_, _| Some(credential(m, "p")))
                .unwrap_err();
            assert!(e.0.contains(why), "{msg}: {e}");
        }
        let e = ScramServer::new(m)
            .step(b"n,,n=nobody,r=x", |_, _| None)
            .unwrap_err();
        assert!(e.0.contains("invalid credentials"), "{e}");
    }

    #[test]
    fn the_tokenauth_extension_asks_for_a_token_credential() {
        let m = ScramMechanism::Sha512;
        let mut asked = None;
        ScramServer::new(m)
            .step(b"n,,n=tokenid,r=x,tokenauth=true", |u, token| {
                asked = Some((u.to_string(), token));
                Some(credential(m, "p"))
            })
            .unwrap();
        assert_eq!(asked, Some(("tokenid".to_string(), true)));
        let e = ScramServer::new(m)
            .step(b"n,,n=tokenid,r=x,tokenauth=true", |_, _| None)
            .unwrap_err();
        assert!(e.0.contains("invalid credentials"), "{e}");
        let mut plain = None;
        ScramServer::new(m)
            .step(b"n,,n=u,r=x,tokenauth=false", |_, token| {
                plain = Some(token);
                Some(credential(m, "p"))
            })
            .unwrap();
        assert_eq!(plain, Some(false));
    }

    #[test]
    fn a_final_message_with_another_nonce_is_refused() {
        let m = ScramMechanism::Sha512;
        let mut server = ScramServer::new(m);
        server
            .step(b"n,,n=u,r=abc", |_, _| Some(credential(m, "p")))
            .unwrap();
        let e = server
            .step(b"c=biws,r=abcWRONG,p=AAAA", |_, _| None)
            .unwrap_err();
        assert!(e.0.contains("nonce"), "{e}");
    }

    #[test]
    fn rfc7677_test_vector() {
        // RFC 7677 §3: user "user", password "pencil", SCRAM-SHA-256.
        let m = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = credential_from_salted_password(
            m,
            &salt_password(m, "pencil", &salt, 4096),
            &salt,
            4096,
        );
        let check = FinalCheck {
            mechanism: m,
            gs2_header: "n,,",
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO",
            server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            credential: &cred,
        };
        let out = check
            .check("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }
}
