//! Raw HTTP/1.1 to a real `memd serve` on loopback: one request per fresh
//! `TcpStream` (`Connection: close`), the response read to its end. Tests
//! that need the socket itself (a body that never arrives, keep-alive,
//! slow clients) write to their own stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// A whole response.
pub struct Response {
    pub status: u16,
    /// The status line and headers, as sent.
    pub head: String,
    pub body: String,
}

/// Sends `method path` with extra `headers` (each line ending in `\r\n`)
/// and `body`.
pub fn exchange(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).expect("a UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a full response");
    Response {
        status: head.split(' ').nth(1).unwrap().parse().unwrap(),
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// The header lines of a JSON request, with the bearer token if any.
pub fn json_headers(token: Option<&str>) -> String {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!("{auth}Content-Type: application/json\r\n")
}

/// A JSON request; the status and the JSON body (`Null` when the body is
/// not JSON).
pub fn call(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let r = exchange(addr, method, path, &json_headers(token), &body.to_string());
    (
        r.status,
        serde_json::from_str(&r.body).unwrap_or(Value::Null),
    )
}

/// `GET path` without a body; the status and the JSON body.
pub fn get(addr: &str, path: &str, token: &str) -> (u16, Value) {
    let auth = format!("Authorization: Bearer {token}\r\n");
    let r = exchange(addr, "GET", path, &auth, "");
    (
        r.status,
        serde_json::from_str(&r.body).unwrap_or(Value::Null),
    )
}
