//! Named listeners: each request is answered with the endpoints of the
//! listener it arrived on (Metadata, FindCoordinator, DescribeCluster), as
//! Kafka does, so clients inside and outside a network each get addresses
//! they can reach.

mod common;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

/// A connection to another listener of the broker, once it is bound (the
/// broker starts its listeners side by side).
async fn client_at(port: u16) -> Client {
    for _ in 0..100 {
        if let Ok(stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            drop(stream);
            return Client::connect(([127, 0, 0, 1], port).into()).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("nothing listens on port {port} after 5 s");
}

/// FindCoordinator for group `g` until the coordinator is ready.
async fn coordinator(c: &mut Client) -> (String, i32) {
    let mut fc = FindCoordinatorRequest::default();
    fc.key = StrBytes::from_static_str("g");
    for _ in 0..100 {
        let r = c.call(&fc, 3).await.unwrap();
        if r.error_code == 0 {
            return (r.host.to_string(), r.port);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no group coordinator within 10 s");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn metadata_brokers(c: &mut Client) -> Vec<(String, i32)> {
    let r = c.call(&MetadataRequest::default(), 12).await.unwrap();
    r.brokers
        .iter()
        .map(|b| (b.host.to_string(), b.port))
        .collect()
}

/// A broker with its PLAINTEXT listener (inter-broker) and a client
/// listener EXTERNAL on port `ext`, plus `extra` settings.
async fn with_external(ext: u16, extra: &[&str]) -> TestBroker {
    let listeners = format!("listeners=PLAINTEXT://{{addr}},EXTERNAL://127.0.0.1:{ext}");
    let mut settings = vec![
        listeners.as_str(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
    ];
    settings.extend_from_slice(extra);
    TestBroker::start(&settings).await
}

#[tokio::test]
async fn each_listener_answers_with_its_own_advertised_endpoints() {
    let ext = free_port();
    let advertised =
        format!("advertised.listeners=PLAINTEXT://{{addr}},EXTERNAL://kafka.example.com:{ext}");
    let b = with_external(ext, &[&advertised]).await;
    let mut inside = b.client().await;
    let mut outside = client_at(ext).await;

    assert_eq!(
        metadata_brokers(&mut inside).await,
        vec![("127.0.0.1".to_string(), b.addr.port() as i32)]
    );
    assert_eq!(
        metadata_brokers(&mut outside).await,
        vec![("kafka.example.com".to_string(), ext as i32)]
    );

    let mut dc = DescribeClusterRequest::default();
    dc.include_cluster_authorized_operations = false;
    let r = outside.call(&dc, 0).await.unwrap();
    assert_eq!(r.brokers[0].host.as_str(), "kafka.example.com");
    assert_eq!(r.brokers[0].port, ext as i32);

    assert_eq!(
        coordinator(&mut outside).await,
        ("kafka.example.com".to_string(), ext as i32)
    );
    assert_eq!(
        coordinator(&mut inside).await,
        ("127.0.0.1".to_string(), b.addr.port() as i32)
    );
    b.stop().await;
}

/// A Fetch v12 claiming to be replica `replica_id`: its partition's error.
async fn follower_fetch(c: &mut Client, topic: &str, replica_id: i32) -> i16 {
    let resp = c
        .call(&fetch_request(topic, 0, 0, replica_id), 12)
        .await
        .unwrap();
    assert_eq!(resp.error_code, 0);
    resp.responses[0].partitions[0].error_code
}

#[tokio::test]
async fn a_replica_id_is_honoured_only_on_the_inter_broker_listener() {
    // No authorizer: everyone may do everything (ClusterAction included),
    // as a super user could on a client listener under one. Claiming to be
    // a follower still works only where brokers connect.
    let ext = free_port();
    let b = with_external(ext, &[]).await;
    let mut inside = b.client().await;
    let mut outside = client_at(ext).await;
    assert_eq!(
        create_topic(&mut outside, "t", 1).await.topics[0].error_code,
        0
    );
    let produced = produce(&mut outside, "t", 0, batch(3, Compression::None)).await;
    assert_eq!(produced.error_code, 0);

    // TOPIC_AUTHORIZATION_FAILED, as Kafka answers a follower fetch without
    // ClusterAction, for every replica id claimed on a client listener.
    for replica in [0, 1, 7] {
        assert_eq!(
            follower_fetch(&mut outside, "t", replica).await,
            29,
            "replica {replica}"
        );
    }
    // The same client as a consumer reads the records.
    let consumer = fetch(&mut outside, "t", 0, 0, 0, 0).await;
    assert_eq!(consumer.error_code, 0);
    assert_eq!(decode_records(consumer.records.unwrap()).len(), 3);
    // On the inter-broker listener the claim is not refused for authorization.
    assert_ne!(follower_fetch(&mut inside, "t", 1).await, 29);
}

/// Whether `c` gets an ApiVersions answer within `ms`.
async fn answered_within(c: &mut Client, ms: u64) -> bool {
    c.send(&api_versions_request(), 0).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_millis(ms), c.recv())
        .await
        .is_ok_and(|r| r.is_ok())
}

#[tokio::test]
async fn max_connections_holds_a_lone_listener_and_spares_the_inter_broker_one_beside_others() {
    // One listener, which is also the inter-broker one: limited (Kafka
    // protects the inter-broker listener only when clients have another).
    let b = TestBroker::start(&["max.connections=2"]).await;
    let mut first = b.client().await;
    let mut second = b.client().await;
    assert!(answered_within(&mut first, 5_000).await);
    assert!(answered_within(&mut second, 5_000).await);
    let mut third = b.client().await;
    assert!(
        !answered_within(&mut third, 500).await,
        "a third connection is not taken"
    );
    drop(first);
    let r = tokio::time::timeout(std::time::Duration::from_secs(5), third.recv()).await;
    assert!(r.is_ok_and(|r| r.is_ok()), "taken once one closes");

    // Beside a client listener, the inter-broker one takes connections over
    // the limit; the client listener does not.
    let ext = free_port();
    let b = with_external(ext, &["max.connections=1"]).await;
    let mut client = client_at(ext).await;
    assert!(answered_within(&mut client, 5_000).await);
    let mut over = client_at(ext).await;
    assert!(!answered_within(&mut over, 500).await);
    let mut brokers = Vec::new();
    for _ in 0..3 {
        let mut c = b.client().await;
        assert!(answered_within(&mut c, 5_000).await);
        brokers.push(c);
    }
}
