//! Client-metrics subscriptions and group configs in the controller:
//! refused below `skein.version` 5, stored whole and removed when emptied,
//! kept across a restart from the metadata records, and carried over the
//! control plane (the request and the view).

use std::collections::BTreeMap;

use skein_controller::features::{CONFIG_RESOURCES_LEVEL, SKEIN_VERSION};
use skein_controller::resource_configs::ConfigResourceKind;
use skein_controller::rpc::wire::{event_from_pb, event_to_pb, view_from_pb, view_to_pb};
use skein_controller::{
    Command, ControllerConfig, ControllerCore, ControllerError, Event, MetadataImage,
    MetadataRecord, Reply,
};

const CM: ConfigResourceKind = ConfigResourceKind::ClientMetrics;

fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn alter(
    core: &mut ControllerCore,
    kind: ConfigResourceKind,
    name: &str,
    configs: BTreeMap<String, String>,
) -> (Result<(), ControllerError>, Vec<Command>) {
    let commands = core.handle(
        Event::AlterResourceConfigs {
            kind,
            name: name.into(),
            configs,
        },
        1,
    );
    let result = commands
        .iter()
        .find_map(|c| match c {
            Command::Reply(Reply::AlterResourceConfigs { result }) => Some(result.clone()),
            _ => None,
        })
        .expect("a reply");
    (result, commands)
}

fn at_level(level: i16) -> ControllerCore {
    let mut core = ControllerCore::new(ControllerConfig::default());
    core.handle(
        Event::UpdateFeature {
            feature: SKEIN_VERSION.into(),
            level,
            validate_only: false,
        },
        1,
    );
    core
}

fn persisted(commands: &[Command]) -> usize {
    commands
        .iter()
        .filter(|c| matches!(c, Command::PersistResourceConfigs { .. }))
        .count()
}

#[test]
fn subscriptions_need_skein_version_5() {
    let mut core = at_level(CONFIG_RESOURCES_LEVEL - 1);
    let (r, commands) = alter(&mut core, CM, "all", values(&[("metrics", "*")]));
    match r {
        Err(ControllerError::UnsupportedVersion(why)) => {
            assert!(why.contains("skein.version=5"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(persisted(&commands), 0);
    assert!(core.resource_configs().is_empty());
}

#[test]
fn a_set_is_stored_whole_removed_when_empty_and_kept_across_a_restart() {
    let mut core = at_level(CONFIG_RESOURCES_LEVEL);
    let mut image = core.image().clone();
    let replay = |image: &mut MetadataImage, commands: &[Command]| {
        for c in commands {
            if let Some(r) = MetadataRecord::from_command(c) {
                r.apply(image).unwrap();
            }
        }
    };
    let (r, commands) = alter(&mut core, CM, "all", values(&[("metrics", "*")]));
    assert_eq!(r, Ok(()));
    assert_eq!(persisted(&commands), 1);
    replay(&mut image, &commands);
    let (r, commands) = alter(
        &mut core,
        ConfigResourceKind::Group,
        "g",
        values(&[("consumer.session.timeout.ms", "50000")]),
    );
    assert_eq!(r, Ok(()));
    replay(&mut image, &commands);
    assert_eq!(image.resource_configs, *core.resource_configs());
    assert_eq!(
        core.resource_configs().get(CM, "all").unwrap()["metrics"],
        "*"
    );

    // The same set again persists nothing; a new one replaces the old whole.
    let (_, commands) = alter(&mut core, CM, "all", values(&[("metrics", "*")]));
    assert_eq!(persisted(&commands), 0);
    let (_, commands) = alter(&mut core, CM, "all", values(&[("interval.ms", "1000")]));
    replay(&mut image, &commands);
    assert!(!image
        .resource_configs
        .get(CM, "all")
        .unwrap()
        .contains_key("metrics"));

    // Kept across a restart from a snapshot.
    let mut rebuilt = MetadataImage::default();
    for r in MetadataRecord::snapshot(core.image()) {
        r.apply(&mut rebuilt).unwrap();
    }
    assert_eq!(rebuilt.resource_configs, *core.resource_configs());
    let restarted = ControllerCore::from_image(rebuilt, ControllerConfig::default()).unwrap();
    assert_eq!(restarted.resource_configs(), core.resource_configs());

    // Emptied: gone.
    let (r, commands) = alter(&mut core, CM, "all", BTreeMap::new());
    assert_eq!(r, Ok(()));
    replay(&mut image, &commands);
    assert!(image.resource_configs.get(CM, "all").is_none());
    assert!(core.resource_configs().get(CM, "all").is_none());

    // An empty name is refused.
    let (r, _) = alter(&mut core, CM, "", values(&[("metrics", "*")]));
    assert!(
        matches!(r, Err(ControllerError::InvalidRequest(_))),
        "{r:?}"
    );
}

#[test]
fn the_request_and_the_view_cross_the_control_plane() {
    let event = Event::AlterResourceConfigs {
        kind: ConfigResourceKind::Group,
        name: "g".into(),
        configs: values(&[("a", "1"), ("b", "2")]),
    };
    assert_eq!(event_from_pb(1, event_to_pb(&event).unwrap()), event);
    let mut core = at_level(CONFIG_RESOURCES_LEVEL);
    alter(&mut core, CM, "s", values(&[("metrics", "a.,b.")]))
        .0
        .unwrap();
    alter(
        &mut core,
        ConfigResourceKind::Group,
        "g",
        values(&[("x", "1")]),
    )
    .0
    .unwrap();
    let view = skein_controller::ClusterView {
        resource_configs: std::sync::Arc::new(core.resource_configs().clone()),
        ..Default::default()
    };
    assert_eq!(
        view_from_pb(view_to_pb(&view)).resource_configs,
        view.resource_configs
    );
}
