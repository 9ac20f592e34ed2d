//! Delegation tokens in the controller: refused below `skein.version` 4,
//! stored once per id, renewed up to their maximum, removed, kept across a
//! restart from the metadata records, and carried over the control plane
//! (requests and the view).

use skein_controller::delegation_tokens::DelegationToken;
use skein_controller::features::{DELEGATION_TOKENS_LEVEL, SKEIN_VERSION};
use skein_controller::rpc::wire::{event_from_pb, event_to_pb, view_from_pb, view_to_pb};
use skein_controller::{
    Command, ControllerConfig, ControllerCore, ControllerError, Event, MetadataImage,
    MetadataRecord, Reply,
};

fn token(id: &str) -> DelegationToken {
    DelegationToken {
        token_id: id.into(),
        owner: "User:alice".into(),
        requester: "User:admin".into(),
        renewers: vec!["User:bob".into()],
        issue_ms: 1_000,
        max_ms: 10_000,
        expiry_ms: 5_000,
    }
}

fn reply(commands: &[Command]) -> Result<(), ControllerError> {
    commands
        .iter()
        .find_map(|c| match c {
            Command::Reply(Reply::CreateDelegationToken { result }) => Some(result.clone()),
            Command::Reply(Reply::SetDelegationTokenExpiry { result, .. }) => Some(result.clone()),
            _ => None,
        })
        .expect("a reply")
}

fn create(
    core: &mut ControllerCore,
    t: DelegationToken,
) -> (Result<(), ControllerError>, Vec<Command>) {
    let commands = core.handle(Event::CreateDelegationToken { token: t }, 1);
    (reply(&commands), commands)
}

fn set_expiry(
    core: &mut ControllerCore,
    id: &str,
    expiry: Option<i64>,
) -> Result<(), ControllerError> {
    reply(&core.handle(
        Event::SetDelegationTokenExpiry {
            token_id: id.into(),
            expiry_ms: expiry,
        },
        1,
    ))
}

fn at_token_level() -> ControllerCore {
    let mut core = ControllerCore::new(ControllerConfig::default());
    core.handle(
        Event::UpdateFeature {
            feature: SKEIN_VERSION.into(),
            level: DELEGATION_TOKENS_LEVEL,
            validate_only: false,
        },
        1,
    );
    core
}

/// The image the persisted records of `commands` rebuild, over `image`.
fn replay(image: &mut MetadataImage, commands: &[Command]) {
    for c in commands {
        if let Some(r) = MetadataRecord::from_command(c) {
            r.apply(image).unwrap();
        }
    }
}

#[test]
fn tokens_need_skein_version_4() {
    let mut core = ControllerCore::new(ControllerConfig::default());
    let (r, commands) = create(&mut core, token("t1"));
    match r {
        Err(ControllerError::UnsupportedVersion(why)) => {
            assert!(why.contains("skein.version=4"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert!(!commands
        .iter()
        .any(|c| matches!(c, Command::PersistDelegationToken { .. })));
    assert!(core.delegation_tokens().is_empty());
}

#[test]
fn a_token_is_stored_renewed_capped_and_removed() {
    let mut core = at_token_level();
    let mut image = core.image().clone();
    let (r, commands) = create(&mut core, token("t1"));
    assert_eq!(r, Ok(()));
    assert!(matches!(commands.last(), Some(Command::PublishMetadata)));
    replay(&mut image, &commands);
    assert_eq!(image.delegation_tokens["t1"], token("t1"));

    // The same id again is refused; so is a token whose times are out of order.
    let (r, _) = create(&mut core, token("t1"));
    assert!(
        matches!(r, Err(ControllerError::InvalidRequest(_))),
        "{r:?}"
    );
    let mut bad = token("t2");
    bad.expiry_ms = bad.max_ms + 1;
    let (r, _) = create(&mut core, bad);
    assert!(
        matches!(r, Err(ControllerError::InvalidRequest(_))),
        "{r:?}"
    );
    let mut anonymous = token("t3");
    anonymous.token_id.clear();
    assert!(create(&mut core, anonymous).0.is_err());

    // Renewed, then past its maximum: capped there.
    assert_eq!(set_expiry(&mut core, "t1", Some(7_000)), Ok(()));
    assert_eq!(core.delegation_tokens()["t1"].expiry_ms, 7_000);
    assert_eq!(set_expiry(&mut core, "t1", Some(99_000)), Ok(()));
    assert_eq!(core.delegation_tokens()["t1"].expiry_ms, 10_000);

    // Kept across a restart from the records.
    let commands = core.handle(Event::Tick, 2);
    replay(&mut image, &commands);
    let mut rebuilt = MetadataImage::default();
    for r in MetadataRecord::snapshot(core.image()) {
        r.apply(&mut rebuilt).unwrap();
    }
    assert_eq!(rebuilt.delegation_tokens, core.image().delegation_tokens);
    let restarted = ControllerCore::from_image(rebuilt, ControllerConfig::default()).unwrap();
    assert_eq!(restarted.delegation_tokens()["t1"].expiry_ms, 10_000);

    // Removed; then it is not found.
    let commands = core.handle(
        Event::SetDelegationTokenExpiry {
            token_id: "t1".into(),
            expiry_ms: None,
        },
        3,
    );
    assert_eq!(reply(&commands), Ok(()));
    replay(&mut image, &commands);
    assert!(image.delegation_tokens.is_empty());
    assert!(core.delegation_tokens().is_empty());
    let e = set_expiry(&mut core, "t1", Some(7_000)).unwrap_err();
    assert_eq!(e.kafka_code(), 62, "DELEGATION_TOKEN_NOT_FOUND");
}

#[test]
fn token_requests_and_the_view_cross_the_control_plane() {
    for event in [
        Event::CreateDelegationToken { token: token("t1") },
        Event::SetDelegationTokenExpiry {
            token_id: "t1".into(),
            expiry_ms: Some(4_000),
        },
        Event::SetDelegationTokenExpiry {
            token_id: "t1".into(),
            expiry_ms: None,
        },
    ] {
        assert_eq!(event_from_pb(1, event_to_pb(&event).unwrap()), event);
    }
    let mut core = at_token_level();
    create(&mut core, token("t1")).0.unwrap();
    create(&mut core, token("t2")).0.unwrap();
    let view = skein_controller::ClusterView {
        delegation_tokens: std::sync::Arc::new(core.delegation_tokens().clone()),
        ..Default::default()
    };
    assert_eq!(
        view_from_pb(view_to_pb(&view)).delegation_tokens,
        view.delegation_tokens
    );
}
