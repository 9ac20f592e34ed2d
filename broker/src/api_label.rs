//! Metric labels for Kafka API keys.

use kafka_protocol::messages::ApiKey;

/// Short, stable label for an API key.
pub fn api_name(api: ApiKey) -> &'static str {
    // `{:?}` of the generated enum is the Kafka name (Produce, Fetch, …).
    let s: &'static str = match api {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::DescribeLogDirs => "DescribeLogDirs",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
        ApiKey::ConsumerGroupDescribe => "ConsumerGroupDescribe",
        ApiKey::AlterPartitionReassignments => "AlterPartitionReassignments",
        ApiKey::ListPartitionReassignments => "ListPartitionReassignments",
        ApiKey::ElectLeaders => "ElectLeaders",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        ApiKey::DescribeClientQuotas => "DescribeClientQuotas",
        ApiKey::AlterClientQuotas => "AlterClientQuotas",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
        ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
        ApiKey::EndTxn => "EndTxn",
        ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
        ApiKey::WriteTxnMarkers => "WriteTxnMarkers",
        ApiKey::DescribeTransactions => "DescribeTransactions",
        ApiKey::ListTransactions => "ListTransactions",
        ApiKey::DescribeProducers => "DescribeProducers",
        ApiKey::DescribeTopicPartitions => "DescribeTopicPartitions",
        ApiKey::UpdateFeatures => "UpdateFeatures",
        ApiKey::GetTelemetrySubscriptions => "GetTelemetrySubscriptions",
        ApiKey::PushTelemetry => "PushTelemetry",
        ApiKey::ListConfigResources => "ListConfigResources",
        ApiKey::CreateDelegationToken => "CreateDelegationToken",
        ApiKey::RenewDelegationToken => "RenewDelegationToken",
        ApiKey::ExpireDelegationToken => "ExpireDelegationToken",
        ApiKey::DescribeDelegationToken => "DescribeDelegationToken",
        ApiKey::ShareGroupHeartbeat => "ShareGroupHeartbeat",
        ApiKey::ShareGroupDescribe => "ShareGroupDescribe",
        ApiKey::ShareFetch => "ShareFetch",
        ApiKey::ShareAcknowledge => "ShareAcknowledge",
        ApiKey::InitializeShareGroupState => "InitializeShareGroupState",
        ApiKey::ReadShareGroupState => "ReadShareGroupState",
        ApiKey::WriteShareGroupState => "WriteShareGroupState",
        ApiKey::DeleteShareGroupState => "DeleteShareGroupState",
        ApiKey::ReadShareGroupStateSummary => "ReadShareGroupStateSummary",
        ApiKey::DescribeShareGroupOffsets => "DescribeShareGroupOffsets",
        ApiKey::AlterShareGroupOffsets => "AlterShareGroupOffsets",
        ApiKey::DeleteShareGroupOffsets => "DeleteShareGroupOffsets",
        ApiKey::StreamsGroupHeartbeat => "StreamsGroupHeartbeat",
        ApiKey::StreamsGroupDescribe => "StreamsGroupDescribe",
        ApiKey::StreamsGroupTopologyDescriptionUpdate => "StreamsGroupTopologyDescriptionUpdate",
        // Not served (the connection is closed): one bounded label.
        _ => "Other",
    };
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_served_api_has_its_own_label() {
        for (api, _, _) in crate::handlers::SUPPORTED {
            assert_ne!(super::api_name(*api), "Other", "{api:?}");
        }
    }
}
