//! Produce: authorizes, checks and verifies each partition's records, hands
//! them to the write path (`crate::append`: offsets assigned in place, CRC
//! checked, never re-encoded unless the topic's codec differs) and answers
//! per partition. With acks=all the answer waits until the ISR has the
//! records (the high watermark passed them) or the request's `timeout_ms`
//! ends (Kafka's produce purgatory).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use skein_storage::AppendOrigin;

use skein_controller::acls::AclOperation;

use super::strb;
use crate::append::{AppendRecords, Appended, ClientRecords, Records, RequiredAcks};
use crate::authorizer::{may_create, topic_denied, Authz};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::txn::verification::{TxnBatch, TxnOperation};

/// The response, also for acks=0 (not sent then: the connection layer
/// counts its errors and closes the connection when there is one, as Kafka
/// does so the client notices and refreshes its metadata).
pub async fn handle(broker: &Arc<Broker>, req: ProduceRequest, version: i16) -> ProduceResponse {
    let acks = req.acks;
    let timeout = std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut resp = ProduceResponse::default();
    // acks=all appends, waited for once every partition is written.
    let mut pending: Vec<(usize, usize, Appended)> = Vec::new();
    let authz = Authz::current(broker);
    // Transactional batches (control batches among them) need a
    // transactional id that the principal may Write; without one they would
    // open a transaction that no coordinator knows, holding the last stable
    // offset for good. As Kafka, every partition of such a request is refused.
    let topic_data: Vec<_> = req
        .topic_data
        .into_iter()
        .map(|mut td| {
            let parts: Vec<(i32, ClientRecords)> = std::mem::take(&mut td.partition_data)
                .into_iter()
                .map(|pd| (pd.index, ClientRecords::parse(pd.records)))
                .collect();
            (td, parts)
        })
        .collect();
    let transactional = topic_data
        .iter()
        .any(|(_, parts)| parts.iter().any(|(_, r)| r.is_transactional()));
    let txn_denied = match &req.transactional_id {
        Some(t) => !authz.allowed(
            AclOperation::Write,
            skein_controller::acls::ResourceType::TransactionalId,
            &t.0,
        ),
        None => transactional,
    };
    let req_tid = req.transactional_id.as_ref().map(|t| t.0.to_string());
    for (td, parts) in topic_data {
        // Authorization comes before existence (Write on the topic): a
        // topic one may not write to is not revealed to exist.
        let denied_by_name = !td.name.0.is_empty() && !authz.topic(AclOperation::Write, &td.name.0);
        // v13+ names topics by id; older versions by name.
        let topic = if td.name.0.is_empty() {
            broker.metadata.topic_by_id(td.topic_id)
        } else if denied_by_name {
            None
        } else {
            broker.metadata.topic(&td.name.0).or_else(|| {
                if broker.config.auto_create_topics_enable && may_create(&authz, &td.name.0) {
                    broker.auto_create(&td.name.0).ok()
                } else {
                    None
                }
            })
        };
        let denied = denied_by_name
            || topic
                .as_ref()
                .is_some_and(|t| !authz.topic(AclOperation::Write, &t.name));
        let mut tr = TopicProduceResponse::default();
        tr.name = td.name.clone();
        tr.topic_id = td.topic_id;
        for (index, records) in parts {
            let mut pr = PartitionProduceResponse::default();
            pr.index = index;
            pr.base_offset = -1;
            pr.log_append_time_ms = -1;
            pr.log_start_offset = -1;
            let result = if !(acks == -1 || acks == 0 || acks == 1) {
                Err(ApiError::new(
                    ResponseError::InvalidRequiredAcks,
                    format!("acks must be -1, 0 or 1, got {acks}"),
                ))
            } else if txn_denied {
                Err(ApiError::new(
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "Transactional Id authorization failed.",
                ))
            } else if denied {
                Err(topic_denied())
            } else {
                match &topic {
                    None if td.name.0.is_empty() => Err(ApiError::new(
                        ResponseError::UnknownTopicId,
                        "unknown topic id",
                    )),
                    None => Err(ApiError::new(
                        ResponseError::UnknownTopicOrPartition,
                        format!("topic '{}' does not exist", td.name.0),
                    )),
                    Some(t) if crate::internal_topics::is_internal(&t.name) => {
                        Err(crate::internal_topics::refused_write(&t.name, "append to"))
                    }
                    Some(t) => match check_request_records(version, &records) {
                        Err(e) => Err(e),
                        Ok(()) => {
                            let op = TxnOperation::of_produce(version);
                            match verify_transaction(broker, &req_tid, &t.name, index, &records, op)
                                .await
                            {
                                Ok(origin) => {
                                    append(broker, &t.name, index, records, acks, timeout, origin)
                                }
                                Err(e) => Err(e),
                            }
                        }
                    },
                }
            };
            match result {
                Ok(appended) => {
                    let info = &appended.info;
                    pr.base_offset = info.first_offset;
                    pr.log_append_time_ms = info.log_append_time;
                    pr.log_start_offset = info.log_start_offset;
                    if acks == -1 {
                        pending.push((
                            resp.responses.len(),
                            tr.partition_responses.len(),
                            appended,
                        ));
                    }
                }
                Err(e) => {
                    tracing::debug!(topic = %td.name.0, partition = index, error = %e, "produce rejected");
                    pr.error_code = e.code();
                    pr.error_message = e.message();
                    pr.record_errors = e
                        .record_errors
                        .iter()
                        .map(|r| {
                            let mut b = BatchIndexAndErrorMessage::default();
                            b.batch_index = r.batch_index;
                            b.batch_index_error_message = Some(strb(r.message.clone()));
                            b
                        })
                        .collect();
                }
            }
            tr.partition_responses.push(pr);
        }
        if tr.name.0.is_empty() {
            if let Some(t) = &topic {
                if version < 13 {
                    tr.name = TopicName(strb(t.name.clone()));
                }
            }
        }
        resp.responses.push(tr);
    }
    let _parked = (!pending.is_empty()).then(|| broker.metrics.park("produce"));
    for (t, p, appended) in pending {
        if let Err(e) = appended.await {
            let pr = &mut resp.responses[t].partition_responses[p];
            pr.error_code = e.code();
            pr.error_message = e.message();
        }
    }
    resp
}

/// What Kafka's `ProduceRequest.validateRecords` checks before anything
/// else: zstd needs Produce v7+ (`UNSUPPORTED_COMPRESSION_TYPE`); the
/// single batch and its magic are checked by the append.
fn check_request_records(version: i16, records: &ClientRecords) -> Result<(), ApiError> {
    let zstd = records.header().is_some_and(|h| h.compression() == 4);
    if zstd && version < 7 {
        return Err(ApiError::new(
            ResponseError::UnsupportedCompressionType,
            format!("Produce requests with version {version} are not allowed to use ZStandard compression"),
        ));
    }
    Ok(())
}

/// KIP-890: a transactional batch goes in only if the coordinator of the
/// request's transactional id has the partition in that producer's ongoing
/// transaction, or (Produce v12+, transaction version 2) adds it there
/// (see `txn::verification`); the answer is how to append it.
async fn verify_transaction(
    broker: &Arc<Broker>,
    tid: &Option<String>,
    topic: &str,
    partition: i32,
    records: &ClientRecords,
    op: TxnOperation,
) -> Result<AppendOrigin, ApiError> {
    let (Some(tid), Some(h)) = (tid, records.header()) else {
        return Ok(AppendOrigin::Client);
    };
    match h {
        h if h.is_transactional() && !h.is_control() => {
            let batch = TxnBatch {
                tid,
                topic,
                partition,
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                base_sequence: h.base_sequence,
            };
            crate::txn::verification::verify(&broker.txns, batch, op).await
        }
        // Control batches and malformed ones are the validator's to refuse.
        _ => Ok(AppendOrigin::Client),
    }
}

/// The first partition error of a produce response (for acks=0, why the
/// connection is closed).
pub fn first_error(resp: &ProduceResponse) -> Option<String> {
    resp.responses.iter().find_map(|t| {
        t.partition_responses
            .iter()
            .find(|p| p.error_code != 0)
            .map(|p| {
                let code = ResponseError::try_from_code(p.error_code)
                    .map_or_else(|| p.error_code.to_string(), |e| format!("{e:?}"));
                format!("{}-{}: {code}", t.name.0, p.index)
            })
    })
}

/// A client's records through the write path, counted in the topic's
/// byte and record rates unless the log had them already.
fn append(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: ClientRecords,
    acks: i16,
    timeout: std::time::Duration,
    origin: AppendOrigin,
) -> Result<Appended, ApiError> {
    let bytes = records.len() as u64;
    let appended = broker
        .replicas
        .append_records(AppendRecords {
            topic,
            partition,
            records: Records::Client(records),
            origin,
            acks: RequiredAcks::from_produce(acks).unwrap_or(RequiredAcks::All),
            timeout,
        })
        .inspect_err(|e| log_storage_error(broker, topic, partition, e))?;
    let info = &appended.info;
    if info.duplicate {
        tracing::debug!(
            topic,
            partition,
            offset = info.first_offset,
            "duplicate batch from an idempotent producer"
        );
    } else {
        let m = &broker.metrics;
        m.bytes_in.with_label_values(&[topic]).inc_by(bytes);
        m.records_in
            .with_label_values(&[topic])
            .inc_by(info.num_records);
    }
    Ok(appended)
}

/// A storage error (a full disk, an I/O error) is the operator's business,
/// not only the client's: it is logged, once per partition every 10 s.
pub(crate) fn log_storage_error(broker: &Broker, topic: &str, partition: i32, e: &ApiError) {
    if e.code != ResponseError::KafkaStorageError {
        return;
    }
    if let Some(left_out) = broker
        .warn_throttle
        .allow(&format!("storage {topic} {partition}"))
    {
        tracing::error!(topic, partition, error = %e.message, left_out, "cannot write to the log");
    }
}
