//! `memd reindex`: delete `data/index/` and rebuild it from `memories/`.
//! Refused (`ROOT_LOCKED`) while another process writes the root.

use indicatif::{ProgressBar, ProgressStyle};

use crate::config::{Config, Layout};
use crate::hub::Hub;

pub(super) fn run(cli: &super::Cli, layout: Layout, config: Config) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("reindex {bar:40} {bytes}/{total_bytes} {elapsed}")
            .expect("static template"),
    );
    let (hub, report) = Hub::reindex(layout, config, &mut |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
    })?;
    bar.finish_and_clear();
    let stats = hub.stats()?;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    if cli.json {
        return super::print_json(&serde_json::json!({
            "records": report.records,
            "badLines": report.bad_lines,
            "documents": report.documents_indexed,
            "memories": stats.counts.memories,
            "vectors": stats.vectors,
            "vectorsStored": report.vectors_stored,
            "elapsedMs": elapsed_ms,
        }));
    }
    outln!(
        "reindexed {} journal records ({} bad lines skipped) and {} documents in {elapsed_ms} ms; {} memories searchable, {} with vectors",
        report.records,
        report.bad_lines,
        report.documents_indexed,
        stats.counts.memories,
        stats.vectors
    );
    Ok(())
}
