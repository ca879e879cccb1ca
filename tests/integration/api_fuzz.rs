//! Property-based fuzzing of `/v1` against `openapi.yaml` (issue "Privacy
//! without side channels"): schemathesis drives a live `memd serve` with a
//! root and a group token; no request may get a server error, and every
//! status, content type, header and body must be the one the spec declares.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs schemathesis (scripts/api-fuzz.sh)"
)]
#[test]
fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new("bash")
        .arg(repo.join("scripts/api-fuzz.sh"))
        .args(["--max-time", "45"])
        .env("MEMD_BIN", env!("CARGO_BIN_EXE_memd"))
        // The server's root lives in the script's own temporary directory;
        // nothing here touches the repository's memories/ or data/.
        .env("TMPDIR", home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start scripts/api-fuzz.sh");
    let out = {
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut { stderr }, &mut s).unwrap();
            s
        });
        // Bounded: two 45 s runs plus start-up; a hung fuzzer fails the test.
        let deadline = Instant::now() + Duration::from_secs(400);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("api-fuzz.sh did not finish within 400 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        (status, reader.join().unwrap())
    };
    let (status, log) = out;
    assert!(status.success(), "api-fuzz.sh failed:\n{log}");
    // Both runs happened and tested every operation.
    assert_eq!(log.matches("memd serve on").count(), 1, "{log}");
    assert_eq!(log.matches("schemathesis with the").count(), 2, "{log}");
    assert!(!log.contains("server error"), "{log}");
    assert!(log.contains("generated"), "{log}");
}
