//! SCRAM credentials in the controller: stored salted, replaced, deleted,
//! refused whole when one entry is bad, and kept across a restart from the
//! persisted image.

use skein_controller::{
    Command, ControllerConfig, ControllerCore, ControllerError, Event, MetadataImage, Reply,
    ScramCredential, ScramMechanism, ScramUpsertion,
};

fn cred(iterations: u32, key: u8) -> ScramCredential {
    ScramCredential {
        salt: vec![1, 2, 3],
        stored_key: vec![key; 32],
        server_key: vec![key + 1; 32],
        iterations,
    }
}

fn up(user: &str, mechanism: ScramMechanism, credential: ScramCredential) -> ScramUpsertion {
    ScramUpsertion {
        user: user.into(),
        mechanism,
        credential,
    }
}

fn alter(
    core: &mut ControllerCore,
    upsertions: Vec<ScramUpsertion>,
    deletions: Vec<(&str, ScramMechanism)>,
) -> (Result<(), ControllerError>, Vec<Command>) {
    let commands = core.handle(
        Event::AlterScramCredentials {
            upsertions,
            deletions: deletions
                .into_iter()
                .map(|(u, m)| (u.to_string(), m))
                .collect(),
        },
        1,
    );
    let result = commands
        .iter()
        .find_map(|c| match c {
            Command::Reply(Reply::AlterScramCredentials { result }) => Some(result.clone()),
            _ => None,
        })
        .expect("a reply");
    (result, commands)
}

#[test]
fn credentials_are_added_replaced_and_deleted() {
    let mut core = ControllerCore::new(ControllerConfig::default());
    let (r, commands) = alter(
        &mut core,
        vec![
            up("alice", ScramMechanism::Sha256, cred(4096, 10)),
            up("alice", ScramMechanism::Sha512, cred(8192, 20)),
            up("bob", ScramMechanism::Sha256, cred(4096, 30)),
        ],
        vec![],
    );
    assert_eq!(r, Ok(()));
    assert!(matches!(commands.last(), Some(Command::PublishMetadata)));
    let persisted: Vec<_> = commands
        .iter()
        .filter_map(|c| match c {
            Command::PersistScramCredentials { user, credentials } => {
                Some((user.clone(), credentials.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(persisted, vec![("alice".into(), 2), ("bob".into(), 1)]);
    assert_eq!(core.scram_credentials()["alice"].len(), 2);

    // Replace one, delete another, delete one that does not exist.
    let (r, _) = alter(
        &mut core,
        vec![up("alice", ScramMechanism::Sha256, cred(5000, 40))],
        vec![
            ("alice", ScramMechanism::Sha512),
            ("bob", ScramMechanism::Sha512),
        ],
    );
    assert_eq!(r, Ok(()));
    let alice = &core.scram_credentials()["alice"];
    assert_eq!(alice.len(), 1);
    assert_eq!(alice[&ScramMechanism::Sha256].iterations, 5000);
    assert_eq!(alice[&ScramMechanism::Sha256].stored_key, vec![40; 32]);

    // The last credential of a user gone: the user is gone.
    let (r, commands) = alter(&mut core, vec![], vec![("bob", ScramMechanism::Sha256)]);
    assert_eq!(r, Ok(()));
    assert!(!core.scram_credentials().contains_key("bob"));
    assert!(commands.iter().any(|c| matches!(c,
        Command::PersistScramCredentials { user, credentials } if user == "bob" && credentials.is_empty())));
}

#[test]
fn one_bad_entry_refuses_the_whole_request() {
    let mut core = ControllerCore::new(ControllerConfig::default());
    for (upsertions, deletions, why) in [
        (
            vec![
                up("alice", ScramMechanism::Sha256, cred(4096, 1)),
                up("bob", ScramMechanism::Sha256, cred(4095, 1)),
            ],
            vec![],
            "too few iterations",
        ),
        (
            vec![up("bob", ScramMechanism::Sha512, cred(16385, 1))],
            vec![],
            "too many iterations",
        ),
        (
            vec![up("", ScramMechanism::Sha512, cred(4096, 1))],
            vec![],
            "empty",
        ),
        (
            vec![up("carol", ScramMechanism::Sha256, cred(4096, 1))],
            vec![("carol", ScramMechanism::Sha256)],
            "more than once",
        ),
    ] {
        let (r, commands) = alter(&mut core, upsertions, deletions);
        match r {
            Err(ControllerError::InvalidRequest(m)) => assert!(m.contains(why), "{m}"),
            other => panic!("expected a refusal ({why}), got {other:?}"),
        }
        assert!(!commands.iter().any(|c| matches!(
            c,
            Command::PersistScramCredentials { .. } | Command::PublishMetadata
        )));
        assert!(
            core.scram_credentials().is_empty(),
            "nothing applied ({why})"
        );
    }
}

#[test]
fn credentials_survive_a_restart_from_the_image_and_are_not_in_debug_output() {
    let mut core = ControllerCore::new(ControllerConfig::default());
    alter(
        &mut core,
        vec![up("alice", ScramMechanism::Sha512, cred(4096, 7))],
        vec![],
    )
    .0
    .unwrap();
    let json = serde_json::to_vec(core.image()).unwrap();
    let text = String::from_utf8_lossy(&json);
    assert!(text.contains("SCRAM-SHA-512"), "{text}");
    let image: MetadataImage = serde_json::from_slice(&json).unwrap();
    let restarted = ControllerCore::from_image(image, ControllerConfig::default()).unwrap();
    assert_eq!(restarted.scram_credentials(), core.scram_credentials());
    // An image written before SCRAM existed still loads.
    let old: MetadataImage = serde_json::from_str(
        r#"{"brokers":{},"topics":{},"cluster":{"next_producer_id":0,"next_broker_epoch":1}}"#,
    )
    .unwrap();
    assert!(old.scram_credentials.is_empty());
    let debug = format!("{:?}", restarted.scram_credentials());
    assert!(
        !debug.contains("[7, 7"),
        "keys leak into debug output: {debug}"
    );
}
