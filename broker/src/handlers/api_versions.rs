//! ApiVersions: the APIs and version ranges this broker speaks.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};

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

/// KIP-511's pattern of a client's software name and version (v3+):
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.';
    match b {
        [] => false,
        [only] => edge(only),
        [first, middle @ .., last] => edge(first) && edge(last) && middle.iter().all(inner),
    }
}

fn error(e: ResponseError) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.error_code = e.code();
    r
}

/// The answer to `req` at `version`, as Kafka 4.4's: INVALID_REQUEST for a
/// software name or version outside KIP-511's pattern (v3+);
/// REBOOTSTRAP_REQUIRED (v5, KIP-1242) when the client names a cluster id
/// and node id that are not this broker's (it holds stale metadata);
/// otherwise every API.
pub fn answer(
    req: &ApiVersionsRequest,
    version: i16,
    cluster_id: &str,
    node_id: i32,
) -> ApiVersionsResponse {
    if version >= 3
        && !(valid_software_field(&req.client_software_name)
            && valid_software_field(&req.client_software_version))
    {
        return error(ResponseError::InvalidRequest);
    }
    if version >= 5 {
        if let Some(id) = &req.cluster_id {
            if id.as_str() != cluster_id || req.node_id != node_id {
                return error(ResponseError::RebootstrapRequired);
            }
        }
    }
    handle()
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

    #[test]
    fn software_names_follow_kip_511() {
        for ok in [
            "librdkafka",
            "2.6.0",
            "apache-kafka-java",
            "a",
            "1.0-rc.1",
            "kgo",
        ] {
            assert!(valid_software_field(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", "é", ".x", "x_y"] {
            assert!(!valid_software_field(bad), "{bad}");
        }
    }

    #[test]
    fn v5_asks_a_client_with_another_clusters_metadata_to_rebootstrap() {
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = "app".into();
        req.client_software_version = "1".into();
        assert_eq!(
            answer(&req, 5, "c1", 1).error_code,
            0,
            "no cluster id named"
        );
        req.cluster_id = Some("c1".into());
        req.node_id = 1;
        assert_eq!(answer(&req, 5, "c1", 1).error_code, 0);
        let rebootstrap = ResponseError::RebootstrapRequired.code();
        assert_eq!(answer(&req, 5, "c2", 1).error_code, rebootstrap);
        assert_eq!(answer(&req, 5, "c1", 2).error_code, rebootstrap);
        assert_eq!(
            answer(&req, 4, "c2", 2).error_code,
            0,
            "v4 has no such fields"
        );
        req.client_software_name = "bad name".into();
        let r = answer(&req, 3, "c1", 1);
        assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
        assert!(r.api_keys.is_empty());
    }
}
