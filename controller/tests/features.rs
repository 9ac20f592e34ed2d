//! Feature levels (`skein.version`): finalized only when every registered
//! broker and the controller support the level, never lowered; a broker
//! whose release cannot run at the finalized level is refused at
//! registration; the metadata log's head format follows the level, so an
//! older controller refuses a log finalized past it.

mod common;

use common::{register, reply, test_config};
use skein_controller::features::{supported, SKEIN_VERSION, SKEIN_VERSION_MAX};
use skein_controller::store::MemoryBlobStore;
use skein_controller::{
    BlobStore, BrokerSoftware, Command, ControllerConfig, ControllerCore, ControllerError, Event,
    MetadataLog, MetadataRecord, Reply,
};

/// A registration of a broker of this release (its software said).
fn register_current(id: i32) -> Event {
    let mut event = register(id, None);
    if let Event::BrokerRegistered { software, .. } = &mut event {
        *software = BrokerSoftware {
            version: Some("0.2.0".into()),
            features: supported(),
        };
    }
    event
}

/// Finalize `skein.version` at `level`.
fn finalize(level: i16, validate_only: bool) -> Event {
    Event::UpdateFeature {
        feature: SKEIN_VERSION.into(),
        level,
        validate_only,
    }
}

fn update(
    core: &mut ControllerCore,
    level: i16,
    validate_only: bool,
) -> Result<i16, ControllerError> {
    let out = core.handle(finalize(level, validate_only), 10);
    match reply(&out) {
        Reply::UpdateFeature { result, .. } => result,
        other => panic!("{other:?}"),
    }
}

fn registered(core: &mut ControllerCore, event: Event) -> Result<u64, ControllerError> {
    match reply(&core.handle(event, 20)) {
        Reply::BrokerRegistered { result, .. } => result,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_level_is_finalized_once_every_broker_supports_it_and_never_lowered() {
    let mut core = ControllerCore::new(test_config());
    core.handle(register_current(1), 0);
    core.handle(register_current(2), 0);
    // Broker 3 runs the previous release: it said nothing, so level 1 only.
    core.handle(register(3, None), 0);
    assert_eq!(core.image().cluster.feature_level(SKEIN_VERSION), 1);

    let err = update(&mut core, 2, false).unwrap_err();
    assert_eq!(err.kafka_code(), 96, "FEATURE_UPDATE_FAILED: {err}");
    assert!(
        err.to_string().contains("broker 3 (a release before 0.2.0"),
        "{err}"
    );
    assert_eq!(
        core.image().cluster.feature_level(SKEIN_VERSION),
        1,
        "nothing changed"
    );

    // Broker 3 rolled to this release: now it may.
    core.handle(register_current(3), 5);
    assert_eq!(update(&mut core, 2, true), Ok(1), "validate only");
    assert_eq!(
        core.image().cluster.feature_level(SKEIN_VERSION),
        1,
        "validate only changes nothing"
    );
    let out = core.handle(finalize(2, false), 10);
    assert!(
        out.iter().any(
            |c| matches!(c, Command::PersistCluster(s) if s.feature_level(SKEIN_VERSION) == 2)
        ),
        "the level is persisted: {out:?}"
    );
    assert_eq!(core.image().cluster.feature_level(SKEIN_VERSION), 2);
    assert_eq!(
        update(&mut core, 2, false),
        Ok(2),
        "the same level again is fine"
    );

    let err = update(&mut core, 1, false).unwrap_err();
    assert!(err.to_string().contains("never lowered"), "{err}");
    let err = update(&mut core, SKEIN_VERSION_MAX + 1, false).unwrap_err();
    assert!(
        err.to_string().contains("this controller supports"),
        "{err}"
    );
    let err = core.handle(
        Event::UpdateFeature {
            feature: "metadata.version".into(),
            level: 2,
            validate_only: false,
        },
        10,
    );
    assert!(matches!(
        reply(&err),
        Reply::UpdateFeature { result: Err(_), .. }
    ));
}

#[test]
fn a_broker_too_old_for_the_finalized_level_is_refused_at_registration() {
    let mut core = ControllerCore::new(test_config());
    for id in 1..=3 {
        core.handle(register_current(id), 0);
    }
    assert_eq!(update(&mut core, 2, false), Ok(1));
    // Broker 3 restarts on the previous release (a downgrade after finalizing).
    let err = registered(&mut core, register(3, None)).unwrap_err();
    assert_eq!(err.kafka_code(), 35, "UNSUPPORTED_VERSION: {err}");
    assert!(
        err.to_string().contains("cannot run at skein.version 2"),
        "{err}"
    );
    // The refusal is kept for the operator to show, until the broker
    // registers.
    assert_eq!(core.refused_registrations().get(&3), Some(&err.to_string()));
    assert_eq!(core.refused_registrations().len(), 1);
    // Back on this release, it registers.
    registered(&mut core, register_current(3)).expect("a broker of this release registers");
    assert!(core.refused_registrations().is_empty());
}

#[test]
fn the_log_head_becomes_format_2_when_finalized_so_an_older_controller_refuses_it() {
    let store = MemoryBlobStore::tiny();
    let mut log = MetadataLog::open(Box::new(store.clone()), "w1".into(), || "cid".into())
        .unwrap()
        .log;
    let head_version = |store: &MemoryBlobStore| {
        let (bytes, _) = store.read_head().unwrap().unwrap();
        serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()["version"].as_u64()
    };
    let mut core = ControllerCore::new(test_config());
    for id in 1..=3 {
        let out = core.handle(register_current(id), 0);
        let records = out
            .iter()
            .filter_map(MetadataRecord::from_command)
            .collect();
        log.append(records, core.image()).unwrap();
    }
    assert_eq!(
        head_version(&store),
        Some(1),
        "what 0.1.0 reads, until finalized"
    );

    let out = core.handle(finalize(2, false), 10);
    let records = out
        .iter()
        .filter_map(MetadataRecord::from_command)
        .collect();
    log.append(records, core.image()).unwrap();
    assert_eq!(head_version(&store), Some(2), "finalized: 0.1.0 refuses it");

    // This release reads it back, level included.
    let opened = MetadataLog::open(Box::new(store.fork()), "w2".into(), || "new".into()).unwrap();
    assert_eq!(opened.image.cluster.feature_level(SKEIN_VERSION), 2);
}

/// A broker of the previous release: it knows `skein.version` but not
/// `transaction.version`, so it runs at transaction version 0 only.
fn register_previous(id: i32) -> Event {
    let mut event = register(id, None);
    if let Event::BrokerRegistered { software, .. } = &mut event {
        *software = BrokerSoftware {
            version: Some("0.1.9".into()),
            features: supported()
                .into_iter()
                .filter(|f| f.name == SKEIN_VERSION)
                .collect(),
        };
    }
    event
}

#[test]
fn a_new_cluster_starts_at_transaction_version_2_and_an_existing_log_stays_at_0() {
    use skein_controller::features::TRANSACTION_VERSION;
    use skein_controller::ControllerService;
    // A new cluster (an empty store): finalized before any broker, and
    // written down, so a restart reads it back.
    let store = MemoryBlobStore::tiny();
    let controller =
        ControllerService::open_store(Some(Box::new(store.clone())), test_config()).unwrap();
    assert_eq!(controller.feature_level(TRANSACTION_VERSION), 2);
    drop(controller);
    let opened = MetadataLog::open(Box::new(store.fork()), "w2".into(), || "new".into()).unwrap();
    assert!(!opened.created);
    assert_eq!(opened.image.cluster.feature_level(TRANSACTION_VERSION), 2);

    // A log of the previous release never named it: it stays at 0, and
    // the controller of this release does not raise it.
    let old = MemoryBlobStore::tiny();
    let mut log = MetadataLog::open(Box::new(old.clone()), "w1".into(), || "cid".into())
        .unwrap()
        .log;
    let mut core = ControllerCore::new(ControllerConfig {
        new_cluster_features: Default::default(),
        ..test_config()
    });
    let records = core
        .handle(register_previous(1), 0)
        .iter()
        .filter_map(MetadataRecord::from_command)
        .collect();
    log.append(records, core.image()).unwrap();
    let controller =
        ControllerService::open_store(Some(Box::new(old.fork())), test_config()).unwrap();
    assert_eq!(controller.feature_level(TRANSACTION_VERSION), 0);
    assert_eq!(controller.feature_level(SKEIN_VERSION), 1);
}

#[test]
fn transaction_version_2_needs_every_broker_to_support_it() {
    use skein_controller::features::TRANSACTION_VERSION;
    let finalize_tv = |core: &mut ControllerCore, level| {
        let out = core.handle(
            Event::UpdateFeature {
                feature: TRANSACTION_VERSION.into(),
                level,
                validate_only: false,
            },
            10,
        );
        match reply(&out) {
            Reply::UpdateFeature { result, .. } => result,
            other => panic!("{other:?}"),
        }
    };
    // An existing cluster at transaction version 0, one broker not rolled.
    let mut core = ControllerCore::new(ControllerConfig {
        new_cluster_features: Default::default(),
        ..test_config()
    });
    core.handle(register_current(1), 0);
    registered(&mut core, register_previous(2)).expect("at level 0 it may run");
    let err = finalize_tv(&mut core, 2).unwrap_err();
    assert!(err.to_string().contains("broker 2 (release 0.1.9"), "{err}");
    core.handle(register_current(2), 5);
    assert_eq!(finalize_tv(&mut core, 2), Ok(0));
    assert_eq!(core.image().cluster.feature_level(TRANSACTION_VERSION), 2);
    let err = finalize_tv(&mut core, 3).unwrap_err();
    assert!(err.to_string().contains("0..=2"), "{err}");
    // Rolled back to the previous release, a broker is refused: it would
    // neither add produced partitions nor bump epochs.
    let err = registered(&mut core, register_previous(2)).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot run at transaction.version 2"),
        "{err}"
    );
}
