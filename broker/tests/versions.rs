//! Every API the broker advertises answers at every version it advertises.
//! The codec refuses to encode a response field the negotiated version lacks,
//! so a handler that sets one would close the client's connection: this test
//! walks the whole ApiVersions table to catch that.

mod common;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::records::Compression;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

async fn ok<R: Request>(c: &mut Client, req: &R, v: i16) -> R::Response {
    match c.call(req, v).await {
        Ok(r) => r,
        Err(e) => panic!("API key {} v{v}: no response ({e})", R::KEY),
    }
}

#[tokio::test]
async fn every_advertised_version_of_every_api_answers() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let versions = ok(&mut c, &api_versions_request(), 3).await;
    let range = |k: ApiKey| {
        let a = versions
            .api_keys
            .iter()
            .find(|a| a.api_key == k as i16)
            .unwrap_or_else(|| panic!("{k:?} not advertised"));
        a.min_version..=a.max_version
    };
    create_topic(&mut c, "vt", 2).await;
    let meta = {
        let mut t = metadata_request::MetadataRequestTopic::default();
        t.name = Some(topic_name("vt"));
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![t]);
        ok(&mut c, &req, 12).await
    };
    let topic_id = meta.topics[0].topic_id;
    assert!(!topic_id.is_nil());
    let mut checked = 0;

    for v in range(ApiKey::ApiVersions) {
        let r = ok(&mut c, &api_versions_request(), v).await;
        assert_eq!(r.error_code, 0, "ApiVersions v{v}");
        checked += 1;
    }
    for v in range(ApiKey::Metadata) {
        let mut t = metadata_request::MetadataRequestTopic::default();
        t.name = Some(topic_name("vt"));
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![t]);
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.topics[0].error_code, 0, "Metadata v{v}");
        assert_eq!(r.topics[0].partitions.len(), 2, "Metadata v{v}");
        checked += 1;
    }
    for v in range(ApiKey::Produce) {
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(batch(2, Compression::None));
        let mut td = produce_request::TopicProduceData::default();
        if v >= 13 {
            td.topic_id = topic_id;
        } else {
            td.name = topic_name("vt");
        }
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = 1;
        req.timeout_ms = 1000;
        req.topic_data = vec![td];
        let r = ok(&mut c, &req, v).await;
        assert_eq!(
            r.responses[0].partition_responses[0].error_code, 0,
            "Produce v{v}"
        );
        checked += 1;
    }
    for v in range(ApiKey::Fetch) {
        let mut fp = fetch_request::FetchPartition::default();
        fp.partition = 0;
        fp.partition_max_bytes = 1 << 20;
        if v >= 9 {
            fp.current_leader_epoch = -1;
        }
        if v >= 12 {
            fp.last_fetched_epoch = -1;
        }
        if v >= 5 {
            fp.log_start_offset = -1;
        }
        let mut ft = fetch_request::FetchTopic::default();
        if v >= 13 {
            ft.topic_id = topic_id;
        } else {
            ft.topic = topic_name("vt");
        }
        ft.partitions = vec![fp];
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_bytes = 1 << 20;
        req.topics = vec![ft];
        if v >= 7 {
            req.session_epoch = -1;
        }
        let r = ok(&mut c, &req, v).await;
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "Fetch v{v}");
        assert!(!p.records.as_ref().unwrap().is_empty(), "Fetch v{v}");
        checked += 1;
    }
    for v in range(ApiKey::ListOffsets) {
        let mut p = list_offsets_request::ListOffsetsPartition::default();
        p.partition_index = 0;
        p.timestamp = -1;
        let mut t = list_offsets_request::ListOffsetsTopic::default();
        t.name = topic_name("vt");
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = vec![t];
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0, "ListOffsets v{v}");
        assert!(r.topics[0].partitions[0].offset > 0, "ListOffsets v{v}");
        checked += 1;
    }
    for v in range(ApiKey::CreateTopics) {
        let mut t = create_topics_request::CreatableTopic::default();
        t.name = topic_name(&format!("ct{v}"));
        t.num_partitions = 1;
        t.replication_factor = 1;
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.topics[0].error_code, 0, "CreateTopics v{v}");
        checked += 1;
    }
    for v in range(ApiKey::CreatePartitions) {
        let mut t = create_partitions_request::CreatePartitionsTopic::default();
        t.name = topic_name(&format!("ct{}", 2 + v));
        t.count = 2;
        let mut req = CreatePartitionsRequest::default();
        req.topics = vec![t];
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.results[0].error_code, 0, "CreatePartitions v{v}");
        checked += 1;
    }
    for v in range(ApiKey::DescribeConfigs) {
        let mut res = describe_configs_request::DescribeConfigsResource::default();
        res.resource_type = 2;
        res.resource_name = s("vt");
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![res];
        req.include_synonyms = v >= 1;
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.results[0].error_code, 0, "DescribeConfigs v{v}");
        assert!(r.results[0]
            .configs
            .iter()
            .any(|c| c.name.as_str() == "retention.ms"));
        checked += 1;
    }
    for v in range(ApiKey::AlterConfigs) {
        let mut cfg = alter_configs_request::AlterableConfig::default();
        cfg.name = s("retention.ms");
        cfg.value = Some(s("3600000"));
        let mut res = alter_configs_request::AlterConfigsResource::default();
        res.resource_type = 2;
        res.resource_name = s("vt");
        res.configs = vec![cfg];
        let mut req = AlterConfigsRequest::default();
        req.resources = vec![res];
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.responses[0].error_code, 0, "AlterConfigs v{v}");
        checked += 1;
    }
    for v in range(ApiKey::IncrementalAlterConfigs) {
        let mut cfg = incremental_alter_configs_request::AlterableConfig::default();
        cfg.name = s("retention.bytes");
        cfg.config_operation = 0;
        cfg.value = Some(s("1000000"));
        let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
        res.resource_type = 2;
        res.resource_name = s("vt");
        res.configs = vec![cfg];
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = vec![res];
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.responses[0].error_code, 0, "IncrementalAlterConfigs v{v}");
        checked += 1;
    }
    for v in range(ApiKey::DescribeCluster) {
        let r = ok(&mut c, &DescribeClusterRequest::default(), v).await;
        assert_eq!(r.brokers.len(), 1, "DescribeCluster v{v}");
        checked += 1;
    }
    for v in range(ApiKey::DescribeLogDirs) {
        let mut req = DescribeLogDirsRequest::default();
        req.topics = None; // null: every topic (an empty list means none)
        let r = ok(&mut c, &req, v).await;
        assert!(
            r.results[0]
                .topics
                .iter()
                .any(|t| t.name.0.as_str() == "vt"),
            "DescribeLogDirs v{v}"
        );
        checked += 1;
    }
    // A group that does not exist: GROUP_ID_NOT_FOUND, and from v3 (Kafka
    // 4.4) the reason beside it.
    for v in range(ApiKey::DeleteGroups) {
        let mut req = DeleteGroupsRequest::default();
        req.groups_names = vec![GroupId(s("no-such-group"))];
        let r = ok(&mut c, &req, v).await;
        let g = &r.results[0];
        assert_eq!(g.error_code, 69, "DeleteGroups v{v}");
        assert_eq!(
            g.error_message.is_some(),
            v >= 3,
            "DeleteGroups v{v}: {:?}",
            g.error_message
        );
        checked += 1;
    }
    for v in range(ApiKey::InitProducerId) {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.transaction_timeout_ms = 1000;
        if v >= 3 {
            req.producer_id = ProducerId(-1);
            req.producer_epoch = -1;
        }
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.error_code, 0, "InitProducerId v{v}");
        checked += 1;
    }
    for v in range(ApiKey::DeleteRecords) {
        let mut p = delete_records_request::DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = 1 + v as i64;
        let mut t = delete_records_request::DeleteRecordsTopic::default();
        t.name = topic_name("vt");
        t.partitions = vec![p];
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![t];
        let r = ok(&mut c, &req, v).await;
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.low_watermark),
            (0, 1 + v as i64),
            "DeleteRecords v{v}"
        );
        checked += 1;
    }
    for v in range(ApiKey::DeleteTopics) {
        let name = format!("ct{}", 1 + v);
        let mut req = DeleteTopicsRequest::default();
        if v >= 6 {
            let mut t = delete_topics_request::DeleteTopicState::default();
            t.name = Some(topic_name(&name));
            req.topics = vec![t];
        } else {
            req.topic_names = vec![topic_name(&name)];
        }
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.responses[0].error_code, 0, "DeleteTopics v{v} ({name})");
        checked += 1;
    }
    for v in range(ApiKey::ListPartitionReassignments) {
        let r = ok(&mut c, &ListPartitionReassignmentsRequest::default(), v).await;
        assert_eq!(r.error_code, 0, "ListPartitionReassignments v{v}");
        assert!(r.topics.is_empty(), "nothing is being moved");
        checked += 1;
    }
    for v in range(ApiKey::AlterPartitionReassignments) {
        // cancelling when nothing runs: a partition-level error, never a closed connection
        let mut p = alter_partition_reassignments_request::ReassignablePartition::default();
        p.partition_index = 0;
        p.replicas = None;
        let mut t = alter_partition_reassignments_request::ReassignableTopic::default();
        t.name = topic_name("vt");
        t.partitions = vec![p];
        let mut req = AlterPartitionReassignmentsRequest::default();
        req.topics = vec![t];
        let r = ok(&mut c, &req, v).await;
        assert_eq!(r.error_code, 0, "AlterPartitionReassignments v{v}");
        assert_eq!(
            r.responses[0].partitions[0].error_code,
            kafka_protocol::error::ResponseError::NoReassignmentInProgress.code(),
            "AlterPartitionReassignments v{v}"
        );
        checked += 1;
    }
    assert!(checked > 80, "only {checked} API versions checked");
    b.stop().await;
}
