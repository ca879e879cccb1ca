//! The one outbound HTTP client: the CLI's calls to a running `memd serve`
//! (`memd health`, `memd doctor`), the MCP stdio process's `/v1` calls
//! ([`crate::mcp::upstream`]), Syncthing's REST API, and the consolidation
//! model's OpenAI-compatible endpoint.
//!
//! Blocking (the callers are synchronous), one request per call, and bounded
//! everywhere: a whole-call timeout, a cap on the response body
//! ([`UPSTREAM_INVALID`](crate::ErrorCode::UpstreamInvalid) past it), no
//! proxies and no redirects, so a bearer token or API key only ever goes to
//! the host it was configured for. `https://` is verified with rustls against
//! the bundled Mozilla roots, or against the PEM certificates in
//! `SSL_CERT_FILE` when that is set (a private CA in front of a self-hosted
//! model).
//!
//! Failures keep their cause as the error's source and carry a stable code:
//! nothing answering (refused, reset, timed out, DNS) is
//! [`UNAVAILABLE`](crate::ErrorCode::Unavailable) and retryable; an answer
//! that is not HTTP, too large, or fails TLS verification is
//! `UPSTREAM_INVALID`; a URL that cannot be used is `INVALID_INPUT`.

use std::time::Duration;

use ureq::Agent;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

use crate::error::{Error, Result};

/// Largest response body read from a local daemon or Syncthing, in bytes.
pub(crate) const LOOPBACK_BODY_LIMIT: u64 = 16 * 1024 * 1024;

/// A response: status code and body text.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// Body, decoded as UTF-8 (invalid sequences replaced).
    pub body: String,
    /// Headers, names in lowercase (values that are not text left out).
    pub(crate) headers: Vec<(String, String)>,
}

impl Response {
    /// The first value of header `name` (lowercase), if present.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    /// Who is called, for error messages, e.g. "the memd daemon at 127.0.0.1:8787".
    pub(crate) service: &'a str,
    /// `GET`, `POST`, `PUT`, …
    pub(crate) method: &'a str,
    /// `http://` or `https://` URL.
    pub(crate) url: &'a str,
    /// Extra headers (`Authorization`, `X-API-Key`, …).
    pub(crate) headers: &'a [(&'a str, &'a str)],
    /// A JSON body, sent with `Content-Type: application/json`.
    pub(crate) json: Option<&'a [u8]>,
    /// The whole call, from resolving the host to the last body byte.
    pub(crate) timeout: Duration,
    /// Largest body accepted, in bytes.
    pub(crate) body_limit: u64,
}

/// `GET path` on the daemon at `addr` (`host:port`) with an optional bearer token.
pub fn get(addr: &str, path: &str, token: Option<&str>, timeout: Duration) -> Result<Response> {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    let service = format!("the memd daemon at {addr}");
    send(&Request {
        service: &service,
        method: "GET",
        url: &format!("http://{addr}{path}"),
        headers: &headers,
        json: None,
        timeout,
        body_limit: LOOPBACK_BODY_LIMIT,
    })
}

/// Sends `req` and returns the answer, whatever its status.
pub(crate) fn send(req: &Request<'_>) -> Result<Response> {
    let scheme = req.url.split_once("://").map(|(s, _)| s);
    if !matches!(scheme, Some("http" | "https")) {
        return Err(Error::invalid(format!(
            "{}: {:?} is not an http:// or https:// URL",
            req.service, req.url
        )));
    }
    let agent = agent(req.timeout)?;
    let mut builder = ureq::http::Request::builder()
        .method(req.method)
        .uri(req.url);
    for (name, value) in req.headers {
        builder = builder.header(*name, *value);
    }
    if req.json.is_some() {
        builder = builder.header("Content-Type", "application/json");
    }
    let request = builder
        .body(req.json.unwrap_or_default().to_vec())
        .map_err(|e| Error::invalid(format!("{}: cannot build a request: {e}", req.service)))?;
    let mut response = agent.run(request).map_err(|e| failure(req, e))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let bytes = response
        .body_mut()
        .with_config()
        .limit(req.body_limit)
        .read_to_vec()
        .map_err(|e| failure(req, e))?;
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        headers,
    })
}

/// An agent for one call. Building one is cheap next to the calls it makes
/// (a handful per command or consolidation run), and it reads `SSL_CERT_FILE`
/// afresh each time.
fn agent(timeout: Duration) -> Result<Agent> {
    let tls = TlsConfig::builder().root_certs(root_certs()?).build();
    Ok(Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        // Never follow a redirect: the Authorization header must stay with
        // the host it was configured for, and an API that redirects is
        // misconfigured anyway. The 3xx comes back as a status.
        .max_redirects(0)
        // Loopback calls must not go through a proxy from the environment,
        // and neither may the model's API key.
        .proxy(None)
        .tls_config(tls)
        .build()
        .into())
}

/// The bundled Mozilla roots, or the certificates in `SSL_CERT_FILE`.
fn root_certs() -> Result<RootCerts> {
    let Some(path) = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty()) else {
        return Ok(RootCerts::WebPki);
    };
    let display = std::path::Path::new(&path).display().to_string();
    let pem = std::fs::read(&path).map_err(|source| Error::Io {
        context: format!("cannot read SSL_CERT_FILE {display}"),
        source,
    })?;
    let mut certs: Vec<Certificate<'static>> = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(Error::invalid(format!(
                    "SSL_CERT_FILE {display} is not PEM: {e}"
                )));
            }
        }
    }
    if certs.is_empty() {
        return Err(Error::invalid(format!(
            "SSL_CERT_FILE {display} holds no certificate"
        )));
    }
    Ok(RootCerts::new_with_certs(&certs))
}

/// Whether `e` is a refused connection from [`send`]: nothing listened, so
/// the request never reached a server and sending it again is safe.
pub(crate) fn is_refused(e: &Error) -> bool {
    let Error::Unavailable {
        source: Some(source),
        ..
    } = e
    else {
        return false;
    };
    matches!(
        source.downcast_ref::<ureq::Error>(),
        Some(ureq::Error::Io(io)) if io.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// The stable error for a failed call.
fn failure(req: &Request<'_>, e: ureq::Error) -> Error {
    use ureq::Error as E;
    let service = req.service.to_string();
    let unavailable = |reason: String, e: ureq::Error| Error::Unavailable {
        service: service.clone(),
        reason,
        source: Some(Box::new(e)),
    };
    let invalid = |reason: String, e: ureq::Error| Error::UpstreamInvalid {
        service: service.clone(),
        reason,
        source: Some(Box::new(e)),
    };
    match e {
        E::Timeout(_) => unavailable(
            format!("no answer within {} s", req.timeout.as_secs_f32()),
            e,
        ),
        E::HostNotFound => unavailable("its host name does not resolve".into(), e),
        E::ConnectionFailed => unavailable("cannot connect".into(), e),
        // rustls reports a failed handshake through the socket's IO error.
        E::Io(ref io)
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()) =>
        {
            invalid(format!("the TLS handshake failed: {io}"), e)
        }
        E::Io(ref io) => {
            let reason = match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused (is it running?)",
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                    "the connection was dropped"
                }
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    "the connection timed out"
                }
                std::io::ErrorKind::UnexpectedEof => "it closed the connection without answering",
                _ => "the connection failed",
            };
            unavailable(format!("{reason}: {io}"), e)
        }
        E::BodyExceedsLimit(limit) => {
            invalid(format!("its answer is larger than {limit} bytes"), e)
        }
        E::BadUri(_) | E::Http(_) | E::TlsRequired | E::RequireHttpsOnly(_) => {
            Error::invalid(format!("{}: cannot use {:?}: {e}", req.service, req.url))
        }
        E::Tls(_) | E::Rustls(_) | E::Pem(_) => {
            invalid(format!("the TLS handshake failed: {e}"), e)
        }
        E::Protocol(_) | E::LargeResponseHeader(..) => {
            invalid(format!("not an HTTP answer: {e}"), e)
        }
        other => invalid(other.to_string(), other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn call(url: &str) -> Result<Response> {
        send(&Request {
            service: "the test server",
            method: "GET",
            url,
            headers: &[],
            json: None,
            timeout: Duration::from_secs(5),
            body_limit: 1024,
        })
    }

    #[test]
    fn unusable_urls_are_input_errors() {
        for url in ["ftp://127.0.0.1/x", "127.0.0.1:9/x", "http://exa mple/"] {
            let e = call(url).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidInput, "{url}: {e}");
        }
    }

    #[test]
    fn a_closed_port_is_unavailable_and_retryable() {
        // Bind then drop: the port is closed for the call below.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = get(
            &format!("127.0.0.1:{port}"),
            "/v1/health",
            None,
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
        assert!(e.code().retryable());
        assert!(
            e.to_string().contains("the memd daemon at 127.0.0.1:"),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some(), "the cause is kept");
        assert!(is_refused(&e), "a closed port refuses: safe to resend");
        assert!(!is_refused(&Error::invalid("x")));
    }
}
