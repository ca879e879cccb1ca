//! Figures of a running process read from `/proc` (Linux): memory from
//! `status`, CPU time from `stat`. `pid` is a process id or `self`.

use std::fmt::Display;

/// A `/proc/PID/status` figure in MiB (`VmRSS:` now, `VmHWM:` peak,
/// `RssAnon:`, `RssFile:`); 0 when the process or the line is gone.
pub fn status_mib(pid: impl Display, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// [`status_mib`] of this process.
pub fn own_mib(key: &str) -> f64 {
    status_mib("self", key)
}

/// CPU seconds (user + system) the process has used so far (clock ticks
/// are 1/100 s on Linux).
pub fn cpu_seconds(pid: impl Display) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the name.
    (ticks(11) + ticks(12)) / 100.0
}
