//! `memd stats`: counts, sizes and unreadable lines.

use crate::hub::Hub;

pub(super) fn run(cli: &super::Cli, hub: Hub) -> anyhow::Result<()> {
    let s = hub.stats()?;
    if cli.json {
        return super::print_json(&s);
    }
    outln!("root:        {}", s.root);
    outln!(
        "memories:    {} ({} facts, {} chunks from {} documents, {} forgotten)",
        s.counts.memories,
        s.counts.facts,
        s.counts.chunks,
        s.counts.documents,
        s.counts.forgotten
    );
    let sorted = |m: &std::collections::HashMap<String, u64>| {
        let mut v: Vec<_> = m.iter().map(|(k, n)| format!("{k}={n}")).collect();
        v.sort();
        v.join(" ")
    };
    outln!("by stage:    {}", sorted(&s.counts.by_stage));
    outln!("by scene:    {}", sorted(&s.counts.by_scene));
    outln!("by privacy:  {}", sorted(&s.counts.by_privacy));
    outln!("by tier:     {}", sorted(&s.counts.by_tier));
    outln!(
        "journal:     {} files, {} bytes",
        s.journal_files,
        s.journal_bytes
    );
    outln!(
        "index:       {} bytes, {} text documents, {} vectors",
        s.index_bytes,
        s.text_documents,
        s.vectors
    );
    if !s.writer {
        outln!("note:        another process holds the writer lock; showing its index");
    }
    if !s.issues.is_empty() {
        outln!("issues:");
        for i in &s.issues {
            outln!("  {i}");
        }
    }
    Ok(())
}
