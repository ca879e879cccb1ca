//! `memd reindex`: rebuild the index from `memories/`.
//!
//! Next to a running daemon the rebuild happens in the daemon, the root's
//! only writer (`POST /v1/reindex`, see [`crate::hub::reindex`]): it empties
//! its index and replays the files in place while writes wait. Without one,
//! this process takes the writer lock, deletes `data/index/` and builds a
//! new index. Both report the same [`ReindexReply`].

use indicatif::{ProgressBar, ProgressStyle};

use super::daemon::{self, Via};
use crate::api::{ReindexBody, ReindexReply};
use crate::config::{Config, Layout};
use crate::hub::Hub;

pub(super) fn run(cli: &super::Cli, layout: Layout, config: Config) -> anyhow::Result<()> {
    let reply = match daemon::via(&layout, || offline(&layout, &config))? {
        Via::Daemon(d) => {
            eprintln!(
                "memd: rebuilding in memd serve (pid {}, {}); writes wait for it",
                d.pid, d.addr
            );
            d.post_long::<_, ReindexReply>("/v1/reindex", &ReindexBody {})?
        }
        Via::Local(reply) => reply,
    };
    if cli.json {
        return super::print_json(&reply);
    }
    outln!(
        "reindexed {} journal records ({} bad lines skipped) and {} documents in {} ms; {} memories searchable, {} with vectors",
        reply.records,
        reply.bad_lines,
        reply.documents,
        reply.elapsed_ms,
        reply.memories,
        reply.vectors
    );
    Ok(())
}

/// Deletes `data/index/` and builds it again in this process (no daemon runs).
fn offline(layout: &Layout, config: &Config) -> crate::Result<ReindexReply> {
    let started = std::time::Instant::now();
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("reindex {bar:40} {bytes}/{total_bytes} {elapsed}")
            .expect("static template"),
    );
    let built = Hub::reindex(layout.clone(), config.clone(), &mut |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
    });
    bar.finish_and_clear();
    let (hub, report) = built?;
    let stats = hub.stats()?;
    Ok(crate::hub::reindex::reindex_reply(
        &report,
        report.vectors_stored,
        &stats,
        started,
    ))
}
