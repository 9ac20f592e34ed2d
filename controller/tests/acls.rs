//! ACLs in the controller: created and deleted through the core, refused
//! whole when one binding is invalid, kept in the image across a restart,
//! and carried to brokers in the view.

mod common;

use common::*;
use skein_controller::acls::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternFilter, PatternType, ResourceType,
};
use skein_controller::rpc::wire::{view_from_pb, view_to_pb};
use skein_controller::{
    ClusterView, Command, ControllerConfig, ControllerCore, ControllerError, Event, Reply,
};

fn binding(name: &str, pattern: PatternType, who: &str, op: AclOperation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern_type: pattern,
        principal: who.into(),
        host: "*".into(),
        operation: op,
        permission: AclPermission::Allow,
    }
}

fn create(
    core: &mut ControllerCore,
    bindings: Vec<AclBinding>,
) -> (Vec<Command>, Result<(), ControllerError>) {
    let commands = core.handle(Event::CreateAcls { bindings }, 0);
    match reply(&commands) {
        Reply::CreateAcls { result } => (commands, result),
        other => panic!("{other:?}"),
    }
}

fn delete(core: &mut ControllerCore, filters: Vec<AclFilter>) -> Vec<Vec<AclBinding>> {
    match reply(&core.handle(Event::DeleteAcls { filters }, 0)) {
        Reply::DeleteAcls { result } => result.unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn acls_are_created_deleted_and_survive_a_restart() {
    let mut core = ControllerCore::new(ControllerConfig::default());
    let read = binding(
        "orders",
        PatternType::Literal,
        "User:alice",
        AclOperation::Read,
    );
    let write = binding(
        "pay",
        PatternType::Prefixed,
        "User:bob",
        AclOperation::Write,
    );
    let (commands, result) = create(&mut core, vec![read.clone(), write.clone()]);
    result.unwrap();
    assert!(commands.contains(&Command::PersistAcls(core.acls().clone())));
    assert!(commands.contains(&Command::PublishMetadata));
    assert_eq!(core.acls().len(), 2);

    // One invalid binding refuses the whole request.
    let mut bad = read.clone();
    bad.resource_type = ResourceType::Cluster;
    let extra = binding("x", PatternType::Literal, "User:carol", AclOperation::Read);
    let (commands, result) = create(&mut core, vec![extra, bad]);
    assert!(
        matches!(result, Err(ControllerError::InvalidRequest(m)) if m.contains("kafka-cluster"))
    );
    assert!(!commands
        .iter()
        .any(|c| matches!(c, Command::PersistAcls(_))));
    assert_eq!(core.acls().len(), 2);

    // Creating one again changes nothing.
    let (commands, result) = create(&mut core, vec![read.clone()]);
    result.unwrap();
    assert!(!commands
        .iter()
        .any(|c| matches!(c, Command::PersistAcls(_))));

    let json = serde_json::to_string(core.image()).unwrap();
    let restarted =
        ControllerCore::from_image(serde_json::from_str(&json).unwrap(), test_config()).unwrap();
    assert_eq!(restarted.acls(), core.acls());

    // Per filter, what it matched; a binding two filters match goes once.
    let mut by_name = AclFilter::any();
    by_name.resource_name = Some("payments".into());
    by_name.pattern = PatternFilter::Match;
    let mut by_user = AclFilter::any();
    by_user.principal = Some("User:bob".into());
    let mut none = AclFilter::any();
    none.resource_type = Some(ResourceType::Group);
    let matched = delete(&mut core, vec![by_name, by_user, none]);
    assert_eq!(matched, vec![vec![write.clone()], vec![write], vec![]]);
    assert_eq!(core.acls().iter().collect::<Vec<_>>(), vec![&read]);
    assert!(delete(&mut core, vec![AclFilter::any()]) == vec![vec![read]]);
    assert!(core.acls().is_empty());
}

#[test]
fn acls_reach_brokers_in_the_view() {
    let mut core = ControllerCore::new(ControllerConfig::default());
    let b = binding("*", PatternType::Literal, "User:*", AclOperation::Describe);
    create(&mut core, vec![b]).1.unwrap();
    let view = ClusterView {
        acls: std::sync::Arc::new(core.acls().clone()),
        ..Default::default()
    };
    assert_eq!(view_from_pb(view_to_pb(&view)).acls, view.acls);
}
