//! Seed inputs, built with the same encoders real clients' requests match:
//! every supported API at every supported version, and whole conversations
//! (create a topic, produce, fetch, look up offsets; a consumer group's
//! join/sync/commit; admin calls). A target writes them into the directory
//! named by `SKEIN_FUZZ_SEEDS` when it starts (see `fuzz/run.sh`).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use kafka_protocol::records::{Compression, Record, TimestampType};

/// Writes `seeds` into `$SKEIN_FUZZ_SEEDS/<name>-<i>` when that is set.
pub fn write_if_asked(seeds: impl FnOnce() -> Vec<Vec<u8>>) {
    let Some(dir) = std::env::var_os("SKEIN_FUZZ_SEEDS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("seed dir");
    for (i, seed) in seeds().into_iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:04}")), seed).expect("write seed");
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

/// One size-prefixed request frame.
fn frame<R: Request>(req: &R, version: i16, correlation: i32) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation;
    header.client_id = Some(s("fuzz"));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .expect("encode header");
    req.encode(&mut body, version).expect("encode request");
    let mut out = Vec::with_capacity(body.len() + 4);
    out.put_i32(body.len() as i32);
    out.extend_from_slice(&body);
    out
}

/// `n` records with keys (or not), from producer `pid` (-1: none).
pub fn records(n: usize, keyed: bool, pid: i64, compression: Compression) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| {
            let mut headers = IndexMap::new();
            if i % 2 == 1 {
                headers.insert(s("h"), Some(Bytes::from_static(b"v")));
            }
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: pid,
                producer_epoch: if pid >= 0 { 0 } else { -1 },
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: if pid >= 0 { i as i32 } else { i as i32 - 1 },
                timestamp: 1_700_000_000_000 + i as i64,
                key: keyed.then(|| Bytes::from(format!("key-{}", i % 3))),
                value: Some(Bytes::from(format!("value-{i}"))),
                headers,
            }
        })
        .collect();
    Bytes::from(skein_storage::testing::encode(&records, compression))
}

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// Seeds of the `record_batch` target.
pub fn batches() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for c in CODECS {
        out.push(records(3, true, -1, c).to_vec());
        out.push(records(2, false, -1, c).to_vec());
        out.push(records(4, true, 7, c).to_vec());
    }
    // Two batches back to back, as a follower receives them.
    let mut two = records(2, true, -1, Compression::None).to_vec();
    two.extend_from_slice(&records(2, true, -1, Compression::Gzip));
    out.push(two);
    out
}

/// Seeds of the `log_recovery` target: real logs written by `Log`, with
/// their indexes, in the target's input format.
pub fn log_dirs() -> Vec<Vec<u8>> {
    use crate::log_recovery::{INDEX, SEGMENT};
    let mut out = Vec::new();
    for (segment_bytes, codec) in [
        (1 << 20, Compression::None),
        (300, Compression::None),
        (300, Compression::Zstd),
    ] {
        let tmp = tempfile::tempdir().expect("temp dir");
        let config = skein_storage::LogConfig {
            segment_bytes,
            index_interval_bytes: 64,
            ..skein_storage::LogConfig::default()
        };
        let now = 1_700_000_000_000;
        let mut log = skein_storage::Log::open(tmp.path(), config, now).expect("open");
        for i in 0..8 {
            let mut b = records(1 + i % 3, true, -1, codec).to_vec();
            log.append_as_leader(&mut b, 1 + i as i32 / 4, now + i as i64, skein_storage::AppendOrigin::Client)
                .expect("append");
            let _ = log.maybe_roll(now);
        }
        let bases = log.segment_base_offsets();
        log.close().expect("close");
        let mut input = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            if i > 0 {
                input.extend_from_slice(SEGMENT);
            }
            for (j, suffix) in ["log", "index", "timeindex"].iter().enumerate() {
                if j > 0 {
                    input.extend_from_slice(INDEX);
                }
                let path = tmp.path().join(format!("{base:020}.{suffix}"));
                input.extend_from_slice(&std::fs::read(path).unwrap_or_default());
            }
        }
        out.push(input);
    }
    out
}

macro_rules! defaults_at_every_version {
    ($out:ident, $( $req:ty ),* $(,)?) => {$(
        {
            let key = ApiKey::try_from(<$req as Request>::KEY).expect("known key");
            let (lo, hi) = skein_broker::handlers::supported_versions(key).expect("supported");
            for v in lo..=hi {
                $out.push(frame(&<$req>::default(), v, 1));
            }
        }
    )*};
}

/// Seeds of the `request` target.
pub fn requests() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    defaults_at_every_version!(
        out,
        ProduceRequest,
        FetchRequest,
        ListOffsetsRequest,
        MetadataRequest,
        ApiVersionsRequest,
        CreateTopicsRequest,
        DeleteTopicsRequest,
        CreatePartitionsRequest,
        DescribeConfigsRequest,
        AlterConfigsRequest,
        IncrementalAlterConfigsRequest,
        DescribeClusterRequest,
        DescribeLogDirsRequest,
        InitProducerIdRequest,
        DeleteRecordsRequest,
        OffsetForLeaderEpochRequest,
        FindCoordinatorRequest,
        JoinGroupRequest,
        SyncGroupRequest,
        HeartbeatRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
        DeleteGroupsRequest,
        OffsetDeleteRequest,
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupDescribeRequest,
        AlterPartitionReassignmentsRequest,
        ListPartitionReassignmentsRequest,
    );
    for c in CODECS {
        out.push(data_conversation(c, false));
    }
    out.push(data_conversation(Compression::Gzip, true));
    out.push(group_conversation());
    out.push(admin_conversation());
    out
}

fn create_topic(name: &str, partitions: i32, compact: bool) -> CreateTopicsRequest {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    if compact {
        let mut c = create_topics_request::CreatableTopicConfig::default();
        c.name = s("cleanup.policy");
        c.value = Some(s("compact"));
        t.configs.push(c);
    }
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 1000;
    req
}

/// Create a topic, produce (plain and idempotent), fetch, list offsets by
/// time, and ask for an epoch's end offset.
fn data_conversation(codec: Compression, compact: bool) -> Vec<u8> {
    let mut out = frame(&create_topic("t", 2, compact), 7, 1);
    let mut init = InitProducerIdRequest::default();
    init.transaction_timeout_ms = -1;
    out.extend(frame(&init, 4, 2));
    for (i, pid) in [(0, -1i64), (1, 0)] {
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = i;
        pd.records = Some(records(3, true, pid, codec));
        let mut td = produce_request::TopicProduceData::default();
        td.name = topic("t");
        td.partition_data.push(pd);
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 1000;
        req.topic_data.push(td);
        out.extend(frame(&req, 9, 3 + i));
    }
    let mut fp = fetch_request::FetchPartition::default();
    fp.partition = 0;
    fp.partition_max_bytes = 1 << 20;
    let mut ft = fetch_request::FetchTopic::default();
    ft.topic = topic("t");
    ft.partitions.push(fp);
    let mut fetch = FetchRequest::default();
    fetch.replica_id = BrokerId(-1);
    fetch.max_bytes = 1 << 20;
    fetch.topics.push(ft);
    out.extend(frame(&fetch, 12, 5));
    let mut lp = list_offsets_request::ListOffsetsPartition::default();
    lp.partition_index = 0;
    lp.timestamp = 1_700_000_000_001;
    let mut lt = list_offsets_request::ListOffsetsTopic::default();
    lt.name = topic("t");
    lt.partitions.push(lp);
    let mut lo = ListOffsetsRequest::default();
    lo.replica_id = BrokerId(-1);
    lo.topics.push(lt);
    out.extend(frame(&lo, 7, 6));
    let mut ep = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
    ep.leader_epoch = 0;
    let mut et = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
    et.topic = topic("t");
    et.partitions.push(ep);
    let mut ofle = OffsetForLeaderEpochRequest::default();
    ofle.topics.push(et);
    out.extend(frame(&ofle, 4, 7));
    out.extend(frame(&ofle, 2, 8));
    let mut dp = delete_records_request::DeleteRecordsPartition::default();
    dp.offset = 1;
    let mut dt = delete_records_request::DeleteRecordsTopic::default();
    dt.name = topic("t");
    dt.partitions.push(dp);
    let mut dr = DeleteRecordsRequest::default();
    dr.topics.push(dt);
    out.extend(frame(&dr, 2, 9));
    out
}

/// One member joins, syncs, commits, fetches offsets, heartbeats, leaves.
fn group_conversation() -> Vec<u8> {
    let mut fc = FindCoordinatorRequest::default();
    fc.key = s("g");
    let mut out = frame(&fc, 3, 1);
    let mut p = join_group_request::JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0]);
    let mut join = JoinGroupRequest::default();
    join.group_id = GroupId(s("g"));
    join.session_timeout_ms = 10_000;
    join.rebalance_timeout_ms = 10_000;
    join.protocol_type = s("consumer");
    join.protocols.push(p);
    out.extend(frame(&join, 5, 2));
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(s("g"));
    sync.generation_id = 1;
    out.extend(frame(&sync, 3, 3));
    let mut cp = offset_commit_request::OffsetCommitRequestPartition::default();
    cp.committed_offset = 1;
    let mut ct = offset_commit_request::OffsetCommitRequestTopic::default();
    ct.name = topic("t");
    ct.partitions.push(cp);
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(s("g"));
    commit.generation_id_or_member_epoch = -1;
    commit.topics.push(ct);
    out.extend(frame(&commit, 8, 4));
    let mut of = OffsetFetchRequest::default();
    of.group_id = GroupId(s("g"));
    out.extend(frame(&of, 7, 5));
    let mut hb = HeartbeatRequest::default();
    hb.group_id = GroupId(s("g"));
    out.extend(frame(&hb, 4, 6));
    let mut dg = DescribeGroupsRequest::default();
    dg.groups.push(GroupId(s("g")));
    out.extend(frame(&dg, 5, 7));
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(s("g"));
    out.extend(frame(&leave, 4, 8));
    let mut del = DeleteGroupsRequest::default();
    del.groups_names.push(GroupId(s("g")));
    out.extend(frame(&del, 2, 9));
    out
}

/// Topic administration: configs, partitions, log dirs, reassignments.
fn admin_conversation() -> Vec<u8> {
    let mut out = frame(&create_topic("a", 1, false), 7, 1);
    let mut r = describe_configs_request::DescribeConfigsResource::default();
    r.resource_type = 2;
    r.resource_name = s("a");
    let mut dc = DescribeConfigsRequest::default();
    dc.resources.push(r);
    out.extend(frame(&dc, 4, 2));
    let mut c = incremental_alter_configs_request::AlterableConfig::default();
    c.name = s("retention.ms");
    c.value = Some(s("1000"));
    let mut ar = incremental_alter_configs_request::AlterConfigsResource::default();
    ar.resource_type = 2;
    ar.resource_name = s("a");
    ar.configs.push(c);
    let mut iac = IncrementalAlterConfigsRequest::default();
    iac.resources.push(ar);
    out.extend(frame(&iac, 1, 3));
    let mut cpt = create_partitions_request::CreatePartitionsTopic::default();
    cpt.name = topic("a");
    cpt.count = 3;
    let mut cp = CreatePartitionsRequest::default();
    cp.topics.push(cpt);
    out.extend(frame(&cp, 3, 4));
    out.extend(frame(&DescribeLogDirsRequest::default(), 4, 5));
    out.extend(frame(&DescribeClusterRequest::default(), 1, 6));
    out.extend(frame(&ListPartitionReassignmentsRequest::default(), 0, 7));
    let mut md = MetadataRequest::default();
    let mut mt = metadata_request::MetadataRequestTopic::default();
    mt.name = Some(topic("a"));
    md.topics = Some(vec![mt]);
    md.allow_auto_topic_creation = true;
    out.extend(frame(&md, 12, 8));
    let mut dt = DeleteTopicsRequest::default();
    dt.topic_names.push(topic("a"));
    out.extend(frame(&dt, 5, 9));
    out
}
