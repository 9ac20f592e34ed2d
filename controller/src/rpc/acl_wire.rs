//! Control-plane conversions of ACLs: bindings in views and `CreateAcls`,
//! filters in `DeleteAcls`, and the bindings each filter matched.

use super::field_wire::Wire;
use super::pb;
use crate::acls::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternFilter, PatternType, ResourceType,
    ANY_CODE,
};

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

/// A binding of `CreateAcls`. One with a code this controller does not
/// know is not dropped silently (as a view drops it): it stands in as one
/// with an empty name, which the core refuses (and the whole request with
/// it).
impl Wire for AclBinding {
    type Pb = pb::AclBinding;
    fn to_pb(&self) -> pb::AclBinding {
        binding_to_pb(self)
    }
    fn from_pb(b: pb::AclBinding) -> Self {
        binding_from_pb(b).unwrap_or_else(|| AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: String::new(),
            pattern_type: PatternType::Literal,
            principal: String::new(),
            host: String::new(),
            operation: AclOperation::All,
            permission: AclPermission::Deny,
        })
    }
}

/// A filter of `DeleteAcls`; one with a code this controller does not know
/// matches nothing.
impl Wire for AclFilter {
    type Pb = pb::AclFilter;
    fn to_pb(&self) -> pb::AclFilter {
        filter_to_pb(self)
    }
    fn from_pb(f: pb::AclFilter) -> Self {
        filter_from_pb(f).unwrap_or(AclFilter {
            resource_name: Some(String::new()),
            pattern: PatternFilter::Is(PatternType::Literal),
            ..AclFilter::any()
        })
    }
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
    use crate::event::Event;
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
        let binding = <AclBinding as Wire>::from_pb(b);
        assert!(crate::acls::check_binding(&binding).is_err());
    }
}
