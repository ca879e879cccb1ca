//! Bringing forgotten facts back, for rollbacks of consolidation runs.
//!
//! A restore appends the fact's earlier `put` line again (same id, same
//! content), which the index applies like any rewrite of an id: the journal
//! stays append-only and a replay gives the same result. Only facts that are
//! forgotten at the moment of the append are restored; the check runs under
//! the writer lock, right before the append.
//!
//! The journal files a line by its `ts` month and a replay reads months in
//! order, so a fact restored in a later month than it was written keeps its id
//! and content but takes the restore time as `ts`: otherwise its line would
//! land in an older file than its tombstone, and `memd reindex` would forget it
//! again.

use chrono::Utc;

use super::Hub;
use crate::error::Result;
use crate::model::{Fact, JOURNAL_VERSION, Record};
use crate::store::journal::file_name_for;

impl Hub {
    /// Re-appends `facts` (each an earlier `put` of its id) whose id is
    /// currently forgotten. Returns the ids restored.
    pub(crate) fn restore_forgotten(&self, facts: Vec<Fact>) -> Result<Vec<String>> {
        if facts.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = self.writer_state()?;
        let mut records = Vec::new();
        let now = Utc::now();
        for mut fact in facts {
            if file_name_for(fact.ts) != file_name_for(now) {
                fact.ts = now;
            }
            if let Err(e) = fact.validate(&Self::pins(&self.config())) {
                tracing::warn!(fact.id = %fact.id, error = %e, "not restored: breaks the write rules");
                continue;
            }
            let twice = records.iter().any(|r: &Record| r.id() == fact.id);
            if !twice && self.index.meta.fact_state(&fact.id)? == Some(false) {
                records.push(Record::Put {
                    v: JOURNAL_VERSION,
                    at: None,
                    fact,
                });
            }
        }
        if !records.is_empty() {
            self.append_and_index(&mut state, &records)?;
        }
        Ok(records.iter().map(|r| r.id().to_string()).collect())
    }
}
