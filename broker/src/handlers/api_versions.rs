//! ApiVersions: the APIs and version ranges this broker speaks.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsResponse, ResponseKind};

use super::SUPPORTED;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|(k, lo, hi)| {
            let mut v = ApiVersion::default();
            v.api_key = *k as i16;
            v.min_version = *lo;
            v.max_version = *hi;
            v
        })
        .collect()
}

/// The normal answer.
pub fn handle() -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.api_keys = api_keys();
    r
}

/// The answer to an ApiVersions version we do not know (sent as v0).
pub fn unsupported_version_response() -> ResponseKind {
    let mut r = handle();
    r.error_code = ResponseError::UnsupportedVersion.code();
    ResponseKind::ApiVersions(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn advertised_ranges_are_within_what_the_codec_knows() {
        for (k, lo, hi) in SUPPORTED {
            let valid = k.valid_versions();
            assert!(*lo >= valid.min && *hi <= valid.max, "{k:?}");
            assert!(lo <= hi);
        }
        assert!(handle()
            .api_keys
            .iter()
            .any(|a| a.api_key == ApiKey::Produce as i16));
    }
}
