//! One CLI whether or not a daemon runs: the address file `memd serve`
//! records, and the transport the CLI's commands use to go through it.
//!
//! Once bound, `memd serve` records `ROOT/.memd.addr` ([`Credential::record`]):
//! its pid, the address it answers on and a random local credential, in a
//! file private to the user (0600), replaced durably and removed on a clean
//! stop. The daemon accepts that credential as the local operator
//! ([`crate::hub::Caller::operator`], token name `cli`), and only from a
//! loopback peer ([`crate::http::AppState::with_operator_secret`]).
//!
//! `write`, `forget`, `search`, `get`, `ingest`, `consolidate`, `reindex` and
//! the operator's commands (`list`, `tier`, `gc`, `audit`, `category`,
//! `stats --expiring`, `archive list`) pick their
//! [`Target`]: the daemon of the root when the file names one that answers
//! (its pid is alive and its port accepts the credential), else the root,
//! opened by the command itself. Through the daemon a command sends the same
//! `/v1` request body it would hand to the use case in process, and reads the
//! reply into the same type, so both ways print the same output and exit with
//! the same code. A stale file (a daemon that was killed) is ignored. When
//! the root is locked by a `memd serve` that is still starting (catching up
//! before it binds), the command waits for its address file instead of
//! answering `ROOT_LOCKED`. `health`, `doctor` and `mcp` find the daemon the
//! same way first, then at `--addr`/`--url`, then at config `listen`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::RngCore;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::client;
use crate::config::{Config, Layout};
use crate::error::{Error, Result};
use crate::hub::{Caller, Hub, Limited, Mode};

/// How long a call to the daemon may take. A write waits for the writer as it
/// would in process (behind a rebuild, say); only a daemon that stopped
/// answering altogether ends it.
const CALL_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long the probe of a recorded address may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a command waits for a root locked by another short-lived command.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// How long after it took the lock a starting `memd serve` is waited for
/// (it catches up with the files before it binds and records its address).
const SERVE_START_WAIT: Duration = Duration::from_secs(120);

/// What `ROOT/.memd.addr` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AddressFile {
    /// The daemon's process id.
    pid: u32,
    /// `host:port` to connect to (a wildcard bind is recorded as loopback).
    addr: String,
    /// The local credential: a bearer secret the daemon takes as the operator.
    secret: String,
    /// The daemon's version.
    version: String,
}

/// The local credential of one `memd serve`.
pub(crate) struct Credential {
    secret: String,
}

impl Credential {
    /// A fresh random credential (256 bits).
    pub(crate) fn new() -> Credential {
        let mut raw = [0u8; 32];
        rand::rng().fill_bytes(&mut raw);
        Credential {
            secret: format!("mdl_{}", crate::base::bytes::hex(&raw)),
        }
    }

    /// The bearer secret.
    pub(crate) fn secret(&self) -> &str {
        &self.secret
    }

    /// Records that this process serves the root at `bound`; the file goes
    /// away when the returned guard is dropped (a clean stop).
    pub(crate) fn record(&self, layout: &Layout, bound: SocketAddr) -> Result<Recorded> {
        let file = AddressFile {
            pid: std::process::id(),
            addr: connect_address(bound),
            secret: self.secret.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
        };
        let path = layout.daemon_address();
        let text = serde_json::to_string_pretty(&file)
            .map_err(|e| Error::Internal(format!("address file: {e}")))?;
        crate::base::durable::write_atomic(&path, format!("{text}\n").as_bytes())?;
        Ok(Recorded {
            path,
            secret: self.secret.clone(),
        })
    }
}

/// The recorded address of this process; removed on drop if it is still ours.
pub(crate) struct Recorded {
    path: PathBuf,
    secret: String,
}

impl Drop for Recorded {
    fn drop(&mut self) {
        let ours = read_file(&self.path).is_some_and(|f| f.secret == self.secret);
        if ours && let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(error = %e, path = %self.path.display(), "cannot remove the address file");
        }
    }
}

/// The address a client connects to for a daemon bound to `bound`: a
/// wildcard bind is reached on loopback.
fn connect_address(bound: SocketAddr) -> String {
    let ip = bound.ip();
    let ip = if ip.is_unspecified() {
        match ip {
            std::net::IpAddr::V4(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            std::net::IpAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        }
    } else {
        ip
    };
    SocketAddr::new(ip, bound.port()).to_string()
}

fn read_file(path: &Path) -> Option<AddressFile> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether a process with this pid exists (ours or another user's).
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// The running daemon of a root, reached with its local credential.
#[derive(Debug, Clone)]
pub(crate) struct Daemon {
    /// `host:port`.
    pub(crate) addr: String,
    /// Its pid.
    pub(crate) pid: u32,
    secret: String,
}

/// A reply of the daemon: the body, and the note a lowered `limit` adds.
struct Reply {
    body: String,
    clamped: Option<String>,
}

impl Daemon {
    /// The daemon `layout`'s address file names, if its process is alive and
    /// its port answers `/v1/health` to the credential; `None` otherwise (no
    /// file, or a stale one).
    pub(crate) fn find(layout: &Layout) -> Option<Daemon> {
        let file = read_file(&layout.daemon_address())?;
        if !alive(file.pid) {
            tracing::debug!(
                pid = file.pid,
                "the address file names a process that is gone"
            );
            return None;
        }
        let daemon = Daemon {
            addr: file.addr,
            pid: file.pid,
            secret: file.secret,
        };
        match daemon.send("GET", "/v1/health", None, PROBE_TIMEOUT) {
            Ok(_) => Some(daemon),
            Err(e) => {
                tracing::debug!(error = %e, addr = %daemon.addr, "the recorded daemon does not answer");
                None
            }
        }
    }

    /// `http://host:port`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Who is called, for error messages.
    fn service(&self) -> String {
        format!("the memd daemon at {} (pid {})", self.addr, self.pid)
    }

    /// Sends one request with the credential; a reply other than 200 is the
    /// error it carries (same code, same message).
    fn send(
        &self,
        method: &str,
        path: &str,
        json: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Reply> {
        let auth = format!("Bearer {}", self.secret);
        let response = client::send(&client::Request {
            service: &self.service(),
            method,
            url: &format!("{}{path}", self.base_url()),
            headers: &[("Authorization", &auth)],
            json,
            timeout,
            body_limit: client::LOOPBACK_BODY_LIMIT,
        })?;
        if response.status != 200 {
            return Err(Error::from_reply(response.status, &response.body));
        }
        let clamped = response
            .header(crate::http::LIMIT_CLAMPED)
            .map(String::from);
        Ok(Reply {
            body: response.body,
            clamped,
        })
    }

    /// `POST path` with `body`, the reply read as `R`.
    fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<(R, Option<String>)> {
        let json = serde_json::to_vec(body)
            .map_err(|e| Error::Internal(format!("cannot encode the request to {path}: {e}")))?;
        let reply = self.send("POST", path, Some(&json), timeout)?;
        Ok((self.read(path, &reply.body)?, reply.clamped))
    }

    /// `GET path`, the reply read as `R`.
    pub(crate) fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R> {
        let reply = self.send("GET", path, None, CALL_TIMEOUT)?;
        self.read(path, &reply.body)
    }

    fn read<R: DeserializeOwned>(&self, path: &str, body: &str) -> Result<R> {
        serde_json::from_str(body).map_err(|e| Error::UpstreamInvalid {
            service: self.service(),
            reason: format!(
                "its reply to {path} is not what this memd reads (a daemon of another version? \
                 restart it with this binary)"
            ),
            source: Some(Box::new(e)),
        })
    }
}

/// Where a command runs: through the root's daemon, or on what it opened itself.
pub(crate) enum Via<T> {
    /// The root's running daemon, through `/v1` as the local operator.
    Daemon(Daemon),
    /// This process, on the root it opened (a hub, or a rebuilt index).
    Local(T),
}

/// Where a use case runs: the daemon, or this process's hub.
pub(crate) type Target = Via<Hub>;

/// The root's daemon if one runs, else what `local` opens. A root locked by
/// a `memd serve` that is still starting is waited for (it records its
/// address once bound); one locked by another command, for a moment (then
/// `ROOT_LOCKED`).
pub(crate) fn via<T>(layout: &Layout, mut local: impl FnMut() -> Result<T>) -> Result<Via<T>> {
    let started = Instant::now();
    let mut said = false;
    loop {
        if let Some(daemon) = Daemon::find(layout) {
            return Ok(Via::Daemon(daemon));
        }
        match local() {
            Ok(opened) => return Ok(Via::Local(opened)),
            Err(Error::RootLocked { root, pid }) => {
                let starting = serve_starting(layout, &pid);
                let limit = if starting {
                    SERVE_START_WAIT
                } else {
                    LOCK_WAIT
                };
                if started.elapsed() >= limit {
                    return Err(Error::RootLocked { root, pid });
                }
                if starting && !said {
                    eprintln!("memd: waiting for memd serve (pid {pid}) to finish starting");
                    said = true;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}

impl Target {
    /// The root's daemon if one runs, else the root opened in `mode` (see [`via`]).
    pub(crate) fn open(layout: &Layout, config: &Config, mode: Mode) -> Result<Target> {
        via(layout, || Hub::open(layout.clone(), config.clone(), mode))
    }

    /// Runs one use case: `POST route` with `body` on the daemon, or `local`
    /// on this process's hub as the local operator.
    pub(crate) fn call<B, R>(
        &self,
        route: &str,
        body: B,
        local: impl FnOnce(&Hub, &Caller, B) -> Result<R>,
    ) -> Result<R>
    where
        B: Serialize,
        R: DeserializeOwned,
    {
        match self {
            Via::Daemon(d) => d.post(route, &body, CALL_TIMEOUT).map(|(r, _)| r),
            Via::Local(hub) => local(hub, &hub.operator(), body),
        }
    }

    /// [`Target::call`] for a use case whose `limit` may be lowered.
    pub(crate) fn call_limited<B, R>(
        &self,
        route: &str,
        body: B,
        local: impl FnOnce(&Hub, &Caller, B) -> Result<Limited<R>>,
    ) -> Result<Limited<R>>
    where
        B: Serialize,
        R: DeserializeOwned,
    {
        match self {
            Via::Daemon(d) => d
                .post(route, &body, CALL_TIMEOUT)
                .map(|(body, clamped)| Limited {
                    body,
                    clamped,
                    next_offset: None,
                }),
            Via::Local(hub) => local(hub, &hub.operator(), body),
        }
    }
}

impl Daemon {
    /// `POST path` for a long job (a rebuild): no timeout worth the name.
    pub(crate) fn post_long<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<R> {
        self.post(path, body, Duration::from_secs(24 * 3600))
            .map(|(r, _)| r)
    }
}

/// Whether the lock holder `pid` is a `memd serve` that took the lock
/// recently enough to be still catching up (it records its address once
/// bound).
fn serve_starting(layout: &Layout, pid: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{}/cmdline", pid.trim())) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let is_memd = args
        .first()
        .and_then(|a| Path::new(std::str::from_utf8(a).ok()?).file_name())
        .is_some_and(|n| n.to_string_lossy().starts_with("memd"));
    let serves = args.iter().any(|a| *a == b"serve");
    let young = std::fs::metadata(layout.lock())
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < SERVE_START_WAIT);
    is_memd && serves && young
}

/// Where `health`, `doctor` and `mcp` look for a daemon: the root's address
/// file, then the address given on the command line, then config `listen`.
#[derive(Debug, Clone)]
pub(crate) enum Found {
    /// The root's own daemon, with its credential.
    Recorded(Daemon),
    /// An address to try without a credential.
    Address(String),
}

impl Found {
    /// The root's daemon if it runs, else `given`, else `listen`.
    pub(crate) fn locate(layout: &Layout, given: Option<&str>, listen: &str) -> Found {
        if let Some(d) = Daemon::find(layout) {
            return Found::Recorded(d);
        }
        Found::Address(given.unwrap_or(listen).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_binds_are_reached_on_loopback() {
        let check = |bound: &str, want: &str| {
            assert_eq!(connect_address(bound.parse().unwrap()), want, "{bound}");
        };
        check("127.0.0.1:8787", "127.0.0.1:8787");
        check("0.0.0.0:9000", "127.0.0.1:9000");
        check("[::]:9000", "[::1]:9000");
        check("[::1]:1", "[::1]:1");
        check("192.168.1.2:80", "192.168.1.2:80");
    }

    #[test]
    fn the_address_file_is_private_and_goes_away_on_a_clean_stop() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let credential = Credential::new();
        assert!(credential.secret().starts_with("mdl_") && credential.secret().len() == 68);
        let recorded = credential
            .record(&layout, "127.0.0.1:4242".parse().unwrap())
            .unwrap();
        let path = layout.daemon_address();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let file = read_file(&path).unwrap();
        assert_eq!(file.pid, std::process::id());
        assert_eq!(file.addr, "127.0.0.1:4242");
        assert_eq!(file.secret, credential.secret());
        // Nothing answers on that port: the file is stale for a client.
        assert!(Daemon::find(&layout).is_none());
        drop(recorded);
        assert!(!path.exists());
    }

    #[test]
    fn a_file_replaced_by_another_daemon_is_left_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let first = Credential::new();
        let recorded = first
            .record(&layout, "127.0.0.1:1".parse().unwrap())
            .unwrap();
        let second = Credential::new();
        let _theirs = second
            .record(&layout, "127.0.0.1:2".parse().unwrap())
            .unwrap();
        drop(recorded);
        assert_eq!(
            read_file(&layout.daemon_address()).unwrap().secret,
            second.secret()
        );
    }

    #[test]
    fn a_dead_pid_is_not_alive() {
        assert!(alive(std::process::id()));
        // Beyond the kernel's pid limit (2^22).
        assert!(!alive(4_194_305));
        assert!(!alive(0));
    }
}
