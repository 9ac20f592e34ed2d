//! `CreateAcls`, `DescribeAcls` and `DeleteAcls`: what `kafka-acls` and
//! `Admin.createAcls/describeAcls/deleteAcls` use. Without an authorizer
//! they answer SECURITY_DISABLED; creating and deleting needs Alter on the
//! cluster, listing needs Describe. The controller keeps the ACLs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use skein_controller::acls::{
    self, AclBinding, AclFilter, AclOperation, AclPermission, PatternType, ResourceType,
};

use super::{str_opt, strb};
use crate::authorizer::{cluster_denied, Authz};
use crate::broker::Broker;

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

/// A binding from a `CreateAcls` entry; `Err` is the INVALID_REQUEST message.
fn binding_of(
    c: &kafka_protocol::messages::create_acls_request::AclCreation,
) -> Result<AclBinding, String> {
    let b = AclBinding {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or_else(|| format!("Invalid resourceType {}", c.resource_type))?,
        resource_name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type)
            .ok_or_else(|| format!("Invalid patternType {}", c.resource_pattern_type))?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: AclOperation::from_code(c.operation)
            .ok_or_else(|| format!("Invalid operation {}", c.operation))?,
        permission: AclPermission::from_code(c.permission_type)
            .ok_or_else(|| format!("Invalid permissionType {}", c.permission_type))?,
    };
    acls::check_binding(&b)?;
    Ok(b)
}

/// A filter from its wire fields; `None` when a code is unknown (it then
/// matches nothing when listing, and is refused when deleting).
fn filter_of(
    resource_type: i8,
    name: &Option<StrBytes>,
    pattern: i8,
    principal: &Option<StrBytes>,
    host: &Option<StrBytes>,
    operation: i8,
    permission: i8,
) -> Option<AclFilter> {
    let text = |s: &Option<StrBytes>| s.as_ref().map(|s| s.to_string());
    AclFilter::from_codes(
        resource_type,
        text(name),
        pattern,
        text(principal),
        text(host),
        operation,
        permission,
    )
}

/// Why every entry of a CreateAcls or DeleteAcls is refused: no authorizer,
/// or no Alter on the cluster.
fn refused_whole(authz: &Authz) -> Option<(ResponseError, String)> {
    if !authz.enabled() {
        Some((ResponseError::SecurityDisabled, NO_AUTHORIZER.to_string()))
    } else if !authz.cluster(AclOperation::Alter) {
        let e = cluster_denied();
        Some((e.code, e.message))
    } else {
        None
    }
}

/// Waits (briefly) until this broker's view shows a change the controller
/// made, so the client's next request here sees it.
fn await_view(broker: &Broker, done: impl Fn(&acls::Acls) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !done(&broker.metadata.image().acls) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn create(broker: &Broker, req: CreateAclsRequest) -> CreateAclsResponse {
    let authz = Authz::current(broker);
    let result = |code: Option<ResponseError>, message: Option<String>| {
        let mut r = AclCreationResult::default();
        r.error_code = code.map_or(0, |c| c.code());
        r.error_message = message.map(StrBytes::from_string);
        r
    };
    let mut resp = CreateAclsResponse::default();
    if let Some((code, message)) = refused_whole(&authz) {
        resp.results = req
            .creations
            .iter()
            .map(|_| result(Some(code), Some(message.clone())))
            .collect();
        return resp;
    }
    let checked: Vec<Result<AclBinding, String>> = req.creations.iter().map(binding_of).collect();
    let valid: Vec<AclBinding> = checked.iter().filter_map(|r| r.clone().ok()).collect();
    let sent = if valid.is_empty() {
        Ok(())
    } else {
        broker.metadata.create_acls(valid.clone())
    };
    if sent.is_ok() {
        await_view(broker, |now| valid.iter().all(|b| now.contains(b)));
    }
    resp.results = checked
        .into_iter()
        .map(|r| match (r, &sent) {
            (Err(message), _) => result(Some(ResponseError::InvalidRequest), Some(message)),
            (Ok(_), Ok(())) => result(None, None),
            (Ok(_), Err(e)) => result(Some(e.code), Some(e.message.clone())),
        })
        .collect();
    resp
}

pub fn describe(broker: &Broker, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let authz = Authz::current(broker);
    let mut resp = DescribeAclsResponse::default();
    if !authz.enabled() {
        resp.error_code = ResponseError::SecurityDisabled.code();
        resp.error_message = str_opt(NO_AUTHORIZER);
        return resp;
    }
    if !authz.cluster(AclOperation::Describe) {
        let e = cluster_denied();
        resp.error_code = e.code();
        resp.error_message = e.message();
        return resp;
    }
    let Some(filter) = filter_of(
        req.resource_type_filter,
        &req.resource_name_filter,
        req.pattern_type_filter,
        &req.principal_filter,
        &req.host_filter,
        req.operation,
        req.permission_type,
    ) else {
        return resp; // an unknown code matches nothing
    };
    let all = broker.metadata.image().acls.clone();
    let mut by_resource: BTreeMap<(ResourceType, String, PatternType), Vec<&AclBinding>> =
        BTreeMap::new();
    for b in all.iter().filter(|b| filter.matches(b)) {
        by_resource
            .entry((b.resource_type, b.resource_name.clone(), b.pattern_type))
            .or_default()
            .push(b);
    }
    resp.resources = by_resource
        .into_iter()
        .map(|((rt, name, pt), bindings)| {
            let mut r = DescribeAclsResource::default();
            r.resource_type = rt.code();
            r.resource_name = strb(name);
            r.pattern_type = pt.code();
            r.acls = bindings
                .into_iter()
                .map(|b| {
                    let mut d = AclDescription::default();
                    d.principal = strb(b.principal.clone());
                    d.host = strb(b.host.clone());
                    d.operation = b.operation.code();
                    d.permission_type = b.permission.code();
                    d
                })
                .collect();
            r
        })
        .collect();
    resp
}

pub fn delete(broker: &Broker, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let authz = Authz::current(broker);
    let failed = |code: ResponseError, message: String| {
        let mut r = DeleteAclsFilterResult::default();
        r.error_code = code.code();
        r.error_message = Some(StrBytes::from_string(message));
        r
    };
    let mut resp = DeleteAclsResponse::default();
    if let Some((code, message)) = refused_whole(&authz) {
        resp.filter_results = req
            .filters
            .iter()
            .map(|_| failed(code, message.clone()))
            .collect();
        return resp;
    }
    let parsed: Vec<Option<AclFilter>> = req
        .filters
        .iter()
        .map(|f| {
            filter_of(
                f.resource_type_filter,
                &f.resource_name_filter,
                f.pattern_type_filter,
                &f.principal_filter,
                &f.host_filter,
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclFilter> = parsed.iter().flatten().cloned().collect();
    let deleted = if valid.is_empty() {
        Ok(Vec::new())
    } else {
        broker.metadata.delete_acls(valid.clone())
    };
    if deleted.is_ok() {
        await_view(broker, |now| {
            !now.iter().any(|b| valid.iter().any(|f| f.matches(b)))
        });
    }
    let mut matched = match &deleted {
        Ok(m) => m.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    resp.filter_results = parsed
        .into_iter()
        .map(|f| match (f, &deleted) {
            (None, _) => failed(
                ResponseError::InvalidRequest,
                "Invalid filter: an unknown resource type, pattern type, operation or permission"
                    .into(),
            ),
            (Some(_), Err(e)) => failed(e.code, e.message.clone()),
            (Some(_), Ok(_)) => {
                let mut r = DeleteAclsFilterResult::default();
                r.matching_acls = matched
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|b| {
                        let mut m = DeleteAclsMatchingAcl::default();
                        m.resource_type = b.resource_type.code();
                        m.resource_name = strb(b.resource_name);
                        m.pattern_type = b.pattern_type.code();
                        m.principal = strb(b.principal);
                        m.host = strb(b.host);
                        m.operation = b.operation.code();
                        m.permission_type = b.permission.code();
                        m
                    })
                    .collect();
                r
            }
        })
        .collect();
    resp
}
