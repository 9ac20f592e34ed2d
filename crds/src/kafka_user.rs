//! `KafkaUser`: one user of a `KafkaCluster` — its SCRAM credential, its
//! ACLs and its quotas, reconciled through the cluster's controller.

// Each `printcolumn(...)` repeats `type_ = ...`, which clippy mistakes for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::immutable::{immutable, immutable_optional};
use crate::topic::ClusterRef;

/// Desired state of a user.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "skein.dev",
    version = "v1alpha1",
    kind = "KafkaUser",
    namespaced,
    status = "KafkaUserStatus",
    shortname = "ku",
    category = "skein",
    derive = "PartialEq",
    doc = "A Kafka user of a KafkaCluster in the same namespace: credential, ACLs and quotas.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef.name"
    ),
    printcolumn(
        name = "Authentication",
        type_ = "string",
        json_path = ".spec.authentication.type"
    ),
    printcolumn(name = "Principal", type_ = "string", json_path = ".status.principal"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = immutable_optional("userName"))]
#[serde(rename_all = "camelCase")]
pub struct KafkaUserSpec {
    /// The KafkaCluster (same namespace) the user belongs to. Immutable.
    #[x_kube(validation = immutable("clusterRef"))]
    pub cluster_ref: ClusterRef,
    /// Kafka user name when it differs from `.metadata.name`; the principal
    /// is `User:<userName>` (`User:CN=<userName>` for a `tls` user).
    /// Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-zA-Z0-9._@-]+$"), length(min = 1, max = 128))]
    pub user_name: Option<String>,
    /// How the user proves who it is. Without it the user has no credential
    /// (ACLs and quotas still apply to the principal, for example one
    /// authenticated by a listener's other mechanism).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<UserAuthentication>,
    /// What the user may do (Kafka ACLs). Only the ACLs listed here are
    /// managed: ACLs for the same principal made with `kafka-acls` are left
    /// alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<UserAuthorization>,
    /// Client quotas of the user (entity `user=<userName>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<UserQuotas>,
}

/// A user's credential.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.password) || self.type != 'tls'").message("a tls user has a certificate, not a password"))]
pub struct UserAuthentication {
    /// `scram-sha-512` or `scram-sha-256`: the operator stores the salted
    /// credential through the controller (never the password) and writes the
    /// password and a `sasl.jaas.config` into the Secret named like the
    /// KafkaUser. `tls`: the operator issues a client certificate from the
    /// cluster's clients CA (subject `CN=<userName>`, so the principal is
    /// `User:CN=<userName>`) into that Secret (`user.crt`, `user.key`,
    /// `user-keystore.pem`, and the cluster CA as `ca.crt`), for listeners
    /// with `authentication.type: tls`.
    #[serde(rename = "type")]
    pub type_: AuthenticationType,
    /// Take the password from this Secret instead of generating one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<PasswordSource>,
}

/// A kind of credential: SCRAM (a KafkaUser's salted password, a listener's
/// SASL mechanism) or `tls` (a client certificate of the cluster's clients
/// CA, whose subject is the principal).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AuthenticationType {
    #[serde(rename = "scram-sha-512")]
    ScramSha512,
    #[serde(rename = "scram-sha-256")]
    ScramSha256,
    #[serde(rename = "tls")]
    Tls,
}

impl AuthenticationType {
    /// The SASL mechanism name (`SCRAM-SHA-512`); none for `tls`.
    pub fn mechanism(self) -> Option<&'static str> {
        match self {
            AuthenticationType::ScramSha512 => Some("SCRAM-SHA-512"),
            AuthenticationType::ScramSha256 => Some("SCRAM-SHA-256"),
            AuthenticationType::Tls => None,
        }
    }
}

/// Where a given password comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordSource {
    pub value_from: PasswordValueFrom,
}

/// A key of a Secret in the user's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordValueFrom {
    pub secret_key_ref: SecretKeyRef,
}

/// Secret name and key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub key: String,
}

/// The user's ACLs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserAuthorization {
    /// ACL rules, each for the user's principal.
    #[serde(default)]
    pub acls: Vec<AclRule>,
}

/// One ACL rule: operations on a resource, allowed or denied, from a host.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AclRule {
    pub resource: AclResource,
    /// Kafka's operation names: `Read`, `Write`, `Create`, `Delete`, `Alter`,
    /// `Describe`, `ClusterAction`, `DescribeConfigs`, `AlterConfigs`,
    /// `IdempotentWrite`, `All`.
    #[schemars(length(min = 1))]
    pub operations: Vec<AclOperationName>,
    /// An IP address, or `*` (the default) for every host.
    #[serde(default = "any_host")]
    pub host: String,
    /// `allow` (the default) or `deny`; a deny wins over any allow.
    #[serde(default, rename = "type")]
    pub type_: AclRuleType,
}

fn any_host() -> String {
    "*".into()
}

/// The resource a rule protects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AclResource {
    #[serde(rename = "type")]
    pub type_: AclResourceType,
    /// Resource name (`*` for all; not used for `cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `literal` (the default) or `prefix`.
    #[serde(default)]
    pub pattern_type: AclPatternType,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AclResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AclPatternType {
    #[default]
    Literal,
    Prefix,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AclRuleType {
    #[default]
    Allow,
    Deny,
}

/// Kafka's ACL operations, named as `kafka-acls --operation` takes them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AclOperationName {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
}

/// Quotas of a user; each absent value is no quota.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserQuotas {
    /// Bytes per second the user may produce (`producer_byte_rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub producer_byte_rate: Option<i64>,
    /// Bytes per second the user may fetch (`consumer_byte_rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub consumer_byte_rate: Option<i64>,
    /// Share of one request-handler thread, in percent (`request_percentage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub request_percentage: Option<i64>,
}

/// Observed state of a user.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KafkaUserStatus {
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `.metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `User:<userName>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The Secret holding the password and `sasl.jaas.config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The SASL mechanism whose credential the operator stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
    /// The ACLs the operator created, so removed rules are deleted and ACLs
    /// made by hand are not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acls: Vec<ManagedAcl>,
    /// The quota keys the operator set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<String>,
}

/// One ACL binding the operator created for the user (Kafka's names:
/// `TOPIC`, `LITERAL`, `READ`, `ALLOW`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedAcl {
    pub resource_type: String,
    pub resource_name: String,
    pub pattern_type: String,
    pub operation: String,
    pub host: String,
    pub permission: String,
}

impl KafkaUser {
    /// The Kafka user name: `spec.userName` or else `.metadata.name`.
    pub fn user_name(&self) -> &str {
        self.spec
            .user_name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
