//! `DescribeUserScramCredentials` and `AlterUserScramCredentials`
//! (KIP-554): what `kafka-configs --entity-type users` uses to manage
//! SCRAM users. Clients send a salted password (PBKDF2 of the password
//! with their salt and iteration count); the broker turns it into the
//! stored and server keys and the controller keeps those.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use skein_controller::{ScramMechanism, ScramUpsertion};

use skein_controller::acls::AclOperation;

use super::{str_opt, strb};
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::error::ApiError;
use crate::sasl::scram::credential_from_salted_password;

pub fn describe(
    broker: &Broker,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !Authz::current(broker).cluster(AclOperation::Describe) {
        let mut resp = DescribeUserScramCredentialsResponse::default();
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        resp.error_message = str_opt("Cluster authorization failed.");
        resp.results = req
            .users
            .iter()
            .flatten()
            .map(|u| {
                let mut r = DescribeUserScramCredentialsResult::default();
                r.user = u.name.clone();
                r.error_code = ResponseError::ClusterAuthorizationFailed.code();
                // As Kafka: the message on each result too (librdkafka
                // reads it unconditionally).
                r.error_message = str_opt("Cluster authorization failed.");
                r
            })
            .collect();
        return resp;
    }
    let all = broker.metadata.image().scram_credentials.clone();
    let result = |user: &str| {
        let mut r = DescribeUserScramCredentialsResult::default();
        r.user = strb(user);
        match all.get(user) {
            Some(creds) => {
                r.credential_infos = creds
                    .iter()
                    .map(|(m, c)| {
                        let mut info = CredentialInfo::default();
                        info.mechanism = m.code();
                        info.iterations = c.iterations as i32;
                        info
                    })
                    .collect();
            }
            None => {
                r.error_code = ResponseError::ResourceNotFound.code();
                r.error_message = str_opt(format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                ));
            }
        }
        r
    };
    let mut resp = DescribeUserScramCredentialsResponse::default();
    resp.results = match req.users.filter(|u| !u.is_empty()) {
        // No list, or an empty one: every user.
        None => all.keys().map(|u| result(u)).collect(),
        Some(users) => {
            let mut count: BTreeMap<&str, usize> = BTreeMap::new();
            for u in &users {
                *count.entry(u.name.as_str()).or_default() += 1;
            }
            count
                .into_iter()
                .map(|(user, n)| {
                    if n > 1 {
                        let mut r = DescribeUserScramCredentialsResult::default();
                        r.user = strb(user);
                        r.error_code = ResponseError::DuplicateResource.code();
                        r.error_message = str_opt(format!(
                            "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                        ));
                        r
                    } else {
                        result(user)
                    }
                })
                .collect()
        }
    };
    resp
}

/// The user name and mechanism of one entry, as Kafka checks them first.
fn user_mechanism(user: &str, code: i8) -> Result<ScramMechanism, ApiError> {
    if user.is_empty() {
        return Err(ApiError::new(
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_code(code).ok_or_else(|| {
        ApiError::new(
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })
}

fn fail(errors: &mut BTreeMap<String, ApiError>, user: &str, code: ResponseError, message: String) {
    errors
        .entry(user.to_string())
        .or_insert_with(|| ApiError::new(code, message));
}

pub fn alter(
    broker: &Broker,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let existing = broker.metadata.image().scram_credentials.clone();
    // One result per user named; the first error found for a user is its
    // answer and none of its entries are applied.
    let mut errors: BTreeMap<String, ApiError> = BTreeMap::new();
    let mut seen: BTreeMap<(String, i8), usize> = BTreeMap::new();
    let mut users = BTreeSet::new();
    for (user, mechanism) in req
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism))
        .chain(
            req.upsertions
                .iter()
                .map(|u| (u.name.to_string(), u.mechanism)),
        )
    {
        users.insert(user.clone());
        *seen.entry((user, mechanism)).or_default() += 1;
    }
    if !Authz::current(broker).cluster(AclOperation::Alter) {
        for user in &users {
            fail(
                &mut errors,
                user,
                ResponseError::ClusterAuthorizationFailed,
                "Cluster authorization failed.".into(),
            );
        }
    }
    for ((user, _), n) in &seen {
        if *n > 1 {
            fail(
                &mut errors,
                user,
                ResponseError::DuplicateResource,
                format!("A user credential cannot be altered twice in the same request: {user}"),
            );
        }
    }
    let mut deletions = Vec::new();
    for d in &req.deletions {
        let user = d.name.to_string();
        let checked = user_mechanism(&user, d.mechanism).and_then(|mechanism| {
            match existing.get(&user).is_some_and(|c| c.contains_key(&mechanism)) {
                true => Ok(mechanism),
                false => Err(ApiError::new(
                    ResponseError::ResourceNotFound,
                    format!("Attempt to delete a user credential that does not exist: {user} ({mechanism})"),
                )),
            }
        });
        match checked {
            Ok(mechanism) => deletions.push((user, mechanism)),
            Err(e) => fail(&mut errors, &user, e.code, e.message),
        }
    }
    let mut upsertions = Vec::new();
    for u in &req.upsertions {
        let user = u.name.to_string();
        let checked = user_mechanism(&user, u.mechanism).and_then(|mechanism| {
            let unacceptable =
                |m: String| Err(ApiError::new(ResponseError::UnacceptableCredential, m));
            if u.iterations < ScramMechanism::MIN_ITERATIONS as i32 {
                return unacceptable(format!(
                    "Too few iterations: {} (at least {})",
                    u.iterations,
                    ScramMechanism::MIN_ITERATIONS
                ));
            }
            if u.iterations > ScramMechanism::MAX_ITERATIONS as i32 {
                return unacceptable(format!(
                    "Too many iterations: {} (at most {})",
                    u.iterations,
                    ScramMechanism::MAX_ITERATIONS
                ));
            }
            if u.salt.is_empty() || u.salted_password.is_empty() {
                return unacceptable("Salt and salted password must not be empty".into());
            }
            Ok(mechanism)
        });
        match checked {
            Ok(mechanism) => upsertions.push(ScramUpsertion {
                credential: credential_from_salted_password(
                    mechanism,
                    &u.salted_password,
                    &u.salt,
                    u.iterations as u32,
                ),
                user,
                mechanism,
            }),
            Err(e) => fail(&mut errors, &user, e.code, e.message),
        }
    }
    deletions.retain(|(user, _)| !errors.contains_key(user));
    upsertions.retain(|u| !errors.contains_key(&u.user));
    if !deletions.is_empty() || !upsertions.is_empty() {
        let applied: BTreeSet<String> = deletions
            .iter()
            .map(|(u, _)| u.clone())
            .chain(upsertions.iter().map(|u| u.user.clone()))
            .collect();
        if let Err(e) = broker
            .metadata
            .alter_scram_credentials(upsertions, deletions)
        {
            for user in applied {
                fail(&mut errors, &user, e.code, e.message.clone());
            }
        }
    }
    let mut resp = AlterUserScramCredentialsResponse::default();
    resp.results = users
        .into_iter()
        .map(|user| {
            let mut r = AlterUserScramCredentialsResult::default();
            if let Some(e) = errors.get(&user) {
                r.error_code = e.code();
                r.error_message = str_opt(e.message.clone());
            }
            r.user = strb(user);
            r
        })
        .collect();
    resp
}
