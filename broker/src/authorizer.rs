//! Authorization, as Kafka's `StandardAuthorizer` does it: on when
//! `authorizer.class.name` names it, off (everything allowed) otherwise.
//! `super.users` may do anything; with no ACL naming a resource,
//! `allow.everyone.if.no.acl.found` decides. The ACLs come from the
//! controller in the broker's view; the decision itself is
//! [`skein_controller::acls::authorize`].

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use skein_controller::acls::{self, AclOperation, Acls, Decision, ResourceType};

pub use crate::authorizer_config::{AuthorizerConfig, STANDARD_AUTHORIZER};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::principal::Principal;

/// The authorization context of one request: its principal and host, and
/// the ACLs as the broker knows them when it started.
pub struct Authz {
    config: AuthorizerConfig,
    acls: Arc<Acls>,
    principal: String,
    host: String,
}

impl Authz {
    /// The context of the request being handled (`User:ANONYMOUS` outside
    /// a connection, as in the fuzz harness).
    pub fn current(broker: &Broker) -> Self {
        let principal = crate::request_context::PRINCIPAL
            .try_with(|p| p.to_string())
            .unwrap_or_else(|_| Principal::anonymous().to_string());
        let host = crate::request_context::CLIENT_ADDR
            .try_with(|a| a.ip().to_string())
            .unwrap_or_else(|_| "127.0.0.1".into());
        Authz {
            config: broker.config.authorizer.clone(),
            acls: if broker.config.authorizer.enabled {
                broker.metadata.image().acls.clone()
            } else {
                Arc::default()
            },
            principal,
            host,
        }
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Whether the principal may do `op` on the resource.
    pub fn allowed(&self, op: AclOperation, resource_type: ResourceType, name: &str) -> bool {
        if !self.config.enabled || self.config.super_users.contains(&self.principal) {
            return true;
        }
        match acls::authorize(
            &self.acls,
            &self.principal,
            &self.host,
            op,
            resource_type,
            name,
        ) {
            Decision::Allowed => true,
            Decision::Denied => false,
            Decision::NoAcl => self.config.allow_everyone_if_no_acl_found,
        }
    }

    /// Whether the principal may do `op` on some resource of the type.
    pub fn allowed_any(&self, op: AclOperation, resource_type: ResourceType) -> bool {
        if !self.config.enabled || self.config.super_users.contains(&self.principal) {
            return true;
        }
        match acls::authorize_any(&self.acls, &self.principal, &self.host, op, resource_type) {
            Decision::Allowed => true,
            Decision::Denied => false,
            Decision::NoAcl => self.config.allow_everyone_if_no_acl_found,
        }
    }

    pub fn topic(&self, op: AclOperation, topic: &str) -> bool {
        self.allowed(op, ResourceType::Topic, topic)
    }

    pub fn group(&self, op: AclOperation, group: &str) -> bool {
        self.allowed(op, ResourceType::Group, group)
    }

    pub fn cluster(&self, op: AclOperation) -> bool {
        self.allowed(op, ResourceType::Cluster, acls::CLUSTER_NAME)
    }

    /// The `authorized_operations` bit field of a resource: one bit per
    /// operation Kafka supports on its type that the principal may do.
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        supported_operations(resource_type)
            .iter()
            .filter(|op| self.allowed(**op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

/// TOPIC_AUTHORIZATION_FAILED, with Kafka's message.
pub fn topic_denied() -> ApiError {
    ApiError::new(
        ResponseError::TopicAuthorizationFailed,
        "Topic authorization failed.",
    )
}

/// CLUSTER_AUTHORIZATION_FAILED, with Kafka's message.
pub fn cluster_denied() -> ApiError {
    ApiError::new(
        ResponseError::ClusterAuthorizationFailed,
        "Cluster authorization failed.",
    )
}

/// Whether a topic may be created (automatically or by CreateTopics):
/// Create on the cluster, or on the topic.
pub fn may_create(authz: &Authz, topic: &str) -> bool {
    authz.cluster(AclOperation::Create) || authz.topic(AclOperation::Create, topic)
}

/// The operations Kafka defines on each resource type
/// (`AclEntry.supportedOperations`).
pub fn supported_operations(resource_type: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn super_users_and_the_no_acl_default() {
        let acls: Acls = [acls::AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: "t".into(),
            pattern_type: acls::PatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: acls::AclPermission::Allow,
        }]
        .into_iter()
        .collect();
        let authz = |who: &str, allow: bool| Authz {
            config: AuthorizerConfig {
                enabled: true,
                super_users: ["User:admin".to_string()].into_iter().collect(),
                allow_everyone_if_no_acl_found: allow,
            },
            acls: Arc::new(acls.clone()),
            principal: who.into(),
            host: "127.0.0.1".into(),
        };
        assert!(authz("User:alice", false).topic(AclOperation::Read, "t"));
        assert!(
            !authz("User:bob", true).topic(AclOperation::Read, "t"),
            "t has ACLs"
        );
        assert!(
            authz("User:bob", true).topic(AclOperation::Read, "u"),
            "u has none"
        );
        assert!(!authz("User:bob", false).topic(AclOperation::Read, "u"));
        assert!(authz("User:admin", false).cluster(AclOperation::Alter));
        // Read implies Describe: bits 3 (READ) and 8 (DESCRIBE).
        assert_eq!(
            authz("User:alice", false).authorized_operations(ResourceType::Topic, "t"),
            (1 << 3) | (1 << 8)
        );
    }
}
