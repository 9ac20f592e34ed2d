//! Control-plane conversions of ACLs: bindings in views and `CreateAcls`,
//! filters in `DeleteAcls`, and the bindings each filter matched.

use super::pb::{self, request};
use crate::acls::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternFilter, PatternType, ResourceType,
    ANY_CODE,
};
use crate::event::Event;

/// Kafka's ANY code in filters.
const ANY: i32 = ANY_CODE as i32;

pub fn binding_to_pb(b: &AclBinding) -> pb::AclBinding {
    pb::AclBinding {
        resource_type: b.resource_type.code().into(),
        resource_name: b.resource_name.clone(),
        pattern_type: b.pattern_type.code().into(),
        principal: b.principal.clone(),
        host: b.host.clone(),
        operation: b.operation.code().into(),
        permission: b.permission.code().into(),
    }
}

fn code(c: i32) -> i8 {
    i8::try_from(c).unwrap_or(0)
}

/// `None` for a code this controller does not know.
pub fn binding_from_pb(b: pb::AclBinding) -> Option<AclBinding> {
    Some(AclBinding {
        resource_type: ResourceType::from_code(code(b.resource_type))?,
        resource_name: b.resource_name,
        pattern_type: PatternType::from_code(code(b.pattern_type))?,
        principal: b.principal,
        host: b.host,
        operation: AclOperation::from_code(code(b.operation))?,
        permission: AclPermission::from_code(code(b.permission))?,
    })
}

pub fn bindings_from_pb(all: Vec<pb::AclBinding>) -> Vec<AclBinding> {
    all.into_iter().filter_map(binding_from_pb).collect()
}

fn filter_to_pb(f: &AclFilter) -> pb::AclFilter {
    pb::AclFilter {
        resource_type: f.resource_type.map_or(ANY, |t| t.code().into()),
        resource_name: f.resource_name.clone(),
        pattern_type: f.pattern.code().into(),
        principal: f.principal.clone(),
        host: f.host.clone(),
        operation: f.operation.map_or(ANY, |o| o.code().into()),
        permission: f.permission.map_or(ANY, |p| p.code().into()),
    }
}

/// `None` for a code this controller does not know.
fn filter_from_pb(f: pb::AclFilter) -> Option<AclFilter> {
    AclFilter::from_codes(
        code(f.resource_type),
        f.resource_name,
        code(f.pattern_type),
        f.principal,
        f.host,
        code(f.operation),
        code(f.permission),
    )
}

pub fn create_acls_to_pb(bindings: &[AclBinding]) -> request::Kind {
    request::Kind::CreateAcls(pb::CreateAcls {
        bindings: bindings.iter().map(binding_to_pb).collect(),
    })
}

/// A binding with a code this controller does not know is not dropped
/// silently: it stands in as one with an empty name, which the core refuses
/// (and the whole request with it).
pub fn create_acls_from_pb(c: pb::CreateAcls) -> Event {
    let bindings = c
        .bindings
        .into_iter()
        .map(|b| {
            binding_from_pb(b).unwrap_or_else(|| AclBinding {
                resource_type: ResourceType::Topic,
                resource_name: String::new(),
                pattern_type: PatternType::Literal,
                principal: String::new(),
                host: String::new(),
                operation: AclOperation::All,
                permission: AclPermission::Deny,
            })
        })
        .collect();
    Event::CreateAcls { bindings }
}

pub fn delete_acls_to_pb(filters: &[AclFilter]) -> request::Kind {
    request::Kind::DeleteAcls(pb::DeleteAcls {
        filters: filters.iter().map(filter_to_pb).collect(),
    })
}

/// A filter with a code this controller does not know matches nothing.
pub fn delete_acls_from_pb(d: pb::DeleteAcls) -> Event {
    let filters = d
        .filters
        .into_iter()
        .map(|f| {
            filter_from_pb(f).unwrap_or(AclFilter {
                resource_name: Some(String::new()),
                pattern: PatternFilter::Is(PatternType::Literal),
                ..AclFilter::any()
            })
        })
        .collect();
    Event::DeleteAcls { filters }
}

pub fn matches_to_pb(matched: &[Vec<AclBinding>]) -> pb::AclMatches {
    pb::AclMatches {
        filters: matched
            .iter()
            .map(|m| pb::AclFilterMatch {
                bindings: m.iter().map(binding_to_pb).collect(),
            })
            .collect(),
    }
}

pub fn matches_from_pb(m: pb::AclMatches) -> Vec<Vec<AclBinding>> {
    m.filters
        .into_iter()
        .map(|f| bindings_from_pb(f.bindings))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Reply;
    use crate::rpc::wire::{event_from_pb, event_to_pb, reply_from_pb, reply_to_pb};

    fn binding() -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Group,
            resource_name: "orders-".into(),
            pattern_type: PatternType::Prefixed,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }
    }

    #[test]
    fn acl_requests_and_replies_cross_the_wire() {
        let create = Event::CreateAcls {
            bindings: vec![binding()],
        };
        let kind = event_to_pb(&create).unwrap();
        assert_eq!(event_from_pb(1, kind), create);

        let mut filter = AclFilter::any();
        filter.resource_name = Some("orders-x".into());
        filter.pattern = PatternFilter::Match;
        filter.permission = Some(AclPermission::Allow);
        let delete = Event::DeleteAcls {
            filters: vec![filter, AclFilter::any()],
        };
        let kind = event_to_pb(&delete).unwrap();
        assert_eq!(event_from_pb(1, kind), delete);

        let reply = Reply::DeleteAcls {
            result: Ok(vec![vec![binding()], vec![]]),
        };
        let pb = reply_to_pb(7, Some(reply.clone()));
        assert_eq!(reply_from_pb(&delete, pb), reply);
    }

    #[test]
    fn unknown_codes_are_refused_not_dropped() {
        let mut b = binding_to_pb(&binding());
        b.operation = 99;
        let Event::CreateAcls { bindings } =
            create_acls_from_pb(pb::CreateAcls { bindings: vec![b] })
        else {
            panic!("a CreateAcls event")
        };
        assert_eq!(bindings.len(), 1);
        assert!(crate::acls::check_binding(&bindings[0]).is_err());
    }
}
