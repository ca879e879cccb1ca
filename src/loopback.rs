//! A minimal HTTP/1.1 client for talking to a local `memd serve` from the
//! CLI (`memd health`, `memd doctor`): one request per connection, plain
//! HTTP, short timeouts. Nothing here is meant for the open network.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::{Error, Result};

/// A response: status code and body text.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// Body (de-chunked).
    pub body: String,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// `GET path` on `addr` (host:port) with an optional bearer token.
pub fn get(addr: &str, path: &str, token: Option<&str>, timeout: Duration) -> Result<Response> {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    request(addr, "GET", path, &headers, None, timeout)
}

/// `method path` on `addr` (host:port) with extra headers and an optional
/// JSON body.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    json_body: Option<&str>,
    timeout: Duration,
) -> Result<Response> {
    let sock = addr
        .to_socket_addrs()
        .map_err(io(format!("cannot resolve {addr}")))?
        .next()
        .ok_or_else(|| Error::invalid(format!("{addr} resolves to nothing")))?;
    let mut stream =
        TcpStream::connect_timeout(&sock, timeout).map_err(io(format!("cannot reach {addr}")))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(io(format!("cannot talk to {addr}")))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = json_body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("Connection: close\r\n\r\n");
    head.push_str(json_body.unwrap_or(""));
    stream
        .write_all(head.as_bytes())
        .map_err(io(format!("cannot talk to {addr}")))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(io(format!("no answer from {addr}")))?;
    parse(&raw).ok_or_else(|| Error::Internal(format!("{addr} sent a malformed HTTP response")))
}

fn parse(raw: &[u8]) -> Option<Response> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:")
            && l.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_string()
    };
    Some(Response { status, body })
}

fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let n = usize::from_str_radix(size.trim(), 16).ok()?;
        if n == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..n)?);
        body = rest.get(n + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "{}"));
        let r = parse(b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "abcde"));
        assert!(parse(b"garbage").is_none());
    }
}
