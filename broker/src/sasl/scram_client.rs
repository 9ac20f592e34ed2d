//! The client side of SCRAM-SHA-256/512 (RFC 5802): how a broker
//! authenticates to another broker on a SASL inter-broker listener, with
//! the `username`/`password` of its own JAAS entry.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::rand::SecureRandom;
use skein_controller::ScramMechanism;

use crate::sasl::scram::{constant_time_eq, digest_alg, mac, salt_password, ScramError};

/// Kafka's clients refuse fewer iterations than this (a server that asks
/// for less is not trusted with the password).
const MIN_ITERATIONS: u32 = 4096;

/// One exchange, client side.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// What the server must answer in its final message.
    server_signature: Option<Vec<u8>>,
}

/// `saslname` encoding: `,` is `=2C` and `=` is `=3D`.
fn encode_saslname(s: &str) -> String {
    s.replace('=', "=3D").replace(',', "=2C")
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str) -> Result<Self, ScramError> {
        let mut random = [0u8; 24];
        ring::rand::SystemRandom::new()
            .fill(&mut random)
            .map_err(|_| ScramError("no randomness for the client nonce".into()))?;
        Ok(Self::with_nonce(
            mechanism,
            user,
            password,
            &B64.encode(random),
        ))
    }

    pub(super) fn with_nonce(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: &str,
    ) -> Self {
        ScramClient {
            mechanism,
            password: password.to_string(),
            nonce: nonce.to_string(),
            client_first_bare: format!("n={},r={nonce}", encode_saslname(user)),
            server_signature: None,
        }
    }

    /// The client-first message (no channel binding).
    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message answering the server-first one.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| ScramError("SCRAM server-first message is not UTF-8".into()))?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in text.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = B64.decode(v).ok(),
                Some(("i", v)) => iterations = v.parse::<u32>().ok(),
                Some(("e", v)) => return Err(ScramError(format!("SCRAM server error: {v}"))),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(ScramError(format!(
                "invalid SCRAM server-first message: {text}"
            )));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError(
                "SCRAM server nonce does not extend the client's".into(),
            ));
        }
        if iterations < MIN_ITERATIONS {
            return Err(ScramError(format!(
                "SCRAM server asks for {iterations} iterations, fewer than {MIN_ITERATIONS}"
            )));
        }
        let m = self.mechanism;
        let salted = salt_password(m, &self.password, &salt, iterations);
        let client_key = mac(m, &salted, b"Client Key");
        let stored_key = ring::digest::digest(digest_alg(m), &client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode("n,,"));
        let auth = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = mac(m, stored_key.as_ref(), auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = mac(m, &salted, b"Server Key");
        self.server_signature = Some(mac(m, &server_key, auth.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server knew the credential.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let text = String::from_utf8_lossy(server_final);
        if let Some(e) = text.strip_prefix("e=") {
            return Err(ScramError(format!("SCRAM server error: {e}")));
        }
        let got = text.strip_prefix("v=").and_then(|v| B64.decode(v).ok());
        match (&self.server_signature, got) {
            (Some(want), Some(got)) if constant_time_eq(want, &got) => Ok(()),
            _ => Err(ScramError(
                "the SCRAM server's signature is wrong: it does not know the credential".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::scram::{credential_from_salted_password, ScramServer, Step};

    fn against_server(m: ScramMechanism, stored: &str, tried: &str) -> Result<String, ScramError> {
        let salt = b"salt-of-the-earth";
        let cred =
            credential_from_salted_password(m, &salt_password(m, stored, salt, 4096), salt, 4096);
        let mut server = ScramServer::new(m);
        let mut client = ScramClient::new(m, "bro,ker=1", tried)?;
        let Step::Challenge(first) = server.step(&client.first(), |u, _| {
            assert_eq!(u, "bro,ker=1");
            Some(cred.clone())
        })?
        else {
            panic!("a challenge first")
        };
        let last = client.respond(&first)?;
        match server.step(&last, |_, _| unreachable!())? {
            Step::Done { user, response, .. } => {
                client.verify(&response)?;
                assert!(
                    client.verify(b"v=AAAA").is_err(),
                    "a wrong server signature passes"
                );
                Ok(user)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn authenticates_against_skeins_server_and_checks_it() {
        for m in ScramMechanism::ALL {
            assert_eq!(against_server(m, "pw", "pw").unwrap(), "bro,ker=1");
            let e = against_server(m, "pw", "wrong").unwrap_err();
            assert!(e.0.contains("invalid credentials"), "{e}");
        }
    }

    #[test]
    fn rfc7677_test_vector() {
        // RFC 7677 §3: user "user", password "pencil".
        let mut c = ScramClient::with_nonce(
            ScramMechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(c.first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = c
            .respond(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
    }

    #[test]
    fn a_server_that_does_not_extend_the_nonce_or_skimps_on_iterations_is_refused() {
        let m = ScramMechanism::Sha512;
        let mut c = ScramClient::with_nonce(m, "u", "p", "abc");
        assert!(c.respond(b"r=xyz123,s=AAAA,i=4096").is_err());
        assert!(c.respond(b"r=abc,s=AAAA,i=4096").is_err());
        let e = c.respond(b"r=abcdef,s=AAAA,i=100").unwrap_err();
        assert!(e.0.contains("iterations"), "{e}");
        assert!(c.respond(b"e=invalid-proof").is_err());
    }
}
