//! A compact Unigram (SentencePiece) model for the `tokenizers` pipeline.
//!
//! `tokenizers`' own Unigram model keeps its 250k-piece XLM-R vocabulary as a
//! byte trie with one hash map per node, a `String` per piece twice over (the
//! vocabulary and a hash map from piece to id) and a cache: about 280 MiB
//! resident for multilingual-e5. [`CompactUnigram`] holds the same vocabulary
//! in one sorted byte buffer with `u32` offsets, `u32` ids and `f64` scores
//! (about 7 MiB), finds the pieces starting at a position by narrowing a range
//! of that sorted table one byte at a time, and runs the same Viterbi search
//! as `tokenizers` (`Unigram::encode_optimized`: same scores, same unknown
//! penalty, same tie-breaking, same fusing of unknown characters, same byte
//! fallback), so it gives the same token ids.
//!
//! Only the model is replaced: [`load`] reads `tokenizer.json` and plugs the
//! file's own normaliser, pre-tokenizer, post-processor, decoder, added tokens,
//! truncation and padding into a `tokenizers::TokenizerImpl` around it. A file
//! whose model is not Unigram (or uses Unigram sampling) is loaded by
//! `tokenizers` as it is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tokenizers::{
    AddedToken, DecoderWrapper, Model, NormalizerWrapper, PaddingParams, PostProcessorWrapper,
    PreTokenizerWrapper, Token, TokenizerImpl, Trainer, TruncationParams,
};

/// The penalty `tokenizers` and SentencePiece give an unknown character,
/// below the lowest piece score.
const UNK_PENALTY: f64 = 10.0;

/// The `tokenizers` pipeline around a [`CompactUnigram`].
pub(crate) type CompactTokenizer = TokenizerImpl<
    CompactUnigram,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// A tokenizer read from a `tokenizer.json`.
pub enum LoadedTokenizer {
    /// A Unigram model, held compactly.
    Compact(Box<CompactTokenizer>),
    /// Any other model, as `tokenizers` loads it.
    Generic(Box<tokenizers::Tokenizer>),
}

impl LoadedTokenizer {
    /// The token ids of `text`, special tokens added when asked, after the
    /// file's (or the overriding) truncation.
    pub fn encode_ids(&self, text: &str, add_special: bool) -> tokenizers::Result<Vec<u32>> {
        Ok(match self {
            LoadedTokenizer::Compact(t) => t.encode(text, add_special)?.get_ids().to_vec(),
            LoadedTokenizer::Generic(t) => t.encode(text, add_special)?.get_ids().to_vec(),
        })
    }

    /// The id of a token of the vocabulary or the added tokens.
    pub(crate) fn token_to_id(&self, token: &str) -> Option<u32> {
        match self {
            LoadedTokenizer::Compact(t) => t.token_to_id(token),
            LoadedTokenizer::Generic(t) => t.token_to_id(token),
        }
    }

    /// Sets (or clears) truncation.
    pub fn with_truncation(&mut self, trunc: Option<TruncationParams>) -> tokenizers::Result<()> {
        match self {
            LoadedTokenizer::Compact(t) => t.with_truncation(trunc).map(|_| ()),
            LoadedTokenizer::Generic(t) => t.with_truncation(trunc).map(|_| ()),
        }
    }

    /// Sets (or clears) padding.
    pub fn with_padding(&mut self, padding: Option<PaddingParams>) {
        match self {
            LoadedTokenizer::Compact(t) => {
                t.with_padding(padding);
            }
            LoadedTokenizer::Generic(t) => {
                t.with_padding(padding);
            }
        }
    }

    /// Whether the compact Unigram model is in use.
    pub fn is_compact(&self) -> bool {
        matches!(self, LoadedTokenizer::Compact(_))
    }
}

#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    #[serde(default)]
    normalizer: Option<NormalizerWrapper>,
    #[serde(default)]
    pre_tokenizer: Option<PreTokenizerWrapper>,
    #[serde(default)]
    post_processor: Option<PostProcessorWrapper>,
    #[serde(default)]
    decoder: Option<DecoderWrapper>,
    #[serde(default)]
    truncation: Option<TruncationParams>,
    #[serde(default)]
    padding: Option<PaddingParams>,
    model: RawModel,
}

#[derive(Deserialize)]
struct RawModel {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    unk_id: Option<usize>,
    #[serde(default)]
    vocab: Option<Vec<(String, f64)>>,
    #[serde(default)]
    byte_fallback: bool,
}

/// Reads `path`: a Unigram model becomes a [`CompactUnigram`] inside the
/// file's own pipeline; anything else is loaded by `tokenizers`.
pub fn load(path: &Path) -> tokenizers::Result<LoadedTokenizer> {
    let bytes = std::fs::read(path)?;
    let raw: RawFile = match serde_json::from_slice(&bytes) {
        Ok(raw) => raw,
        // Not the shape read here (another model's fields): the generic loader decides.
        Err(_) => return generic(&bytes),
    };
    let (Some("Unigram"), Some(vocab)) = (raw.model.kind.as_deref(), raw.model.vocab) else {
        return generic(&bytes);
    };
    drop(bytes);
    let model = CompactUnigram::new(vocab, raw.model.unk_id, raw.model.byte_fallback)?;
    let mut tokenizer = TokenizerImpl::new(model);
    tokenizer
        .with_normalizer(raw.normalizer)?
        .with_pre_tokenizer(raw.pre_tokenizer)
        .with_post_processor(raw.post_processor)
        .with_decoder(raw.decoder)
        .with_truncation(raw.truncation)?
        .with_padding(raw.padding);
    // As `tokenizers` does when it reads the file: the ids come from the model
    // (or follow its vocabulary), the flags from the file.
    tokenizer.add_tokens(raw.added_tokens)?;
    Ok(LoadedTokenizer::Compact(Box::new(tokenizer)))
}

fn generic(bytes: &[u8]) -> tokenizers::Result<LoadedTokenizer> {
    Ok(LoadedTokenizer::Generic(Box::new(
        tokenizers::Tokenizer::from_bytes(bytes)?,
    )))
}

/// A Unigram vocabulary in a sorted table: piece `k` (in byte order) is
/// `bytes[starts[k]..starts[k + 1]]`, with id `ids[k]`.
pub struct CompactUnigram {
    bytes: Vec<u8>,
    starts: Vec<u32>,
    ids: Vec<u32>,
    /// By id: the piece's position in the sorted table.
    sorted_at: Vec<u32>,
    /// By id: the piece's score.
    scores: Vec<f64>,
    min_score: f64,
    unk_id: Option<usize>,
    byte_fallback: bool,
}

impl CompactUnigram {
    /// Builds the table from `(piece, score)` pairs in id order.
    pub(crate) fn new(
        vocab: Vec<(String, f64)>,
        unk_id: Option<usize>,
        byte_fallback: bool,
    ) -> tokenizers::Result<CompactUnigram> {
        if let Some(unk) = unk_id {
            if vocab.is_empty() {
                return Err("The vocabulary is empty but at least <unk> is needed".into());
            }
            if unk >= vocab.len() {
                return Err("The `unk_id` is larger than vocabulary size".into());
            }
        }
        if u32::try_from(vocab.len()).is_err() {
            return Err("vocabulary too large".into());
        }
        let mut min_score = f64::INFINITY;
        let mut scores = Vec::with_capacity(vocab.len());
        for (_, score) in &vocab {
            min_score = min_score.min(*score);
            scores.push(*score);
        }
        let mut order: Vec<u32> = (0..vocab.len() as u32).collect();
        // Equal pieces: the highest id first, so it is the one kept (as the
        // last insert into `tokenizers`' piece-to-id map wins).
        order.sort_by(|&a, &b| {
            vocab[a as usize]
                .0
                .as_bytes()
                .cmp(vocab[b as usize].0.as_bytes())
                .then(b.cmp(&a))
        });
        order.dedup_by(|later, kept| vocab[*later as usize].0 == vocab[*kept as usize].0);
        let total: usize = order.iter().map(|&i| vocab[i as usize].0.len()).sum();
        if u32::try_from(total).is_err() {
            return Err("vocabulary too large".into());
        }
        let mut bytes = Vec::with_capacity(total);
        let mut starts = Vec::with_capacity(order.len() + 1);
        let mut sorted_at = vec![0u32; vocab.len()];
        let mut position: HashMap<&str, u32> = HashMap::new();
        for (k, &id) in order.iter().enumerate() {
            starts.push(bytes.len() as u32);
            bytes.extend_from_slice(vocab[id as usize].0.as_bytes());
            position.insert(vocab[id as usize].0.as_str(), k as u32);
        }
        starts.push(bytes.len() as u32);
        for (id, (piece, _)) in vocab.iter().enumerate() {
            sorted_at[id] = position[piece.as_str()];
        }
        drop(position);
        Ok(CompactUnigram {
            bytes,
            starts,
            ids: order,
            sorted_at,
            scores,
            min_score,
            unk_id,
            byte_fallback,
        })
    }

    fn piece(&self, k: usize) -> &[u8] {
        &self.bytes[self.starts[k] as usize..self.starts[k + 1] as usize]
    }

    fn lookup(&self, piece: &[u8]) -> Option<u32> {
        let n = self.ids.len();
        let mut lo = 0;
        let mut hi = n;
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.piece(mid).cmp(piece) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.ids[mid]),
            }
        }
        None
    }

    /// Calls `found(len, id)` for every piece that is a prefix of `text`,
    /// shortest first.
    fn prefixes(&self, text: &[u8], mut found: impl FnMut(usize, u32)) {
        let mut lo = 0;
        let mut hi = self.ids.len();
        for (depth, &c) in text.iter().enumerate() {
            // Every piece in lo..hi starts with text[..depth], sorted; those
            // exactly `depth` bytes long sort first.
            let byte = |k: usize| self.piece(k).get(depth).copied();
            let first = lo + partition(hi - lo, |i| byte(lo + i) < Some(c));
            let end = first + partition(hi - first, |i| byte(first + i) <= Some(c));
            lo = first;
            hi = end;
            if lo >= hi {
                return;
            }
            if self.piece(lo).len() == depth + 1 {
                found(depth + 1, self.ids[lo]);
            }
        }
    }

    /// The Viterbi segmentation of `sentence`, as byte ranges; runs of
    /// unknown characters are fused into one range.
    fn segment(&self, sentence: &str) -> tokenizers::Result<Vec<(usize, usize)>> {
        #[derive(Clone, Copy)]
        struct Best {
            id: usize,
            score: f64,
            from: Option<usize>,
        }
        let size = sentence.len();
        let text = sentence.as_bytes();
        let unk_score = self.min_score - UNK_PENALTY;
        let mut best = vec![
            Best {
                id: 0,
                score: 0.0,
                from: None
            };
            size + 1
        ];
        let mut at = 0;
        while at < size {
            let here = best[at].score;
            let char_len = sentence[at..].chars().next().map_or(1, char::len_utf8);
            let mut single = false;
            self.prefixes(&text[at..], |len, id| {
                let node = &mut best[at + len];
                let candidate = self.scores[id as usize] + here;
                if node.from.is_none() || candidate > node.score {
                    *node = Best {
                        id: id as usize,
                        score: candidate,
                        from: Some(at),
                    };
                }
                if len == char_len {
                    single = true;
                }
            });
            if !single {
                let unk = self
                    .unk_id
                    .ok_or("Encountered an unknown token but `unk_id` is missing")?;
                let node = &mut best[at + char_len];
                let candidate = unk_score + here;
                if node.from.is_none() || candidate > node.score {
                    *node = Best {
                        id: unk,
                        score: candidate,
                        from: Some(at),
                    };
                }
            }
            at += char_len;
        }
        let mut ranges = Vec::new();
        let mut unk_run: Option<(usize, usize)> = None;
        let mut end = size;
        while end > 0 {
            let node = best[end];
            let start = node.from.ok_or("broken Viterbi path")?;
            if Some(node.id) == self.unk_id {
                unk_run = Some(match unk_run {
                    Some((_, run_end)) => (start, run_end),
                    None => (start, end),
                });
            } else {
                if let Some(run) = unk_run.take() {
                    ranges.push(run);
                }
                ranges.push((start, end));
            }
            end = start;
        }
        if let Some(run) = unk_run {
            ranges.push(run);
        }
        ranges.reverse();
        Ok(ranges)
    }
}

/// The number of leading `i` in `0..n` for which `pred(i)` holds (it holds
/// for a prefix of the range).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl Model for CompactUnigram {
    type Trainer = NoTrainer;

    fn tokenize(&self, sentence: &str) -> tokenizers::Result<Vec<Token>> {
        if sentence.is_empty() {
            return Ok(Vec::new());
        }
        let mut tokens = Vec::new();
        for (start, end) in self.segment(sentence)? {
            let piece = &sentence[start..end];
            let offsets = (start, end);
            let id = match self.lookup(piece.as_bytes()) {
                Some(id) => id,
                None => {
                    if self.byte_fallback {
                        let bytes: Option<Vec<Token>> = piece
                            .bytes()
                            .map(|b| {
                                let name = format!("<0x{b:02X}>");
                                self.lookup(name.as_bytes())
                                    .map(|id| Token::new(id, name, offsets))
                            })
                            .collect();
                        if let Some(bytes) = bytes {
                            tokens.extend(bytes);
                            continue;
                        }
                    }
                    self.unk_id
                        .ok_or("Encountered an unknown token but `unk_id` is missing")?
                        as u32
                }
            };
            tokens.push(Token::new(id, piece.to_string(), offsets));
        }
        Ok(tokens)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.lookup(token.as_bytes())
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        let k = *self.sorted_at.get(id as usize)? as usize;
        Some(String::from_utf8_lossy(self.piece(k)).into_owned())
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        (0..self.ids.len())
            .map(|k| {
                (
                    String::from_utf8_lossy(self.piece(k)).into_owned(),
                    self.ids[k],
                )
            })
            .collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.scores.len()
    }

    fn save(&self, _folder: &Path, _prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        Err("the compact Unigram model is read-only".into())
    }

    fn get_trainer(&self) -> NoTrainer {
        NoTrainer
    }
}

/// [`CompactUnigram`] cannot be trained; `tokenizers` requires a trainer type.
pub struct NoTrainer;

impl Trainer for NoTrainer {
    type Model = CompactUnigram;

    fn should_show_progress(&self) -> bool {
        false
    }

    fn train(&self, _model: &mut CompactUnigram) -> tokenizers::Result<Vec<AddedToken>> {
        Err("the compact Unigram model cannot be trained".into())
    }

    fn feed<I, S, F>(&mut self, _iterator: I, _process: F) -> tokenizers::Result<()>
    where
        I: Iterator<Item = S> + Send,
        S: AsRef<str> + Send,
        F: Fn(&str) -> tokenizers::Result<Vec<String>> + Sync,
    {
        Err("the compact Unigram model cannot be trained".into())
    }
}
