//! The share coordinator and the share-partition manager on an in-process
//! broker (no sockets): epochs fence stale writers, state survives a
//! restart, and a member's acquired records come back when its session ends.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;

use super::partition::{AckBatch, RecordState, StateBatch, ACCEPT};
use crate::broker::{Broker, Stop};
use crate::config::BrokerConfig;

async fn open_broker(dir: &std::path::Path) -> Arc<Broker> {
    let raw = BTreeMap::from([
        ("log.dirs".to_string(), dir.display().to_string()),
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("offsets.topic.num.partitions".to_string(), "2".to_string()),
        (
            "share.coordinator.state.topic.num.partitions".to_string(),
            "2".to_string(),
        ),
    ]);
    Broker::open(BrokerConfig::from_map(raw).unwrap())
        .await
        .unwrap()
}

/// Retries `f` while the share coordinator is still being created or loaded.
async fn settled<T>(mut f: impl AsyncFnMut() -> Result<T, crate::error::ApiError>) -> T {
    for _ in 0..200 {
        match f().await {
            Ok(v) => return v,
            Err(e)
                if matches!(
                    e.code,
                    ResponseError::CoordinatorNotAvailable
                        | ResponseError::CoordinatorLoadInProgress
                        | ResponseError::NotCoordinator
                ) =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the share coordinator never settled");
}

fn acked(first: i64, last: i64) -> StateBatch {
    StateBatch {
        first,
        last,
        state: RecordState::Acknowledged,
        delivery_count: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_fence_stale_writers_and_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = open_broker(dir.path()).await;
    b.metadata.create_topic("t", 1, 1, BTreeMap::new()).unwrap();
    let id = b.metadata.topic("t").unwrap().id;
    let k = ("g".to_string(), id, 0);
    let sc = b.share_coordinator.clone();
    settled(async || sc.initialize(&k, 1, -1).await).await;
    let st = sc.read(&k, 3).await.unwrap();
    assert_eq!((st.state_epoch, st.start_offset), (1, -1));
    sc.write(&k, 1, 3, 5, vec![acked(5, 7)]).await.unwrap();
    // An older leader, an older group epoch: fenced.
    let e = sc.write(&k, 1, 2, 5, vec![]).await.unwrap_err();
    assert_eq!(e.code, ResponseError::FencedLeaderEpoch);
    let e = sc.write(&k, 0, 3, 5, vec![]).await.unwrap_err();
    assert_eq!(e.code, ResponseError::FencedStateEpoch);
    assert_eq!(
        sc.read(&k, 2).await.unwrap_err().code,
        ResponseError::FencedLeaderEpoch
    );
    // A share-partition never initialized cannot be read or written.
    let other = ("g".to_string(), id, 9);
    assert_eq!(
        sc.write(&other, 1, 0, 0, vec![]).await.unwrap_err().code,
        ResponseError::InvalidRequest
    );
    b.stop(Stop::Crash).await;
    drop(sc);
    drop(b);

    let b = open_broker(dir.path()).await;
    let sc = b.share_coordinator.clone();
    let st = settled(async || sc.read(&k, 3).await).await;
    assert_eq!((st.state_epoch, st.start_offset), (1, 5));
    assert_eq!(st.batches, vec![acked(5, 7)]);
    let summary = sc.summary(&k).unwrap().unwrap();
    assert_eq!(summary.delivery_complete_count, 3);
    // Deleting forgets it, and deleting again is no error.
    sc.delete(&k).await.unwrap();
    sc.delete(&k).await.unwrap();
    assert_eq!(sc.summary(&k).unwrap(), None);
    b.stop(Stop::Crash).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_stay_done_and_a_closed_session_gives_the_rest_back() {
    let dir = tempfile::tempdir().unwrap();
    let b = open_broker(dir.path()).await;
    b.metadata.create_topic("t", 1, 1, BTreeMap::new()).unwrap();
    let id = b.metadata.topic("t").unwrap().id;
    // Ten records, one batch each.
    let part = loop {
        if let Some(p) = b.replicas.get("t", 0).filter(|p| p.is_leader()) {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for i in 0..10u8 {
        let mut batch = crate::coordinator_runtime::encode_batch(
            &[(
                bytes::Bytes::from(vec![i]),
                Some(bytes::Bytes::from(vec![i])),
            )],
            0,
        )
        .to_vec();
        part.append_as_leader(&mut batch, false, 0, skein_storage::AppendOrigin::Client)
            .unwrap();
    }
    while part.high_watermark() < 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let k = ("g".to_string(), id, 0);
    let sc = b.share_coordinator.clone();
    // Start at the beginning (0), as AlterShareGroupOffsets would set it.
    settled(async || sc.initialize(&k, 1, 0).await).await;
    let settings = b.share.settings("g");
    let got = b
        .share
        .acquire(&k, &part, "m1", &settings, 4, 1 << 20, false)
        .await
        .unwrap()
        .expect("records to acquire");
    assert_eq!(
        got.acquired
            .iter()
            .map(|a| (a.first, a.last, a.delivery_count))
            .collect::<Vec<_>>(),
        [(0, 3, 1)]
    );
    // Another member gets the next ones, not these.
    let other = b
        .share
        .acquire(&k, &part, "m2", &settings, 2, 1 << 20, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.acquired[0].first, 4);
    // m2 may not acknowledge m1's records; m1 accepts 0..1.
    let e = b
        .share
        .acknowledge(&k, "m2", &[ack(0, 1)], true)
        .await
        .unwrap_err();
    assert_eq!(e.code, ResponseError::InvalidRecordState);
    b.share
        .acknowledge(&k, "m1", &[ack(0, 1)], true)
        .await
        .unwrap();
    // m1's session ends: 2..3 come back, with a second delivery next time.
    b.share.release("g", "m1", &BTreeSet::from([(id, 0)])).await;
    let again = b
        .share
        .acquire(&k, &part, "m3", &settings, 2, 1 << 20, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again
            .acquired
            .iter()
            .map(|a| (a.first, a.last, a.delivery_count))
            .collect::<Vec<_>>(),
        [(2, 3, 2)]
    );
    // What was persisted: 0..1 done, the start offset moved past them.
    let st = sc.read(&k, part.leader_epoch()).await.unwrap();
    assert_eq!(st.start_offset, 2);
    b.stop(Stop::Crash).await;
}

fn ack(first: i64, last: i64) -> AckBatch {
    AckBatch {
        first,
        last,
        types: vec![ACCEPT],
    }
}
