//! An in-process `/v1` API over a temp root, driven with `Router::oneshot`.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use chrono::{DateTime, Utc};
use memory_hub::http::{AppState, router};
use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::model::{Privacy, Subject};
use serde_json::Value;
use tower::ServiceExt;

use crate::support::{TempRoot, scene};

/// What the router answered.
pub struct Reply {
    pub status: u16,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

/// A hub, its router and a movable clock.
pub struct Api {
    pub root: TempRoot,
    pub hub: Arc<Hub>,
    pub router: Router,
    pub clock: Arc<Mutex<Option<DateTime<Utc>>>>,
}

impl Api {
    pub fn new() -> Self {
        let root = TempRoot::new();
        Self::over(root)
    }

    /// An API over a root prepared beforehand (documents written first).
    pub fn over(root: TempRoot) -> Self {
        let hub = root.hub();
        Self::over_hub(root, hub)
    }

    /// An API over a hub opened by the caller (another config or embedder).
    pub fn over_hub(root: TempRoot, hub: Hub) -> Self {
        let hub = Arc::new(hub);
        // As `memd serve` does: the consolidation routes run the scheduler's code.
        hub.install_consolidation(memory_hub::consolidate::service::service());
        let clock: Arc<Mutex<Option<DateTime<Utc>>>> = Arc::new(Mutex::new(None));
        let c = clock.clone();
        let state = AppState::new(hub.clone())
            .with_clock(Arc::new(move || c.lock().unwrap().unwrap_or_else(Utc::now)));
        Api {
            root,
            hub,
            router: router(state),
            clock,
        }
    }

    /// Moves the server's clock (None: real time).
    pub fn set_now(&self, now: Option<DateTime<Utc>>) {
        *self.clock.lock().unwrap() = now;
    }

    /// Issues a token from a preset and returns its secret.
    pub fn token(&self, name: &str, preset: &str) -> String {
        self.root.token(name, preset)
    }

    /// Issues a token with explicit scopes and scenes.
    pub fn custom_token(&self, name: &str, scopes: &[&str], scenes: &[&str]) -> String {
        self.root.custom_token(name, scopes, scenes)
    }

    /// Sends a raw request; returns status and parsed JSON body.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let Reply {
            status,
            body: bytes,
            ..
        } = self.send(method, path, token, body).await;
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| panic!("non-JSON body: {}", String::from_utf8_lossy(&bytes)))
        };
        (status, value)
    }

    /// Sends a request without a body; returns status and the body as text.
    pub async fn raw_text(&self, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
        let reply = self.send(method, path, token, Vec::new()).await;
        (
            reply.status,
            String::from_utf8(reply.body).expect("UTF-8 body"),
        )
    }

    /// Sends a request (a JSON content type, the bearer token if any); the
    /// whole reply.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        Reply {
            status,
            headers,
            body: bytes.to_vec(),
        }
    }

    /// POSTs JSON.
    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.raw("POST", path, Some(token), body.to_string().into_bytes())
            .await
    }

    /// POSTs JSON and asserts 200.
    pub async fn ok(&self, path: &str, token: &str, body: Value) -> Value {
        let (status, v) = self.post(path, token, body.clone()).await;
        assert_eq!(status, 200, "{path} {body} -> {v}");
        v
    }

    /// GET.
    pub async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        self.raw("GET", path, token, Vec::new()).await
    }

    /// Ids of a search; full text unless the body names a mode, so that hit
    /// lists are exact (hybrid adds nearest neighbours of any relevance).
    pub async fn search_ids(&self, token: &str, mut body: Value) -> Vec<String> {
        if body.get("mode").is_none() {
            body["mode"] = serde_json::json!("fulltext");
        }
        let v = self.ok("/v1/search", token, body).await;
        ids(&v["hits"])
    }

    /// Writes straight through the hub.
    pub fn write(
        &self,
        scene_name: &str,
        text: &str,
        privacy: Privacy,
        subject: Subject,
    ) -> String {
        let mut req = WriteRequest::new(scene(scene_name), text, "test");
        req.privacy = privacy;
        req.subject = subject;
        self.hub.append(req).unwrap().id
    }

    /// All audit lines.
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.root.layout().audit())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The `id` fields of an array of objects.
pub fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|h| h["id"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The items of a timeline reply, month after month.
pub fn timeline_items(v: &Value) -> Vec<&Value> {
    v["months"]
        .as_array()
        .expect("a timeline reply")
        .iter()
        .flat_map(|m| m["items"].as_array().expect("a month's items"))
        .collect()
}
