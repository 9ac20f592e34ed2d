//! Dynamic broker configs in the controller: set and removed per broker
//! and cluster-wide, refused whole when one change is bad, kept in the
//! image across a restart, published in the view and carried over the
//! control plane.

use skein_controller::broker_configs::BrokerConfigChange;
use skein_controller::rpc::wire::{event_from_pb, event_to_pb, view_from_pb, view_to_pb};
use skein_controller::{
    Command, ControllerConfig, ControllerCore, ControllerError, Event, MetadataImage, Reply,
};

fn change(resource: &str, key: &str, value: Option<&str>) -> BrokerConfigChange {
    BrokerConfigChange {
        resource: resource.into(),
        key: key.into(),
        value: value.map(str::to_string),
    }
}

fn alter(
    core: &mut ControllerCore,
    changes: Vec<BrokerConfigChange>,
) -> Result<(), ControllerError> {
    let commands = core.handle(Event::AlterBrokerConfigs { changes }, 1);
    let persisted = commands
        .iter()
        .any(|c| matches!(c, Command::PersistBrokerConfigs(_)));
    let result = commands
        .into_iter()
        .find_map(|c| match c {
            Command::Reply(Reply::AlterBrokerConfigs { result }) => Some(result),
            _ => None,
        })
        .expect("a reply");
    assert_eq!(persisted, result.is_ok(), "persisted exactly when accepted");
    result
}

#[test]
fn broker_configs_are_set_removed_and_survive_a_restart() {
    let mut core = ControllerCore::new(ControllerConfig::default());
    alter(
        &mut core,
        vec![
            change("", "log.retention.ms", Some("3600000")),
            change("1", "message.max.bytes", Some("2097152")),
        ],
    )
    .unwrap();
    assert_eq!(
        core.broker_configs().cluster_default().unwrap()["log.retention.ms"],
        "3600000"
    );
    assert_eq!(
        core.broker_configs().broker(1).unwrap()["message.max.bytes"],
        "2097152"
    );

    // One bad change: nothing applied.
    let e = alter(
        &mut core,
        vec![
            change("", "log.retention.ms", None),
            change("broker-2", "message.max.bytes", Some("1")),
        ],
    )
    .unwrap_err();
    assert!(matches!(e, ControllerError::InvalidRequest(_)), "{e:?}");
    assert!(core.broker_configs().cluster_default().is_some());

    alter(&mut core, vec![change("1", "message.max.bytes", None)]).unwrap();
    assert!(core.broker_configs().broker(1).is_none());

    let json = serde_json::to_vec(core.image()).unwrap();
    let image: MetadataImage = serde_json::from_slice(&json).unwrap();
    let restarted = ControllerCore::from_image(image, ControllerConfig::default()).unwrap();
    assert_eq!(restarted.broker_configs(), core.broker_configs());
}

#[test]
fn broker_configs_cross_the_control_plane() {
    let event = Event::AlterBrokerConfigs {
        changes: vec![
            change("", "log.cleaner.threads", Some("2")),
            change("3", "log.segment.bytes", None),
        ],
    };
    assert_eq!(event_from_pb(1, event_to_pb(&event).unwrap()), event);

    let mut core = ControllerCore::new(ControllerConfig::default());
    alter(
        &mut core,
        vec![
            change("", "log.cleaner.threads", Some("2")),
            change("3", "log.segment.bytes", Some("1048576")),
        ],
    )
    .unwrap();
    let service_view = skein_controller::ClusterView {
        broker_configs: std::sync::Arc::new(core.broker_configs().clone()),
        ..Default::default()
    };
    assert_eq!(
        view_from_pb(view_to_pb(&service_view)).broker_configs,
        service_view.broker_configs
    );
}
