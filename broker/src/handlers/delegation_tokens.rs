//! Create/Renew/Expire/DescribeDelegationToken (KIP-48, KIP-373's owners),
//! with Kafka 4's checks in Kafka's order (its `KafkaApis` and
//! `DelegationTokenControlManager`): the broker decides from its view and
//! clock, the controller stores the outcome (`crate::delegation_tokens`).
//!
//! No token request is served on a channel that could not prove who sent
//! it, nor on one authenticated with a token (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED):
//! a PLAINTEXT listener, one-way SSL, or a token login.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};
use skein_controller::acls::{AclOperation, ResourceType};
use skein_controller::delegation_tokens::DelegationToken;

use super::strb;
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::listeners::SecurityProtocol;
use crate::principal::Principal;
use crate::sasl::Session;

/// Kafka's `allowTokenRequests`.
fn token_requests_allowed(broker: &Broker, session: &Session) -> bool {
    if session.token_authenticated() {
        return false;
    }
    let protocol = broker
        .config
        .listeners
        .iter()
        .find(|l| *l.name == *session.listener())
        .map(|l| l.protocol);
    match protocol {
        // A connection on no listener (tests, the fuzz harness) proves nothing.
        None | Some(SecurityProtocol::Plaintext) => false,
        Some(SecurityProtocol::Ssl) => *session.principal() != Principal::anonymous(),
        Some(SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl) => true,
    }
}

/// `Type:name`, as a principal string of the token.
fn principal_parts(p: &str) -> (String, String) {
    match Principal::parse(p) {
        Some(p) => (p.kind, p.name),
        None => ("User".into(), p.to_string()),
    }
}

pub fn create(
    broker: &Broker,
    session: &Session,
    req: CreateDelegationTokenRequest,
    version: i16,
) -> CreateDelegationTokenResponse {
    let requester = session.principal().clone();
    let owner = match req.owner_principal_name.as_ref().filter(|n| !n.is_empty()) {
        Some(name) => Principal {
            kind: req
                .owner_principal_type
                .as_ref()
                .map(|t| t.to_string())
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "User".into()),
            name: name.to_string(),
        },
        None => requester.clone(),
    };
    let mut resp = CreateDelegationTokenResponse::default();
    resp.principal_type = strb(owner.kind.clone());
    resp.principal_name = strb(owner.name.clone());
    if version > 2 {
        resp.token_requester_principal_type = strb(requester.kind.clone());
        resp.token_requester_principal_name = strb(requester.name.clone());
    }
    // Refusals before the controller carry -1 times, as Kafka's broker.
    let refuse = |mut resp: CreateDelegationTokenResponse, code: ResponseError, times: i64| {
        resp.error_code = code.code();
        resp.issue_timestamp_ms = times;
        resp.expiry_timestamp_ms = times;
        resp.max_timestamp_ms = times;
        resp
    };
    if !token_requests_allowed(broker, session) {
        return refuse(resp, ResponseError::DelegationTokenRequestNotAllowed, -1);
    }
    if owner != requester
        && !Authz::current(broker).allowed(
            AclOperation::CreateTokens,
            ResourceType::User,
            &owner.to_string(),
        )
    {
        return refuse(resp, ResponseError::DelegationTokenAuthorizationFailed, -1);
    }
    if req
        .renewers
        .iter()
        .any(|r| r.principal_type.as_str() != "User")
    {
        return refuse(resp, ResponseError::InvalidPrincipalType, -1);
    }
    let tokens = &broker.delegation_tokens;
    let Some(secret) = tokens.config.secret.clone() else {
        return refuse(resp, ResponseError::DelegationTokenAuthDisabled, 0);
    };
    let now = crate::system::now_ms();
    let max_life = match req.max_lifetime_ms {
        m if m > 0 => m.min(tokens.config.max_lifetime_ms),
        _ => tokens.config.max_lifetime_ms,
    };
    let max_ms = now.saturating_add(max_life);
    let token = DelegationToken {
        token_id: crate::delegation_tokens::new_token_id(),
        owner: owner.to_string(),
        requester: requester.to_string(),
        renewers: req
            .renewers
            .iter()
            .map(|r| {
                format!(
                    "{}:{}",
                    r.principal_type.as_str(),
                    r.principal_name.as_str()
                )
            })
            .collect(),
        issue_ms: now,
        max_ms,
        expiry_ms: max_ms.min(now.saturating_add(tokens.config.expiry_time_ms)),
    };
    match broker.metadata.create_delegation_token(token.clone()) {
        Ok(()) => {
            resp.issue_timestamp_ms = token.issue_ms;
            resp.expiry_timestamp_ms = token.expiry_ms;
            resp.max_timestamp_ms = token.max_ms;
            resp.hmac = crate::delegation_tokens::hmac_of(&secret, &token.token_id).into();
            resp.token_id = strb(token.token_id);
            resp
        }
        Err(e) => {
            // The response has no message field: the reason goes to the log.
            tracing::warn!(owner = %owner, error = %e, "delegation token not created");
            refuse(resp, e.code, 0)
        }
    }
}

/// What Renew and Expire share: the token their HMAC names, or the error.
fn token_for_hmac(
    broker: &Broker,
    session: &Session,
    hmac: &[u8],
) -> Result<DelegationToken, (ResponseError, i64)> {
    if !token_requests_allowed(broker, session) {
        return Err((ResponseError::DelegationTokenRequestNotAllowed, -1));
    }
    if !broker.delegation_tokens.enabled() {
        return Err((ResponseError::DelegationTokenAuthDisabled, 0));
    }
    let view = broker.metadata.image();
    broker
        .delegation_tokens
        .find_by_hmac(&view.delegation_tokens, hmac)
        .cloned()
        .ok_or((ResponseError::DelegationTokenNotFound, 0))
}

/// Has the controller store the token's new expiry (`None`: remove it);
/// the expiry to answer.
fn store_expiry(
    broker: &Broker,
    token: &DelegationToken,
    stored: Option<i64>,
    answered: i64,
) -> Result<i64, (ResponseError, i64)> {
    broker
        .metadata
        .set_delegation_token_expiry(&token.token_id, stored)
        .map(|()| answered)
        .map_err(|e| (e.code, 0))
}

/// The error code and expiry timestamp of a Renew or Expire answer.
fn answer(result: Result<i64, (ResponseError, i64)>) -> (i16, i64) {
    match result {
        Ok(expiry) => (0, expiry),
        Err((code, times)) => (code.code(), times),
    }
}

/// Kafka's `allowedToRenew`: the owner or a renewer (not the requester).
fn may_renew(session: &Session, token: &DelegationToken) -> bool {
    let who = session.principal().to_string();
    token.owner == who || token.renewers.contains(&who)
}

pub fn renew(
    broker: &Broker,
    session: &Session,
    req: RenewDelegationTokenRequest,
) -> RenewDelegationTokenResponse {
    let mut resp = RenewDelegationTokenResponse::default();
    let now = crate::system::now_ms();
    let result = token_for_hmac(broker, session, &req.hmac).and_then(|token| {
        if token.expired(now) {
            return Err((ResponseError::DelegationTokenExpired, 0));
        }
        if !may_renew(session, &token) {
            return Err((ResponseError::DelegationTokenOwnerMismatch, 0));
        }
        let default = broker.delegation_tokens.config.expiry_time_ms;
        let period = match req.renew_period_ms {
            p if p > 0 => p.min(default),
            _ => default,
        };
        let expiry = token.max_ms.min(now.saturating_add(period));
        store_expiry(broker, &token, Some(expiry), expiry)
    });
    (resp.error_code, resp.expiry_timestamp_ms) = answer(result);
    resp
}

pub fn expire(
    broker: &Broker,
    session: &Session,
    req: ExpireDelegationTokenRequest,
) -> ExpireDelegationTokenResponse {
    let mut resp = ExpireDelegationTokenResponse::default();
    let now = crate::system::now_ms();
    let result = token_for_hmac(broker, session, &req.hmac).and_then(|token| {
        if !may_renew(session, &token) {
            return Err((ResponseError::DelegationTokenOwnerMismatch, 0));
        }
        // A negative period expires the token now, even an expired one.
        let (expiry, stored) = if req.expiry_time_period_ms < 0 {
            (now, None)
        } else if token.expired(now) {
            return Err((ResponseError::DelegationTokenExpired, 0));
        } else {
            let expiry = token
                .max_ms
                .min(now.saturating_add(req.expiry_time_period_ms));
            (expiry, Some(expiry))
        };
        store_expiry(broker, &token, stored, expiry)
    });
    (resp.error_code, resp.expiry_timestamp_ms) = answer(result);
    resp
}

pub fn describe(
    broker: &Broker,
    session: &Session,
    req: DescribeDelegationTokenRequest,
    version: i16,
) -> DescribeDelegationTokenResponse {
    let mut resp = DescribeDelegationTokenResponse::default();
    if !token_requests_allowed(broker, session) {
        resp.error_code = ResponseError::DelegationTokenRequestNotAllowed.code();
        return resp;
    }
    let Some(secret) = broker.delegation_tokens.config.secret.clone() else {
        resp.error_code = ResponseError::DelegationTokenAuthDisabled.code();
        return resp;
    };
    // An empty list of owners asks for no token; no list, for every one.
    let owners: Option<Vec<String>> = req.owners.map(|owners| {
        owners
            .iter()
            .map(|o| {
                format!(
                    "{}:{}",
                    o.principal_type.as_str(),
                    o.principal_name.as_str()
                )
            })
            .collect()
    });
    if owners.as_ref().is_some_and(|o| o.is_empty()) {
        return resp;
    }
    let who = session.principal().to_string();
    let authz = Authz::current(broker);
    let view = broker.metadata.image();
    resp.tokens = view
        .delegation_tokens
        .values()
        .filter(|t| {
            owners
                .as_ref()
                .is_none_or(|owners| owners.iter().any(|o| t.owner_or_renewer(o)))
        })
        .filter(|t| {
            t.owner_or_renewer(&who)
                || authz.allowed(
                    AclOperation::Describe,
                    ResourceType::DelegationToken,
                    &t.token_id,
                )
                || authz.allowed(AclOperation::DescribeTokens, ResourceType::User, &t.owner)
        })
        .map(|t| {
            let mut d = DescribedDelegationToken::default();
            let (kind, name) = principal_parts(&t.owner);
            d.principal_type = strb(kind);
            d.principal_name = strb(name);
            if version > 2 {
                let (kind, name) = principal_parts(&t.requester);
                d.token_requester_principal_type = strb(kind);
                d.token_requester_principal_name = strb(name);
            }
            d.issue_timestamp = t.issue_ms;
            d.expiry_timestamp = t.expiry_ms;
            d.max_timestamp = t.max_ms;
            d.token_id = strb(t.token_id.clone());
            d.hmac = crate::delegation_tokens::hmac_of(&secret, &t.token_id).into();
            d.renewers = t
                .renewers
                .iter()
                .map(|r| {
                    let (kind, name) = principal_parts(r);
                    let mut renewer = DescribedDelegationTokenRenewer::default();
                    renewer.principal_type = strb(kind);
                    renewer.principal_name = strb(name);
                    renewer
                })
                .collect();
            d
        })
        .collect();
    resp
}
