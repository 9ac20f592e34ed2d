//! The control-plane messages of SCRAM credentials, client quotas and
//! delegation tokens: in the published view and in the requests that
//! change them.

use super::field_wire::Wire;
use super::pb::{self, request};
use crate::delegation_tokens::{DelegationToken, DelegationTokens};
use crate::event::Event;
use crate::quotas::{ClientQuotas, QuotaChange, QuotaEntity, QuotaEntityType, QuotaValue};
use crate::scram::{ScramCredential, ScramCredentials, ScramMechanism, ScramUpsertion};

fn scram_to_pb(user: &str, mechanism: ScramMechanism, c: &ScramCredential) -> pb::ScramCredential {
    pb::ScramCredential {
        user: user.to_owned(),
        mechanism: mechanism.code() as i32,
        salt: c.salt.clone(),
        stored_key: c.stored_key.clone(),
        server_key: c.server_key.clone(),
        iterations: c.iterations,
    }
}

/// A credential from the wire; an unknown mechanism drops the entry.
fn scram_from_pb(c: pb::ScramCredential) -> Option<ScramUpsertion> {
    Some(ScramUpsertion {
        user: c.user,
        mechanism: ScramMechanism::from_code(i8::try_from(c.mechanism).ok()?)?,
        credential: ScramCredential {
            salt: c.salt,
            stored_key: c.stored_key,
            server_key: c.server_key,
            iterations: c.iterations,
        },
    })
}

fn entity_to_pb(entity: &QuotaEntity) -> Vec<pb::QuotaEntityPart> {
    entity
        .iter()
        .map(|(t, n)| pb::QuotaEntityPart {
            entity_type: t.name().to_string(),
            name: n.clone(),
        })
        .collect()
}

/// An entity from the wire; `None` if a part has a type this end does not know.
fn entity_from_pb(parts: Vec<pb::QuotaEntityPart>) -> Option<QuotaEntity> {
    parts
        .into_iter()
        .map(|p| Some((QuotaEntityType::parse(&p.entity_type)?, p.name)))
        .collect()
}

pub fn scram_credentials_from_pb(all: Vec<pb::ScramCredential>) -> ScramCredentials {
    let mut out = ScramCredentials::new();
    for u in all.into_iter().filter_map(scram_from_pb) {
        out.entry(u.user)
            .or_default()
            .insert(u.mechanism, u.credential);
    }
    out
}

pub fn scram_credentials_to_pb(all: &ScramCredentials) -> Vec<pb::ScramCredential> {
    all.iter()
        .flat_map(|(user, creds)| creds.iter().map(move |(m, c)| scram_to_pb(user, *m, c)))
        .collect()
}

pub fn delegation_token_to_pb(t: &DelegationToken) -> pb::DelegationToken {
    pb::DelegationToken {
        token_id: t.token_id.clone(),
        owner: t.owner.clone(),
        requester: t.requester.clone(),
        renewers: t.renewers.clone(),
        issue_ms: t.issue_ms,
        max_ms: t.max_ms,
        expiry_ms: t.expiry_ms,
    }
}

pub fn delegation_token_from_pb(t: pb::DelegationToken) -> DelegationToken {
    DelegationToken {
        token_id: t.token_id,
        owner: t.owner,
        requester: t.requester,
        renewers: t.renewers,
        issue_ms: t.issue_ms,
        max_ms: t.max_ms,
        expiry_ms: t.expiry_ms,
    }
}

pub fn delegation_tokens_to_pb(all: &DelegationTokens) -> Vec<pb::DelegationToken> {
    all.values().map(delegation_token_to_pb).collect()
}

pub fn delegation_tokens_from_pb(all: Vec<pb::DelegationToken>) -> DelegationTokens {
    all.into_iter()
        .map(|t| (t.token_id.clone(), delegation_token_from_pb(t)))
        .collect()
}

/// The token of `CreateDelegationToken`, a message field (absent: a token
/// with no id, which the controller refuses).
impl Wire for DelegationToken {
    type Pb = Option<pb::DelegationToken>;
    fn to_pb(&self) -> Option<pb::DelegationToken> {
        Some(delegation_token_to_pb(self))
    }
    fn from_pb(pb: Option<pb::DelegationToken>) -> Self {
        pb.map(delegation_token_from_pb).unwrap_or_default()
    }
}

pub fn client_quotas_to_pb(quotas: &ClientQuotas) -> Vec<pb::ClientQuota> {
    quotas
        .0
        .iter()
        .map(|(entity, values)| pb::ClientQuota {
            entity: entity_to_pb(entity),
            values: values.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        })
        .collect()
}

/// Quotas from the wire; an entity with a type this end does not know is
/// left out.
pub fn client_quotas_from_pb(quotas: Vec<pb::ClientQuota>) -> ClientQuotas {
    ClientQuotas(
        quotas
            .into_iter()
            .filter_map(|q| {
                let values = q
                    .values
                    .into_iter()
                    .map(|(k, v)| (k, QuotaValue(v)))
                    .collect();
                Some((entity_from_pb(q.entity)?, values))
            })
            .collect(),
    )
}

pub fn alter_scram_to_pb(
    upsertions: &[ScramUpsertion],
    deletions: &[(String, ScramMechanism)],
) -> request::Kind {
    request::Kind::AlterScramCredentials(pb::AlterScramCredentials {
        upsertions: upsertions
            .iter()
            .map(|u| scram_to_pb(&u.user, u.mechanism, &u.credential))
            .collect(),
        deletions: deletions
            .iter()
            .map(|(user, m)| pb::ScramDeletion {
                user: user.clone(),
                mechanism: m.code() as i32,
            })
            .collect(),
    })
}

/// A mechanism this controller does not know is not dropped silently: the
/// whole request is refused (the deletion of user "" that stands in for it
/// fails the core's check).
pub fn alter_scram_from_pb(a: pb::AlterScramCredentials) -> Event {
    let known = a.upsertions.len() + a.deletions.len();
    let upsertions: Vec<ScramUpsertion> =
        a.upsertions.into_iter().filter_map(scram_from_pb).collect();
    let mut deletions: Vec<(String, ScramMechanism)> = a
        .deletions
        .into_iter()
        .filter_map(|d| {
            Some((
                d.user,
                ScramMechanism::from_code(i8::try_from(d.mechanism).ok()?)?,
            ))
        })
        .collect();
    if upsertions.len() + deletions.len() != known {
        deletions.push((String::new(), ScramMechanism::Sha256));
    }
    Event::AlterScramCredentials {
        upsertions,
        deletions,
    }
}

/// A change of `AlterClientQuotas`. An entity type this controller does
/// not know becomes an empty entity, which the core refuses (the request
/// fails whole).
impl Wire for QuotaChange {
    type Pb = pb::QuotaChange;
    fn to_pb(&self) -> pb::QuotaChange {
        pb::QuotaChange {
            entity: entity_to_pb(&self.entity),
            key: self.key.clone(),
            value: self.value,
        }
    }
    fn from_pb(c: pb::QuotaChange) -> Self {
        QuotaChange {
            entity: entity_from_pb(c.entity).unwrap_or_default(),
            key: c.key,
            value: c.value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::{event_from_pb, event_to_pb, view_from_pb, view_to_pb};
    use super::*;
    use crate::view::ClusterView;

    #[test]
    fn scram_credentials_cross_the_wire_in_requests_and_views() {
        let cred = ScramCredential {
            salt: vec![9; 16],
            stored_key: vec![1; 32],
            server_key: vec![2; 32],
            iterations: 4096,
        };
        let event = Event::AlterScramCredentials {
            upsertions: vec![ScramUpsertion {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
                credential: cred.clone(),
            }],
            deletions: vec![("bob".into(), ScramMechanism::Sha256)],
        };
        let kind = event_to_pb(&event).expect("sent over the wire");
        assert_eq!(event_from_pb(1, kind), event);

        // A mechanism code this end does not know refuses the request
        // instead of dropping the entry.
        let unknown = request::Kind::AlterScramCredentials(pb::AlterScramCredentials {
            upsertions: vec![],
            deletions: vec![pb::ScramDeletion {
                user: "bob".into(),
                mechanism: 7,
            }],
        });
        let Event::AlterScramCredentials { deletions, .. } = event_from_pb(1, unknown) else {
            panic!("an AlterScramCredentials event");
        };
        assert!(deletions.iter().any(|(u, _)| u.is_empty()));

        let mut view = ClusterView::default();
        std::sync::Arc::make_mut(&mut view.scram_credentials)
            .entry("alice".into())
            .or_default()
            .insert(ScramMechanism::Sha256, cred.clone());
        let back = view_from_pb(view_to_pb(&view));
        assert_eq!(back.scram_credentials, view.scram_credentials);
    }
}
