//! Request handlers, one file per Kafka API, and the table of API versions
//! this broker supports (what ApiVersions advertises).

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;

pub mod acls;
pub mod admin;
pub mod api_versions;
pub mod broker_configs;
pub mod broker_loggers;
pub mod configs;
pub mod consumer_group;
pub mod delegation_tokens;
pub mod delete_records;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod features;
pub mod fetch;
pub mod groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod offsets;
pub mod produce;
pub mod quotas;
pub mod resource_configs;
pub mod scram;
pub mod share_fetch;
pub mod share_group;
pub mod share_offsets;
pub mod share_state;
pub mod streams_group;
pub mod telemetry;
pub mod txn;

/// APIs and the version ranges we implement. Versions are capped where a
/// newer version would change semantics we do not implement yet.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    // v18 (KIP-1166) adds a follower's high watermark, which Skein's followers
    // (its own replication) never send: for a consumer it is v17.
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 11),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 5),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    // v5 (KIP-1066): `is_cordoned`, always false (no cordoned log dirs).
    (ApiKey::DescribeLogDirs, 1, 5),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 10),
    (ApiKey::OffsetFetch, 1, 10),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 3),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::ElectLeaders, 0, 2),
    // v5 (and EndTxn, TxnOffsetCommit v5): transaction version 2, which
    // clients use once `transaction.version` is finalized at 2.
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::TxnOffsetCommit, 0, 6),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    // v0: the tokens follow as bare frames (before KIP-152); librdkafka
    // looks for v0 to know the broker speaks SASL at all.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::CreateDelegationToken, 1, 3),
    (ApiKey::RenewDelegationToken, 1, 2),
    (ApiKey::ExpireDelegationToken, 1, 2),
    (ApiKey::DescribeDelegationToken, 1, 3),
    // KIP-714 client telemetry, exported on the broker's /metrics.
    (ApiKey::GetTelemetrySubscriptions, 0, 0),
    (ApiKey::PushTelemetry, 0, 0),
    // v0 was ListClientMetricsResources; v1 lists every type (KIP-1142).
    (ApiKey::ListConfigResources, 0, 1),
    // KIP-932 share groups (answered UNSUPPORTED_VERSION while
    // `share.version` is 0, as Kafka does; advertised regardless).
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 2),
    (ApiKey::ShareAcknowledge, 1, 2),
    (ApiKey::InitializeShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupState, 0, 0),
    (ApiKey::WriteShareGroupState, 0, 1),
    (ApiKey::DeleteShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupStateSummary, 0, 1),
    (ApiKey::DescribeShareGroupOffsets, 0, 1),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
    // KIP-1071 streams groups (answered UNSUPPORTED_VERSION while
    // `streams.version` is 0, as Kafka does; advertised regardless).
    (ApiKey::StreamsGroupHeartbeat, 0, 1),
    (ApiKey::StreamsGroupDescribe, 0, 1),
    (ApiKey::StreamsGroupTopologyDescriptionUpdate, 0, 0),
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
    session: &mut crate::sasl::Session,
) -> Option<ResponseKind> {
    let principal = session.principal().clone();
    crate::request_context::PRINCIPAL
        .scope(principal, dispatch(broker, header, request, session))
        .await
}

async fn dispatch(
    broker: &Arc<Broker>,
    header: &RequestHeader,
    request: RequestKind,
    session: &mut crate::sasl::Session,
) -> Option<ResponseKind> {
    let v = header.request_api_version;
    Some(match request {
        RequestKind::SaslHandshake(r) => ResponseKind::SaslHandshake(session.handshake(r, v)),
        RequestKind::SaslAuthenticate(r) => {
            ResponseKind::SaslAuthenticate(session.authenticate(broker, r))
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            ResponseKind::DescribeUserScramCredentials(scram::describe(broker, r))
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(quotas::describe(broker, r))
        }
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(quotas::alter(broker, r))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(scram::alter(broker, r))
        }
        RequestKind::CreateDelegationToken(r) => {
            ResponseKind::CreateDelegationToken(delegation_tokens::create(broker, session, r, v))
        }
        RequestKind::RenewDelegationToken(r) => {
            ResponseKind::RenewDelegationToken(delegation_tokens::renew(broker, session, r))
        }
        RequestKind::ExpireDelegationToken(r) => {
            ResponseKind::ExpireDelegationToken(delegation_tokens::expire(broker, session, r))
        }
        RequestKind::DescribeDelegationToken(r) => ResponseKind::DescribeDelegationToken(
            delegation_tokens::describe(broker, session, r, v),
        ),
        RequestKind::GetTelemetrySubscriptions(r) => ResponseKind::GetTelemetrySubscriptions(
            telemetry::get_subscriptions(broker, header, session, r),
        ),
        RequestKind::PushTelemetry(r) => {
            ResponseKind::PushTelemetry(telemetry::push(broker, header, session, r))
        }
        RequestKind::ListConfigResources(r) => {
            ResponseKind::ListConfigResources(telemetry::list_config_resources(broker, r, v))
        }
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(acls::create(broker, r)),
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(acls::describe(broker, r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(acls::delete(broker, r)),
        RequestKind::ApiVersions(r) => {
            session.set_client_software(&r.client_software_name, &r.client_software_version);
            let cluster_id = broker.metadata.image().cluster_id.clone();
            let mut r = api_versions::answer(&r, v, &cluster_id, broker.config.node_id);
            if r.error_code == 0 {
                features::add_to_api_versions(broker, &mut r);
            }
            ResponseKind::ApiVersions(r)
        }
        RequestKind::UpdateFeatures(r) => {
            ResponseKind::UpdateFeatures(features::update(broker, r, v))
        }
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(broker, r, v)),
        RequestKind::Produce(r) => ResponseKind::Produce(produce::handle(broker, r, v).await),
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch::handle(broker, r, v).await),
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker, r, v).await)
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(admin::create_topics(broker, r, v))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(admin::delete_topics(broker, r, v))
        }
        RequestKind::AlterPartitionReassignments(r) => ResponseKind::AlterPartitionReassignments(
            admin::alter_partition_reassignments(broker, r),
        ),
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(broker, r))
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(admin::list_partition_reassignments(broker, r))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(admin::create_partitions(broker, r))
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(admin::describe_cluster(broker, r))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(admin::describe_log_dirs(broker, r, v))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(txn::init_producer_id(broker, r).await)
        }
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(txn::add_partitions_to_txn(broker, r, v).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(txn::add_offsets_to_txn(broker, r).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(txn::end_txn(broker, r, v).await),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(txn::txn_offset_commit(broker, r, v).await)
        }
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(txn::write_txn_markers(broker, r).await)
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(txn::describe_transactions(broker, r))
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(txn::list_transactions(broker, r))
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(txn::describe_producers(broker, r))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(broker, r))
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(broker, r))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(broker, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(configs::describe(broker, r))
        }
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(configs::alter(broker, r)),
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(configs::incremental_alter(broker, r))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(groups::find_coordinator(broker, r, v))
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(groups::join_group(broker, r, v, &client_id(header)).await)
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(groups::sync_group(broker, r, v).await)
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(broker, r)),
        RequestKind::LeaveGroup(r) => ResponseKind::LeaveGroup(groups::leave_group(broker, r, v)),
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offsets::offset_commit(broker, r, v).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offsets::offset_fetch(broker, r, v))
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(groups::describe_groups(broker, r, v))
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(groups::list_groups(broker, r, v)),
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(groups::delete_groups(broker, r).await)
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offsets::offset_delete(broker, r))
        }
        RequestKind::ConsumerGroupHeartbeat(r) => ResponseKind::ConsumerGroupHeartbeat(
            consumer_group::heartbeat(broker, r, &client_id(header)),
        ),
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(consumer_group::describe(broker, r, v))
        }
        RequestKind::StreamsGroupHeartbeat(r) => ResponseKind::StreamsGroupHeartbeat(
            streams_group::heartbeat(broker, r, &client_id(header)),
        ),
        RequestKind::StreamsGroupDescribe(r) => {
            ResponseKind::StreamsGroupDescribe(streams_group::describe(broker, r))
        }
        RequestKind::StreamsGroupTopologyDescriptionUpdate(r) => {
            ResponseKind::StreamsGroupTopologyDescriptionUpdate(
                streams_group::topology_description_update(broker, r),
            )
        }
        RequestKind::ShareGroupHeartbeat(r) => {
            ResponseKind::ShareGroupHeartbeat(share_group::heartbeat(broker, r, &client_id(header)))
        }
        RequestKind::ShareGroupDescribe(r) => {
            ResponseKind::ShareGroupDescribe(share_group::describe(broker, r))
        }
        RequestKind::ShareFetch(r) => {
            ResponseKind::ShareFetch(share_fetch::fetch(broker, r, v).await)
        }
        RequestKind::ShareAcknowledge(r) => {
            ResponseKind::ShareAcknowledge(share_fetch::acknowledge(broker, r, v).await)
        }
        RequestKind::InitializeShareGroupState(r) => {
            ResponseKind::InitializeShareGroupState(share_state::initialize(broker, r).await)
        }
        RequestKind::ReadShareGroupState(r) => {
            ResponseKind::ReadShareGroupState(share_state::read(broker, r).await)
        }
        RequestKind::WriteShareGroupState(r) => {
            ResponseKind::WriteShareGroupState(share_state::write(broker, r).await)
        }
        RequestKind::DeleteShareGroupState(r) => {
            ResponseKind::DeleteShareGroupState(share_state::delete(broker, r).await)
        }
        RequestKind::ReadShareGroupStateSummary(r) => {
            ResponseKind::ReadShareGroupStateSummary(share_state::summary(broker, r))
        }
        RequestKind::DescribeShareGroupOffsets(r) => {
            ResponseKind::DescribeShareGroupOffsets(share_offsets::describe(broker, r, v).await)
        }
        RequestKind::AlterShareGroupOffsets(r) => {
            ResponseKind::AlterShareGroupOffsets(share_offsets::alter(broker, r).await)
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            ResponseKind::DeleteShareGroupOffsets(share_offsets::delete(broker, r).await)
        }
        // The version table keeps every other API from reaching here.
        _ => unreachable!("dispatch of an API missing from SUPPORTED"),
    })
}

pub use crate::request_context::{client_host, listener_name, CLIENT_ADDR, LISTENER};

fn client_id(header: &RequestHeader) -> String {
    header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default()
}

/// `Some(StrBytes)` from a string, as the optional message fields want.
pub fn str_opt(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

/// A `StrBytes` from a string.
pub fn strb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
