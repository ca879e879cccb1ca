//! `memd stats`: counts, sizes and unreadable lines.

use crate::hub::Hub;

pub(super) fn run(cli: &super::Cli, hub: Hub) -> anyhow::Result<()> {
    let s = hub.stats()?;
    if cli.json {
        return super::print_json(&s);
    }
    println!("root:        {}", s.root);
    println!(
        "memories:    {} ({} facts, {} chunks from {} documents, {} forgotten)",
        s.counts.memories, s.counts.facts, s.counts.chunks, s.counts.documents, s.counts.forgotten
    );
    let sorted = |m: &std::collections::HashMap<String, u64>| {
        let mut v: Vec<_> = m.iter().map(|(k, n)| format!("{k}={n}")).collect();
        v.sort();
        v.join(" ")
    };
    println!("by stage:    {}", sorted(&s.counts.by_stage));
    println!("by scene:    {}", sorted(&s.counts.by_scene));
    println!("by privacy:  {}", sorted(&s.counts.by_privacy));
    println!("by tier:     {}", sorted(&s.counts.by_tier));
    println!(
        "journal:     {} files, {} bytes",
        s.journal_files, s.journal_bytes
    );
    println!(
        "index:       {} bytes, {} text documents, {} vectors",
        s.index_bytes, s.text_documents, s.vectors
    );
    if !s.writer {
        println!("note:        another process holds the writer lock; showing its index");
    }
    if !s.issues.is_empty() {
        println!("issues:");
        for i in &s.issues {
            println!("  {i}");
        }
    }
    Ok(())
}
