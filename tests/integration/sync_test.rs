//! Two devices, one memory: `scripts/sync-test.sh` runs two roots, two
//! Syncthing instances and two `memd serve` on loopback, writes and forgets on
//! both at once, and checks that both daemons converge (identical results for
//! a fixed query set, nothing lost, nothing duplicated, no conflict copies of
//! journals), after a minute of concurrent writes and forgets on both.
//! `scripts/test.sh` installs Syncthing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs Syncthing (scripts/setup-system.sh)"
)]
#[test]
fn two_devices_converge_through_syncthing() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new("bash")
        .arg(repo.join("scripts/sync-test.sh"))
        .env("MEMD_BIN", env!("CARGO_BIN_EXE_memd"))
        .env("TMPDIR", tmp.path())
        // Concurrent writes and forgets on both devices for a minute.
        .env("SYNC_TEST_SECONDS", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start scripts/sync-test.sh (needs syncthing: apt-get install syncthing)");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let (out, err) = (read(Box::new(stdout)), read(Box::new(stderr)));
    // Bounded: about 70 s of work; a hung sync fails the test.
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sync-test.sh did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(status.success(), "sync-test.sh failed\n{out}\n{err}");
}
