//! ACLs, Kafka's model: a binding allows or denies one principal, from one
//! host, one operation on the resources a pattern names. The controller
//! keeps them in its image (so they survive restarts and failover) and every
//! broker gets them in its view; [`authorize`] is the decision Kafka's
//! `StandardAuthorizer` makes.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The name of the cluster resource (Kafka allows no other).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal resource name and host that match every name and host.
pub const WILDCARD: &str = "*";
/// The principal that matches every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// Kafka's code for ANY in filters (resource type, pattern, operation,
/// permission).
pub const ANY_CODE: i8 = 1;

macro_rules! coded_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name { $($variant),* }

        impl $name {
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant),*];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code),* }
            }

            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// The name Kafka's tools print.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

coded_enum!(
    /// What an ACL protects (`ResourceType`; 0 is UNKNOWN, 1 ANY).
    ResourceType {
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

coded_enum!(
    /// How a binding's resource name matches (`PatternType`; 0 UNKNOWN,
    /// 1 ANY and 2 MATCH are for filters only).
    PatternType {
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

coded_enum!(
    /// What a principal may do (`AclOperation`; 0 UNKNOWN, 1 ANY).
    AclOperation {
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

coded_enum!(
    /// Allow or deny (`AclPermissionType`; 0 UNKNOWN, 1 ANY).
    AclPermission {
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `User:alice`, or `User:*` for everyone.
    pub principal: String,
    /// An IP address, or `*` for any host.
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} on {}:{}:{} from host {} for {}",
            self.permission,
            self.operation,
            self.resource_type,
            self.pattern_type,
            self.resource_name,
            self.host,
            self.principal
        )
    }
}

/// Every ACL of the cluster.
pub type Acls = BTreeSet<AclBinding>;

/// How a filter matches pattern types (`PatternType` in a filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatternFilter {
    /// Any pattern type; a name must be equal.
    Any,
    /// The bindings that would apply to a resource of this name: literal
    /// ones of the name or `*`, prefixed ones whose prefix it starts with.
    Match,
    /// Exactly this pattern type (and the name, if given).
    Is(PatternType),
}

impl PatternFilter {
    pub fn code(self) -> i8 {
        match self {
            PatternFilter::Any => 1,
            PatternFilter::Match => 2,
            PatternFilter::Is(p) => p.code(),
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(PatternFilter::Any),
            2 => Some(PatternFilter::Match),
            c => PatternType::from_code(c).map(PatternFilter::Is),
        }
    }
}

/// Which bindings DescribeAcls lists and DeleteAcls removes; `None` is ANY.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<AclOperation>,
    pub permission: Option<AclPermission>,
}

impl AclFilter {
    /// Matches every binding.
    pub fn any() -> Self {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// A filter from Kafka's wire codes (1 is ANY for the resource type,
    /// operation and permission); `None` when a code is unknown.
    pub fn from_codes(
        resource_type: i8,
        resource_name: Option<String>,
        pattern: i8,
        principal: Option<String>,
        host: Option<String>,
        operation: i8,
        permission: i8,
    ) -> Option<Self> {
        fn any_or<T>(code: i8, from: impl Fn(i8) -> Option<T>) -> Option<Option<T>> {
            if code == ANY_CODE {
                Some(None)
            } else {
                from(code).map(Some)
            }
        }
        Some(AclFilter {
            resource_type: any_or(resource_type, ResourceType::from_code)?,
            resource_name,
            pattern: PatternFilter::from_code(pattern)?,
            principal,
            host,
            operation: any_or(operation, AclOperation::from_code)?,
            permission: any_or(permission, AclPermission::from_code)?,
        })
    }

    /// Kafka's `AclBindingFilter.matches`.
    pub fn matches(&self, b: &AclBinding) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.resource_type.is_none_or(|t| t == b.resource_type)
            && self.pattern_matches(b)
            && eq(&self.principal, &b.principal)
            && eq(&self.host, &b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }

    fn pattern_matches(&self, b: &AclBinding) -> bool {
        if let PatternFilter::Is(p) = self.pattern {
            if p != b.pattern_type {
                return false;
            }
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Is(_) => *name == b.resource_name,
            PatternFilter::Match => match b.pattern_type {
                PatternType::Literal => *name == b.resource_name || b.resource_name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&b.resource_name),
            },
        }
    }
}

/// Checks a binding before it is created (Kafka's `AclControlManager`
/// and `AclApis` rules); the error is the message for INVALID_REQUEST.
pub fn check_binding(b: &AclBinding) -> Result<(), String> {
    if b.resource_name.is_empty() {
        return Err("Resource name should not be empty".into());
    }
    if b.resource_type == ResourceType::Cluster && b.resource_name != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    match b.principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
        _ => {
            return Err(format!(
                "Could not parse principal from `{}` (no colon is found)",
                b.principal
            ))
        }
    }
    if b.host.is_empty() {
        return Err("Invalid host: the host must not be empty".into());
    }
    Ok(())
}

/// Operations that an ALLOW of another operation implies (Kafka: Read,
/// Write, Delete and Alter imply Describe; AlterConfigs implies
/// DescribeConfigs).
fn implies(granted: AclOperation, wanted: AclOperation) -> bool {
    use AclOperation::*;
    granted == wanted
        || granted == All
        || (wanted == Describe && matches!(granted, Read | Write | Delete | Alter))
        || (wanted == DescribeConfigs && granted == AlterConfigs)
}

/// Whether `binding`'s pattern covers the resource `name` of its type.
fn covers(b: &AclBinding, name: &str) -> bool {
    match b.pattern_type {
        PatternType::Literal => b.resource_name == name || b.resource_name == WILDCARD,
        PatternType::Prefixed => name.starts_with(&b.resource_name),
    }
}

/// What an authorization found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    Denied,
    /// No ACL names the resource at all: `allow.everyone.if.no.acl.found`
    /// decides.
    NoAcl,
}

/// Kafka's `StandardAuthorizer` decision for `principal` (`User:alice`)
/// connecting from `host` (an IP address) doing `op` on a resource (super
/// users are the caller's business): a matching DENY wins, then a matching
/// ALLOW (with implied operations); with no ACL on the resource at all,
/// [`Decision::NoAcl`].
pub fn authorize(
    acls: &Acls,
    principal: &str,
    host: &str,
    op: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> Decision {
    let mut found = false;
    let mut allowed = false;
    for b in acls
        .iter()
        .filter(|b| b.resource_type == resource_type && covers(b, name))
    {
        found = true;
        if b.principal != principal && b.principal != WILDCARD_PRINCIPAL {
            continue;
        }
        if b.host != host && b.host != WILDCARD {
            continue;
        }
        match b.permission {
            AclPermission::Deny if b.operation == op || b.operation == AclOperation::All => {
                return Decision::Denied
            }
            AclPermission::Allow if implies(b.operation, op) => allowed = true,
            _ => {}
        }
    }
    match (allowed, found) {
        (true, _) => Decision::Allowed,
        (false, true) => Decision::Denied,
        (false, false) => Decision::NoAcl,
    }
}

/// Kafka's `authorizeByResourceType`: whether `principal` may do `op` on
/// at least one resource of the type (InitProducerId without a
/// transactional id asks it for Write on topics, KIP-679). An ALLOW on
/// `*` or on a name or prefix that no DENY covers is enough; with no ACL
/// at all, [`Decision::NoAcl`].
pub fn authorize_any(
    acls: &Acls,
    principal: &str,
    host: &str,
    op: AclOperation,
    resource_type: ResourceType,
) -> Decision {
    let first = authorize(acls, principal, host, op, resource_type, "hardcode");
    if first == Decision::Allowed {
        return first;
    }
    let relevant: Vec<&AclBinding> = acls
        .iter()
        .filter(|b| {
            b.resource_type == resource_type
                && (b.principal == principal || b.principal == WILDCARD_PRINCIPAL)
                && (b.host == host || b.host == WILDCARD)
                && (b.operation == op || b.operation == AclOperation::All)
        })
        .collect();
    let with = |perm: AclPermission, pattern: PatternType| {
        relevant
            .iter()
            .filter(move |b| b.permission == perm && b.pattern_type == pattern)
            .map(|b| b.resource_name.as_str())
    };
    let denied_literals: BTreeSet<&str> = with(AclPermission::Deny, PatternType::Literal).collect();
    let denied_prefixes: Vec<&str> = with(AclPermission::Deny, PatternType::Prefixed).collect();
    if denied_literals.contains(WILDCARD) {
        return Decision::Denied;
    }
    let covered = |name: &str| denied_prefixes.iter().any(|d| name.starts_with(d));
    let allowed = with(AclPermission::Allow, PatternType::Literal)
        .any(|n| n == WILDCARD || (!denied_literals.contains(n) && !covered(n)))
        || with(AclPermission::Allow, PatternType::Prefixed).any(|p| !covered(p));
    match (allowed, first) {
        (true, _) => Decision::Allowed,
        (false, Decision::NoAcl) if relevant.is_empty() => Decision::NoAcl,
        _ => Decision::Denied,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AclOperation::*;

    fn acl(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        who: &str,
        host: &str,
        op: AclOperation,
        perm: AclPermission,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: who.into(),
            host: host.into(),
            operation: op,
            permission: perm,
        }
    }

    fn topic(
        name: &str,
        pt: PatternType,
        who: &str,
        op: AclOperation,
        p: AclPermission,
    ) -> AclBinding {
        acl(ResourceType::Topic, name, pt, who, "*", op, p)
    }

    #[test]
    fn codes_round_trip_with_kafkas_numbers() {
        assert_eq!(ResourceType::Topic.code(), 2);
        assert_eq!(ResourceType::from_code(4), Some(ResourceType::Cluster));
        assert_eq!(
            ResourceType::from_code(1),
            None,
            "ANY is not a binding's type"
        );
        assert_eq!(IdempotentWrite.code(), 12);
        assert_eq!(AclOperation::from_code(1), None);
        assert_eq!(AclPermission::Allow.code(), 3);
        assert_eq!(PatternFilter::from_code(2), Some(PatternFilter::Match));
        assert_eq!(
            PatternFilter::from_code(4),
            Some(PatternFilter::Is(PatternType::Prefixed))
        );
        for op in AclOperation::ALL_VALUES {
            assert_eq!(AclOperation::from_code(op.code()), Some(*op));
        }
    }

    #[test]
    fn deny_wins_and_allow_implies_describe() {
        use AclPermission::*;
        use PatternType::*;
        let acls: Acls = [
            topic("orders", Literal, "User:alice", Read, Allow),
            topic("pay", Prefixed, "User:alice", Write, Allow),
            topic("payroll", Literal, "User:alice", Write, Deny),
            topic("*", Literal, "User:*", Describe, Allow),
            topic("cfg", Literal, "User:bob", AlterConfigs, Allow),
        ]
        .into_iter()
        .collect();
        let t = |who: &str, op, name: &str| {
            authorize(&acls, who, "10.0.0.1", op, ResourceType::Topic, name)
        };
        assert_eq!(t("User:alice", Read, "orders"), Decision::Allowed);
        assert_eq!(t("User:alice", Describe, "orders"), Decision::Allowed);
        assert_eq!(t("User:alice", Write, "orders"), Decision::Denied);
        assert_eq!(
            t("User:alice", Write, "payments"),
            Decision::Allowed,
            "prefixed"
        );
        assert_eq!(
            t("User:alice", Write, "payroll"),
            Decision::Denied,
            "deny wins"
        );
        assert_eq!(
            t("User:carol", Describe, "anything"),
            Decision::Allowed,
            "wildcards"
        );
        assert_eq!(
            t("User:carol", Read, "anything"),
            Decision::Denied,
            "the resource has ACLs"
        );
        assert_eq!(t("User:bob", DescribeConfigs, "cfg"), Decision::Allowed);
        assert_eq!(
            authorize(&acls, "User:alice", "h", Read, ResourceType::Group, "g"),
            Decision::NoAcl
        );
    }

    #[test]
    fn write_on_any_topic() {
        use AclPermission::*;
        use PatternType::*;
        let any = |acls: &[AclBinding]| {
            let acls: Acls = acls.iter().cloned().collect();
            authorize_any(&acls, "User:a", "h", Write, ResourceType::Topic)
        };
        assert_eq!(any(&[]), Decision::NoAcl);
        assert_eq!(
            any(&[topic("t", Literal, "User:a", Write, Allow)]),
            Decision::Allowed
        );
        // Nothing names "any topic": allow.everyone.if.no.acl.found decides.
        assert_eq!(
            any(&[topic("t", Literal, "User:a", Read, Allow)]),
            Decision::NoAcl
        );
        assert_eq!(
            any(&[
                topic("t", Literal, "User:a", Write, Allow),
                topic("t", Prefixed, "User:a", Write, Deny)
            ]),
            Decision::Denied
        );
        assert_eq!(
            any(&[
                topic("pay", Prefixed, "User:a", All, Allow),
                topic("p", Prefixed, "User:*", Write, Deny)
            ]),
            Decision::Denied
        );
        assert_eq!(
            any(&[topic("pay", Prefixed, "User:a", All, Allow)]),
            Decision::Allowed
        );
        assert_eq!(
            any(&[
                topic("*", Literal, "User:a", Write, Allow),
                topic("x", Literal, "User:a", Write, Deny)
            ]),
            Decision::Allowed
        );
    }

    #[test]
    fn hosts_and_all() {
        use AclPermission::*;
        let acls: Acls = [
            acl(
                ResourceType::Group,
                "g",
                PatternType::Literal,
                "User:a",
                "10.0.0.1",
                All,
                Allow,
            ),
            acl(
                ResourceType::Group,
                "g",
                PatternType::Literal,
                "User:a",
                "10.0.0.2",
                All,
                Deny,
            ),
        ]
        .into_iter()
        .collect();
        let g = |host: &str, op| authorize(&acls, "User:a", host, op, ResourceType::Group, "g");
        assert_eq!(g("10.0.0.1", Read), Decision::Allowed);
        assert_eq!(g("10.0.0.1", Delete), Decision::Allowed);
        assert_eq!(g("10.0.0.2", Read), Decision::Denied);
        assert_eq!(g("10.0.0.3", Read), Decision::Denied);
    }

    #[test]
    fn filters_match_as_kafkas() {
        use AclPermission::*;
        use PatternType::*;
        let lit = topic("orders", Literal, "User:a", Read, Allow);
        let star = topic("*", Literal, "User:a", Read, Allow);
        let pre = topic("ord", Prefixed, "User:b", Write, Deny);
        let mut f = AclFilter::any();
        assert!([&lit, &star, &pre].iter().all(|b| f.matches(b)));
        f.resource_name = Some("orders".into());
        assert!(
            f.matches(&lit) && !f.matches(&star) && !f.matches(&pre),
            "ANY: exact name"
        );
        f.pattern = PatternFilter::Match;
        assert!(
            f.matches(&lit) && f.matches(&star) && f.matches(&pre),
            "MATCH: what applies"
        );
        f.pattern = PatternFilter::Is(Prefixed);
        assert!(
            !f.matches(&lit) && !f.matches(&pre),
            "PREFIXED: exact prefix only"
        );
        f.resource_name = Some("ord".into());
        assert!(f.matches(&pre));
        let mut f = AclFilter::any();
        f.principal = Some("User:b".into());
        f.permission = Some(Deny);
        assert!(f.matches(&pre) && !f.matches(&lit));
    }

    #[test]
    fn bindings_are_checked() {
        let ok = topic(
            "t",
            PatternType::Literal,
            "User:a",
            Read,
            AclPermission::Allow,
        );
        assert!(check_binding(&ok).is_ok());
        let mut b = ok.clone();
        b.resource_name.clear();
        assert!(check_binding(&b).is_err());
        let mut b = ok.clone();
        b.resource_type = ResourceType::Cluster;
        assert!(check_binding(&b).unwrap_err().contains("kafka-cluster"));
        b.resource_name = CLUSTER_NAME.into();
        assert!(check_binding(&b).is_ok());
        let mut b = ok.clone();
        b.principal = "alice".into();
        assert!(check_binding(&b).is_err());
        let mut b = ok;
        b.host.clear();
        assert!(check_binding(&b).is_err());
    }
}
