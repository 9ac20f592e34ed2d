//! The share coordinator's inter-broker APIs (KIP-932): Initialize, Read,
//! Write and DeleteShareGroupState and ReadShareGroupStateSummary. Only
//! brokers call them: every partition of a caller without ClusterAction
//! on the cluster gets CLUSTER_AUTHORIZATION_FAILED, as in Kafka.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use skein_controller::acls::AclOperation;

use super::str_opt;
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::error::ApiError;
use crate::share::partition::StateBatch;
use crate::share::records::state_from_wire;

fn allowed(broker: &Broker) -> Result<(), ApiError> {
    if Authz::current(broker).cluster(AclOperation::ClusterAction) {
        Ok(())
    } else {
        Err(crate::authorizer::cluster_denied())
    }
}

fn codes(r: Result<(), ApiError>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match r {
        Ok(()) => (0, None),
        Err(e) => (e.code(), str_opt(e.message)),
    }
}

pub async fn initialize(
    broker: &Arc<Broker>,
    req: InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    let auth = allowed(broker);
    let group = req.group_id.to_string();
    let mut resp = InitializeShareGroupStateResponse::default();
    for t in req.topics {
        let mut tr = initialize_share_group_state_response::InitializeStateResult::default();
        tr.topic_id = t.topic_id;
        for p in t.partitions {
            let r = match &auth {
                Err(e) => Err(e.clone()),
                Ok(()) => {
                    broker
                        .share_coordinator
                        .initialize(
                            &(group.clone(), t.topic_id, p.partition),
                            p.state_epoch,
                            p.start_offset,
                        )
                        .await
                }
            };
            let mut pr = initialize_share_group_state_response::PartitionResult::default();
            pr.partition = p.partition;
            (pr.error_code, pr.error_message) = codes(r);
            tr.partitions.push(pr);
        }
        resp.results.push(tr);
    }
    resp
}

pub async fn read(
    broker: &Arc<Broker>,
    req: ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    let auth = allowed(broker);
    let group = req.group_id.to_string();
    let mut resp = ReadShareGroupStateResponse::default();
    for t in req.topics {
        let mut tr = read_share_group_state_response::ReadStateResult::default();
        tr.topic_id = t.topic_id;
        for p in t.partitions {
            let mut pr = read_share_group_state_response::PartitionResult::default();
            pr.partition = p.partition;
            let r = match &auth {
                Err(e) => Err(e.clone()),
                Ok(()) => {
                    broker
                        .share_coordinator
                        .read(&(group.clone(), t.topic_id, p.partition), p.leader_epoch)
                        .await
                }
            };
            match r {
                Ok(s) => {
                    pr.state_epoch = s.state_epoch;
                    pr.start_offset = s.start_offset;
                    pr.state_batches = s
                        .batches
                        .iter()
                        .map(|b| {
                            let mut sb = read_share_group_state_response::StateBatch::default();
                            sb.first_offset = b.first;
                            sb.last_offset = b.last;
                            sb.delivery_state = b.state as i8;
                            sb.delivery_count = b.delivery_count;
                            sb
                        })
                        .collect();
                }
                Err(e) => (pr.error_code, pr.error_message) = codes(Err(e)),
            }
            tr.partitions.push(pr);
        }
        resp.results.push(tr);
    }
    resp
}

pub async fn write(
    broker: &Arc<Broker>,
    req: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let auth = allowed(broker);
    let group = req.group_id.to_string();
    let mut resp = WriteShareGroupStateResponse::default();
    for t in req.topics {
        let mut tr = write_share_group_state_response::WriteStateResult::default();
        tr.topic_id = t.topic_id;
        for p in t.partitions {
            let r = match &auth {
                Err(e) => Err(e.clone()),
                Ok(()) => {
                    let batches: Option<Vec<StateBatch>> = p
                        .state_batches
                        .iter()
                        .map(|b| {
                            Some(StateBatch {
                                first: b.first_offset,
                                last: b.last_offset,
                                state: state_from_wire(b.delivery_state)?,
                                delivery_count: b.delivery_count,
                            })
                            .filter(|s| s.first <= s.last)
                        })
                        .collect();
                    match batches {
                        None => Err(ApiError::new(
                            ResponseError::InvalidRequest,
                            "a state batch is malformed",
                        )),
                        Some(batches) => {
                            broker
                                .share_coordinator
                                .write(
                                    &(group.clone(), t.topic_id, p.partition),
                                    p.state_epoch,
                                    p.leader_epoch,
                                    p.start_offset,
                                    batches,
                                )
                                .await
                        }
                    }
                }
            };
            let mut pr = write_share_group_state_response::PartitionResult::default();
            pr.partition = p.partition;
            (pr.error_code, pr.error_message) = codes(r);
            tr.partitions.push(pr);
        }
        resp.results.push(tr);
    }
    resp
}

pub async fn delete(
    broker: &Arc<Broker>,
    req: DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    let auth = allowed(broker);
    let group = req.group_id.to_string();
    let mut resp = DeleteShareGroupStateResponse::default();
    for t in req.topics {
        let mut tr = delete_share_group_state_response::DeleteStateResult::default();
        tr.topic_id = t.topic_id;
        for p in t.partitions {
            let r = match &auth {
                Err(e) => Err(e.clone()),
                Ok(()) => {
                    broker
                        .share_coordinator
                        .delete(&(group.clone(), t.topic_id, p.partition))
                        .await
                }
            };
            let mut pr = delete_share_group_state_response::PartitionResult::default();
            pr.partition = p.partition;
            (pr.error_code, pr.error_message) = codes(r);
            tr.partitions.push(pr);
        }
        resp.results.push(tr);
    }
    resp
}

pub fn summary(
    broker: &Arc<Broker>,
    req: ReadShareGroupStateSummaryRequest,
) -> ReadShareGroupStateSummaryResponse {
    let auth = allowed(broker);
    let group = req.group_id.to_string();
    let mut resp = ReadShareGroupStateSummaryResponse::default();
    for t in req.topics {
        let mut tr = read_share_group_state_summary_response::ReadStateSummaryResult::default();
        tr.topic_id = t.topic_id;
        for p in t.partitions {
            let mut pr = read_share_group_state_summary_response::PartitionResult::default();
            pr.partition = p.partition;
            let r = auth.clone().and_then(|()| {
                broker
                    .share_coordinator
                    .summary(&(group.clone(), t.topic_id, p.partition))
            });
            match r {
                Ok(Some(s)) => {
                    pr.state_epoch = s.state_epoch;
                    pr.leader_epoch = s.leader_epoch;
                    pr.start_offset = s.start_offset;
                    pr.delivery_complete_count = s.delivery_complete_count;
                }
                // No state: as Kafka, start offset and count unknown.
                Ok(None) => {
                    pr.start_offset = -1;
                    pr.delivery_complete_count = -1;
                }
                Err(e) => (pr.error_code, pr.error_message) = codes(Err(e)),
            }
            tr.partitions.push(pr);
        }
        resp.results.push(tr);
    }
    resp
}
