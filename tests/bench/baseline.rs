//! Baselines measured in the same run: raw tantivy and SQLite FTS5, both fed
//! the same bigram terms as memd, with no filters, no metadata and no ranking
//! on top — the floor that memd's own search is compared against.

use memory_hub::index::tokenizer::{MemdTokenizer, TEXT_TOKENIZER, tokenize};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::{Index, IndexReader, TantivyDocument, Term};

/// tantivy with our tokenizer and one text field.
pub struct RawTantivy {
    reader: IndexReader,
    body: tantivy::schema::Field,
}

impl RawTantivy {
    pub fn build(dir: &std::path::Path, texts: &[String]) -> RawTantivy {
        let mut b = Schema::builder();
        let body = b.add_text_field(
            "body",
            TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(TEXT_TOKENIZER)
                    .set_index_option(IndexRecordOption::WithFreqs),
            ),
        );
        let index = Index::create_in_dir(dir, b.build()).unwrap();
        index
            .tokenizers()
            .register(TEXT_TOKENIZER, MemdTokenizer::text());
        let mut w = index.writer_with_num_threads(1, 64 * 1024 * 1024).unwrap();
        for t in texts {
            let mut d = TantivyDocument::default();
            d.add_text(body, t);
            w.add_document(d).unwrap();
        }
        w.commit().unwrap();
        let reader = index.reader().unwrap();
        RawTantivy { reader, body }
    }

    pub fn search(&self, q: &str) -> usize {
        let clauses: Vec<(Occur, Box<dyn Query>)> = tokenize(q)
            .into_iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.body, &t.text),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        let searcher = self.reader.searcher();
        searcher
            .search(
                &BooleanQuery::new(clauses),
                &TopDocs::with_limit(10).order_by_score(),
            )
            .unwrap()
            .len()
    }
}

/// SQLite FTS5 over space-joined bigram terms.
pub struct Fts5 {
    conn: rusqlite::Connection,
}

impl Fts5 {
    pub fn build(path: &std::path::Path, texts: &[String]) -> Fts5 {
        let mut conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; CREATE VIRTUAL TABLE f USING fts5(body);")
            .unwrap();
        let tx = conn.transaction().unwrap();
        {
            let mut stmt = tx.prepare("INSERT INTO f (body) VALUES (?)").unwrap();
            for t in texts {
                let terms: Vec<String> = tokenize(t).into_iter().map(|t| t.text).collect();
                stmt.execute([terms.join(" ")]).unwrap();
            }
        }
        tx.commit().unwrap();
        Fts5 { conn }
    }

    pub fn search(&self, q: &str) -> usize {
        self.top(q, 10).len()
    }

    /// The `k` best rows (0-based insertion order) by FTS5's BM25 rank, any term matching.
    pub fn top(&self, q: &str, k: usize) -> Vec<usize> {
        let expr = tokenize(q)
            .into_iter()
            .map(|t| format!("\"{}\"", t.text))
            .collect::<Vec<_>>()
            .join(" OR ");
        let mut stmt = self
            .conn
            .prepare_cached("SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank LIMIT ?")
            .unwrap();
        stmt.query_map(rusqlite::params![expr, k as i64], |r| r.get::<_, i64>(0))
            .unwrap()
            .map(|r| r.unwrap() as usize - 1)
            .collect()
    }
}

impl Fts5 {
    /// Times one autocommit insert per text into a fresh FTS5 table
    /// (`synchronous = OFF`: not durable, the floor a durable write is
    /// compared against); sorted.
    pub fn time_single_inserts(
        path: &std::path::Path,
        texts: &[String],
    ) -> Vec<std::time::Duration> {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; CREATE VIRTUAL TABLE f USING fts5(body);",
        )
        .unwrap();
        let mut stmt = conn.prepare("INSERT INTO f (body) VALUES (?)").unwrap();
        let mut out: Vec<std::time::Duration> = texts
            .iter()
            .map(|t| {
                let start = std::time::Instant::now();
                let terms: Vec<String> = tokenize(t).into_iter().map(|t| t.text).collect();
                stmt.execute([terms.join(" ")]).unwrap();
                start.elapsed()
            })
            .collect();
        out.sort();
        out
    }

    /// Folds the write-ahead log into the database file (to measure its size).
    pub fn checkpoint(&self) {
        self.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
}
