//! The one error type of the tiered-storage layer. The broker maps it to the
//! Kafka error a client sees (a remote read that fails is
//! `KAFKA_STORAGE_ERROR`); `NotFound` is kept apart from other store errors
//! because a missing object is often an expected state (a segment already
//! deleted, a manifest replaced by a newer leader).

/// An error from the object store, the local disk or a manifest.
#[derive(Debug, thiserror::Error)]
pub enum TieredError {
    /// The object does not exist (or no longer does).
    #[error("object not found: {path}")]
    NotFound {
        /// The object's key in the store.
        path: String,
    },
    /// Any other object-store failure (network, authorization, throttling
    /// after the retries ran out).
    #[error("object store: {0}")]
    Store(object_store::Error),
    /// A local file could not be read or written.
    #[error("local file: {0}")]
    Io(#[from] std::io::Error),
    /// A manifest could not be encoded or decoded.
    #[error("manifest: {0}")]
    Manifest(#[from] serde_json::Error),
    /// The store configuration is not usable (bad URL, missing credentials).
    #[error("store configuration: {0}")]
    Config(String),
    /// What the caller handed over does not add up (a segment file shorter
    /// than its stated length, an end offset below the base).
    #[error("invalid segment upload: {0}")]
    InvalidUpload(String),
    /// A remote object does not match its manifest entry.
    #[error("remote data does not match the manifest: {0}")]
    Corrupt(String),
}

impl From<object_store::Error> for TieredError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { path, .. } => TieredError::NotFound { path },
            other => TieredError::Store(other),
        }
    }
}

impl TieredError {
    /// Whether the error says the object is missing.
    pub fn is_not_found(&self) -> bool {
        matches!(self, TieredError::NotFound { .. })
    }
}
