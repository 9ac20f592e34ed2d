//! Where the store is and how to reach it, and the `object_store` client
//! built from that.
//!
//! Credentials are only ever the ones given here: the S3 client is built with
//! `AmazonS3Builder::new()` (never `from_env`, which reads every `AWS_*`
//! variable) and refuses to start without a key and secret, because without
//! them the builder falls back to the cloud metadata endpoint.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::error::TieredError;

/// Where the store is.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// An absolute directory path or `file:///abs/dir` (the local file
    /// system; the directory is created), `s3://bucket[/prefix]`, or
    /// `mem://[prefix]` (in memory, for tests).
    pub url: String,
    /// The S3 endpoint, e.g. `http://127.0.0.1:8333`; `None` is AWS itself.
    /// Plain `http://` is allowed when the endpoint says so.
    pub endpoint: Option<String>,
    /// The S3 region (`us-east-1` when not given).
    pub region: Option<String>,
    /// The S3 access key id (required for S3).
    pub access_key_id: Option<String>,
    /// The S3 secret access key (required for S3).
    pub secret_access_key: Option<String>,
    /// How many times a failed S3 request is retried.
    pub max_retries: usize,
    /// No retry starts after this long from a request's first attempt.
    pub retry_timeout: Duration,
    /// One S3 request's timeout (a 5 MiB part must fit in it).
    pub request_timeout: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: String::new(),
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl StoreConfig {
    /// A configuration for `url` with the default retries and no S3 details.
    pub fn new(url: impl Into<String>) -> Self {
        StoreConfig {
            url: url.into(),
            ..StoreConfig::default()
        }
    }
}

// By hand so the secret never reaches a log line.
impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("url", &self.url)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("max_retries", &self.max_retries)
            .field("retry_timeout", &self.retry_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

/// The client for a configuration, the key prefix inside it, and a
/// description for logs.
pub(crate) struct OpenedStore {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: String,
    pub(crate) description: String,
}

/// Installs ring's rustls `CryptoProvider` as the process default, which
/// the S3 client's TLS needs (object_store's reqwest is built with no
/// provider of its own). Idempotent: a provider already installed, ring's or
/// another, is kept.
pub fn install_crypto_provider() {
    // Err means a default is already installed; keeping it is the point.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Builds the client `cfg` names.
pub(crate) fn open_store(cfg: &StoreConfig) -> Result<OpenedStore, TieredError> {
    let url = cfg.url.trim();
    if let Some(rest) = url.strip_prefix("s3://") {
        return open_s3(cfg, rest);
    }
    if let Some(prefix) = url.strip_prefix("mem://") {
        return Ok(OpenedStore {
            store: Arc::new(InMemory::new()),
            prefix: prefix.trim_matches('/').to_string(),
            description: format!("mem://{}", prefix.trim_matches('/')),
        });
    }
    let dir = url.strip_prefix("file://").unwrap_or(url);
    if dir.starts_with('/') {
        return open_dir(dir);
    }
    Err(TieredError::Config(format!(
        "store URL {url:?} is none of an absolute directory, file:///dir, s3://bucket[/prefix] or mem://"
    )))
}

fn open_dir(dir: &str) -> Result<OpenedStore, TieredError> {
    std::fs::create_dir_all(dir)?;
    // Empty directories left by deleted segments are removed as they go.
    let store = LocalFileSystem::new_with_prefix(dir)?.with_automatic_cleanup(true);
    Ok(OpenedStore {
        store: Arc::new(store),
        prefix: String::new(),
        description: format!("file://{dir}"),
    })
}

fn open_s3(cfg: &StoreConfig, rest: &str) -> Result<OpenedStore, TieredError> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(TieredError::Config(format!(
            "store URL {:?} names no bucket",
            cfg.url
        )));
    }
    let (Some(key), Some(secret)) = (&cfg.access_key_id, &cfg.secret_access_key) else {
        return Err(TieredError::Config(
            "an S3 store needs an access key id and a secret access key".to_string(),
        ));
    };
    install_crypto_provider();
    let region = cfg
        .region
        .clone()
        .unwrap_or_else(|| "us-east-1".to_string());
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: cfg.max_retries,
        retry_timeout: cfg.retry_timeout,
    };
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(&region)
        .with_access_key_id(key)
        .with_secret_access_key(secret)
        .with_virtual_hosted_style_request(false)
        .with_retry(retry)
        .with_client_options(ClientOptions::new().with_timeout(cfg.request_timeout));
    let mut at = format!("AWS {region}");
    if let Some(endpoint) = &cfg.endpoint {
        let endpoint = endpoint.trim_end_matches('/');
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"));
        at = format!("{endpoint} ({region})");
    }
    let prefix = prefix.trim_matches('/').to_string();
    Ok(OpenedStore {
        store: Arc::new(builder.build()?),
        description: format!("s3://{bucket}/{prefix} at {at}"),
        prefix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_needs_explicit_credentials_and_a_bucket() {
        let mut cfg = StoreConfig::new("s3://tiered/cluster");
        cfg.endpoint = Some("http://127.0.0.1:1".to_string());
        assert!(matches!(open_store(&cfg), Err(TieredError::Config(_))));
        cfg.access_key_id = Some("k".to_string());
        cfg.secret_access_key = Some("s".to_string());
        let opened = open_store(&cfg).expect("builds without contacting the server");
        assert_eq!(opened.prefix, "cluster");
        assert_eq!(
            opened.description,
            "s3://tiered/cluster at http://127.0.0.1:1 (us-east-1)"
        );
        cfg.url = "s3:///x".to_string();
        assert!(matches!(open_store(&cfg), Err(TieredError::Config(_))));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let mut cfg = StoreConfig::new("s3://b");
        cfg.secret_access_key = Some("hunter2".to_string());
        assert!(!format!("{cfg:?}").contains("hunter2"));
    }

    #[test]
    fn relative_paths_are_refused() {
        assert!(matches!(
            open_store(&StoreConfig::new("data/tiered")),
            Err(TieredError::Config(_))
        ));
    }
}
