//! A scripted API server for reconcile tests (after kube-rs/controller-rs's
//! fixtures): each expected request is checked for method, path, query and
//! body, in order, and answered. A reconcile that sends a request the script
//! does not expect fails the test.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::client::Body;
use kube::Client;
use prometheus::Registry;
use serde_json::{json, Value};
use skein_operator::context::{BoxFuture, TopicRemover};
use skein_operator::error::TopicRemovalError;
use skein_operator::manifests::BuildOptions;
use skein_operator::{Context, Metrics};
use tokio::task::JoinHandle;
use tower_test::mock::{self, Handle};

pub const NS: &str = "streaming";
/// The path of the test namespace's Skein resources.
pub const BASE: &str = "/apis/skein.dev/v1alpha1/namespaces/streaming";
pub const FIELD_MANAGER_QUERY: &str = "fieldManager=skein-operator";

/// The fixed clock of the tests.
pub fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

pub fn now_time() -> Time {
    Time(now())
}

type Check = Box<dyn FnOnce(&Value) + Send>;
type Reply = Box<dyn FnOnce(&Value) -> (u16, Value) + Send>;

/// One expected request and its answer.
pub struct Expect {
    method: Method,
    path: String,
    query: Vec<String>,
    check: Check,
    reply: Reply,
}

impl Expect {
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Expect {
            method,
            path: path.into(),
            query: Vec::new(),
            check: Box::new(|_| {}),
            reply: Box::new(|body| (200, body.clone())),
        }
    }
    /// A server-side apply of an owned object by the operator (echoed back).
    pub fn apply(path: impl Into<String>) -> Self {
        Expect::new(Method::PATCH, path)
            .query(FIELD_MANAGER_QUERY)
            .query("force=true")
    }
    pub fn get(path: impl Into<String>) -> Self {
        Expect::new(Method::GET, path)
    }
    /// The query string must contain this `key=value`.
    pub fn query(mut self, q: &str) -> Self {
        self.query.push(q.into());
        self
    }
    /// Assertions on the JSON body.
    pub fn check(mut self, f: impl FnOnce(&Value) + Send + 'static) -> Self {
        self.check = Box::new(f);
        self
    }
    /// Answer with this JSON and status 200.
    pub fn reply(mut self, v: Value) -> Self {
        self.reply = Box::new(move |_| (200, v));
        self
    }
    /// Answer computed from the request body.
    pub fn reply_with(mut self, f: impl FnOnce(&Value) -> Value + Send + 'static) -> Self {
        self.reply = Box::new(move |b| (200, f(b)));
        self
    }
    /// Answer with a Kubernetes `Status` error.
    pub fn fail(mut self, code: u16, reason: &str) -> Self {
        let reason = reason.to_string();
        self.reply = Box::new(move |_| {
            (
                code,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": format!("{reason} (mock)"), "reason": reason, "code": code}),
            )
        });
        self
    }
    fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// The mock side of the client: runs a script of expected requests.
pub struct ApiServer(Handle<Request<Body>, Response<Body>>);

impl ApiServer {
    /// Serves `script` in order; the task yields the request bodies it saw.
    pub fn run(self, script: Vec<Expect>) -> JoinHandle<Vec<Value>> {
        let mut handle = self.0;
        tokio::spawn(async move {
            let mut bodies = Vec::new();
            for (i, step) in script.into_iter().enumerate() {
                let what = step.describe();
                let (request, send) = handle.next_request().await.unwrap_or_else(|| {
                    panic!("step {i}: expected {what}, but the client went away")
                });
                let uri = request.uri().clone();
                assert_eq!(
                    request.method(),
                    step.method,
                    "step {i}: expected {what}, got {} {uri}",
                    request.method()
                );
                assert_eq!(
                    uri.path(),
                    step.path,
                    "step {i}: expected {what}, got {} {uri}",
                    request.method()
                );
                let query = uri.query().unwrap_or("");
                for q in &step.query {
                    assert!(
                        query.split('&').any(|p| p == q),
                        "step {i}: {what}: query {query:?} lacks {q:?}"
                    );
                }
                let bytes = request.into_body().collect().await.unwrap().to_bytes();
                let body: Value = if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).expect("request body is JSON")
                };
                (step.check)(&body);
                let (code, reply) = (step.reply)(&body);
                bodies.push(body);
                send.send_response(
                    Response::builder()
                        .status(code)
                        .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                        .unwrap(),
                );
            }
            bodies
        })
    }
}

/// A topic remover that records its calls and answers as told.
#[derive(Default)]
pub struct FakeRemover {
    pub calls: Mutex<Vec<(String, String)>>,
    pub fail_with: Mutex<Option<String>>,
}

impl TopicRemover for FakeRemover {
    fn delete_topic<'a>(
        &'a self,
        namespace: &'a str,
        cluster: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), TopicRemovalError>> {
        self.calls
            .lock()
            .unwrap()
            .push((format!("{namespace}/{cluster}"), topic.to_string()));
        let result = match self.fail_with.lock().unwrap().clone() {
            Some(e) => Err(TopicRemovalError::Unavailable(e)),
            None => Ok(()),
        };
        Box::pin(async move { result })
    }
}

/// A context on a mocked client, plus the mock's handle and the remover.
pub fn test_context() -> (Arc<Context>, ApiServer, Arc<FakeRemover>) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, NS);
    let metrics = Metrics::new(&Registry::new()).unwrap();
    let remover = Arc::new(FakeRemover::default());
    let options = BuildOptions {
        default_broker_image: "skein-broker:test".into(),
        ..BuildOptions::default()
    };
    let ctx = Context::new(client, metrics, options, remover.clone(), None);
    (Arc::new(ctx), ApiServer(handle), remover)
}

/// Awaits the mock's script with a deadline.
pub async fn finish(server: JoinHandle<Vec<Value>>) -> Vec<Value> {
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the reconcile did not send every expected request")
        .expect("a mock assertion failed")
}

/// Runs a reconcile future with a deadline (a request the script does not
/// expect would leave it waiting forever).
pub async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(5), f)
        .await
        .expect("reconcile hung: it sent a request the script does not expect")
}

/// Finds the condition of `type_` in a status JSON.
pub fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}

/// The KafkaCluster `demo` in the test namespace with `spec`, at
/// `generation`, with `status` if given.
pub fn cluster(spec: Value, generation: i64, status: Option<Value>) -> skein_crds::KafkaCluster {
    let mut obj = json!({
        "apiVersion": "skein.dev/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": NS, "uid": "0b1c2d3e-0000-4000-8000-000000000001", "generation": generation},
        "spec": spec,
    });
    if let Some(s) = status {
        obj["status"] = s;
    }
    serde_json::from_value(obj).unwrap()
}
