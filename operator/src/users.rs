//! What a `KafkaUser` asks of its cluster's controller, worked out without
//! I/O: the ACL bindings and quota values its spec names, and the changes
//! (credential, ACLs, quotas) that take the controller's metadata from what
//! it holds to what the spec says. Only what the operator made itself (as
//! the user's status records it) is ever removed, so ACLs and quotas set by
//! hand with `kafka-acls` / `kafka-configs` are left alone.

use std::collections::{BTreeMap, BTreeSet};

use skein_controller::acls::{
    AclOperation, AclPermission, PatternFilter, PatternType, ResourceType, CLUSTER_NAME, WILDCARD,
};
use skein_controller::quotas::QuotaChange;
use skein_controller::{
    AclBinding, AclFilter, ClusterView, QuotaEntity, QuotaEntityType, ScramCredential,
    ScramMechanism, ScramUpsertion,
};
use skein_crds::{
    AclOperationName, AclPatternType, AclResourceType, AclRuleType, AuthenticationType, KafkaUser,
    ManagedAcl,
};

/// Iterations of the credentials the operator stores (Kafka's minimum,
/// what `kafka-configs` uses by default).
pub const SCRAM_ITERATIONS: u32 = 4096;

/// The quota keys a KafkaUser manages.
pub const QUOTA_KEYS: [&str; 3] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
];

/// A spec the controller would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidUser(pub String);

/// The name of the user's principal: its user name, or for a `tls` user
/// its certificate's subject as the brokers see it (`CN=<name>`). ACLs are
/// for `User:<this>` and quotas for the entity `user=<this>`.
pub fn principal_name(user: &KafkaUser) -> String {
    match user.spec.authentication.as_ref().map(|a| a.type_) {
        Some(AuthenticationType::Tls) => format!("CN={}", user.user_name()),
        _ => user.user_name().to_string(),
    }
}

/// `User:<principal name>`.
pub fn principal(user: &KafkaUser) -> String {
    format!("User:{}", principal_name(user))
}

/// The SCRAM mechanism of a SCRAM user (none for `tls`).
pub fn mechanism(t: AuthenticationType) -> Option<ScramMechanism> {
    match t {
        AuthenticationType::ScramSha512 => Some(ScramMechanism::Sha512),
        AuthenticationType::ScramSha256 => Some(ScramMechanism::Sha256),
        AuthenticationType::Tls => None,
    }
}

fn operation(op: AclOperationName) -> AclOperation {
    match op {
        AclOperationName::All => AclOperation::All,
        AclOperationName::Read => AclOperation::Read,
        AclOperationName::Write => AclOperation::Write,
        AclOperationName::Create => AclOperation::Create,
        AclOperationName::Delete => AclOperation::Delete,
        AclOperationName::Alter => AclOperation::Alter,
        AclOperationName::Describe => AclOperation::Describe,
        AclOperationName::ClusterAction => AclOperation::ClusterAction,
        AclOperationName::DescribeConfigs => AclOperation::DescribeConfigs,
        AclOperationName::AlterConfigs => AclOperation::AlterConfigs,
        AclOperationName::IdempotentWrite => AclOperation::IdempotentWrite,
    }
}

/// The bindings the spec's rules expand to (one per operation).
pub fn desired_acls(user: &KafkaUser) -> Result<BTreeSet<AclBinding>, InvalidUser> {
    let principal = principal(user);
    let mut out = BTreeSet::new();
    let Some(authz) = &user.spec.authorization else {
        return Ok(out);
    };
    for (i, rule) in authz.acls.iter().enumerate() {
        let resource_type = match rule.resource.type_ {
            AclResourceType::Topic => ResourceType::Topic,
            AclResourceType::Group => ResourceType::Group,
            AclResourceType::Cluster => ResourceType::Cluster,
            AclResourceType::TransactionalId => ResourceType::TransactionalId,
        };
        let resource_name = match (resource_type, &rule.resource.name) {
            (ResourceType::Cluster, None) => CLUSTER_NAME.to_string(),
            (_, None) => WILDCARD.to_string(),
            (_, Some(n)) => n.clone(),
        };
        let pattern_type = match rule.resource.pattern_type {
            AclPatternType::Literal => PatternType::Literal,
            AclPatternType::Prefix => PatternType::Prefixed,
        };
        let permission = match rule.type_ {
            AclRuleType::Allow => AclPermission::Allow,
            AclRuleType::Deny => AclPermission::Deny,
        };
        for op in &rule.operations {
            let b = AclBinding {
                resource_type,
                resource_name: resource_name.clone(),
                pattern_type,
                principal: principal.clone(),
                host: rule.host.clone(),
                operation: operation(*op),
                permission,
            };
            skein_controller::acls::check_binding(&b)
                .map_err(|why| InvalidUser(format!("spec.authorization.acls[{i}]: {why}")))?;
            out.insert(b);
        }
    }
    Ok(out)
}

/// The filter that matches exactly `b` (DeleteAcls).
pub fn exact_filter(b: &AclBinding) -> AclFilter {
    AclFilter {
        resource_type: Some(b.resource_type),
        resource_name: Some(b.resource_name.clone()),
        pattern: PatternFilter::Is(b.pattern_type),
        principal: Some(b.principal.clone()),
        host: Some(b.host.clone()),
        operation: Some(b.operation),
        permission: Some(b.permission),
    }
}

/// The record of a binding in the user's status.
pub fn managed(b: &AclBinding) -> ManagedAcl {
    ManagedAcl {
        resource_type: b.resource_type.name().into(),
        resource_name: b.resource_name.clone(),
        pattern_type: b.pattern_type.name().into(),
        operation: b.operation.name().into(),
        host: b.host.clone(),
        permission: b.permission.name().into(),
    }
}

/// The binding a status record names (`None` for a record this version
/// cannot read, which is then left alone).
pub fn from_managed(m: &ManagedAcl, principal: &str) -> Option<AclBinding> {
    fn by_name<T: Copy>(all: &[T], name: &str, f: impl Fn(T) -> &'static str) -> Option<T> {
        all.iter().copied().find(|v| f(*v) == name)
    }
    Some(AclBinding {
        resource_type: by_name(
            ResourceType::ALL_VALUES,
            &m.resource_type,
            ResourceType::name,
        )?,
        resource_name: m.resource_name.clone(),
        pattern_type: by_name(PatternType::ALL_VALUES, &m.pattern_type, PatternType::name)?,
        principal: principal.to_string(),
        host: m.host.clone(),
        operation: by_name(AclOperation::ALL_VALUES, &m.operation, AclOperation::name)?,
        permission: by_name(
            AclPermission::ALL_VALUES,
            &m.permission,
            AclPermission::name,
        )?,
    })
}

/// The quota values the spec sets, by Kafka's keys.
pub fn desired_quotas(user: &KafkaUser) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    if let Some(q) = &user.spec.quotas {
        for (key, value) in QUOTA_KEYS.iter().zip([
            q.producer_byte_rate,
            q.consumer_byte_rate,
            q.request_percentage,
        ]) {
            if let Some(v) = value {
                out.insert(key.to_string(), v as f64);
            }
        }
    }
    out
}

/// The quota entity `user=<name>`.
pub fn quota_entity(user_name: &str) -> QuotaEntity {
    BTreeMap::from([(QuotaEntityType::User, Some(user_name.to_string()))])
}

/// What the operator last applied for a user (from its status).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    pub mechanism: Option<ScramMechanism>,
    pub acls: BTreeSet<AclBinding>,
    pub quota_keys: BTreeSet<String>,
}

impl Applied {
    pub fn of(user: &KafkaUser) -> Self {
        let principal = principal(user);
        let Some(s) = &user.status else {
            return Applied::default();
        };
        Applied {
            mechanism: s.mechanism.as_deref().and_then(ScramMechanism::from_name),
            acls: s
                .acls
                .iter()
                .filter_map(|m| from_managed(m, &principal))
                .collect(),
            quota_keys: s.quotas.iter().cloned().collect(),
        }
    }
}

/// The changes to send to the controller; empty when it already agrees.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub upsert: Vec<ScramUpsertion>,
    pub delete_credentials: Vec<(String, ScramMechanism)>,
    pub create_acls: Vec<AclBinding>,
    pub delete_acls: Vec<AclBinding>,
    pub quotas: Vec<QuotaChange>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.upsert.is_empty()
            && self.delete_credentials.is_empty()
            && self.create_acls.is_empty()
            && self.delete_acls.is_empty()
            && self.quotas.is_empty()
    }
}

/// What the user wants now: a credential for a password (or none), ACLs,
/// quota values.
pub struct Desired<'a> {
    pub user_name: &'a str,
    pub credential: Option<(ScramMechanism, &'a str)>,
    pub acls: &'a BTreeSet<AclBinding>,
    pub quotas: &'a BTreeMap<String, f64>,
}

/// The changes from the controller's `view` to `want`. A stored credential
/// that already matches the password is kept (its salt too); a mechanism the
/// operator stored before and no longer wants is deleted.
pub fn plan(view: &ClusterView, want: &Desired<'_>, applied: &Applied) -> Plan {
    let mut plan = Plan::default();
    let stored = view.scram_credentials.get(want.user_name);
    if let Some((m, password)) = want.credential {
        let current = stored.and_then(|c| c.get(&m));
        if !current.is_some_and(|c| c.is_for_password(m, password)) {
            plan.upsert.push(ScramUpsertion {
                user: want.user_name.to_string(),
                mechanism: m,
                credential: ScramCredential::from_password(m, password, SCRAM_ITERATIONS),
            });
        }
    }
    if let Some(old) = applied.mechanism {
        let still_wanted = want.credential.is_some_and(|(m, _)| m == old);
        if !still_wanted && stored.is_some_and(|c| c.contains_key(&old)) {
            plan.delete_credentials
                .push((want.user_name.to_string(), old));
        }
    }
    plan.create_acls = want
        .acls
        .iter()
        .filter(|b| !view.acls.contains(*b))
        .cloned()
        .collect();
    plan.delete_acls = applied
        .acls
        .iter()
        .filter(|b| !want.acls.contains(*b) && view.acls.contains(*b))
        .cloned()
        .collect();
    let entity = quota_entity(want.user_name);
    for (key, value) in want.quotas {
        if view.client_quotas.get(&entity, key) != Some(*value) {
            plan.quotas.push(QuotaChange {
                entity: entity.clone(),
                key: key.clone(),
                value: Some(*value),
            });
        }
    }
    for key in &applied.quota_keys {
        if !want.quotas.contains_key(key) && view.client_quotas.get(&entity, key).is_some() {
            plan.quotas.push(QuotaChange {
                entity: entity.clone(),
                key: key.clone(),
                value: None,
            });
        }
    }
    plan
}

/// The `sasl.jaas.config` a Java client (or `kafka-*.sh --command-config`)
/// uses for a SCRAM user. Quotes and backslashes in the password are
/// escaped as JAAS reads them.
pub fn jaas_config(user_name: &str, password: &str) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{}\" password=\"{}\";",
        esc(user_name),
        esc(password)
    )
}

/// A new random password: 32 letters and digits (about 190 bits).
pub fn generate_password() -> String {
    use ring::rand::SecureRandom;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let rng = ring::rand::SystemRandom::new();
    let mut out = String::with_capacity(32);
    while out.len() < 32 {
        let mut b = [0u8; 1];
        rng.fill(&mut b).expect("the system random source works");
        // 62 * 4 = 248: reject the top bytes so every symbol is as likely.
        if (b[0] as usize) < ALPHABET.len() * 4 {
            out.push(ALPHABET[b[0] as usize % ALPHABET.len()] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use skein_controller::quotas::QuotaValue;
    use skein_crds::KafkaUserStatus;

    use super::*;

    fn user(spec: serde_json::Value) -> KafkaUser {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "skein.dev/v1alpha1",
            "kind": "KafkaUser",
            "metadata": {"name": "alice", "namespace": "ns"},
            "spec": spec,
        }))
        .expect("a valid KafkaUser")
    }

    fn alice() -> KafkaUser {
        user(serde_json::json!({
            "clusterRef": {"name": "c"},
            "authentication": {"type": "scram-sha-512"},
            "authorization": {"acls": [
                {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]},
                {"resource": {"type": "group", "name": "app-", "patternType": "prefix"}, "operations": ["Read"]},
                {"resource": {"type": "topic", "name": "secret"}, "operations": ["All"], "type": "deny", "host": "10.0.0.1"},
                {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
            ]},
            "quotas": {"producerByteRate": 1048576, "requestPercentage": 25},
        }))
    }

    /// The view after a plan was carried out (what the controller would hold).
    fn applied_to(mut view: ClusterView, plan: &Plan) -> ClusterView {
        let mut creds = (*view.scram_credentials).clone();
        for u in &plan.upsert {
            creds
                .entry(u.user.clone())
                .or_default()
                .insert(u.mechanism, u.credential.clone());
        }
        for (user, m) in &plan.delete_credentials {
            if let Some(c) = creds.get_mut(user) {
                c.remove(m);
            }
        }
        creds.retain(|_, c| !c.is_empty());
        view.scram_credentials = Arc::new(creds);
        let mut acls = (*view.acls).clone();
        acls.extend(plan.create_acls.iter().cloned());
        for b in &plan.delete_acls {
            acls.retain(|x| !exact_filter(b).matches(x));
        }
        view.acls = Arc::new(acls);
        let mut quotas = (*view.client_quotas).clone();
        for c in &plan.quotas {
            let e = quotas.0.entry(c.entity.clone()).or_default();
            match c.value {
                Some(v) => {
                    e.insert(c.key.clone(), QuotaValue(v));
                }
                None => {
                    e.remove(&c.key);
                }
            }
        }
        quotas.0.retain(|_, q| !q.is_empty());
        view.client_quotas = Arc::new(quotas);
        view
    }

    fn status_after(
        user: &KafkaUser,
        acls: &BTreeSet<AclBinding>,
        mechanism: Option<&str>,
    ) -> KafkaUser {
        let mut u = user.clone();
        u.status = Some(KafkaUserStatus {
            mechanism: mechanism.map(str::to_string),
            acls: acls.iter().map(managed).collect(),
            quotas: desired_quotas(user).into_keys().collect(),
            ..KafkaUserStatus::default()
        });
        u
    }

    #[test]
    fn rules_expand_to_one_binding_per_operation_for_the_users_principal() {
        let acls = desired_acls(&alice()).unwrap();
        assert_eq!(acls.len(), 5);
        assert!(acls.iter().all(|b| b.principal == "User:alice"));
        let cluster = acls
            .iter()
            .find(|b| b.resource_type == ResourceType::Cluster)
            .unwrap();
        assert_eq!(cluster.resource_name, "kafka-cluster");
        assert_eq!(cluster.operation, AclOperation::IdempotentWrite);
        let group = acls
            .iter()
            .find(|b| b.resource_type == ResourceType::Group)
            .unwrap();
        assert_eq!(
            (group.pattern_type, group.resource_name.as_str()),
            (PatternType::Prefixed, "app-")
        );
        let deny = acls
            .iter()
            .find(|b| b.permission == AclPermission::Deny)
            .unwrap();
        assert_eq!(
            (deny.host.as_str(), deny.operation),
            ("10.0.0.1", AclOperation::All)
        );
        for b in &acls {
            assert_eq!(from_managed(&managed(b), "User:alice").as_ref(), Some(b));
        }
    }

    #[test]
    fn a_tls_users_principal_is_its_certificates_subject() {
        let mut u = alice();
        u.spec.authentication =
            Some(serde_json::from_value(serde_json::json!({"type": "tls"})).unwrap());
        assert_eq!(principal(&u), "User:CN=alice");
        assert!(desired_acls(&u)
            .unwrap()
            .iter()
            .all(|b| b.principal == "User:CN=alice"));
        assert_eq!(mechanism(AuthenticationType::Tls), None);
        assert_eq!(principal(&alice()), "User:alice");
    }

    #[test]
    fn a_cluster_rule_naming_another_resource_is_refused() {
        let u = user(serde_json::json!({
            "clusterRef": {"name": "c"},
            "authorization": {"acls": [
                {"resource": {"type": "cluster", "name": "other"}, "operations": ["Alter"]},
            ]},
        }));
        let err = desired_acls(&u).unwrap_err();
        assert!(
            err.0.contains("acls[0]") && err.0.contains("kafka-cluster"),
            "{err}"
        );
    }

    #[test]
    fn a_plan_converges_and_then_is_empty() {
        let u = alice();
        let acls = desired_acls(&u).unwrap();
        let quotas = desired_quotas(&u);
        let want = Desired {
            user_name: "alice",
            credential: Some((ScramMechanism::Sha512, "pw-1")),
            acls: &acls,
            quotas: &quotas,
        };
        let first = plan(&ClusterView::default(), &want, &Applied::default());
        assert_eq!(first.upsert.len(), 1);
        assert_eq!(first.create_acls.len(), 5);
        assert_eq!(first.quotas.len(), 2);
        let view = applied_to(ClusterView::default(), &first);
        assert!(view.scram_credentials["alice"][&ScramMechanism::Sha512]
            .is_for_password(ScramMechanism::Sha512, "pw-1"));
        let recorded = status_after(&u, &acls, Some("SCRAM-SHA-512"));
        assert!(
            plan(&view, &want, &Applied::of(&recorded)).is_empty(),
            "nothing left to do"
        );

        // A new password replaces the credential and nothing else.
        let want2 = Desired {
            credential: Some((ScramMechanism::Sha512, "pw-2")),
            ..want
        };
        let second = plan(&view, &want2, &Applied::of(&recorded));
        assert_eq!(
            (
                second.upsert.len(),
                second.create_acls.len(),
                second.quotas.len()
            ),
            (1, 0, 0)
        );
    }

    #[test]
    fn removed_rules_and_quotas_go_but_hand_made_acls_and_quotas_stay() {
        let u = alice();
        let acls = desired_acls(&u).unwrap();
        let quotas = desired_quotas(&u);
        let want = Desired {
            user_name: "alice",
            credential: Some((ScramMechanism::Sha512, "pw")),
            acls: &acls,
            quotas: &quotas,
        };
        let mut view = applied_to(
            ClusterView::default(),
            &plan(&ClusterView::default(), &want, &Applied::default()),
        );
        // Made by hand with kafka-acls / kafka-configs for the same user.
        let by_hand = AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: "audit".into(),
            pattern_type: PatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Write,
            permission: AclPermission::Allow,
        };
        let mut all = (*view.acls).clone();
        all.insert(by_hand.clone());
        view.acls = Arc::new(all);
        let mut q = (*view.client_quotas).clone();
        q.0.entry(quota_entity("alice"))
            .or_default()
            .insert("consumer_byte_rate".into(), QuotaValue(5000.0));
        view.client_quotas = Arc::new(q);
        let recorded = status_after(&u, &acls, Some("SCRAM-SHA-512"));

        // The user drops every rule but the topic read, and its quotas.
        let fewer: BTreeSet<AclBinding> = acls
            .iter()
            .filter(|b| b.resource_name == "orders" && b.operation == AclOperation::Read)
            .cloned()
            .collect();
        let none = BTreeMap::new();
        let want = Desired {
            acls: &fewer,
            quotas: &none,
            ..want
        };
        let p = plan(&view, &want, &Applied::of(&recorded));
        assert_eq!(p.delete_acls.len(), 4);
        assert!(!p.delete_acls.contains(&by_hand));
        assert!(p.create_acls.is_empty() && p.upsert.is_empty());
        let removed: BTreeSet<&str> = p
            .quotas
            .iter()
            .filter(|c| c.value.is_none())
            .map(|c| c.key.as_str())
            .collect();
        assert_eq!(
            removed,
            BTreeSet::from(["producer_byte_rate", "request_percentage"])
        );
        let after = applied_to(view, &p);
        assert!(after.acls.contains(&by_hand));
        assert_eq!(
            after
                .client_quotas
                .get(&quota_entity("alice"), "consumer_byte_rate"),
            Some(5000.0)
        );

        // Switching the mechanism deletes the old credential.
        let want = Desired {
            credential: Some((ScramMechanism::Sha256, "pw")),
            ..want
        };
        let p = plan(&after, &want, &Applied::of(&recorded));
        assert_eq!(p.upsert[0].mechanism, ScramMechanism::Sha256);
        assert_eq!(
            p.delete_credentials,
            vec![("alice".to_string(), ScramMechanism::Sha512)]
        );
    }

    #[test]
    fn passwords_are_random_alphanumerics_and_jaas_escapes_quotes() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
        assert_eq!(
            jaas_config("bob", r#"p"w\x"#),
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="p\"w\\x";"#
        );
    }
}
