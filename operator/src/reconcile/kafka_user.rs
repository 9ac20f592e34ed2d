//! Reconciler of `KafkaUser`: the user's Secret (password and
//! `sasl.jaas.config`), its SCRAM credential, ACLs and quotas in the
//! cluster controller's metadata (replicated to every broker like topics).
//!
//! The user's Secret is named like the KafkaUser and written only while it
//! is absent or this KafkaUser's ([`crate::ownership`]): a KafkaUser named
//! like someone else's Secret is refused (`SecretOwnedByAnother`) and writes
//! nothing, so neither the Secret nor, through garbage collection, its
//! existence is taken from its owner. Names of the form of a cluster's
//! Secrets and Skein's own principals are refused before anything is read
//! ([`crate::validate::validate_user`]).
//!
//! Deleting a KafkaUser goes through the finalizer [`USER_FINALIZER`]: its
//! credential, the ACLs and quotas the operator made are removed, so the
//! user is locked out at once; the Secret goes with the KafkaUser (owner
//! reference). As with topics, a gone cluster releases the finalizer at once
//! and an unreachable one after a grace period.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use skein_controller::requests as req;
use skein_controller::{Call, ControlPlaneError};
use skein_crds::condition::condition;
use skein_crds::{
    AuthenticationType, ConditionStatus as S, ConditionType as T, KafkaCluster, KafkaUser,
    ManagedAcl,
};
use tracing::{info, warn};

use super::{cleanup_grace_over, get_cluster, get_opt, patch_status, publish};
use crate::cluster_controllers::ClusterController;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::manifests::ClusterNames;
use crate::ownership::{self, Foreign, Written};
use crate::users::{self, Applied, Desired, Plan};
use crate::validate::{self, InvalidSpec};

/// Resource kind label for metrics.
pub const KIND: &str = "KafkaUser";
/// Finalizer that removes a deleted user's credential, ACLs and quotas.
pub const USER_FINALIZER: &str = "skein.dev/user-credentials";
/// Key of the password in the user's Secret.
pub const PASSWORD_KEY: &str = "password";
/// Key of the JAAS line in the user's Secret.
pub const JAAS_KEY: &str = "sasl.jaas.config";
/// Re-check of a refusal whose cause is not watched (a Secret).
const REQUEUE_REFUSED: Duration = Duration::from_secs(30);

/// The part of `KafkaUser.status` the reconciler writes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserStatusPatch {
    pub conditions: Vec<Condition>,
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
    pub acls: Vec<ManagedAcl>,
    pub quotas: Vec<String>,
}

/// Reconciles one KafkaUser, timed and counted.
pub async fn reconcile(user: Arc<KafkaUser>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started(KIND);
    let ns = user.namespace().ok_or(Error::NotNamespaced)?;
    let users_api: Api<KafkaUser> = Api::namespaced(ctx.client.clone(), &ns);
    let (ctx, api) = (&ctx, &users_api);
    let now = Timestamp::now();
    finalizer(&users_api, USER_FINALIZER, user, |event| async move {
        match event {
            Finalizer::Apply(u) => apply(&u, ctx, api, now).await,
            Finalizer::Cleanup(u) => cleanup(&u, ctx, now).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Counts the failure and retries with a short delay.
pub fn error_policy(_user: Arc<KafkaUser>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(error = %error, "KafkaUser reconcile failed");
    ctx.metrics.reconcile_failed(KIND, error);
    Action::requeue(Duration::from_secs(10))
}

fn not_ready(user: &KafkaUser, reason: &str, message: &str, now: Time) -> UserStatusPatch {
    let prev = user
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    let generation = user.metadata.generation;
    // What was applied before stays recorded until it is undone.
    let s = user.status.clone().unwrap_or_default();
    UserStatusPatch {
        conditions: vec![
            condition(
                prev,
                T::Ready,
                S::False,
                reason,
                message,
                generation,
                now.clone(),
            ),
            condition(prev, T::Degraded, S::True, reason, message, generation, now),
        ],
        observed_generation: generation,
        principal: Some(users::principal(user)),
        secret: s.secret,
        mechanism: s.mechanism,
        acls: s.acls,
        quotas: s.quotas,
    }
}

async fn refuse(
    user: &KafkaUser,
    ctx: &Context,
    api: &Api<KafkaUser>,
    reason: &str,
    message: String,
    now: Time,
) -> Result<()> {
    let first_look =
        user.status.as_ref().and_then(|s| s.observed_generation) != user.metadata.generation;
    warn!(user = %user.name_any(), reason, "{message}");
    patch_status(
        api,
        &user.name_any(),
        &not_ready(user, reason, &message, now),
    )
    .await?;
    if first_look {
        publish(ctx, user, EventType::Warning, reason, "Reconcile", message).await;
    }
    Ok(())
}

async fn read_secret(ctx: &Context, ns: &str, name: &str) -> Result<Option<Secret>> {
    get_opt(ctx, ns, name, "Secret").await
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The password: from the Secret the spec names (one
/// [`validate::check_password_secret`] allows), else the one already in the
/// user's own Secret `existing`, else a new one. `Err` carries the refusal
/// (condition reason, message).
async fn password(
    user: &KafkaUser,
    cluster: &KafkaCluster,
    existing: Option<&Secret>,
    ctx: &Context,
    ns: &str,
) -> Result<Result<String, (&'static str, String)>> {
    let given = user
        .spec
        .authentication
        .as_ref()
        .and_then(|a| a.password.as_ref());
    if let Some(src) = given {
        let r = &src.value_from.secret_key_ref;
        let invalid = |why: String| Ok(Err(("PasswordSecretInvalid", why)));
        let Some(secret) = read_secret(ctx, ns, &r.name).await? else {
            return invalid(format!("password Secret {:?} not found", r.name));
        };
        if let Err(refused) = validate::check_password_secret(&secret, cluster) {
            return Ok(Err((refused.reason(), refused.to_string())));
        }
        return match secret_value(&secret, &r.key) {
            Some(p) if !p.is_empty() => Ok(Ok(p)),
            _ => invalid(format!(
                "password Secret {:?} has no non-empty UTF-8 key {:?}",
                r.name, r.key
            )),
        };
    }
    Ok(Ok(existing
        .and_then(|s| secret_value(s, PASSWORD_KEY))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(users::generate_password)))
}

/// Writes the user's Secret unless `existing` (as read at the start of the
/// reconcile) is someone else's ([`ownership::write`] checks again);
/// `Ok(Some(_))` is that refusal. A Secret that appears or changes after it
/// was read makes the write fail with a conflict, and the next reconcile
/// looks again.
async fn write_secret(
    ctx: &Context,
    ns: &str,
    user: &KafkaUser,
    secret: &Secret,
    existing: Option<&Secret>,
) -> Result<Option<Foreign>> {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    match ownership::write(&api, secret, existing, user.uid().as_deref()).await {
        Ok(Written::Done(_)) => Ok(None),
        Ok(Written::Foreign(f)) => Ok(Some(f)),
        Err(source) => Err(Error::Apply {
            kind: "Secret".into(),
            name: user.name_any(),
            source,
        }),
    }
}

/// A SCRAM user's Secret data.
fn scram_data(user: &KafkaUser, mechanism: &str, password: &str) -> BTreeMap<String, String> {
    let name = user.user_name();
    BTreeMap::from([
        (PASSWORD_KEY.to_string(), password.to_string()),
        (JAAS_KEY.to_string(), users::jaas_config(name, password)),
        ("username".to_string(), name.to_string()),
        ("sasl.mechanism".to_string(), mechanism.to_string()),
    ])
}

/// The user's Secret: owned by the KafkaUser, so it goes with it.
fn user_secret(
    user: &KafkaUser,
    data: BTreeMap<String, String>,
    annotations: Option<BTreeMap<String, String>>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            annotations,
            name: Some(user.name_any()),
            namespace: user.namespace(),
            labels: Some(BTreeMap::from([
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "skein-operator".to_string(),
                ),
                (
                    "skein.dev/cluster".to_string(),
                    user.spec.cluster_ref.name.clone(),
                ),
                ("skein.dev/kafka-user".to_string(), user.name_any()),
            ])),
            owner_references: user.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        type_: Some("Opaque".into()),
        ..Secret::default()
    }
}

/// Sends the plan's changes to the controller, credentials first (a new
/// user can log in once its ACLs appear), removals last.
fn execute(rt: &ClusterController, plan: &Plan) -> std::result::Result<(), ControlPlaneError> {
    let c = &rt.controller;
    if !plan.upsert.is_empty() || !plan.delete_credentials.is_empty() {
        c.call(req::AlterScramCredentials {
            upsertions: plan.upsert.clone(),
            deletions: plan.delete_credentials.clone(),
        })?;
    }
    if !plan.create_acls.is_empty() {
        c.call(req::CreateAcls {
            bindings: plan.create_acls.clone(),
        })?;
    }
    if !plan.quotas.is_empty() {
        c.call(req::AlterClientQuotas {
            changes: plan.quotas.clone(),
        })?;
    }
    if !plan.delete_acls.is_empty() {
        let filters = plan.delete_acls.iter().map(users::exact_filter).collect();
        c.call(req::DeleteAcls { filters })?;
    }
    Ok(())
}

async fn apply(
    user: &KafkaUser,
    ctx: &Context,
    api: &Api<KafkaUser>,
    now: Timestamp,
) -> Result<Action> {
    let ns = user.namespace().ok_or(Error::NotNamespaced)?;
    let name = user.name_any();
    let now_t = Time(now);
    // Names first: nothing is read or written for a user named like a
    // cluster's Secret or one of Skein's own principals.
    if let Err(invalid) = validate::validate_user(user) {
        refuse(user, ctx, api, invalid.reason(), invalid.to_string(), now_t).await?;
        return Ok(Action::await_change());
    }
    let cluster_name = &user.spec.cluster_ref.name;
    let Some(cluster) = get_cluster(ctx, &ns, cluster_name).await? else {
        let msg = format!("KafkaCluster {cluster_name:?} not found in namespace {ns:?}");
        refuse(user, ctx, api, "ClusterNotFound", msg, now_t).await?;
        return Ok(Action::requeue(Duration::from_secs(60)));
    };
    let acls = match users::desired_acls(user) {
        Ok(a) => a,
        Err(invalid) => {
            refuse(user, ctx, api, "InvalidAcl", invalid.to_string(), now_t).await?;
            return Ok(Action::await_change());
        }
    };
    let auth = user.spec.authentication.as_ref().map(|a| a.type_);
    let mechanism = auth.and_then(users::mechanism);
    // The user's Secret is written only while it is absent or this
    // KafkaUser's; anyone else's is not read either (its `password` key
    // would otherwise become this user's password).
    let existing = match auth {
        Some(_) => read_secret(ctx, &ns, &name).await?,
        None => None,
    };
    if let Err(foreign) = ownership::check(
        "Secret",
        &name,
        existing.as_ref().map(|s| &s.metadata),
        user.uid().as_deref(),
    ) {
        let invalid = InvalidSpec::SecretOwnedByAnother(foreign);
        refuse(user, ctx, api, invalid.reason(), invalid.to_string(), now_t).await?;
        return Ok(Action::requeue(REQUEUE_REFUSED));
    }
    let password = match mechanism {
        None => None,
        Some(_) => match password(user, &cluster, existing.as_ref(), ctx, &ns).await? {
            Ok(p) => Some(p),
            Err((reason, msg)) => {
                refuse(user, ctx, api, reason, msg, now_t).await?;
                return Ok(Action::requeue(REQUEUE_REFUSED));
            }
        },
    };
    let Some(rt) = ctx
        .controllers
        .as_ref()
        .and_then(|r| r.get(&ns, cluster_name))
    else {
        let msg = format!("the controller of cluster {cluster_name:?} is not running yet");
        refuse(user, ctx, api, "ControllerNotReady", msg, now_t).await?;
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let mut recheck = Duration::from_secs(300);
    let secret = match (mechanism, &password) {
        (Some(m), Some(p)) => Some(user_secret(user, scram_data(user, m.name(), p), None)),
        _ if auth == Some(AuthenticationType::Tls) => {
            let names = ClusterNames {
                cluster: cluster_name.clone(),
                namespace: ns.clone(),
            };
            match crate::listener_tls::user_certificate(
                &ctx.client,
                &names,
                user.user_name(),
                existing.as_ref(),
                ctx.options.certificates,
            )
            .await?
            {
                Ok((data, annotations, renewal_in)) => {
                    // Back when the certificate falls due (on a short test
                    // clock, sooner than the periodic look).
                    recheck = recheck.min(renewal_in + Duration::from_secs(1));
                    Some(user_secret(user, data, Some(annotations)))
                }
                Err((reason, msg)) => {
                    refuse(user, ctx, api, reason, msg, now_t).await?;
                    return Ok(Action::requeue(Duration::from_secs(15)));
                }
            }
        }
        _ => None,
    };
    if let Some(secret) = &secret {
        if let Some(foreign) = write_secret(ctx, &ns, user, secret, existing.as_ref()).await? {
            let invalid = InvalidSpec::SecretOwnedByAnother(foreign);
            refuse(user, ctx, api, invalid.reason(), invalid.to_string(), now_t).await?;
            return Ok(Action::requeue(REQUEUE_REFUSED));
        }
    }
    let quotas = users::desired_quotas(user);
    let principal_name = users::principal_name(user);
    let want = Desired {
        user_name: &principal_name,
        credential: mechanism.zip(password.as_deref()),
        acls: &acls,
        quotas: &quotas,
    };
    let plan = users::plan(&rt.controller.view(), &want, &Applied::of(user));
    if !plan.is_empty() {
        if let Err(source) = execute(&rt, &plan) {
            // A refusal (bad value) needs a change; anything else is retried.
            if let ControlPlaneError::Controller(e) = &source {
                refuse(
                    user,
                    ctx,
                    api,
                    "Refused",
                    format!("the controller refused: {e}"),
                    now_t,
                )
                .await?;
            }
            return Err(Error::UserController {
                user: user.user_name().to_string(),
                source,
            });
        }
        info!(user = user.user_name(), namespace = %ns, credential = plan.upsert.len(),
              acls_created = plan.create_acls.len(), acls_deleted = plan.delete_acls.len(),
              quotas = plan.quotas.len(), "user reconciled");
    }
    let prev = user
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    let generation = user.metadata.generation;
    let first_look = user.status.as_ref().and_then(|s| s.observed_generation) != generation;
    let msg = format!(
        "{} ACL(s), {} quota(s){}",
        acls.len(),
        quotas.len(),
        match (mechanism, auth) {
            (Some(m), _) => format!(", {m} credential in Secret {name}"),
            (None, Some(_)) => format!(", client certificate in Secret {name}"),
            (None, None) => String::new(),
        }
    );
    let patch = UserStatusPatch {
        conditions: vec![
            condition(
                prev,
                T::Ready,
                S::True,
                "Reconciled",
                &msg,
                generation,
                now_t.clone(),
            ),
            condition(
                prev,
                T::Degraded,
                S::False,
                "Reconciled",
                &msg,
                generation,
                now_t,
            ),
        ],
        observed_generation: generation,
        principal: Some(users::principal(user)),
        secret: auth.map(|_| name.clone()),
        mechanism: mechanism.map(|m| m.name().to_string()),
        acls: acls.iter().map(users::managed).collect(),
        quotas: quotas.keys().cloned().collect(),
    };
    patch_status(api, &name, &patch).await?;
    if first_look {
        publish(ctx, user, EventType::Normal, "Reconciled", "Reconcile", msg).await;
    }
    Ok(Action::requeue(recheck))
}

async fn cleanup(user: &KafkaUser, ctx: &Context, now: Timestamp) -> Result<Action> {
    let ns = user.namespace().ok_or(Error::NotNamespaced)?;
    let cluster_name = &user.spec.cluster_ref.name;
    let gone = match get_cluster(ctx, &ns, cluster_name).await {
        Ok(c) => c.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        Err(e) => return give_up_or_retry(user, ctx, now, e.to_string()).await,
    };
    if gone {
        info!(
            user = user.user_name(),
            "cluster gone or going: released the user"
        );
        return Ok(Action::await_change());
    }
    let Some(rt) = ctx
        .controllers
        .as_ref()
        .and_then(|r| r.get(&ns, cluster_name))
    else {
        return give_up_or_retry(
            user,
            ctx,
            now,
            "the cluster's controller is not running".into(),
        )
        .await;
    };
    // Everything the operator made (as recorded) and what the spec asks
    // for (in case the status was never written after a change went out).
    let mut applied = Applied::of(user);
    if let Ok(acls) = users::desired_acls(user) {
        applied.acls.extend(acls);
    }
    applied
        .quota_keys
        .extend(users::desired_quotas(user).into_keys());
    let (empty_acls, empty_quotas) = (BTreeSet::new(), BTreeMap::new());
    let principal_name = users::principal_name(user);
    let want = Desired {
        user_name: &principal_name,
        credential: None,
        acls: &empty_acls,
        quotas: &empty_quotas,
    };
    let view = rt.controller.view();
    let mut plan = users::plan(&view, &want, &applied);
    if let Some(m) = user
        .spec
        .authentication
        .as_ref()
        .and_then(|a| users::mechanism(a.type_))
    {
        let stored = view
            .scram_credentials
            .get(user.user_name())
            .is_some_and(|c| c.contains_key(&m));
        let entry = (user.user_name().to_string(), m);
        if stored && !plan.delete_credentials.contains(&entry) {
            plan.delete_credentials.push(entry);
        }
    }
    if let Err(e) = execute(&rt, &plan) {
        return give_up_or_retry(user, ctx, now, e.to_string()).await;
    }
    let note = format!(
        "removed user {:?}: {} credential(s), {} ACL(s), {} quota(s)",
        user.user_name(),
        plan.delete_credentials.len(),
        plan.delete_acls.len(),
        plan.quotas.len()
    );
    info!(namespace = %ns, "{note}");
    publish(ctx, user, EventType::Normal, "UserDeleted", "Delete", note).await;
    Ok(Action::await_change())
}

/// Retries the removal until the grace period after the deletion request,
/// then releases the finalizer with a Warning event.
async fn give_up_or_retry(
    user: &KafkaUser,
    ctx: &Context,
    now: Timestamp,
    why: String,
) -> Result<Action> {
    if let Some(grace) = cleanup_grace_over(&user.metadata, ctx, now) {
        let note = format!(
            "gave up removing user {:?} after {grace}s: {why}; its credential and ACLs may remain",
            user.user_name()
        );
        warn!("{note}");
        publish(
            ctx,
            user,
            EventType::Warning,
            "UserNotRemoved",
            "Delete",
            note,
        )
        .await;
        return Ok(Action::await_change());
    }
    warn!(
        user = user.user_name(),
        "removing the user: {why}; retrying"
    );
    Ok(Action::requeue(Duration::from_secs(5)))
}
