//! Named listeners: each request is answered with the endpoints of the
//! listener it arrived on (Metadata, FindCoordinator, DescribeCluster), as
//! Kafka does, so clients inside and outside a network each get addresses
//! they can reach.

mod common;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

async fn client_at(port: u16) -> Client {
    Client::connect(([127, 0, 0, 1], port).into()).await
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

#[tokio::test]
async fn each_listener_answers_with_its_own_advertised_endpoints() {
    let ext = free_port();
    let listeners = format!("listeners=PLAINTEXT://{{addr}},EXTERNAL://127.0.0.1:{ext}");
    let advertised =
        format!("advertised.listeners=PLAINTEXT://{{addr}},EXTERNAL://kafka.example.com:{ext}");
    let b = TestBroker::start(&[
        &listeners,
        &advertised,
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
    ])
    .await;
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
