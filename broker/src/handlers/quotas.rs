//! `DescribeClientQuotas` and `AlterClientQuotas` (KIP-546): what
//! `kafka-configs --entity-type users|clients|ips` reads and writes. The
//! controller stores the quotas; [`crate::quotas`] enforces them.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    alter_client_quotas_response, describe_client_quotas_response, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use skein_controller::acls::AclOperation;
use skein_controller::quotas::{check_change, QuotaChange};
use skein_controller::{QuotaEntity, QuotaEntityType};

use super::str_opt;
use crate::authorizer::Authz;
use crate::broker::Broker;

/// A filter component: the entity must have the type, with this name
/// (`Exact`), as the default (`Default`), or with any name (`Any`).
enum Match {
    Exact(String),
    Default,
    Any,
}

pub fn describe(broker: &Broker, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse {
    let mut resp = DescribeClientQuotasResponse::default();
    if !Authz::current(broker).cluster(AclOperation::DescribeConfigs) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        resp.error_message = str_opt("Cluster authorization failed.");
        return resp;
    }
    let mut filter = Vec::new();
    let mut seen = BTreeSet::new();
    for c in &req.components {
        let Some(t) = QuotaEntityType::parse(c.entity_type.as_str()) else {
            return refuse(
                resp,
                format!(
                    "Custom entity type '{}' not supported",
                    c.entity_type.as_str()
                ),
            );
        };
        if !seen.insert(t) {
            return refuse(
                resp,
                format!("Duplicate {} filter component entity type", t.name()),
            );
        }
        let m = match (c.match_type, &c._match) {
            (0, Some(name)) => Match::Exact(name.to_string()),
            (0, None) => {
                return refuse(resp, "Unexpected null match for an exact match type".into())
            }
            (1, _) => Match::Default,
            (2, _) => Match::Any,
            (other, _) => return refuse(resp, format!("Unexpected match type: {other}")),
        };
        filter.push((t, m));
    }
    let quotas = broker.metadata.image().client_quotas.clone();
    let matches = |entity: &QuotaEntity| {
        filter.iter().all(|(t, m)| match (entity.get(t), m) {
            (Some(Some(name)), Match::Exact(want)) => name == want,
            (Some(None), Match::Default) => true,
            (Some(_), Match::Any) => true,
            _ => false,
        }) && (!req.strict || entity.len() == filter.len())
    };
    resp.entries = Some(
        quotas
            .0
            .iter()
            .filter(|(entity, _)| matches(entity))
            .map(|(entity, values)| {
                let mut e = describe_client_quotas_response::EntryData::default();
                e.entity = entity
                    .iter()
                    .map(|(t, n)| {
                        let mut d = describe_client_quotas_response::EntityData::default();
                        d.entity_type = StrBytes::from_static_str(t.name());
                        d.entity_name = n.clone().map(StrBytes::from_string);
                        d
                    })
                    .collect();
                e.values = values
                    .iter()
                    .map(|(k, v)| {
                        let mut d = describe_client_quotas_response::ValueData::default();
                        d.key = StrBytes::from_string(k.clone());
                        d.value = v.0;
                        d
                    })
                    .collect();
                e
            })
            .collect(),
    );
    resp
}

fn refuse(mut resp: DescribeClientQuotasResponse, why: String) -> DescribeClientQuotasResponse {
    resp.error_code = ResponseError::InvalidRequest.code();
    resp.error_message = str_opt(why);
    resp
}

pub fn alter(broker: &Broker, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let mut resp = AlterClientQuotasResponse::default();
    let mut changes = Vec::new();
    let mut applied = Vec::new();
    let denied = !Authz::current(broker).cluster(AclOperation::AlterConfigs);
    for entry in &req.entries {
        let mut out = alter_client_quotas_response::EntryData::default();
        out.entity = entry
            .entity
            .iter()
            .map(|e| {
                let mut d = alter_client_quotas_response::EntityData::default();
                d.entity_type = e.entity_type.clone();
                d.entity_name = e.entity_name.clone();
                d
            })
            .collect();
        match entry_changes(entry) {
            _ if denied => {
                out.error_code = ResponseError::ClusterAuthorizationFailed.code();
                out.error_message = str_opt("Cluster authorization failed.");
            }
            Ok(c) => {
                applied.push(resp.entries.len());
                changes.extend(c);
            }
            Err(why) => {
                out.error_code = ResponseError::InvalidRequest.code();
                out.error_message = str_opt(why);
            }
        }
        resp.entries.push(out);
    }
    if !req.validate_only && !changes.is_empty() {
        if let Err(e) = broker.metadata.alter_client_quotas(changes) {
            for i in applied {
                resp.entries[i].error_code = e.code();
                resp.entries[i].error_message = str_opt(e.message.clone());
            }
        }
    }
    resp
}

/// One entry's changes, checked; any problem refuses the whole entry.
fn entry_changes(
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
) -> Result<Vec<QuotaChange>, String> {
    let mut entity = QuotaEntity::new();
    for e in &entry.entity {
        let Some(t) = QuotaEntityType::parse(e.entity_type.as_str()) else {
            return Err(format!(
                "Unhandled client quota entity type: {}",
                e.entity_type.as_str()
            ));
        };
        if entity
            .insert(t, e.entity_name.as_ref().map(|n| n.to_string()))
            .is_some()
        {
            return Err(format!("Duplicate {} entity type", t.name()));
        }
    }
    let mut keys = BTreeSet::new();
    let mut out = Vec::new();
    for op in &entry.ops {
        if !keys.insert(op.key.as_str()) {
            return Err(format!("Duplicate quota key {}", op.key.as_str()));
        }
        let change = QuotaChange {
            entity: entity.clone(),
            key: op.key.to_string(),
            value: (!op.remove).then_some(op.value),
        };
        check_change(&change)?;
        out.push(change);
    }
    Ok(out)
}
