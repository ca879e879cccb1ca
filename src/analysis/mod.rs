//! Text analysis shared by the index, query planning and the test embedder:
//! the one tokenizer ([`tokenizer`]: words, CJK bigrams and characters) and
//! its light English stemmer ([`stem`]), and the bilingual lexicon
//! ([`lexicon`], parsed from CC-CEDICT text) that translates query words, and
//! `presence`: which of a query's terms a text holds, as the tokenizer would
//! cut it. It knows nothing about the index, so
//! every layer above may use it.

pub mod lexicon;
pub(crate) mod presence;
pub mod stem;
pub mod tokenizer;
