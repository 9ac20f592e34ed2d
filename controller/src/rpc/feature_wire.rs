//! Feature levels on the wire: the view's finalized and supported levels,
//! a broker's range at registration, and the `UpdateFeature` request.

use std::collections::HashMap;

use super::pb::{self, request};
use crate::model::FeatureRange;
use crate::view::ViewFeatures;

fn level(l: i32) -> i16 {
    l.clamp(0, i16::MAX.into()) as i16
}

pub fn ranges_to_pb(ranges: &[FeatureRange]) -> Vec<pb::FeatureRange> {
    ranges
        .iter()
        .map(|f| pb::FeatureRange {
            name: f.name.clone(),
            min_level: f.min.into(),
            max_level: f.max.into(),
        })
        .collect()
}

pub fn ranges_from_pb(ranges: Vec<pb::FeatureRange>) -> Vec<FeatureRange> {
    ranges
        .into_iter()
        .map(|f| FeatureRange {
            name: f.name,
            min: level(f.min_level),
            max: level(f.max_level),
        })
        .collect()
}

pub fn view_features_from_pb(
    finalized: HashMap<String, i32>,
    controller: Vec<pb::FeatureRange>,
) -> ViewFeatures {
    ViewFeatures {
        finalized: finalized.into_iter().map(|(k, l)| (k, level(l))).collect(),
        controller: ranges_from_pb(controller),
    }
}

pub fn update_to_pb(feature: &str, level: i16, validate_only: bool) -> request::Kind {
    request::Kind::UpdateFeature(pb::UpdateFeature {
        name: feature.to_string(),
        level: level.into(),
        validate_only,
    })
}

pub fn update_from_pb(u: pb::UpdateFeature) -> crate::Event {
    crate::Event::UpdateFeature {
        feature: u.name,
        level: level(u.level),
        validate_only: u.validate_only,
    }
}

#[cfg(test)]
mod tests {
    use crate::rpc::wire::{
        event_from_pb, event_to_pb, reply_from_pb, reply_to_pb, view_from_pb, view_to_pb,
    };
    use crate::{ClusterView, ControllerError, Event, Reply};

    #[test]
    fn a_views_features_and_an_update_round_trip() {
        let mut view = ClusterView::default();
        view.features.finalized.insert("skein.version".into(), 2);
        view.features.controller = crate::features::supported();
        let back = view_from_pb(view_to_pb(&view));
        assert_eq!(back.features, view.features);
        assert!(back.features.controller_knows("skein.version"));
        assert!(!ClusterView::default()
            .features
            .controller_knows("skein.version"));

        let event = Event::UpdateFeature {
            feature: "skein.version".into(),
            level: 2,
            validate_only: true,
        };
        let kind = event_to_pb(&event).expect("carried to the controller");
        assert_eq!(event_from_pb(1, kind), event);
        for result in [
            Ok(1),
            Err(ControllerError::FeatureUpdateFailed("no".into())),
        ] {
            let reply = Reply::UpdateFeature {
                feature: "skein.version".into(),
                result: result.clone(),
            };
            match reply_from_pb(&event, reply_to_pb(7, Some(reply))) {
                Reply::UpdateFeature { result: got, .. } => match (got, result) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(a), Err(b)) => assert_eq!(a.kafka_code(), b.kafka_code()),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            }
        }
    }
}
