//! An in-process broker on a random port and a minimal Kafka client built on
//! the `kafka-protocol` codecs, for protocol-level tests.
#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use clap::Parser;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
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

impl TestBroker {
    pub async fn start(overrides: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, overrides).await
    }

    pub async fn start_in(dir: tempfile::TempDir, overrides: &[&str]) -> Self {
        // Broker logs go to the test's captured output (shown when it fails).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("SKEIN_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .with_test_writer()
            .try_init();
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
        for o in overrides {
            args.push("--override".into());
            args.push(o.to_string());
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
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch whenever offset - sequence changes.
            sequence: seq + i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(format!("value-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.freeze()
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
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = min_bytes;
    req.max_bytes = 50 << 20;
    req.session_epoch = -1;
    req.topics = vec![ft];
    let resp = c.call(&req, 12).await.unwrap();
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
