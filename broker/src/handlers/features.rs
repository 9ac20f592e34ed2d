//! Feature levels for Kafka's tools (`kafka-features.sh`, Admin
//! `describeFeatures`/`updateFeatures`): ApiVersions advertises the levels
//! this broker supports and the ones the cluster has finalized, and
//! UpdateFeatures finalizes a level through the controller
//! (docs/upgrades.md). Skein's features are `skein.version` and Kafka's
//! `transaction.version` (clients use KIP-890 part 2 once it is finalized
//! at 2); Kafka's others (`metadata.version`, `group.version`, ...) are not
//! advertised, since clients change behaviour on them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{
    ApiVersionsResponse, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;
use skein_controller::acls::AclOperation;

use super::str_opt;
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::error::ApiError;

/// Adds the supported and finalized features (ApiVersions v3+).
pub fn add_to_api_versions(broker: &Broker, r: &mut ApiVersionsResponse) {
    r.supported_features = skein_controller::features::supported()
        .into_iter()
        .map(|f| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_string(f.name))
                .with_min_version(f.min)
                .with_max_version(f.max)
        })
        .collect();
    let view = broker.metadata.image();
    if view.features.controller.is_empty() {
        // A controller older than 0.2.0: nothing is known to be finalized.
        r.finalized_features_epoch = -1;
        return;
    }
    r.finalized_features_epoch = view.version as i64;
    r.finalized_features = view
        .features
        .finalized
        .iter()
        // As in Kafka, a feature at level 0 is not finalized at all.
        .filter(|(_, level)| **level > 0)
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_max_version_level(*level)
                .with_min_version_level(*level)
        })
        .collect();
}

/// UpdateFeatures (v0-2): each update finalizes one feature's level; a
/// downgrade or a deletion is refused (a finalized level is never lowered).
pub fn update(broker: &Broker, req: UpdateFeaturesRequest, version: i16) -> UpdateFeaturesResponse {
    let mut resp = UpdateFeaturesResponse::default();
    let authorized = Authz::current(broker).cluster(AclOperation::Alter);
    let mut first_error: Option<ApiError> = None;
    for u in &req.feature_updates {
        let downgrade = (version == 0 && u.allow_downgrade) || (version >= 1 && u.upgrade_type > 1);
        let result = if !authorized {
            Err(ApiError::new(
                ResponseError::ClusterAuthorizationFailed,
                "Cluster authorization failed.",
            ))
        } else if u.max_version_level < 1 || downgrade {
            Err(ApiError::new(
                ResponseError::InvalidUpdateVersion,
                format!(
                    "{}: a finalized level is never lowered or deleted in Skein (docs/upgrades.md)",
                    u.feature.as_str()
                ),
            ))
        } else {
            finalize(
                broker,
                u.feature.as_str(),
                u.max_version_level,
                req.validate_only,
            )
        };
        let mut out = UpdatableFeatureResult::default().with_feature(u.feature.clone());
        if let Err(e) = result {
            out.error_code = e.code();
            out.error_message = str_opt(e.message.clone());
            first_error.get_or_insert(e);
        }
        resp.results.push(out);
    }
    if version >= 2 {
        // v2 answers with a top-level error only.
        resp.results.clear();
        if let Some(e) = first_error {
            resp.error_code = e.code();
            resp.error_message = str_opt(e.message);
        }
    }
    resp
}

fn finalize(
    broker: &Broker,
    feature: &str,
    level: i16,
    validate_only: bool,
) -> Result<(), ApiError> {
    if !broker.metadata.image().features.controller_knows(feature) {
        // A controller older than 0.2.0 would drop the request unanswered.
        return Err(ApiError::new(
            ResponseError::FeatureUpdateFailed,
            format!("the controller does not know {feature} (it runs a release before 0.2.0, or the feature is not Skein's)"),
        ));
    }
    broker
        .metadata
        .update_feature(feature, level, validate_only)
        .map(|_| ())
}
