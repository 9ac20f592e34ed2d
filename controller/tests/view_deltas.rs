//! The published view is built incrementally (only the topics an event
//! changed), and brokers get deltas between versions: both must give the
//! same view as building everything again.

mod common;

use common::register_current as register;
use skein_controller::rpc::wire::{apply_view_pb, view_delta_to_pb, view_to_pb};
use skein_controller::{
    ClusterView, ControllerConfig, ControllerService, Event, NewTopic, TopicId,
};

fn same(a: &ClusterView, b: &ClusterView) -> Result<(), String> {
    if a.topics.len() != b.topics.len() {
        return Err(format!("{} topics vs {}", a.topics.len(), b.topics.len()));
    }
    for (name, t) in &a.topics {
        if b.topics.get(name).map(|x| &**x) != Some(&**t) {
            return Err(format!("topic {name} differs"));
        }
    }
    if a.brokers != b.brokers || a.controller_id != b.controller_id {
        return Err("brokers differ".into());
    }
    if a.topic_names_by_id != b.topic_names_by_id {
        return Err("topic ids differ".into());
    }
    if a.acls != b.acls
        || a.broker_configs != b.broker_configs
        || a.client_quotas != b.client_quotas
    {
        return Err("security or configs differ".into());
    }
    Ok(())
}

#[test]
fn incremental_views_and_deltas_match_a_full_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata");
    let svc = ControllerService::open(Some(&path), ControllerConfig::default()).unwrap();
    let mut events = vec![register(1, None), register(2, None), register(3, None)];
    for i in 0..5u128 {
        events.push(Event::CreateTopic(NewTopic::new(
            format!("t{i}"),
            TopicId(i + 1),
            6,
            3,
        )));
    }
    events.push(Event::BrokerLost { broker: 2 });
    events.push(Event::DeleteTopic { topic: "t1".into() });
    events.push(Event::CreateTopic(NewTopic::new("t1", TopicId(77), 2, 2)));
    events.push(Event::TopicConfigChanged {
        topic: "t3".into(),
        configs: [("retention.ms".to_string(), "5".to_string())].into(),
    });
    events.push(register(2, None));
    events.push(Event::CreatePartitions {
        topic: "t0".into(),
        count: 9,
        assignment: None,
    });

    // A broker's copy, kept by applying what a session would send.
    let mut broker = apply_view_pb(&ClusterView::default(), view_to_pb(&svc.view())).unwrap();
    let mut deltas = 0;
    for event in events {
        svc.handle(event).unwrap();
        let view = svc.view();
        assert!(view.version > broker.version);
        // The view built incrementally equals one built from scratch (a
        // controller opened on the same log).
        let fresh = ControllerService::open(Some(&path), ControllerConfig::default()).unwrap();
        same(&view, &fresh.view()).unwrap();
        drop(fresh);
        let changed = svc
            .topics_changed_between(broker.version, view.version)
            .expect("recent history is kept");
        let message = view_delta_to_pb(&view, broker.version, &changed);
        assert!(message.topics.len() <= changed.len());
        if message.topics.len() < view.topics.len() {
            deltas += 1;
        }
        broker = apply_view_pb(&broker, message).unwrap();
        same(&view, &broker).unwrap();
        assert_eq!(broker.version, view.version);
    }
    assert!(
        deltas >= 5,
        "most updates carry only some topics ({deltas})"
    );
    // A delta for another base version is refused.
    let stale = view_delta_to_pb(&svc.view(), broker.version - 1, &Default::default());
    assert!(apply_view_pb(&broker, stale).is_err());
}

/// A commit that fails leaves the core ahead of the published view; the
/// next event's view must still show everything (it is built whole), and
/// the failed change is committed with it.
#[test]
fn after_a_failed_commit_the_next_view_and_commit_catch_up() {
    use skein_controller::store::{MemoryBlobStore, StoreFault};
    let store = MemoryBlobStore::tiny();
    let svc =
        ControllerService::open_store(Some(Box::new(store.clone())), ControllerConfig::default())
            .unwrap();
    for b in 1..=3 {
        svc.handle(register(b, None)).unwrap();
    }
    store.set_fault(Some(StoreFault {
        op: 0,
        landed: false,
    }));
    assert!(svc
        .handle(Event::CreateTopic(NewTopic::new("lost", TopicId(1), 3, 3)))
        .is_err());
    assert!(!svc.view().topics.contains_key("lost"), "not published");
    // A store that failed like a crashed process takes no more writes;
    // a fresh fault plan lets it work again.
    store.set_fault(None);
    svc.handle(Event::CreateTopic(NewTopic::new("next", TopicId(2), 2, 3)))
        .unwrap();
    let view = svc.view();
    assert!(view.topics.contains_key("lost") && view.topics.contains_key("next"));
    let reopened =
        ControllerService::open_store(Some(Box::new(store.fork())), ControllerConfig::default())
            .unwrap();
    same(&view, &reopened.view()).unwrap();
}
