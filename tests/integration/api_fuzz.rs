//! Property-based fuzzing of `/v1` against `openapi.yaml` (issue "Privacy
//! without side channels"): schemathesis drives a live `memd serve` with a
//! root and a group token; no request may get a server error, and every
//! status, content type, header and body must be the one the spec declares.

use std::process::Command;
use std::time::Duration;

use crate::support::run_within;

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs schemathesis (scripts/api-fuzz.sh)"
)]
#[test]
fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let mut fuzz = Command::new("bash");
    fuzz.arg(repo.join("scripts/api-fuzz.sh"))
        .args(["--max-time", "45"])
        .env("MEMD_BIN", env!("CARGO_BIN_EXE_memd"))
        // The server's root lives in the script's own temporary directory;
        // nothing here touches the repository's memories/ or data/.
        .env("TMPDIR", home.path());
    // Bounded: two 45 s runs plus start-up; a hung fuzzer fails the test.
    let done = run_within(fuzz, Duration::from_secs(400), "scripts/api-fuzz.sh");
    done.assert_success();
    let log = done.stderr;
    // Both runs happened and tested every operation.
    assert_eq!(log.matches("memd serve on").count(), 1, "{log}");
    assert_eq!(log.matches("schemathesis with the").count(), 2, "{log}");
    assert!(!log.contains("server error"), "{log}");
    assert!(log.contains("generated"), "{log}");
}
