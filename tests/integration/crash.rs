//! Crash safety: SIGKILL during a burst of concurrent writes loses nothing that
//! was acknowledged, and a torn last line does not stop startup.
//!
//! The child is this same test binary, re-run with `MEMD_CRASH_CHILD` set so
//! that only `crash_child` runs: it writes from four threads and prints each id
//! to stdout after the write returned.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

use memory_hub::index::filter::Filter;

use crate::support::{TempRoot, search_ids, write};

#[test]
fn crash_child() {
    let Ok(root) = std::env::var("MEMD_CRASH_CHILD") else {
        return; // Only meaningful when started by `kill_during_burst_loses_no_acknowledged_write`.
    };
    let layout = memory_hub::config::Layout::new(root);
    let hub = Arc::new(
        memory_hub::hub::Hub::open(layout, Default::default(), memory_hub::hub::Mode::Write)
            .unwrap(),
    );
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let hub = Arc::clone(&hub);
            std::thread::spawn(move || {
                for i in 0.. {
                    let id = write(&hub, "main", &format!("burst t{t} n{i} 压力测试"));
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{id}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn kill_during_burst_loses_no_acknowledged_write() {
    let root = TempRoot::new();
    let mut acked: Vec<String> = Vec::new();
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "crash::crash_child",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("MEMD_CRASH_CHILD", root.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let target = 40 + round * 20;
        let mut this_round = 0;
        while this_round < target {
            let line = lines.next().expect("child keeps writing").unwrap();
            if let Some(id) = fact_id_in(&line) {
                acked.push(id);
                this_round += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL
        // Lines the child printed before it died were acknowledged too.
        for line in lines.map_while(Result::ok) {
            acked.extend(fact_id_in(&line));
        }
        child.wait().unwrap();
    }
    // Each round writes the same texts again; dedup answers those with the first id.
    acked.sort();
    acked.dedup();
    // Simulate a crash mid-line on top.
    let file = root.journal_files().remove(0);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(br#"{"op":"put","v":1,"id":"fact-main-torn"#)
        .unwrap();
    drop(f);

    let hub = root.hub();
    for id in &acked {
        hub.fetch(id, &Filter::all())
            .unwrap_or_else(|e| panic!("acknowledged {id} lost: {e}"));
    }
    let stats = hub.stats().unwrap();
    assert!(stats.counts.facts as usize >= acked.len());
    // The child never searched, so its text index was never committed: the
    // reopen replayed the journal from tantivy's own (empty) cursor.
    assert_eq!(
        stats.text_documents, stats.counts.facts,
        "tantivy and SQLite agree"
    );
    // The torn fragment was terminated on open and is reported at its own line.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.ends_with("fact-main-torn\n"));
    let torn_line = text.lines().count();
    let name = file
        .strip_prefix(root.path().join("memories/facts"))
        .unwrap()
        .to_str()
        .unwrap();
    let want = format!("facts/{name}:{torn_line}:");
    assert!(
        stats.issues.iter().any(|i| i.starts_with(&want)),
        "{want} in {:?}",
        stats.issues
    );
    // The index still answers and keeps accepting writes.
    let id = write(&hub, "main", "after the crash 压力测试");
    assert!(search_ids(&hub, "after crash", 5).contains(&id));
}

/// The id in a line of the child's output (the test harness may prefix it).
fn fact_id_in(line: &str) -> Option<String> {
    line.split_whitespace()
        .find(|w| w.starts_with("fact-main-"))
        .map(String::from)
}
