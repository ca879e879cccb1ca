//! Two devices, one memory: `scripts/sync-test.sh` runs two roots, two
//! Syncthing instances and two `memd serve` on loopback, writes and forgets on
//! both at once, and checks that both daemons converge (identical results for
//! a fixed query set, nothing lost, nothing duplicated, no conflict copies of
//! journals), after a minute of concurrent writes and forgets on both.
//! `scripts/test.sh` installs Syncthing.

use std::process::Command;
use std::time::Duration;

use crate::support::run_within;

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs Syncthing (scripts/setup-system.sh)"
)]
#[test]
fn two_devices_converge_through_syncthing() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let mut sync = Command::new("bash");
    sync.arg(repo.join("scripts/sync-test.sh"))
        .env("MEMD_BIN", env!("CARGO_BIN_EXE_memd"))
        .env("TMPDIR", tmp.path())
        // Concurrent writes and forgets on both devices for a minute.
        .env("SYNC_TEST_SECONDS", "60");
    // Bounded: about 70 s of work; a hung sync fails the test.
    // (Syncthing comes from Debian: scripts/setup-system.sh.)
    run_within(sync, Duration::from_secs(300), "scripts/sync-test.sh").assert_success();
}
