//! The web console: a few static files served at `/`, embedded in the binary.
//!
//! The console is a plain-ES-module front end (no framework, no build step,
//! nothing from a CDN). It signs in with a bearer token kept in the tab's
//! `sessionStorage` and does everything through `/v1` with that token, so it
//! has exactly the token's rights: this module adds no API, only `GET /` and
//! `GET /assets/{name}`, outside the `/v1` route table and `openapi.yaml`.
//!
//! The API additions the console stands on (the document list and whole
//! documents, forgotten memories to restore, search paging) are ordinary
//! `/v1` routes with their own use cases in [`crate::hub`]; the console
//! calls them with the signed-in token like any client.
//!
//! Every response carries a strict Content-Security-Policy (no inline script
//! or style, connections to this origin only, no framing) and
//! `X-Content-Type-Options: nosniff`. Memory text is untrusted: the scripts
//! build the page with `textContent` and DOM nodes, never `innerHTML`.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The Content-Security-Policy of every console response.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// One embedded file: name under `/assets/`, media type, bytes.
struct Asset {
    name: &'static str,
    media_type: &'static str,
    body: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";

/// The static file table; `index.html` is served at `/` only.
static ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        media_type: "text/css; charset=utf-8",
        body: include_bytes!("assets/style.css"),
    },
    Asset {
        name: "app.js",
        media_type: JS,
        body: include_bytes!("assets/app.js"),
    },
    Asset {
        name: "api.js",
        media_type: JS,
        body: include_bytes!("assets/api.js"),
    },
    Asset {
        name: "dom.js",
        media_type: JS,
        body: include_bytes!("assets/dom.js"),
    },
    Asset {
        name: "markdown.js",
        media_type: JS,
        body: include_bytes!("assets/markdown.js"),
    },
    Asset {
        name: "find.js",
        media_type: JS,
        body: include_bytes!("assets/find.js"),
    },
    Asset {
        name: "memory.js",
        media_type: JS,
        body: include_bytes!("assets/memory.js"),
    },
    Asset {
        name: "browse.js",
        media_type: JS,
        body: include_bytes!("assets/browse.js"),
    },
    Asset {
        name: "docs.js",
        media_type: JS,
        body: include_bytes!("assets/docs.js"),
    },
    Asset {
        name: "admin.js",
        media_type: JS,
        body: include_bytes!("assets/admin.js"),
    },
];

const INDEX: &[u8] = include_bytes!("assets/index.html");

/// The console's routes: `GET /` and `GET /assets/{name}` (HEAD too), no
/// authentication (the files hold no data; the data comes from `/v1`).
pub(crate) fn router() -> Router {
    Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
}

/// The names of the embedded assets (tests).
#[cfg(test)]
pub(crate) fn asset_names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.name)
}

async fn index() -> Response {
    respond(StatusCode::OK, "text/html; charset=utf-8", INDEX)
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => respond(StatusCode::OK, a.media_type, a.body),
        None => respond(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            b"no such console asset\n",
        ),
    }
}

fn respond(status: StatusCode, media_type: &'static str, body: &'static [u8]) -> Response {
    let mut res = (status, body).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // The files change with the binary; revalidating is cheap on loopback.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    async fn fetch(path: &str) -> Response {
        let req = axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        router().oneshot(req).await.unwrap()
    }

    #[tokio::test]
    async fn every_file_has_the_policy_headers() {
        let mut paths = vec!["/".to_string(), "/assets/nope.js".to_string()];
        paths.extend(asset_names().map(|n| format!("/assets/{n}")));
        for path in paths {
            let res = fetch(&path).await;
            let want = if path.ends_with("nope.js") { 404 } else { 200 };
            assert_eq!(res.status().as_u16(), want, "{path}");
            assert_eq!(
                res.headers()[header::CONTENT_SECURITY_POLICY],
                CSP,
                "{path}"
            );
            assert_eq!(
                res.headers()[header::X_CONTENT_TYPE_OPTIONS],
                "nosniff",
                "{path}"
            );
        }
    }

    #[test]
    fn no_inline_script_or_html_injection_sinks() {
        let index = std::str::from_utf8(INDEX).unwrap();
        // Every <script> loads a file; no inline handlers or styles.
        for (i, _) in index.match_indices("<script") {
            assert!(
                index[i..].split('>').next().unwrap().contains("src="),
                "inline script in index.html"
            );
        }
        for word in [" onclick", " onload", " onerror", " style="] {
            assert!(!index.contains(word), "index.html has{word}");
        }
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(a.body).unwrap();
            for sink in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
            ] {
                assert!(!text.contains(sink), "{} uses {sink}", a.name);
            }
        }
    }
}
