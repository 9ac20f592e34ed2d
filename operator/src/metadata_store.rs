//! [`BlobStore`] in ConfigMaps: the controller's metadata log on the
//! `kubernetes` platform (`docs/metadata-store.md`).
//!
//! - The **head** is the ConfigMap `<cluster>-controller`, key `head.json`,
//!   replaced with a `resourceVersion` precondition: a second writer (a
//!   stale operator replica) gets a conflict instead of overwriting newer
//!   state, and its blobs are never named by a head.
//! - Each **blob** is a ConfigMap `<cluster>-controller-<blob>` (key
//!   `records.jsonl`, well under the 1 MiB object limit), created once and
//!   labelled with the cluster and `component=metadata`, so the unused ones
//!   can be listed and deleted.
//! - An older Skein's whole image (key `cluster-metadata.json` of the head
//!   ConfigMap) is read once and replaced by a snapshot.
//!
//! - SCRAM credentials in these ConfigMaps are sealed (AES-256-GCM) once
//!   the cluster is finalized at `skein.version` 3, with a key kept in the
//!   Secret `<cluster>-controller-key` ([`ensure_key`]): ConfigMaps are
//!   readable by a namespace's `view` role, Secrets are not (issue #41;
//!   `skein_controller::store::seal`).
//!
//! Every object is owned by the KafkaCluster, so they go with it. Requests
//! run on a thread of their own with its own client, so the controller's
//! synchronous calls never wait on the runtime they are called from.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use skein_controller::{BlobStore, SealingKey, StoreLimits};
use skein_crds::KafkaCluster;

use crate::error::ControllerStartError;
use crate::manifests::{labels, owned_meta, ClusterNames};

/// Key of the head in the controller ConfigMap.
pub const HEAD_KEY: &str = "head.json";
/// Key of an older Skein's whole image in the same ConfigMap.
pub const LEGACY_KEY: &str = "cluster-metadata.json";
/// Key of a blob's records.
pub const BLOB_KEY: &str = "records.jsonl";
/// Key of the sealing key (32 bytes) in the Secret `<cluster>-controller-key`.
pub const SEALING_KEY: &str = "key";
/// `app.kubernetes.io/component` of the blob ConfigMaps.
pub const COMPONENT: &str = "metadata";

/// Name of the ConfigMap holding a cluster's metadata head.
pub fn metadata_config_map(cluster: &str) -> String {
    format!("{cluster}-controller")
}

enum Op {
    ReadHead,
    WriteHead(Vec<u8>, Option<String>),
    ReadBlob(String),
    WriteBlob(String, Vec<u8>),
    DeleteBlob(String),
    ListBlobs,
    ReadLegacy,
}

enum Done {
    Head(Option<(Vec<u8>, String)>),
    Version(String),
    Bytes(Option<Vec<u8>>),
    Unit,
    Names(Vec<String>),
}

type Request = (Op, std::sync::mpsc::Sender<io::Result<Done>>);

/// The metadata log's objects of one KafkaCluster.
pub struct ConfigMapBlobStore {
    cluster: String,
    namespace: String,
    tx: tokio::sync::mpsc::UnboundedSender<Request>,
    key: Option<SealingKey>,
}

struct Worker {
    api: Api<ConfigMap>,
    namespace: String,
    cluster: String,
    owner: Option<OwnerReference>,
    /// The head ConfigMap's version when it exists without a head (an
    /// older Skein's image): the first head replaces it.
    bare_version: Option<String>,
}

impl ConfigMapBlobStore {
    /// Starts the request thread for the cluster's objects; `key` seals
    /// SCRAM credentials once the cluster is finalized at level 3.
    pub fn start(
        config: kube::Config,
        namespace: &str,
        cluster: &str,
        owner: Option<OwnerReference>,
        key: Option<SealingKey>,
    ) -> io::Result<Self> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Request>();
        let (ns, name) = (namespace.to_string(), cluster.to_string());
        std::thread::Builder::new()
            .name(format!("metadata-{cluster}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("metadata store runtime");
                rt.block_on(async move {
                    let client = match Client::try_from(config) {
                        Ok(c) => c,
                        Err(e) => {
                            while let Some((_, reply)) = rx.recv().await {
                                let _ = reply.send(Err(io::Error::other(format!(
                                    "no Kubernetes client: {e}"
                                ))));
                            }
                            return;
                        }
                    };
                    let mut worker = Worker {
                        api: Api::namespaced(client, &ns),
                        namespace: ns,
                        cluster: name,
                        owner,
                        bare_version: None,
                    };
                    while let Some((op, reply)) = rx.recv().await {
                        let _ = reply.send(worker.run(op).await);
                    }
                });
            })?;
        Ok(Self {
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
            tx,
            key,
        })
    }

    fn call(&self, op: Op) -> io::Result<Done> {
        let (reply, wait) = std::sync::mpsc::channel();
        self.tx
            .send((op, reply))
            .map_err(|_| io::Error::other("metadata store thread stopped"))?;
        wait.recv_timeout(Duration::from_secs(30))
            .map_err(|_| io::Error::other("the API server did not answer in 30 s"))?
    }
}

fn unexpected() -> io::Error {
    io::Error::other("metadata store: unexpected answer")
}

impl BlobStore for ConfigMapBlobStore {
    fn read_head(&self) -> io::Result<Option<(Vec<u8>, String)>> {
        match self.call(Op::ReadHead)? {
            Done::Head(h) => Ok(h),
            _ => Err(unexpected()),
        }
    }
    fn write_head(&self, bytes: &[u8], expected: Option<&str>) -> io::Result<String> {
        match self.call(Op::WriteHead(bytes.to_vec(), expected.map(str::to_string)))? {
            Done::Version(v) => Ok(v),
            _ => Err(unexpected()),
        }
    }
    fn read_blob(&self, name: &str) -> io::Result<Vec<u8>> {
        match self.call(Op::ReadBlob(name.to_string()))? {
            Done::Bytes(Some(b)) => Ok(b),
            Done::Bytes(None) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("metadata blob {name} is missing"),
            )),
            _ => Err(unexpected()),
        }
    }
    fn write_blob(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.call(Op::WriteBlob(name.to_string(), bytes.to_vec()))
            .map(|_| ())
    }
    fn delete_blob(&self, name: &str) -> io::Result<()> {
        self.call(Op::DeleteBlob(name.to_string())).map(|_| ())
    }
    fn list_blobs(&self) -> io::Result<Vec<String>> {
        match self.call(Op::ListBlobs)? {
            Done::Names(n) => Ok(n),
            _ => Err(unexpected()),
        }
    }
    fn read_legacy_image(&self) -> io::Result<Option<Vec<u8>>> {
        match self.call(Op::ReadLegacy)? {
            Done::Bytes(b) => Ok(b),
            _ => Err(unexpected()),
        }
    }
    fn sealing_key(&self) -> Option<SealingKey> {
        self.key.clone()
    }
    fn limits(&self) -> StoreLimits {
        StoreLimits {
            // A ConfigMap holds at most 1 MiB; stay well under it.
            max_blob_bytes: 768 << 10,
            max_tail_bytes: 128 << 10,
            min_snapshot_interval_bytes: 4 << 20,
            max_log_blobs: 64,
        }
    }
    fn describe(&self) -> String {
        format!(
            "ConfigMap {}/{}",
            self.namespace,
            metadata_config_map(&self.cluster)
        )
    }
}

/// The sealing key `secret` holds (`origin` names it in messages).
fn key_of(secret: &Secret, origin: &str) -> Result<SealingKey, String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(SEALING_KEY))
        .ok_or_else(|| format!("{origin} has no key {SEALING_KEY:?}"))?;
    SealingKey::new(&bytes.0, origin)
}

/// What the cluster's key Secret says, as read: the key to use, or why the
/// cluster's controller must not start. `running` is the key the cluster's
/// running controller seals with, if one runs.
#[derive(Debug)]
enum KeyState {
    Use(SealingKey),
    /// Absent: write it (the running controller's key, else a new one).
    Write,
}

fn key_state(
    existing: Option<&Secret>,
    owner_uid: Option<&str>,
    origin: &str,
    running: Option<&SealingKey>,
) -> Result<KeyState, String> {
    let name = origin.rsplit('/').next().unwrap_or(origin);
    crate::ownership::check("Secret", name, existing.map(|s| &s.metadata), owner_uid)
        .map_err(|f| f.to_string())?;
    let Some(secret) = existing else {
        return Ok(KeyState::Write);
    };
    let key = key_of(secret, origin)?;
    match running {
        Some(r) if r.id() != key.id() => Err(format!(
            "{origin} holds key {}, but this cluster's controller seals SCRAM credentials with key {}: the Secret was replaced. Delete it and the operator writes key {} back",
            key.id(),
            r.id(),
            r.id()
        )),
        _ => Ok(KeyState::Use(key)),
    }
}

/// The key of `kc`'s metadata log, from the Secret `<cluster>-controller-key`,
/// which is made (owned by the KafkaCluster, so it goes with it) when
/// missing: with `running`'s bytes when the cluster's controller runs (a
/// deleted Secret is written back), else a new random key. A key is never
/// replaced: one that changed under a running controller is refused, and a
/// Secret made anew after records were sealed fails the log's open with a
/// message naming it. A Secret of that name the cluster did not make is
/// neither read nor written (`crate::ownership`). Such problems are
/// [`ControllerStartError::MetadataKey`] (a condition on the cluster); an
/// API server that cannot be reached is [`ControllerStartError::Image`].
pub async fn ensure_key(
    client: &Client,
    kc: &KafkaCluster,
    running: Option<&SealingKey>,
) -> Result<SealingKey, ControllerStartError> {
    let names = ClusterNames::of(kc);
    let name = names.controller_key_secret();
    let origin = format!("Secret {}/{name}", names.namespace);
    let api: Api<Secret> = Api::namespaced(client.clone(), &names.namespace);
    let unreachable = |what: &str, e: kube::Error| {
        ControllerStartError::Image(io::Error::other(format!("{what} {origin}: {e}")))
    };
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| unreachable("reading", e))?;
    let uid = kc.uid();
    match key_state(existing.as_ref(), uid.as_deref(), &origin, running)
        .map_err(ControllerStartError::MetadataKey)?
    {
        KeyState::Use(key) => Ok(key),
        KeyState::Write => {
            let bytes = running.map_or_else(SealingKey::generate, |k| *k.bytes());
            let key =
                SealingKey::new(&bytes, &origin).map_err(ControllerStartError::MetadataKey)?;
            let secret = Secret {
                metadata: owned_meta(kc, &names, name.clone()),
                type_: Some("Opaque".into()),
                data: Some(BTreeMap::from([(
                    SEALING_KEY.to_string(),
                    ByteString(bytes.to_vec()),
                )])),
                ..Secret::default()
            };
            match crate::ownership::write(&api, &secret, None, uid.as_deref()).await {
                Ok(crate::ownership::Written::Done(_)) => {}
                Ok(crate::ownership::Written::Foreign(f)) => {
                    return Err(ControllerStartError::MetadataKey(f.to_string()))
                }
                Err(e) => return Err(unreachable("writing", e)),
            }
            if running.is_some() {
                tracing::warn!(cluster = %names.cluster, namespace = %names.namespace,
                    "{origin} was missing: written again with the key the controller seals with");
            } else {
                tracing::info!(cluster = %names.cluster, namespace = %names.namespace,
                    key = key.id(), "metadata sealing key made ({origin})");
            }
            Ok(key)
        }
    }
}

/// The blobs among `objects` (listed by the blobs' labels) of the head
/// `head`, by blob name. Only those `owner` (the cluster's uid) owns: the
/// names listed here may be deleted, and a ConfigMap that merely carries the
/// labels and the name's form is someone else's (issue #41).
fn blob_names<'a>(
    objects: impl Iterator<Item = &'a ObjectMeta>,
    head: &str,
    owner: Option<&str>,
) -> Vec<String> {
    let prefix = format!("{head}-");
    objects
        .filter(|m| {
            owner.is_none_or(|uid| m.owner_references.iter().flatten().any(|r| r.uid == uid))
        })
        .filter_map(|m| m.name.as_deref()?.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

impl Worker {
    fn head_name(&self) -> String {
        metadata_config_map(&self.cluster)
    }

    fn blob_name(&self, blob: &str) -> String {
        format!("{}-{blob}", self.head_name())
    }

    fn error(&self, what: &str, e: kube::Error) -> io::Error {
        match e {
            kube::Error::Api(e) if e.code == 409 => io::Error::other(format!(
                "{what} in {} was changed by another writer (is a second operator active?): {}",
                self.namespace, e.message
            )),
            e => io::Error::other(format!("{what} in {}: {e}", self.namespace)),
        }
    }

    fn object(&self, name: String, component: Option<&str>, key: &str, text: String) -> ConfigMap {
        let mut l = BTreeMap::from([
            (labels::MANAGED_BY.to_string(), labels::OPERATOR.to_string()),
            (labels::NAME.to_string(), labels::APP_NAME.to_string()),
            (labels::INSTANCE.to_string(), self.cluster.clone()),
        ]);
        if let Some(c) = component {
            l.insert(labels::COMPONENT.to_string(), c.to_string());
        }
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(self.namespace.clone()),
                labels: Some(l),
                owner_references: self.owner.clone().map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(key.to_string(), text)])),
            ..ConfigMap::default()
        }
    }

    async fn run(&mut self, op: Op) -> io::Result<Done> {
        let head = self.head_name();
        match op {
            Op::ReadHead | Op::ReadLegacy => {
                let legacy = matches!(op, Op::ReadLegacy);
                let cm = self
                    .api
                    .get_opt(&head)
                    .await
                    .map_err(|e| self.error(&head, e))?;
                let Some(cm) = cm else {
                    return Ok(if legacy {
                        Done::Bytes(None)
                    } else {
                        Done::Head(None)
                    });
                };
                let version = cm.resource_version().unwrap_or_default();
                let value = |key: &str| {
                    cm.data
                        .as_ref()
                        .and_then(|d| d.get(key))
                        .map(|s| s.clone().into_bytes())
                };
                if legacy {
                    return Ok(Done::Bytes(value(LEGACY_KEY)));
                }
                let found = value(HEAD_KEY);
                if found.is_none() {
                    self.bare_version = Some(version.clone());
                }
                Ok(Done::Head(found.map(|b| (b, version))))
            }
            Op::WriteHead(bytes, expected) => {
                let text = String::from_utf8(bytes).map_err(io::Error::other)?;
                let mut cm = self.object(head.clone(), None, HEAD_KEY, text);
                let version = expected.or_else(|| self.bare_version.clone());
                let pp = PostParams::default();
                let written = match version {
                    Some(v) => {
                        cm.metadata.resource_version = Some(v);
                        self.api.replace(&head, &pp, &cm).await
                    }
                    None => self.api.create(&pp, &cm).await,
                }
                .map_err(|e| self.error(&head, e))?;
                self.bare_version = None;
                Ok(Done::Version(
                    written.resource_version().unwrap_or_default(),
                ))
            }
            Op::ReadBlob(blob) => {
                let name = self.blob_name(&blob);
                let cm = self
                    .api
                    .get_opt(&name)
                    .await
                    .map_err(|e| self.error(&name, e))?;
                Ok(Done::Bytes(cm.and_then(|cm| {
                    cm.data?.remove(BLOB_KEY).map(String::into_bytes)
                })))
            }
            Op::WriteBlob(blob, bytes) => {
                let name = self.blob_name(&blob);
                let text = String::from_utf8(bytes).map_err(io::Error::other)?;
                let cm = self.object(name.clone(), Some(COMPONENT), BLOB_KEY, text);
                self.api
                    .create(&PostParams::default(), &cm)
                    .await
                    .map_err(|e| self.error(&name, e))?;
                Ok(Done::Unit)
            }
            Op::DeleteBlob(blob) => {
                let name = self.blob_name(&blob);
                match self.api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(Done::Unit),
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(Done::Unit),
                    Err(e) => Err(self.error(&name, e)),
                }
            }
            Op::ListBlobs => {
                let lp = ListParams::default().labels(&format!(
                    "{}={},{}={COMPONENT}",
                    labels::INSTANCE,
                    self.cluster,
                    labels::COMPONENT
                ));
                let list = self
                    .api
                    .list_metadata(&lp)
                    .await
                    .map_err(|e| self.error("metadata blobs", e))?;
                let owner = self.owner.as_ref().map(|o| o.uid.as_str());
                let metas = list.items.iter().map(|o| &o.metadata);
                Ok(Done::Names(blob_names(metas, &head, owner)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, owner: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    fn key_secret(owner: Option<&str>, bytes: &[u8]) -> Secret {
        Secret {
            metadata: meta("demo-controller-key", owner),
            data: Some(BTreeMap::from([(
                SEALING_KEY.to_string(),
                ByteString(bytes.to_vec()),
            )])),
            ..Secret::default()
        }
    }

    const ORIGIN: &str = "Secret ns/demo-controller-key";

    #[test]
    fn the_key_secret_is_made_when_missing_and_read_when_the_clusters() {
        assert!(matches!(
            key_state(None, Some("u1"), ORIGIN, None),
            Ok(KeyState::Write)
        ));
        let ours = key_secret(Some("u1"), &[3; 32]);
        let Ok(KeyState::Use(key)) = key_state(Some(&ours), Some("u1"), ORIGIN, None) else {
            panic!("the cluster's key is used");
        };
        assert_eq!(key.id(), SealingKey::new(&[3; 32], "x").unwrap().id());
        assert_eq!(key.origin(), ORIGIN);
        // The running controller's key, still there.
        let running = SealingKey::new(&[3; 32], ORIGIN).unwrap();
        assert!(matches!(
            key_state(Some(&ours), Some("u1"), ORIGIN, Some(&running)),
            Ok(KeyState::Use(_))
        ));
        // Deleted under a running controller: written back (with its bytes).
        assert!(matches!(
            key_state(None, Some("u1"), ORIGIN, Some(&running)),
            Ok(KeyState::Write)
        ));
    }

    #[test]
    fn a_foreign_malformed_or_replaced_key_secret_is_refused_by_name() {
        // Someone else's Secret of that name is neither read nor written.
        let foreign = key_secret(None, &[3; 32]);
        let e = key_state(Some(&foreign), Some("u1"), ORIGIN, None).unwrap_err();
        assert!(
            e.contains("demo-controller-key") && e.contains("no owner"),
            "{e}"
        );
        let e = key_state(
            Some(&key_secret(Some("u1"), &[3; 16])),
            Some("u1"),
            ORIGIN,
            None,
        )
        .unwrap_err();
        assert!(e.contains(ORIGIN) && e.contains("16 bytes"), "{e}");
        let mut empty = key_secret(Some("u1"), &[]);
        empty.data = None;
        let e = key_state(Some(&empty), Some("u1"), ORIGIN, None).unwrap_err();
        assert!(e.contains("has no key"), "{e}");
        // Replaced under a running controller: the cluster is refused, and
        // the message says how to get the key back.
        let running = SealingKey::new(&[4; 32], ORIGIN).unwrap();
        let e = key_state(
            Some(&key_secret(Some("u1"), &[3; 32])),
            Some("u1"),
            ORIGIN,
            Some(&running),
        )
        .unwrap_err();
        assert!(e.contains(running.id()) && e.contains("Delete it"), "{e}");
    }

    /// Garbage collection of blobs deletes what `blob_names` lists: a
    /// ConfigMap with the blobs' labels and name form that the cluster does
    /// not own is never among them.
    #[test]
    fn only_blobs_the_cluster_owns_are_listed() {
        let objects = [
            meta("demo-controller-snap-1", Some("u1")),
            meta("demo-controller-log-2", Some("u1")),
            meta("demo-controller-app", None),
            meta("demo-controller-other", Some("u2")),
            meta("other-controller-x", Some("u1")),
        ];
        assert_eq!(
            blob_names(objects.iter(), "demo-controller", Some("u1")),
            vec!["snap-1", "log-2"]
        );
        // Without an owner (a store made with none) names alone decide.
        assert_eq!(blob_names(objects.iter(), "demo-controller", None).len(), 4);
    }
}
