//! Writing a transaction's COMMIT or ABORT markers (Kafka's
//! `TransactionMarkerChannelManager`): WriteTxnMarkers to the leader of
//! every partition in the transaction (the local append for partitions this
//! broker leads), retried until each is written, its topic is gone, or this
//! broker stops coordinating the transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::error::{ParseResponseErrorCode, ResponseError};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use tracing::{debug, warn};

use super::coordinator::TxnCoordinator;
use super::metadata::TxnMetadata;
use crate::append::RequiredAcks;
use crate::coordinator_runtime as runtime;
use crate::error::ApiError;
use crate::handlers::strb;
use crate::metadata::CONSUMER_OFFSETS;
use crate::system::now_ms;

type Tp = (String, i32);

/// How long a marker this broker appends waits for the ISR.
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

impl TxnCoordinator {
    /// Appends one marker to a partition this broker leads and waits until the
    /// ISR has it (WriteTxnMarkers, or the coordinator's own partitions); a
    /// marker in `__consumer_offsets` also ends the transaction's held offsets.
    /// A marker older than the producer's epoch here is refused
    /// (`INVALID_PRODUCER_EPOCH`).
    pub async fn write_local(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> Result<(), ApiError> {
        let marker = skein_storage::ControlMarker {
            commit,
            coordinator_epoch,
        };
        let batch = skein_storage::control_batch(producer_id, producer_epoch, marker, now_ms());
        let appended = runtime::write(
            &self.ctx,
            topic,
            partition,
            bytes::BytesMut::from(&batch[..]),
            RequiredAcks::All,
            MARKER_TIMEOUT,
        )?;
        let at = (appended.leader_epoch, appended.required_offset());
        appended.await?;
        if topic == CONSUMER_OFFSETS {
            self.offsets_markers
                .on_txn_marker(partition, producer_id, commit, at);
        }
        Ok(())
    }

    /// Writes the markers of `m` into all its partitions.
    pub(super) async fn write_all(
        &self,
        tid: &str,
        m: &TxnMetadata,
        commit: bool,
    ) -> Result<(), ApiError> {
        let mut remaining: BTreeSet<Tp> = m.partitions.clone();
        let mut backoff = Duration::from_millis(20);
        loop {
            if remaining.is_empty() {
                return Ok(());
            }
            // Still the coordinator at the same epoch? (Not whether followers
            // fetched lately: a slow follower must not stop the markers.)
            let n = self
                .ctx
                .metadata
                .topic(super::TRANSACTION_STATE)
                .map_or(0, |t| t.partitions.len() as i32);
            let p = super::partition_for(tid, n);
            let still = self
                .ctx
                .replicas
                .get(super::TRANSACTION_STATE, p)
                .is_some_and(|part| part.is_leader() && part.leader_epoch() == m.coordinator_epoch);
            if !still {
                return Err(ApiError::new(
                    ResponseError::NotCoordinator,
                    "this broker no longer leads the transaction's state partition at its epoch",
                ));
            }
            let mut by_leader: BTreeMap<i32, Vec<Tp>> = BTreeMap::new();
            for tp in remaining.clone() {
                let leader = self
                    .ctx
                    .metadata
                    .topic(&tp.0)
                    .map(|t| t.partitions.get(tp.1 as usize).map(|p| p.leader));
                match leader {
                    // The topic or partition is gone: nothing to mark.
                    None | Some(None) => {
                        remaining.remove(&tp);
                    }
                    Some(Some(l)) if l >= 0 => by_leader.entry(l).or_default().push(tp),
                    Some(Some(_)) => {}
                }
            }
            for (leader, tps) in by_leader {
                let results = if leader == self.ctx.node_id {
                    let mut out = Vec::new();
                    for tp in tps {
                        let r = self
                            .write_local(
                                &tp.0,
                                tp.1,
                                m.producer_id,
                                m.producer_epoch,
                                commit,
                                m.coordinator_epoch,
                            )
                            .await
                            .map_err(|e| e.code);
                        out.push((tp, r));
                    }
                    out
                } else {
                    self.send(leader, m, commit, &tps).await
                };
                for (tp, r) in results {
                    match r {
                        Ok(()) => {
                            remaining.remove(&tp);
                        }
                        // The partition has a newer epoch of this producer or a
                        // newer coordinator wrote to it: this marker is moot.
                        Err(
                            code @ (ResponseError::InvalidProducerEpoch
                            | ResponseError::TransactionCoordinatorFenced),
                        ) => {
                            warn!(transactional_id = tid, topic = %tp.0, partition = tp.1, ?code, "marker refused as stale");
                            remaining.remove(&tp);
                        }
                        Err(code) => {
                            debug!(transactional_id = tid, topic = %tp.0, partition = tp.1, ?code, "marker not written yet; retrying");
                        }
                    }
                }
            }
            if !remaining.is_empty() {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }

    /// WriteTxnMarkers to another broker; every partition's outcome.
    async fn send(
        &self,
        leader: i32,
        m: &TxnMetadata,
        commit: bool,
        tps: &[Tp],
    ) -> Vec<(Tp, Result<(), ResponseError>)> {
        let failed = |code| tps.iter().map(|tp| (tp.clone(), Err(code))).collect();
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in tps {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        let mut marker = WritableTxnMarker::default();
        marker.producer_id = ProducerId(m.producer_id);
        marker.producer_epoch = m.producer_epoch;
        marker.transaction_result = commit;
        marker.coordinator_epoch = m.coordinator_epoch;
        marker.topics = by_topic
            .into_iter()
            .map(|(t, ps)| {
                let mut wt = WritableTxnMarkerTopic::default();
                wt.name = TopicName(strb(t));
                wt.partition_indexes = ps;
                wt
            })
            .collect();
        let mut req = WriteTxnMarkersRequest::default();
        req.markers = vec![marker];

        let resp = match self
            .markers
            .call(leader, &req, 1, Duration::from_secs(30))
            .await
        {
            Ok(r) => r,
            Err(code) => return failed(code),
        };
        let mut out = Vec::new();
        for r in resp.markers {
            for t in r.topics {
                for p in t.partitions {
                    let tp = (t.name.0.to_string(), p.partition_index);
                    let result = match p.error_code.err() {
                        None => Ok(()),
                        Some(code) => Err(code),
                    };
                    out.push((tp, result));
                }
            }
        }
        // Partitions the response did not mention are retried.
        for tp in tps {
            if !out.iter().any(|(o, _)| o == tp) {
                out.push((tp.clone(), Err(ResponseError::UnknownServerError)));
            }
        }
        out
    }
}
