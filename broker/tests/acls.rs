//! The authorizer on every API: for each (API, resource, operation) Kafka
//! checks, a DENY ACL makes the API answer Kafka's authorization error, and
//! once the ACL is deleted the same request passes the check. The denied
//! client connects from 127.0.0.2 and the ACLs name that host, so the
//! client managing them (from 127.0.0.1) is never refused; everything else
//! is allowed by `allow.everyone.if.no.acl.found`.

mod common;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpSocket;

const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const CLUSTER_DENIED: i16 = 31;
const SECURITY_DISABLED: i16 = 54;

// Kafka's codes: resource types, operations.
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const ALL: i8 = 2;
const READ: i8 = 3;
const WRITE: i8 = 4;
const CREATE: i8 = 5;
const DELETE: i8 = 6;
const ALTER: i8 = 7;
const DESCRIBE: i8 = 8;
const CLUSTER_ACTION: i8 = 9;
const DESCRIBE_CONFIGS: i8 = 10;
const ALTER_CONFIGS: i8 = 11;
const IDEMPOTENT_WRITE: i8 = 12;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A connection from 127.0.0.2 (the host the DENY ACLs name).
async fn connect_from_other_host(addr: std::net::SocketAddr) -> Client {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut c = Client::connect(addr).await;
    c.stream = socket.connect(addr).await.unwrap();
    c
}

/// A DENY for everyone on 127.0.0.2 (`User:*`, literal name).
fn deny(resource_type: i8, name: &str, operation: i8) -> create_acls_request::AclCreation {
    let mut a = create_acls_request::AclCreation::default();
    a.resource_type = resource_type;
    a.resource_name = s(name);
    a.resource_pattern_type = 3;
    a.principal = s("User:*");
    a.host = s("127.0.0.2");
    a.operation = operation;
    a.permission_type = 2;
    a
}

async fn create_acls(c: &mut Client, acls: Vec<create_acls_request::AclCreation>) -> Vec<i16> {
    let mut r = CreateAclsRequest::default();
    r.creations = acls;
    let resp = c.call(&r, 3).await.unwrap();
    resp.results.iter().map(|r| r.error_code).collect()
}

async fn delete_acls(c: &mut Client, acls: &[create_acls_request::AclCreation]) {
    let mut r = DeleteAclsRequest::default();
    r.filters = acls
        .iter()
        .map(|a| {
            let mut f = delete_acls_request::DeleteAclsFilter::default();
            f.resource_type_filter = a.resource_type;
            f.resource_name_filter = Some(a.resource_name.clone());
            f.pattern_type_filter = 3;
            f.principal_filter = Some(a.principal.clone());
            f.host_filter = Some(a.host.clone());
            f.operation = a.operation;
            f.permission_type = 2;
            f
        })
        .collect();
    let resp = c.call(&r, 3).await.unwrap();
    for f in &resp.filter_results {
        assert_eq!((f.error_code, f.matching_acls.len()), (0, 1), "{f:?}");
    }
}

/// DescribeAcls of every binding (ANY everywhere, no name, principal or host).
fn describe_all() -> DescribeAclsRequest {
    let mut r = DescribeAclsRequest::default();
    (r.resource_type_filter, r.pattern_type_filter) = (1, 1);
    (r.operation, r.permission_type) = (1, 1);
    (r.resource_name_filter, r.principal_filter, r.host_filter) = (None, None, None);
    r
}

/// The APIs under test; each call returns the error code that matters.
#[derive(Debug, Clone, Copy)]
enum Api {
    Produce,
    Fetch,
    ListOffsets,
    MetadataByName,
    OffsetForLeaderEpoch,
    OffsetCommitGroup,
    OffsetCommitTopic,
    OffsetFetch,
    FindCoordinator,
    JoinGroup,
    DescribeGroups,
    DeleteGroups,
    OffsetDelete,
    CreateTopics,
    DeleteTopics,
    CreatePartitions,
    DeleteRecords,
    DescribeTopicConfigs,
    DescribeBrokerConfigs,
    AlterTopicConfigs,
    InitProducerId,
    ElectLeaders,
    AlterReassignments,
    ListReassignments,
    DescribeLogDirs,
    DescribeScram,
    AlterScram,
    DescribeQuotas,
    AlterQuotas,
    DescribeAcls,
    CreateAcls,
}

async fn call(api: Api, c: &mut Client) -> i16 {
    match api {
        Api::Produce => produce(c, "t", 0, named_batch("v", 1)).await.error_code,
        Api::Fetch => fetch(c, "t", 0, 0, 0, 0).await.error_code,
        Api::ListOffsets => {
            let mut p = list_offsets_request::ListOffsetsPartition::default();
            p.timestamp = -1;
            p.current_leader_epoch = -1;
            let mut t = list_offsets_request::ListOffsetsTopic::default();
            t.name = topic_name("t");
            t.partitions = vec![p];
            let mut r = ListOffsetsRequest::default();
            r.replica_id = BrokerId(-1);
            r.topics = vec![t];
            c.call(&r, 7).await.unwrap().topics[0].partitions[0].error_code
        }
        Api::MetadataByName => {
            let mut t = metadata_request::MetadataRequestTopic::default();
            t.name = Some(topic_name("t"));
            let mut r = MetadataRequest::default();
            r.topics = Some(vec![t]);
            c.call(&r, 12).await.unwrap().topics[0].error_code
        }
        Api::OffsetForLeaderEpoch => {
            let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
            p.current_leader_epoch = -1;
            p.leader_epoch = 0;
            let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
            t.topic = topic_name("t");
            t.partitions = vec![p];
            let mut r = OffsetForLeaderEpochRequest::default();
            r.replica_id = BrokerId(-1);
            r.topics = vec![t];
            c.call(&r, 4).await.unwrap().topics[0].partitions[0].error_code
        }
        Api::OffsetCommitGroup | Api::OffsetCommitTopic => {
            let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
            p.committed_offset = 1;
            p.committed_leader_epoch = -1;
            let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
            t.name = topic_name("t");
            t.partitions = vec![p];
            let mut r = OffsetCommitRequest::default();
            r.group_id = GroupId(s("g"));
            r.generation_id_or_member_epoch = -1;
            r.topics = vec![t];
            c.call(&r, 8).await.unwrap().topics[0].partitions[0].error_code
        }
        Api::OffsetFetch => {
            let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
            g.group_id = GroupId(s("g"));
            g.topics = None;
            let mut r = OffsetFetchRequest::default();
            r.groups = vec![g];
            c.call(&r, 8).await.unwrap().groups[0].error_code
        }
        Api::FindCoordinator => {
            let mut r = FindCoordinatorRequest::default();
            r.coordinator_keys = vec![s("g")];
            c.call(&r, 4).await.unwrap().coordinators[0].error_code
        }
        Api::JoinGroup => {
            let mut p = join_group_request::JoinGroupRequestProtocol::default();
            p.name = s("range");
            p.metadata = Bytes::from_static(&[0, 0, 0, 0, 0, 0]);
            let mut r = JoinGroupRequest::default();
            r.group_id = GroupId(s("joiners"));
            r.session_timeout_ms = 10_000;
            r.rebalance_timeout_ms = 10_000;
            r.protocol_type = s("consumer");
            r.protocols = vec![p];
            // v5: a first join without a member id is told MEMBER_ID_REQUIRED.
            c.call(&r, 5).await.unwrap().error_code
        }
        Api::DescribeGroups => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![GroupId(s("g"))];
            c.call(&r, 5).await.unwrap().groups[0].error_code
        }
        Api::DeleteGroups => {
            let mut r = DeleteGroupsRequest::default();
            r.groups_names = vec![GroupId(s("doomed"))];
            c.call(&r, 2).await.unwrap().results[0].error_code
        }
        Api::OffsetDelete => {
            let mut p = offset_delete_request::OffsetDeleteRequestPartition::default();
            p.partition_index = 0;
            let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
            t.name = topic_name("t");
            t.partitions = vec![p];
            let mut r = OffsetDeleteRequest::default();
            r.group_id = GroupId(s("g"));
            r.topics = vec![t];
            c.call(&r, 0).await.unwrap().error_code
        }
        Api::CreateTopics => create_topic(c, "made", 1).await.topics[0].error_code,
        Api::DeleteTopics => {
            let mut r = DeleteTopicsRequest::default();
            r.topic_names = vec![topic_name("gone")];
            r.timeout_ms = 5000;
            c.call(&r, 5).await.unwrap().responses[0].error_code
        }
        Api::CreatePartitions => {
            let mut t = create_partitions_request::CreatePartitionsTopic::default();
            t.name = topic_name("t");
            t.count = 2;
            let mut r = CreatePartitionsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = 5000;
            c.call(&r, 3).await.unwrap().results[0].error_code
        }
        Api::DeleteRecords => {
            let mut p = delete_records_request::DeleteRecordsPartition::default();
            p.offset = 0;
            let mut t = delete_records_request::DeleteRecordsTopic::default();
            t.name = topic_name("t");
            t.partitions = vec![p];
            let mut r = DeleteRecordsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = 5000;
            c.call(&r, 2).await.unwrap().topics[0].partitions[0].error_code
        }
        Api::DescribeTopicConfigs | Api::DescribeBrokerConfigs => {
            let mut res = describe_configs_request::DescribeConfigsResource::default();
            (res.resource_type, res.resource_name) = match api {
                Api::DescribeTopicConfigs => (2, s("t")),
                _ => (4, s("1")),
            };
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![res];
            c.call(&r, 4).await.unwrap().results[0].error_code
        }
        Api::AlterTopicConfigs => {
            let mut cfg = incremental_alter_configs_request::AlterableConfig::default();
            cfg.name = s("retention.ms");
            cfg.config_operation = 0;
            cfg.value = Some(s("3600000"));
            let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = s("t");
            res.configs = vec![cfg];
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = vec![res];
            c.call(&r, 1).await.unwrap().responses[0].error_code
        }
        Api::InitProducerId => {
            let mut r = InitProducerIdRequest::default();
            r.transactional_id = None;
            r.transaction_timeout_ms = 60_000;
            r.producer_id = ProducerId(-1);
            r.producer_epoch = -1;
            c.call(&r, 4).await.unwrap().error_code
        }
        Api::ElectLeaders => {
            let mut r = ElectLeadersRequest::default();
            r.topic_partitions = None;
            r.timeout_ms = 5000;
            c.call(&r, 2).await.unwrap().error_code
        }
        Api::AlterReassignments => {
            let mut r = AlterPartitionReassignmentsRequest::default();
            r.timeout_ms = 5000;
            c.call(&r, 0).await.unwrap().error_code
        }
        Api::ListReassignments => {
            let mut r = ListPartitionReassignmentsRequest::default();
            r.timeout_ms = 5000;
            c.call(&r, 0).await.unwrap().error_code
        }
        Api::DescribeLogDirs => {
            let r = DescribeLogDirsRequest::default();
            c.call(&r, 4).await.unwrap().error_code
        }
        Api::DescribeScram => {
            let r = DescribeUserScramCredentialsRequest::default();
            c.call(&r, 0).await.unwrap().error_code
        }
        Api::AlterScram => {
            let mut d = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            d.name = s("nobody");
            d.mechanism = 1;
            let mut r = AlterUserScramCredentialsRequest::default();
            r.deletions = vec![d];
            c.call(&r, 0).await.unwrap().results[0].error_code
        }
        Api::DescribeQuotas => {
            let r = DescribeClientQuotasRequest::default();
            c.call(&r, 1).await.unwrap().error_code
        }
        Api::AlterQuotas => {
            let mut e = alter_client_quotas_request::EntityData::default();
            e.entity_type = s("client-id");
            e.entity_name = Some(s("someone"));
            let mut op = alter_client_quotas_request::OpData::default();
            op.key = s("producer_byte_rate");
            op.value = 1_000_000.0;
            let mut entry = alter_client_quotas_request::EntryData::default();
            entry.entity = vec![e];
            entry.ops = vec![op];
            let mut r = AlterClientQuotasRequest::default();
            r.entries = vec![entry];
            r.validate_only = true;
            c.call(&r, 1).await.unwrap().entries[0].error_code
        }
        Api::DescribeAcls => c.call(&describe_all(), 3).await.unwrap().error_code,
        Api::CreateAcls => {
            let mut a = deny(TOPIC, "unused", READ);
            a.host = s("10.9.9.9");
            create_acls(c, vec![a]).await[0]
        }
    }
}

/// An API, the DENY ACLs (resource type, name, operation) that refuse it,
/// and the error it then answers.
type Case = (Api, Vec<(i8, &'static str, i8)>, i16);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_refuses_what_an_acl_denies_and_allows_it_again() {
    let b = TestBroker::start(&[
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=true",
        "group.initial.rebalance.delay.ms=0",
        "offsets.topic.num.partitions=1",
    ])
    .await;
    let mut admin = b.client().await;
    for t in ["t", "gone"] {
        assert_eq!(create_topic(&mut admin, t, 1).await.topics[0].error_code, 0);
    }
    assert_eq!(
        produce(&mut admin, "t", 0, named_batch("v", 3))
            .await
            .error_code,
        0
    );
    let mut victim = connect_from_other_host(b.addr).await;
    // Once the cluster has an ACL, allow.everyone.if.no.acl.found no longer
    // covers it (Kafka's rule): everyone may do anything on it, and the
    // DENYs below win over this ALLOW.
    let mut everyone = deny(CLUSTER, "kafka-cluster", ALL);
    (everyone.host, everyone.permission_type) = (s("*"), 3);
    assert_eq!(create_acls(&mut admin, vec![everyone]).await, vec![0]);

    // (API, the DENY ACLs that refuse it, the error it then answers).
    let cases: Vec<Case> = vec![
        (Api::Produce, vec![(TOPIC, "t", WRITE)], TOPIC_DENIED),
        (Api::Fetch, vec![(TOPIC, "t", READ)], TOPIC_DENIED),
        (Api::ListOffsets, vec![(TOPIC, "t", DESCRIBE)], TOPIC_DENIED),
        (
            Api::MetadataByName,
            vec![(TOPIC, "t", DESCRIBE)],
            TOPIC_DENIED,
        ),
        (
            Api::OffsetForLeaderEpoch,
            vec![
                (TOPIC, "t", DESCRIBE),
                (CLUSTER, "kafka-cluster", CLUSTER_ACTION),
            ],
            TOPIC_DENIED,
        ),
        (
            Api::OffsetCommitGroup,
            vec![(GROUP, "g", READ)],
            GROUP_DENIED,
        ),
        (
            Api::OffsetCommitTopic,
            vec![(TOPIC, "t", READ)],
            TOPIC_DENIED,
        ),
        (Api::OffsetFetch, vec![(GROUP, "g", DESCRIBE)], GROUP_DENIED),
        (
            Api::FindCoordinator,
            vec![(GROUP, "g", DESCRIBE)],
            GROUP_DENIED,
        ),
        (Api::JoinGroup, vec![(GROUP, "joiners", READ)], GROUP_DENIED),
        (
            Api::DescribeGroups,
            vec![(GROUP, "g", DESCRIBE)],
            GROUP_DENIED,
        ),
        (
            Api::DeleteGroups,
            vec![(GROUP, "doomed", DELETE)],
            GROUP_DENIED,
        ),
        (Api::OffsetDelete, vec![(GROUP, "g", DELETE)], GROUP_DENIED),
        // Create and Delete on the cluster cover every topic: both refused.
        (
            Api::CreateTopics,
            vec![(TOPIC, "made", CREATE), (CLUSTER, "kafka-cluster", CREATE)],
            TOPIC_DENIED,
        ),
        (
            Api::DeleteTopics,
            vec![(TOPIC, "gone", DELETE), (CLUSTER, "kafka-cluster", DELETE)],
            TOPIC_DENIED,
        ),
        (
            Api::CreatePartitions,
            vec![(TOPIC, "t", ALTER)],
            TOPIC_DENIED,
        ),
        (Api::DeleteRecords, vec![(TOPIC, "t", DELETE)], TOPIC_DENIED),
        (
            Api::DescribeTopicConfigs,
            vec![(TOPIC, "t", DESCRIBE_CONFIGS)],
            TOPIC_DENIED,
        ),
        (
            Api::DescribeBrokerConfigs,
            vec![(CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS)],
            CLUSTER_DENIED,
        ),
        (
            Api::AlterTopicConfigs,
            vec![(TOPIC, "t", ALTER_CONFIGS)],
            TOPIC_DENIED,
        ),
        // KIP-679: IdempotentWrite on the cluster, or Write on some topic.
        (
            Api::InitProducerId,
            vec![
                (CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE),
                (TOPIC, "*", WRITE),
            ],
            CLUSTER_DENIED,
        ),
        (
            Api::ElectLeaders,
            vec![(CLUSTER, "kafka-cluster", ALTER)],
            CLUSTER_DENIED,
        ),
        (
            Api::AlterReassignments,
            vec![(CLUSTER, "kafka-cluster", ALTER)],
            CLUSTER_DENIED,
        ),
        (
            Api::ListReassignments,
            vec![(CLUSTER, "kafka-cluster", DESCRIBE)],
            CLUSTER_DENIED,
        ),
        (
            Api::DescribeLogDirs,
            vec![(CLUSTER, "kafka-cluster", DESCRIBE)],
            CLUSTER_DENIED,
        ),
        (
            Api::DescribeScram,
            vec![(CLUSTER, "kafka-cluster", DESCRIBE)],
            CLUSTER_DENIED,
        ),
        (
            Api::AlterScram,
            vec![(CLUSTER, "kafka-cluster", ALTER)],
            CLUSTER_DENIED,
        ),
        (
            Api::DescribeQuotas,
            vec![(CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS)],
            CLUSTER_DENIED,
        ),
        (
            Api::AlterQuotas,
            vec![(CLUSTER, "kafka-cluster", ALTER_CONFIGS)],
            CLUSTER_DENIED,
        ),
        (
            Api::DescribeAcls,
            vec![(CLUSTER, "kafka-cluster", DESCRIBE)],
            CLUSTER_DENIED,
        ),
        (
            Api::CreateAcls,
            vec![(CLUSTER, "kafka-cluster", ALL)],
            CLUSTER_DENIED,
        ),
    ];
    for (api, denies, refused) in cases {
        let acls: Vec<_> = denies.iter().map(|(t, n, o)| deny(*t, n, *o)).collect();
        assert_eq!(
            create_acls(&mut admin, acls.clone()).await,
            vec![0; acls.len()]
        );
        assert_eq!(
            call(api, &mut victim).await,
            refused,
            "{api:?} with {denies:?}"
        );
        delete_acls(&mut admin, &acls).await;
        let code = call(api, &mut victim).await;
        assert!(
            ![TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED].contains(&code),
            "{api:?} still refused ({code}) once the ACL is gone"
        );
    }
    // From 127.0.0.1 nothing was ever refused.
    assert_eq!(call(Api::Produce, &mut admin).await, 0);
    b.stop().await;
}

#[tokio::test]
async fn acl_apis_say_security_disabled_without_an_authorizer() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(call(Api::DescribeAcls, &mut c).await, SECURITY_DISABLED);
    assert_eq!(
        create_acls(&mut c, vec![deny(TOPIC, "t", READ)]).await,
        vec![SECURITY_DISABLED]
    );
    // Everything is allowed, and authorized operations say so.
    let mut r = MetadataRequest::default();
    r.topics = None;
    r.include_cluster_authorized_operations = true;
    let md = c.call(&r, 10).await.unwrap();
    assert_ne!(md.cluster_authorized_operations, i32::MIN);
    assert_ne!(md.cluster_authorized_operations & (1 << DESCRIBE), 0);
    b.stop().await;
}

#[tokio::test]
async fn invalid_bindings_are_refused_one_by_one() {
    let b = TestBroker::start(&[
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=true",
    ])
    .await;
    let mut c = b.client().await;
    let good = deny(TOPIC, "t", READ);
    let mut cluster = deny(CLUSTER, "my-cluster", ALTER);
    cluster.resource_name = s("my-cluster");
    let mut no_colon = deny(TOPIC, "t", WRITE);
    no_colon.principal = s("alice");
    let mut any_op = deny(TOPIC, "t", WRITE);
    any_op.operation = 1;
    assert_eq!(
        create_acls(&mut c, vec![good, cluster, no_colon, any_op]).await,
        vec![0, 42, 42, 42]
    );
    let resp = c.call(&describe_all(), 3).await.unwrap();
    assert_eq!(resp.error_code, 0, "{resp:?}");
    assert_eq!(
        resp.resources.len(),
        1,
        "only the valid binding was created"
    );
    assert_eq!(resp.resources[0].acls[0].operation, READ);
    b.stop().await;
}
