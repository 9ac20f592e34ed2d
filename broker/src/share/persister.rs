//! How a share-partition leader and the group coordinator reach the share
//! coordinator (Kafka's `DefaultStatePersister`): the state of
//! `(group, topic id, partition)` is kept by the leader of its partition of
//! `__share_group_state`; this broker calls its own share coordinator when
//! it is that leader, and otherwise sends the inter-broker request
//! (Initialize/Read/Write/DeleteShareGroupState,
//! ReadShareGroupStateSummary) over the inter-broker listener. Retriable
//! coordinator errors are retried with backoff for a few seconds.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::coordinator::{coordinator_key, ShareCoordinator, Summary};
use super::partition::StateBatch;
use super::records::StateKey;
use super::state::PersistedState;
use crate::broker_channels::BrokerChannels;
use crate::error::ApiError;

/// How long one call keeps retrying a coordinator that moves or loads.
const RETRY_FOR: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

pub struct Persister {
    pub coordinator: Arc<ShareCoordinator>,
    channels: BrokerChannels,
    node_id: i32,
}

fn retriable(code: ResponseError) -> bool {
    matches!(
        code,
        ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::BrokerNotAvailable
            | ResponseError::NetworkException
            | ResponseError::RequestTimedOut
    )
}

fn err(code: i16, msg: Option<StrBytes>) -> Result<(), ApiError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(c) => Err(ApiError::new(
            c,
            msg.map(|m| m.to_string()).unwrap_or_default(),
        )),
    }
}

fn strb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Persister {
    pub fn new(coordinator: Arc<ShareCoordinator>, channels: BrokerChannels, node_id: i32) -> Self {
        Persister {
            coordinator,
            channels,
            node_id,
        }
    }

    /// Runs `once` against the share coordinator of `k` (`Some(id)`: a
    /// remote broker; `None`: this one) until it answers something other
    /// than a retriable coordinator error, or time runs out.
    async fn retrying<T, F, Fut>(&self, k: &StateKey, mut once: F) -> Result<T, ApiError>
    where
        F: FnMut(Option<i32>) -> Fut,
        Fut: std::future::Future<Output = Result<T, ApiError>>,
    {
        let deadline = tokio::time::Instant::now() + RETRY_FOR;
        let mut backoff = Duration::from_millis(50);
        loop {
            let r = match self.coordinator.coordinator_of(&coordinator_key(k)) {
                Ok(id) if id == self.node_id => once(None).await,
                Ok(id) => once(Some(id)).await,
                Err(e) => Err(e),
            };
            match r {
                Err(e) if retriable(e.code) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                r => return r,
            }
        }
    }

    pub async fn initialize(
        &self,
        k: &StateKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ApiError> {
        self.retrying(k, |remote| async move {
            let Some(to) = remote else {
                return self
                    .coordinator
                    .initialize(k, state_epoch, start_offset)
                    .await;
            };
            let mut part = initialize_share_group_state_request::PartitionData::default();
            part.partition = k.2;
            part.state_epoch = state_epoch;
            part.start_offset = start_offset;
            let mut topic = initialize_share_group_state_request::InitializeStateData::default();
            topic.topic_id = k.1;
            topic.partitions = vec![part];
            let mut req = InitializeShareGroupStateRequest::default();
            req.group_id = strb(&k.0);
            req.topics = vec![topic];
            let resp = self.call(to, &req, 0).await?;
            let p = only(resp.results.into_iter().flat_map(|t| t.partitions))?;
            err(p.error_code, p.error_message)
        })
        .await
    }

    pub async fn read(&self, k: &StateKey, leader_epoch: i32) -> Result<PersistedState, ApiError> {
        self.retrying(k, |remote| async move {
            let Some(to) = remote else {
                return self.coordinator.read(k, leader_epoch).await;
            };
            let mut part = read_share_group_state_request::PartitionData::default();
            part.partition = k.2;
            part.leader_epoch = leader_epoch;
            let mut topic = read_share_group_state_request::ReadStateData::default();
            topic.topic_id = k.1;
            topic.partitions = vec![part];
            let mut req = ReadShareGroupStateRequest::default();
            req.group_id = strb(&k.0);
            req.topics = vec![topic];
            let resp = self.call(to, &req, 0).await?;
            let p = only(resp.results.into_iter().flat_map(|t| t.partitions))?;
            err(p.error_code, p.error_message)?;
            let batches = p
                .state_batches
                .iter()
                .filter_map(|b| {
                    Some(StateBatch {
                        first: b.first_offset,
                        last: b.last_offset,
                        state: super::records::state_from_wire(b.delivery_state)?,
                        delivery_count: b.delivery_count,
                    })
                })
                .collect();
            Ok(PersistedState {
                state_epoch: p.state_epoch,
                leader_epoch,
                start_offset: p.start_offset,
                batches,
            })
        })
        .await
    }

    pub async fn write(
        &self,
        k: &StateKey,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
        batches: &[StateBatch],
    ) -> Result<(), ApiError> {
        self.retrying(k, |remote| async move {
            let Some(to) = remote else {
                return self
                    .coordinator
                    .write(k, state_epoch, leader_epoch, start_offset, batches.to_vec())
                    .await;
            };
            let mut part = write_share_group_state_request::PartitionData::default();
            part.partition = k.2;
            part.state_epoch = state_epoch;
            part.leader_epoch = leader_epoch;
            part.start_offset = start_offset;
            part.delivery_complete_count = -1;
            part.state_batches = batches
                .iter()
                .map(|b| {
                    let mut sb = write_share_group_state_request::StateBatch::default();
                    sb.first_offset = b.first;
                    sb.last_offset = b.last;
                    sb.delivery_state = b.state as i8;
                    sb.delivery_count = b.delivery_count;
                    sb
                })
                .collect();
            let mut topic = write_share_group_state_request::WriteStateData::default();
            topic.topic_id = k.1;
            topic.partitions = vec![part];
            let mut req = WriteShareGroupStateRequest::default();
            req.group_id = strb(&k.0);
            req.topics = vec![topic];
            let resp = self.call(to, &req, 0).await?;
            let p = only(resp.results.into_iter().flat_map(|t| t.partitions))?;
            err(p.error_code, p.error_message)
        })
        .await
    }

    pub async fn delete(&self, k: &StateKey) -> Result<(), ApiError> {
        self.retrying(k, |remote| async move {
            let Some(to) = remote else {
                return self.coordinator.delete(k).await;
            };
            let mut part = delete_share_group_state_request::PartitionData::default();
            part.partition = k.2;
            let mut topic = delete_share_group_state_request::DeleteStateData::default();
            topic.topic_id = k.1;
            topic.partitions = vec![part];
            let mut req = DeleteShareGroupStateRequest::default();
            req.group_id = strb(&k.0);
            req.topics = vec![topic];
            let resp = self.call(to, &req, 0).await?;
            let p = only(resp.results.into_iter().flat_map(|t| t.partitions))?;
            err(p.error_code, p.error_message)
        })
        .await
    }

    /// `None`: the share-partition has no state.
    pub async fn summary(&self, k: &StateKey) -> Result<Option<Summary>, ApiError> {
        self.retrying(k, |remote| async move {
            let Some(to) = remote else {
                return self.coordinator.summary(k);
            };
            let mut part = read_share_group_state_summary_request::PartitionData::default();
            part.partition = k.2;
            let mut topic = read_share_group_state_summary_request::ReadStateSummaryData::default();
            topic.topic_id = k.1;
            topic.partitions = vec![part];
            let mut req = ReadShareGroupStateSummaryRequest::default();
            req.group_id = strb(&k.0);
            req.topics = vec![topic];
            let resp = self.call(to, &req, 1).await?;
            let p = only(resp.results.into_iter().flat_map(|t| t.partitions))?;
            err(p.error_code, p.error_message)?;
            Ok(
                (p.start_offset >= 0 || p.state_epoch > 0).then_some(Summary {
                    state_epoch: p.state_epoch,
                    leader_epoch: p.leader_epoch,
                    start_offset: p.start_offset,
                    delivery_complete_count: p.delivery_complete_count,
                }),
            )
        })
        .await
    }

    async fn call<Req: kafka_protocol::protocol::Request>(
        &self,
        to: i32,
        req: &Req,
        version: i16,
    ) -> Result<Req::Response, ApiError> {
        self.channels
            .call(to, req, version, CALL_TIMEOUT)
            .await
            .map_err(|c| ApiError::new(c, format!("share coordinator {to}: {c}")))
    }
}

/// The one partition a request about one share-partition is answered for.
fn only<P>(parts: impl IntoIterator<Item = P>) -> Result<P, ApiError> {
    parts.into_iter().next().ok_or_else(|| {
        ApiError::new(
            ResponseError::UnknownServerError,
            "the share coordinator's answer has no partition",
        )
    })
}
