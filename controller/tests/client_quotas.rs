//! Client quotas in the controller: set, replaced, removed, refused whole
//! when one change is bad, kept in the image across a restart, and carried
//! over the control plane.

use skein_controller::quotas::QuotaChange;
use skein_controller::rpc::wire::{event_from_pb, event_to_pb, view_from_pb, view_to_pb};
use skein_controller::{
    ClusterView, Command, ControllerConfig, ControllerCore, ControllerError, Event, MetadataImage,
    QuotaEntity, QuotaEntityType, Reply,
};

fn entity(parts: &[(QuotaEntityType, Option<&str>)]) -> QuotaEntity {
    parts
        .iter()
        .map(|(t, n)| (*t, n.map(str::to_string)))
        .collect()
}

fn change(e: &QuotaEntity, key: &str, value: Option<f64>) -> QuotaChange {
    QuotaChange {
        entity: e.clone(),
        key: key.into(),
        value,
    }
}

fn alter(core: &mut ControllerCore, changes: Vec<QuotaChange>) -> Result<(), ControllerError> {
    core.handle(Event::AlterClientQuotas { changes }, 1)
        .into_iter()
        .find_map(|c| match c {
            Command::Reply(Reply::AlterClientQuotas { result }) => Some(result),
            _ => None,
        })
        .expect("a reply")
}

#[test]
fn quotas_are_set_removed_and_survive_a_restart() {
    let alice = entity(&[(QuotaEntityType::User, Some("alice"))]);
    let default_client = entity(&[(QuotaEntityType::ClientId, None)]);
    let mut core = ControllerCore::new(ControllerConfig::default());
    alter(
        &mut core,
        vec![
            change(&alice, "producer_byte_rate", Some(1024.0)),
            change(&alice, "consumer_byte_rate", Some(2048.0)),
            change(&default_client, "request_percentage", Some(12.5)),
        ],
    )
    .unwrap();
    assert_eq!(
        core.client_quotas().get(&alice, "producer_byte_rate"),
        Some(1024.0)
    );
    alter(&mut core, vec![change(&alice, "consumer_byte_rate", None)]).unwrap();
    assert_eq!(core.client_quotas().get(&alice, "consumer_byte_rate"), None);
    alter(
        &mut core,
        vec![change(&default_client, "request_percentage", None)],
    )
    .unwrap();
    assert!(
        !core.client_quotas().0.contains_key(&default_client),
        "an entity without values is gone"
    );

    // One bad change: nothing applied.
    let e = alter(
        &mut core,
        vec![
            change(&alice, "producer_byte_rate", Some(1.0)),
            change(&alice, "producer_byte_rate_typo", Some(1.0)),
        ],
    )
    .unwrap_err();
    assert!(matches!(e, ControllerError::InvalidRequest(_)), "{e:?}");
    assert_eq!(
        core.client_quotas().get(&alice, "producer_byte_rate"),
        Some(1024.0)
    );

    let json = serde_json::to_vec(core.image()).unwrap();
    let image: MetadataImage = serde_json::from_slice(&json).unwrap();
    let restarted = ControllerCore::from_image(image, ControllerConfig::default()).unwrap();
    assert_eq!(restarted.client_quotas(), core.client_quotas());
}

#[test]
fn quotas_cross_the_control_plane() {
    let e = entity(&[
        (QuotaEntityType::User, None),
        (QuotaEntityType::ClientId, Some("app")),
    ]);
    let event = Event::AlterClientQuotas {
        changes: vec![
            change(&e, "producer_byte_rate", Some(4096.0)),
            change(&e, "request_percentage", None),
        ],
    };
    assert_eq!(event_from_pb(1, event_to_pb(&event).unwrap()), event);

    let mut core = ControllerCore::new(ControllerConfig::default());
    alter(
        &mut core,
        vec![change(&e, "producer_byte_rate", Some(4096.0))],
    )
    .unwrap();
    let view = ClusterView {
        client_quotas: std::sync::Arc::new(core.client_quotas().clone()),
        ..Default::default()
    };
    assert_eq!(
        view_from_pb(view_to_pb(&view)).client_quotas,
        view.client_quotas
    );
}
