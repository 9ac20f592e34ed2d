//! Feature levels on the wire: the view's finalized and supported levels,
//! and a broker's release and ranges at registration (`Register`).

use std::collections::HashMap;

use super::field_wire::Wire;
use super::pb;
use crate::model::{BrokerSoftware, FeatureRange};
use crate::view::ViewFeatures;

impl Wire for FeatureRange {
    type Pb = pb::FeatureRange;
    fn to_pb(&self) -> pb::FeatureRange {
        pb::FeatureRange {
            name: self.name.clone(),
            min_level: self.min.into(),
            max_level: self.max.into(),
        }
    }
    fn from_pb(f: pb::FeatureRange) -> Self {
        FeatureRange {
            name: f.name,
            min: Wire::from_pb(f.min_level),
            max: Wire::from_pb(f.max_level),
        }
    }
}

/// A broker's release and feature ranges: two fields of `Register`
/// (`software_version`, `supported_features`; a broker older than 0.2.0
/// sends neither).
impl Wire for BrokerSoftware {
    type Pb = (Option<String>, Vec<pb::FeatureRange>);
    fn to_pb(&self) -> Self::Pb {
        (self.version.clone(), self.features.to_pb())
    }
    fn from_pb((version, features): Self::Pb) -> Self {
        BrokerSoftware {
            version,
            features: Wire::from_pb(features),
        }
    }
}

pub fn view_features_from_pb(
    finalized: HashMap<String, i32>,
    controller: Vec<pb::FeatureRange>,
) -> ViewFeatures {
    ViewFeatures {
        finalized: finalized
            .into_iter()
            .map(|(k, l)| (k, Wire::from_pb(l)))
            .collect(),
        controller: Wire::from_pb(controller),
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
