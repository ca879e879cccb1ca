//! Past its per-minute allowance a token gets `429 RATE_LIMITED` on every
//! request, with `Retry-After`, and the connection stays usable: a client
//! that sends its body after the head (as most do under load) reads the
//! refusal instead of a closed connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::TempRoot;

/// One response read off a keep-alive connection: status and headers
/// (lowercase names); `None` if the connection was closed instead.
fn read_response(reader: &mut BufReader<TcpStream>) -> Option<(u16, Vec<(String, String)>)> {
    let mut status_line = String::new();
    if reader.read_line(&mut status_line).ok()? == 0 {
        return None;
    }
    let status: u16 = status_line.split(' ').nth(1)?.parse().ok()?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some((status, headers))
}

#[test]
fn refusals_past_the_rate_limit_are_429_on_a_connection_that_stays_open() {
    let root = TempRoot::new();
    root.write_config(r#"{"backup": {"daily": false}, "embedder": {"enabled": false}, "http": {"rateLimitPerMinute": 5}}"#);
    let token = root.cli_token("busy", "dsh-desktop");
    let served = root.serve();
    let addr = &served.addr;
    let body = r#"{"query": "anything", "mode": "fulltext"}"#;
    let (mut ok, mut limited) = (0, 0);
    for _ in 0..3 {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        for i in 0..8 {
            // The head first, the body a moment later, on one keep-alive connection.
            write!(
                writer,
                "POST /v1/search HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .unwrap();
            writer.flush().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            // A server that closed the connection may refuse the body: the
            // response read below says what happened.
            let _ = writer.write_all(body.as_bytes());
            let (status, headers) = read_response(&mut reader).unwrap_or_else(|| {
                panic!("request {i}: the connection was closed instead of answered")
            });
            match status {
                200 => ok += 1,
                429 => {
                    limited += 1;
                    let wait: u64 = headers
                        .iter()
                        .find(|(k, _)| k == "retry-after")
                        .map(|(_, v)| v.parse().unwrap())
                        .expect("429 says when to retry");
                    assert!((1..=60).contains(&wait), "{wait}");
                }
                other => panic!("request {i}: status {other}"),
            }
        }
    }
    assert!(ok >= 5 && limited >= 14, "{ok} answered, {limited} refused");
}
