//! Request handlers, one file per Kafka API, and the table of API versions
//! this broker supports (what ApiVersions advertises).

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;

pub mod admin;
pub mod api_versions;
pub mod configs;
pub mod fetch;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;

/// APIs and the version ranges we implement. Versions are capped where a
/// newer version would change semantics we do not implement yet.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 17),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
];

/// The version range of `api`, or `None` if the broker does not implement it.
pub fn supported_versions(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == api)
        .map(|(_, lo, hi)| (*lo, *hi))
}

/// Runs the handler of a decoded request. `None`: no response (acks=0).
pub async fn handle(
    broker: &Arc<Broker>,
    header: &RequestHeader,
    request: RequestKind,
) -> Option<ResponseKind> {
    let v = header.request_api_version;
    Some(match request {
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions::handle()),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(broker, r, v)),
        RequestKind::Produce(r) => {
            return produce::handle(broker, r, v)
                .await
                .map(ResponseKind::Produce)
        }
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch::handle(broker, r, v).await),
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker, r, v))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(admin::create_topics(broker, r, v))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(admin::delete_topics(broker, r, v))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(admin::create_partitions(broker, r))
        }
        RequestKind::DescribeCluster(_) => {
            ResponseKind::DescribeCluster(admin::describe_cluster(broker))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(admin::describe_log_dirs(broker, r))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(admin::init_producer_id(broker, r))
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(broker, r))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(admin::delete_records(broker, r))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(configs::describe(broker, r))
        }
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(configs::alter(broker, r)),
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(configs::incremental_alter(broker, r))
        }
        // The version table keeps every other API from reaching here.
        _ => unreachable!("dispatch of an API missing from SUPPORTED"),
    })
}

/// `Some(StrBytes)` from a string, as the optional message fields want.
pub fn str_opt(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

/// A `StrBytes` from a string.
pub fn strb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
