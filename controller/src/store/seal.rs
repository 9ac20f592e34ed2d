//! Sealed SCRAM credentials (issue #41): on Kubernetes the metadata log
//! lives in ConfigMaps, which a namespace user with the `view` role can
//! read, so each user's salt, stored key, server key and iteration count
//! are written encrypted there — envelope encryption as Kubernetes'
//! encryption at rest does it: a 256-bit key in a Secret (which `view`
//! cannot read) seals them with AES-256-GCM. The user's name stays in the
//! clear (it is in the KafkaUser resource too) and is bound to the
//! ciphertext, with the key's id, as associated data, so a sealed record
//! cannot be moved to another user.
//!
//! A record is sealed only once the cluster is finalized at
//! [`crate::features::SEALED_CREDENTIALS_LEVEL`] and its store has a key
//! ([`super::BlobStore::sealing_key`]); reading accepts plain and sealed
//! records at any level. The key is never rotated: a sealed record names
//! the key's id, and one that another key (or no key) meets is an error
//! that says so — never credentials silently dropped.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

use crate::scram::{ScramCredential, ScramMechanism};

/// One user's credentials, as [`super::MetadataRecord::ScramUser`] holds them.
pub type Credentials = BTreeMap<ScramMechanism, ScramCredential>;

/// Bytes of a key.
pub const KEY_LEN: usize = 32;

/// The key credentials are sealed with, and where it comes from (for
/// messages: `Secret ns/demo-controller-key`).
#[derive(Clone)]
pub struct SealingKey {
    bytes: [u8; KEY_LEN],
    id: String,
    origin: String,
}

impl fmt::Debug for SealingKey {
    /// The key's bytes are left out of logs and debug output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealingKey")
            .field("id", &self.id)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl SealingKey {
    /// A key of [`KEY_LEN`] bytes; `origin` names where it is kept.
    pub fn new(bytes: &[u8], origin: impl Into<String>) -> Result<Self, String> {
        let origin = origin.into();
        let bytes: [u8; KEY_LEN] = bytes.try_into().map_err(|_| {
            format!(
                "{origin} holds a key of {} bytes, not {KEY_LEN}",
                bytes.len()
            )
        })?;
        // The id is a digest of the key: it tells keys apart and reveals
        // nothing of a random 256-bit key.
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(b"skein metadata key id\0");
        ctx.update(&bytes);
        let id = ctx.finish().as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(SealingKey { bytes, id, origin })
    }

    /// Fresh random key bytes (the system's random source).
    pub fn generate() -> [u8; KEY_LEN] {
        let mut bytes = [0u8; KEY_LEN];
        SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system random source works");
        bytes
    }

    /// The key's id: 16 hex digits, written next to what it sealed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the key is kept.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The key's bytes, to write it back where it is kept.
    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.bytes
    }

    fn aead(&self) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.bytes).expect("a 256-bit key"))
    }
}

/// Sealed credentials that cannot be opened: no key, another key, or a
/// record that fails authentication. Carried inside the `io::Error` the
/// log's open returns, so the platform can tell it from a store that cannot
/// be reached ([`is_seal_error`]).
#[derive(Debug)]
pub struct SealError(pub String);

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SealError {}

/// Whether `e` is about sealed credentials and the key (a [`SealError`]).
pub fn is_seal_error(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<SealError>().is_some())
}

/// Associated data: the format, the key's id and the user.
fn aad(key_id: &str, user: &str) -> Vec<u8> {
    format!("skein scram credentials v1\0{key_id}\0{user}").into_bytes()
}

/// `credentials` of `user` sealed with `key`: base64 of the nonce, the
/// ciphertext and the tag.
pub fn seal(key: &SealingKey, user: &str, credentials: &Credentials) -> std::io::Result<String> {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| std::io::Error::other("the system random source failed"))?;
    let mut in_out = serde_json::to_vec(credentials).map_err(std::io::Error::other)?;
    key.aead()
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad(key.id(), user)),
            &mut in_out,
        )
        .map_err(|_| std::io::Error::other("sealing failed"))?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&in_out);
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}

/// Opens what [`seal`] made for `user` with the key whose id is `key_id`.
/// `at` says where the record is, for the error.
pub fn open(
    key: Option<&SealingKey>,
    user: &str,
    key_id: &str,
    sealed: &str,
    at: &str,
) -> Result<Credentials, SealError> {
    let Some(key) = key else {
        return Err(SealError(format!(
            "{at}: the SCRAM credentials of user {user:?} are sealed (key {key_id}), and this store has no key to open them"
        )));
    };
    if key.id() != key_id {
        return Err(SealError(format!(
            "{at}: the SCRAM credentials of user {user:?} were sealed with key {key_id}, but {} holds key {}: it was replaced or made anew after they were sealed. Put the original key back there; without it these credentials cannot be read",
            key.origin(),
            key.id()
        )));
    }
    let corrupt = || {
        SealError(format!(
            "{at}: the SCRAM credentials of user {user:?} cannot be opened with {} (key {key_id}): the record is corrupt or was altered",
            key.origin()
        ))
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(sealed)
        .map_err(|_| corrupt())?;
    if bytes.len() < NONCE_LEN {
        return Err(corrupt());
    }
    let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| corrupt())?;
    let mut in_out = ciphertext.to_vec();
    let plain = key
        .aead()
        .open_in_place(nonce, Aad::from(aad(key_id, user)), &mut in_out)
        .map_err(|_| corrupt())?;
    serde_json::from_slice(plain).map_err(|_| corrupt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials() -> Credentials {
        BTreeMap::from([(
            ScramMechanism::Sha512,
            ScramCredential {
                salt: vec![7; 32],
                stored_key: vec![8; 64],
                server_key: vec![9; 64],
                iterations: 4096,
            },
        )])
    }

    fn key(byte: u8) -> SealingKey {
        SealingKey::new(&[byte; KEY_LEN], "Secret ns/demo-controller-key").unwrap()
    }

    #[test]
    fn sealed_credentials_open_with_their_key_and_show_nothing() {
        let k = key(1);
        let sealed = seal(&k, "alice", &credentials()).unwrap();
        assert_eq!(
            open(Some(&k), "alice", k.id(), &sealed, "head").unwrap(),
            credentials()
        );
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&sealed)
            .unwrap();
        for secret in [&[7u8; 32][..], &[8; 64], &[9; 64]] {
            assert!(!raw.windows(secret.len()).any(|w| w == secret));
        }
        assert!(!sealed.contains("4096") && !sealed.contains("iterations"));
        // A fresh nonce each time.
        assert_ne!(sealed, seal(&k, "alice", &credentials()).unwrap());
        assert_eq!(k.id().len(), 16);
        assert!(!format!("{k:?}").contains("[1, 1"), "{k:?}");
    }

    #[test]
    fn another_key_no_key_another_user_or_altered_bytes_are_refused() {
        let k = key(1);
        let sealed = seal(&k, "alice", &credentials()).unwrap();

        let other = key(2);
        let e = open(Some(&other), "alice", k.id(), &sealed, "blob b").unwrap_err();
        assert!(e.0.contains(k.id()) && e.0.contains(other.id()), "{e}");
        assert!(e.0.contains("Secret ns/demo-controller-key"), "{e}");
        assert!(e.0.contains("Put the original key back"), "{e}");
        // Another key that claims the same id still fails authentication.
        let forged = SealingKey {
            id: k.id().to_string(),
            ..other
        };
        let e = open(Some(&forged), "alice", k.id(), &sealed, "blob b").unwrap_err();
        assert!(e.0.contains("corrupt or was altered"), "{e}");

        let e = open(None, "alice", k.id(), &sealed, "blob b").unwrap_err();
        assert!(e.0.contains("no key"), "{e}");

        // Bound to the user: moved to bob, it does not open.
        let e = open(Some(&k), "bob", k.id(), &sealed, "head").unwrap_err();
        assert!(e.0.contains("corrupt or was altered"), "{e}");

        let mut bytes = base64::engine::general_purpose::STANDARD
            .decode(&sealed)
            .unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let altered = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert!(open(Some(&k), "alice", k.id(), &altered, "head").is_err());
        assert!(open(Some(&k), "alice", k.id(), "not base64!", "head").is_err());
        assert!(open(Some(&k), "alice", k.id(), "", "head").is_err());
    }

    #[test]
    fn a_key_must_have_32_bytes() {
        let e = SealingKey::new(&[1; 16], "Secret ns/x").unwrap_err();
        assert!(e.contains("16 bytes") && e.contains("Secret ns/x"), "{e}");
        assert_ne!(
            SealingKey::generate(),
            SealingKey::generate(),
            "random keys"
        );
    }
}
