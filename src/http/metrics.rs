//! Request metrics and the per-token rate limit.
//!
//! Every request to a known route is counted by route and status and timed
//! into a latency histogram; `GET /metrics` renders them in the Prometheus
//! text format together with gauges read at scrape time (memories, vectors
//! pending). The rate limit is a fixed one-minute window per token name:
//! past `http.rateLimitPerMinute` requests the token gets `RATE_LIMITED`
//! until the next minute starts. `memd_rate_limited_total` counts those
//! refusals and the searches the fair search gate refuses (a token's own
//! queue full).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    total: u64,
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    rate_limited: u64,
    windows: BTreeMap<String, (i64, u32)>,
}

/// Counters shared by every request.
#[derive(Default)]
pub(crate) struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    /// Counts one request to `route` that answered `status` after `seconds`.
    pub(crate) fn record(&self, route: &str, status: u16, seconds: f64) {
        let mut m = self.inner.lock().expect("metrics poisoned");
        *m.requests.entry((route.to_string(), status)).or_default() += 1;
        let h = m.latency.entry(route.to_string()).or_default();
        if h.counts.is_empty() {
            h.counts = vec![0; BUCKETS.len()];
        }
        for (i, upper) in BUCKETS.iter().enumerate() {
            if seconds <= *upper {
                h.counts[i] += 1;
            }
        }
        h.sum += seconds;
        h.total += 1;
    }

    /// Whether `token` may make another request in the minute `minute`
    /// (minutes since the epoch) under a limit of `per_minute` (0: none).
    pub(crate) fn allow(&self, token: &str, minute: i64, per_minute: u32) -> bool {
        if per_minute == 0 {
            return true;
        }
        let mut m = self.inner.lock().expect("metrics poisoned");
        let window = m.windows.entry(token.to_string()).or_insert((minute, 0));
        if window.0 != minute {
            *window = (minute, 0);
        }
        if window.1 >= per_minute {
            m.rate_limited += 1;
            return false;
        }
        window.1 += 1;
        true
    }

    /// Counts one request refused with `RATE_LIMITED` past this module's
    /// limit: a search whose token's own queue at the search gate is full.
    pub(crate) fn count_rate_limited(&self) {
        self.inner.lock().expect("metrics poisoned").rate_limited += 1;
    }

    /// The Prometheus text exposition of the counters plus `gauges`
    /// (`(name, help, value)`).
    pub(crate) fn render(&self, gauges: &[(&str, &str, u64)]) -> String {
        let m = self.inner.lock().expect("metrics poisoned");
        let mut out = String::new();
        out.push_str("# HELP memd_http_requests_total Requests by route and status.\n");
        out.push_str("# TYPE memd_http_requests_total counter\n");
        for ((route, status), n) in &m.requests {
            let _ = writeln!(
                out,
                "memd_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        out.push_str("# HELP memd_http_request_duration_seconds Request latency by route.\n");
        out.push_str("# TYPE memd_http_request_duration_seconds histogram\n");
        for (route, h) in &m.latency {
            for (upper, n) in BUCKETS.iter().zip(&h.counts) {
                let _ = writeln!(
                    out,
                    "memd_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{upper}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "memd_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.total
            );
            let _ = writeln!(
                out,
                "memd_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "memd_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.total
            );
        }
        out.push_str(
            "# HELP memd_rate_limited_total Requests refused with RATE_LIMITED (the per-minute limit, or a full search queue).\n",
        );
        out.push_str("# TYPE memd_rate_limited_total counter\n");
        let _ = writeln!(out, "memd_rate_limited_total {}", m.rate_limited);
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_are_cumulative_and_limits_reset_each_minute() {
        let m = Metrics::default();
        m.record("POST /v1/search", 200, 0.0007);
        m.record("POST /v1/search", 200, 0.3);
        m.record("POST /v1/search", 400, 0.002);
        let text = m.render(&[("memd_memories", "Searchable memories.", 42)]);
        assert!(
            text.contains("memd_http_requests_total{route=\"POST /v1/search\",status=\"200\"} 2")
        );
        assert!(text.contains(
            "memd_http_request_duration_seconds_bucket{route=\"POST /v1/search\",le=\"0.001\"} 1"
        ));
        assert!(text.contains(
            "memd_http_request_duration_seconds_bucket{route=\"POST /v1/search\",le=\"0.5\"} 3"
        ));
        assert!(
            text.contains("memd_http_request_duration_seconds_count{route=\"POST /v1/search\"} 3")
        );
        assert!(text.contains("memd_memories 42"));
        assert!(m.allow("a", 1, 2) && m.allow("a", 1, 2));
        assert!(!m.allow("a", 1, 2));
        assert!(m.allow("b", 1, 2), "limits are per token");
        assert!(m.allow("a", 2, 2), "a new minute starts a new window");
        assert!(m.allow("a", 2, 0) && m.allow("a", 2, 0), "0 means no limit");
        assert!(m.render(&[]).contains("memd_rate_limited_total 1"));
    }
}
