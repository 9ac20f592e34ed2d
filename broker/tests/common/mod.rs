//! An in-process broker on a random port and a minimal Kafka client built on
//! the `kafka-protocol` codecs, for protocol-level tests.
#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use clap::Parser;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{Compression, Record};
use skein_broker::{BrokerConfig, Cli};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

pub struct TestBroker {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Broker logs go to the test's captured output (shown when it fails);
/// `SKEIN_LOG` filters them (default `info`).
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SKEIN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
}

impl TestBroker {
    pub async fn start(overrides: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, overrides).await
    }

    pub async fn start_in(dir: tempfile::TempDir, overrides: &[&str]) -> Self {
        init_logs();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut args = vec![
            "skein-broker".to_string(),
            "--data-dir".into(),
            dir.path().display().to_string(),
            "--listen".into(),
            addr.to_string(),
            "--metrics-listen".into(),
            "".into(),
        ];
        // `{addr}` in an override is the address of the first listener.
        for o in overrides {
            args.push("--override".into());
            args.push(o.replace("{addr}", &addr.to_string()));
        }
        let cfg = BrokerConfig::from_cli(&Cli::parse_from(args)).unwrap();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(skein_broker::run_until(cfg, listener, async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            dir,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Stops the broker cleanly and returns its data directory.
    pub async fn stop(mut self) -> tempfile::TempDir {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
        self.dir
    }

    pub async fn client(&self) -> Client {
        Client {
            stream: TcpStream::connect(self.addr).await.unwrap(),
            correlation: 0,
        }
    }
}

pub struct Client {
    pub stream: TcpStream,
    correlation: i32,
}

impl Client {
    /// A connection to `addr` (another listener than the broker's first).
    #[allow(dead_code)]
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            correlation: 0,
        }
    }

    /// Sends a request and decodes the response.
    pub async fn call<Req>(&mut self, req: &Req, version: i16) -> std::io::Result<Req::Response>
    where
        Req: kafka_protocol::protocol::Request,
    {
        self.send(req, version).await?;
        let mut body = self.recv().await?;
        let hv = Req::Response::header_version(version);
        ResponseHeader::decode(&mut body, hv).unwrap();
        Ok(Req::Response::decode(&mut body, version).unwrap())
    }

    pub async fn send<Req>(&mut self, req: &Req, version: i16) -> std::io::Result<()>
    where
        Req: kafka_protocol::protocol::Request,
    {
        self.correlation += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = Req::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation;
        header.client_id = Some(StrBytes::from_static_str("skein-test"));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, Req::header_version(version))
            .unwrap();
        req.encode(&mut buf, version).unwrap();
        self.send_raw(&buf).await
    }

    /// Writes one size-prefixed frame.
    pub async fn send_raw(&mut self, frame: &[u8]) -> std::io::Result<()> {
        let mut out = BytesMut::with_capacity(frame.len() + 4);
        out.put_i32(frame.len() as i32);
        out.put_slice(frame);
        self.stream.write_all(&out).await
    }

    pub async fn recv(&mut self) -> std::io::Result<Bytes> {
        let n = self.stream.read_i32().await?;
        let mut b = vec![0u8; n as usize];
        self.stream.read_exact(&mut b).await?;
        Ok(Bytes::from(b))
    }

    /// True if the broker closed the connection (EOF or reset) within 5 s.
    pub async fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        let r =
            tokio::time::timeout(std::time::Duration::from_secs(5), self.stream.read(&mut b)).await;
        matches!(r, Ok(Ok(0)) | Ok(Err(_)))
    }
}

/// A magic-v2 batch of `n` records `key-i`/`value-i`.
pub fn batch(n: usize, compression: Compression) -> Bytes {
    producer_batch(n, compression, -1, -1, 0)
}

/// A batch of `n` records from producer `pid` at `epoch`, first sequence `seq`.
pub fn producer_batch(n: usize, compression: Compression, pid: i64, epoch: i16, seq: i32) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| {
            let mut r = skein_storage::testing::record(
                Some(&format!("key-{i}")),
                Some(&format!("value-{i}")),
                1_700_000_000_000 + i as i64,
            );
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = seq;
            r
        })
        .collect();
    Bytes::from(skein_storage::testing::encode(&records, compression))
}

/// An ApiVersions request as a client sends it: from v3 the software name
/// and version must match KIP-511's pattern (Kafka and Skein refuse others).
pub fn api_versions_request() -> ApiVersionsRequest {
    let mut r = ApiVersionsRequest::default();
    r.client_software_name = "skein-tests".into();
    r.client_software_version = "1.0".into();
    r
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

pub async fn create_topic(c: &mut Client, name: &str, partitions: i32) -> CreateTopicsResponse {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 5000;
    c.call(&req, 7).await.unwrap()
}

pub async fn produce(
    c: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    produce_acks(c, topic, partition, records, 1).await
}

pub async fn produce_acks(
    c: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
) -> produce_response::PartitionProduceResponse {
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(records);
    let mut td = produce_request::TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = acks;
    req.timeout_ms = 5000;
    req.topic_data = vec![td];
    let resp = c.call(&req, 9).await.unwrap();
    resp.responses
        .into_iter()
        .next()
        .unwrap()
        .partition_responses
        .into_iter()
        .next()
        .unwrap()
}

pub async fn fetch(
    c: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> fetch_response::PartitionData {
    fetch_version(c, topic, partition, offset, (max_wait_ms, min_bytes), 12).await
}

/// A sessionless Fetch (topics by name) of one partition from `offset`, as
/// a consumer (`replica_id` -1) or claiming to be replica `replica_id`.
pub fn fetch_request(topic: &str, partition: i32, offset: i64, replica_id: i32) -> FetchRequest {
    let mut fp = fetch_request::FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    fp.current_leader_epoch = -1;
    fp.last_fetched_epoch = -1;
    fp.log_start_offset = -1;
    let mut ft = fetch_request::FetchTopic::default();
    ft.topic = topic_name(topic);
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(replica_id);
    req.max_bytes = 50 << 20;
    req.session_epoch = -1;
    req.topics = vec![ft];
    req
}

/// [`fetch`] with a given Fetch version (4..=12: topics by name).
pub async fn fetch_version(
    c: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
    (max_wait_ms, min_bytes): (i32, i32),
    version: i16,
) -> fetch_response::PartitionData {
    let mut req = fetch_request(topic, partition, offset, -1);
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = min_bytes;
    let resp = c.call(&req, version).await.unwrap();
    resp.responses
        .into_iter()
        .next()
        .unwrap()
        .partitions
        .into_iter()
        .next()
        .unwrap()
}

/// Decodes every record in a fetched record set: (offset, key, value).
pub fn decode_records(mut b: Bytes) -> Vec<(i64, Bytes, Bytes)> {
    let mut out = Vec::new();
    while b.has_remaining() {
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut b).unwrap();
        for r in set.records {
            out.push((
                r.offset,
                r.key.unwrap_or_default(),
                r.value.unwrap_or_default(),
            ));
        }
    }
    out
}

/// Several in-process brokers sharing one in-memory controller, with short
/// timeouts so failures are detected within a couple of seconds.
pub struct TestCluster {
    pub controller: std::sync::Arc<skein_broker::ControllerService>,
    pub nodes: Vec<ClusterNode>,
    overrides: Vec<String>,
    ticker: tokio::task::JoinHandle<()>,
}

/// One broker of a [`TestCluster`]; its address and data survive restarts.
pub struct ClusterNode {
    pub id: i32,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<skein_broker::Stop>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Controller session timeout of test clusters.
pub const SESSION_TIMEOUT_MS: u64 = 1_500;

impl TestCluster {
    /// Starts brokers 1..=n. `overrides` are broker configs for all of them.
    pub async fn start(n: i32, overrides: &[&str]) -> Self {
        init_logs();
        let config = skein_controller::ControllerConfig {
            broker_session_timeout_ms: SESSION_TIMEOUT_MS,
            ..Default::default()
        };
        let controller = skein_broker::ControllerService::open(None, config).unwrap();
        let ticker = controller.spawn_ticker(std::time::Duration::from_millis(100));
        let mut overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        for d in [
            "broker.heartbeat.interval.ms=200",
            "replica.fetch.backoff.ms=50",
            "replica.fetch.wait.max.ms=200",
            "controlled.shutdown.timeout.ms=5000",
        ] {
            if !overrides
                .iter()
                .any(|o| o.split('=').next() == d.split('=').next())
            {
                overrides.push(d.to_string());
            }
        }
        let mut cluster = Self {
            controller,
            nodes: Vec::new(),
            overrides,
            ticker,
        };
        for id in 1..=n {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let mut node = ClusterNode {
                id,
                addr,
                dir: tempfile::tempdir().unwrap(),
                stop: None,
                task: None,
            };
            cluster.launch(&mut node, listener);
            cluster.nodes.push(node);
        }
        // Brokers register from their own tasks; topics placed before all
        // are registered would not get the replication factor asked for.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while cluster
            .controller
            .image()
            .brokers
            .values()
            .filter(|b| b.is_alive())
            .count()
            < n as usize
        {
            assert!(
                std::time::Instant::now() < deadline,
                "brokers did not register"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        cluster
    }

    fn launch(&self, node: &mut ClusterNode, listener: tokio::net::TcpListener) {
        let mut args = vec![
            "skein-broker".to_string(),
            "--node-id".into(),
            node.id.to_string(),
            "--data-dir".into(),
            node.dir.path().display().to_string(),
            "--listen".into(),
            node.addr.to_string(),
            "--metrics-listen".into(),
            "".into(),
        ];
        for o in &self.overrides {
            args.push("--override".into());
            args.push(o.clone());
        }
        let cfg = BrokerConfig::from_cli(&Cli::parse_from(args)).unwrap();
        let (tx, rx) = oneshot::channel();
        node.stop = Some(tx);
        node.task = Some(tokio::spawn(tracing::Instrument::instrument(
            skein_broker::run_in_cluster(cfg, listener, self.controller.clone(), async move {
                rx.await.unwrap_or(skein_broker::Stop::Crash)
            }),
            tracing::info_span!("broker", node = node.id),
        )));
    }

    pub fn node(&mut self, id: i32) -> &mut ClusterNode {
        self.nodes.iter_mut().find(|n| n.id == id).unwrap()
    }

    /// Stops broker `id` the given way and waits until it has stopped.
    pub async fn stop(&mut self, id: i32, how: skein_broker::Stop) {
        let node = self.node(id);
        let _ = node.stop.take().unwrap().send(how);
        node.task.take().unwrap().await.unwrap().unwrap();
    }

    /// Starts broker `id` again on its address and data.
    pub async fn restart(&mut self, id: i32) {
        let addr = self.node(id).addr;
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let mut node = std::mem::replace(
            self.node(id),
            ClusterNode {
                id,
                addr,
                dir: tempfile::tempdir().unwrap(),
                stop: None,
                task: None,
            },
        );
        self.launch(&mut node, listener);
        *self.node(id) = node;
    }

    pub async fn client(&self, id: i32) -> Client {
        let addr = self.nodes.iter().find(|n| n.id == id).unwrap().addr;
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            correlation: 0,
        }
    }

    /// Leader, leader epoch and ISR of a partition, from the controller.
    pub fn partition_state(&self, topic: &str, partition: u32) -> (i32, i32, Vec<i32>) {
        let image = self.controller.image();
        let p = &image.topics[topic].partitions[partition as usize];
        (p.leader, p.leader_epoch, p.isr.clone())
    }

    /// Polls the controller's image until `check` holds (10 s at most).
    pub async fn wait_for(
        &self,
        what: &str,
        topic: &str,
        partition: u32,
        check: impl Fn(i32, i32, &[i32]) -> bool,
    ) -> (i32, i32, Vec<i32>) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (leader, epoch, isr) = self.partition_state(topic, partition);
            if check(leader, epoch, &isr) {
                return (leader, epoch, isr);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}: leader {leader}, epoch {epoch}, isr {isr:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

/// Creates a topic with a replication factor and configs.
pub async fn create_replicated_topic(
    c: &mut Client,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> CreateTopicsResponse {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = replication_factor;
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut c = create_topics_request::CreatableTopicConfig::default();
            c.name = StrBytes::from_string(k.to_string());
            c.value = Some(StrBytes::from_string(v.to_string()));
            c
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 5000;
    c.call(&req, 7).await.unwrap()
}

/// ListOffsets at `version`: (error, offset, leader epoch).
pub async fn list_offset_v(
    c: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
    version: i16,
) -> (i16, i64, i32) {
    let mut p = list_offsets_request::ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = timestamp;
    p.current_leader_epoch = -1;
    let mut t = list_offsets_request::ListOffsetsTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let resp = c.call(&req, version).await.unwrap();
    let pr = &resp.topics[0].partitions[0];
    (pr.error_code, pr.offset, pr.leader_epoch)
}

/// Every record of a partition, read from offset 0 up to the high watermark.
pub async fn read_all(c: &mut Client, topic: &str, partition: i32) -> Vec<(i64, Bytes, Bytes)> {
    read_from(c, topic, partition, 0).await
}

/// Every record of a partition, read from `offset` up to the high watermark.
pub async fn read_from(
    c: &mut Client,
    topic: &str,
    partition: i32,
    mut offset: i64,
) -> Vec<(i64, Bytes, Bytes)> {
    let mut out = Vec::new();
    loop {
        let pd = fetch(c, topic, partition, offset, 0, 0).await;
        assert_eq!(pd.error_code, 0, "fetch error {}", pd.error_code);
        let records = decode_records(pd.records.unwrap_or_default());
        let start = offset;
        match records.last() {
            Some((last, _, _)) => offset = last + 1,
            None => return out,
        }
        out.extend(records.into_iter().filter(|(o, _, _)| *o >= start));
        if offset >= pd.high_watermark {
            return out;
        }
    }
}

/// A batch of `n` records whose values are `prefix-i`.
pub fn named_batch(prefix: &str, n: usize) -> Bytes {
    Bytes::from(skein_storage::testing::producer_batch(
        -1,
        -1,
        -1,
        n,
        1_700_000_000_000,
        |i| format!("{prefix}-{i}"),
    ))
}
