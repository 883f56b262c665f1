//! The demo's deterministic workload and the pure functions the nodes share: request plan,
//! generated block text, word counting, replica placement and key validation.
//!
//! Everything here is a function of its inputs (the plan of a seed is always the same), so a run
//! can be repeated and the client can check every answer it gets.

use std::collections::HashMap;

use ringtrace_core::hash::SplitMix64;

/// The default seed of the client's workload.
pub(crate) const DEFAULT_SEED: u64 = 42;

/// How many words a `WORDCOUNT` reply lists.
pub(crate) const TOP_WORDS: u32 = 10;

/// Longest accepted key, in bytes.
const MAX_KEY_BYTES: usize = 128;

/// A small, fast, deterministic generator (SplitMix64) with the draws the workload needs. Not
/// for cryptography.
#[derive(Debug, Clone)]
pub(crate) struct Rng(SplitMix64);

impl Rng {
    /// A generator starting from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`n > 0`; the slight modulo bias does not matter here).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// A float in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Words the generated blocks are made of; earlier words are drawn more often.
const VOCABULARY: &[&str] = &[
    "the",
    "block",
    "node",
    "replica",
    "trace",
    "span",
    "request",
    "worker",
    "master",
    "disk",
    "ring",
    "buffer",
    "latency",
    "client",
    "store",
    "fetch",
    "map",
    "reduce",
    "count",
    "word",
    "cluster",
    "network",
    "packet",
    "socket",
    "thread",
    "daemon",
    "profile",
    "frequency",
    "method",
    "critical",
    "path",
    "flame",
    "graph",
    "bottleneck",
    "sample",
    "stack",
    "timestamp",
    "clock",
    "drain",
    "record",
    "export",
    "collector",
    "jaeger",
    "tempo",
    "context",
    "baggage",
    "parent",
    "child",
    "fanout",
    "quorum",
    "lease",
    "heartbeat",
    "checksum",
    "segment",
    "journal",
    "commit",
    "snapshot",
    "shard",
    "partition",
    "leader",
    "follower",
    "election",
    "gossip",
    "membership",
    "throughput",
    "bandwidth",
    "anomaly",
    "divergence",
    "histogram",
    "percentile",
];

/// The text of a block: 150 to 350 words in sentences, skewed toward common words.
pub(crate) fn block_text(rng: &mut Rng) -> String {
    let words = rng.between(150, 350);
    let mut text = String::with_capacity(words * 8);
    let mut sentence_left = 0;
    for i in 0..words {
        let starts_sentence = sentence_left == 0;
        if starts_sentence {
            if i > 0 {
                text.push_str(".\n");
            }
            sentence_left = rng.between(5, 14);
        } else {
            text.push(' ');
        }
        // Squaring a uniform draw favours low indices: a Zipf-like spread of word frequencies.
        let u = rng.unit();
        let idx = ((u * u) * VOCABULARY.len() as f64) as usize;
        let word = VOCABULARY[idx.min(VOCABULARY.len() - 1)];
        if starts_sentence {
            let mut cs = word.chars();
            if let Some(first) = cs.next() {
                text.extend(first.to_uppercase());
                text.push_str(cs.as_str());
            }
        } else {
            text.push_str(word);
        }
        sentence_left -= 1;
    }
    text.push_str(".\n");
    text
}

/// One client request of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Store a generated block.
    Put {
        /// The block's key.
        key: String,
        /// The block's text.
        text: String,
    },
    /// Read back a block stored earlier in the plan.
    Get {
        /// The block's key.
        key: String,
    },
    /// Count words over several blocks stored earlier in the plan.
    WordCount {
        /// The blocks' keys.
        keys: Vec<String>,
    },
}

impl Op {
    /// The operation's name (`put`, `get`, `wordcount`).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Op::Put { .. } => "put",
            Op::Get { .. } => "get",
            Op::WordCount { .. } => "wordcount",
        }
    }
}

/// The client's `requests` operations for `seed`: PUTs of generated blocks first (two in five,
/// at least one), then GETs of stored blocks with a WORDCOUNT over 3–6 blocks every fifth
/// request.
pub(crate) fn plan(requests: usize, seed: u64) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let puts = if requests <= 2 { requests } else { (requests * 2).div_ceil(5) };
    let mut ops = Vec::with_capacity(requests);
    let mut keys = Vec::with_capacity(puts);
    for i in 0..puts {
        let key = format!("block-{:04}", i + 1);
        keys.push(key.clone());
        ops.push(Op::Put { key, text: block_text(&mut rng) });
    }
    for i in 0..requests - puts {
        if i % 5 == 4 && keys.len() > 1 {
            let want = rng.between(3, 6).min(keys.len());
            let mut chosen: Vec<String> = Vec::with_capacity(want);
            while chosen.len() < want {
                let k = &keys[rng.below(keys.len())];
                if !chosen.contains(k) {
                    chosen.push(k.clone());
                }
            }
            ops.push(Op::WordCount { keys: chosen });
        } else {
            ops.push(Op::Get { key: keys[rng.below(keys.len())].clone() });
        }
    }
    ops
}

/// Counts the words of `text`: whitespace-separated, lower-cased, with surrounding punctuation
/// removed. Returns the total number of words and the count of each.
pub(crate) fn count_words(text: &str) -> (u64, HashMap<String, u64>) {
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut total = 0;
    for raw in text.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if word.is_empty() {
            continue;
        }
        total += 1;
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    (total, counts)
}

/// `(word, count)` pairs, most frequent first, ties alphabetical; at most `top` of them.
pub(crate) fn top_words(counts: HashMap<String, u64>, top: usize) -> Vec<(String, u64)> {
    let mut words: Vec<(String, u64)> = counts.into_iter().collect();
    words.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    words.truncate(top);
    words
}

/// The indices of the `factor` workers (of `workers`) that hold `key`: a hash picks the first,
/// the next ones follow it around the ring.
pub(crate) fn replicas(key: &str, workers: usize, factor: usize) -> Vec<usize> {
    if workers == 0 {
        return Vec::new();
    }
    let first = (fnv1a(key.as_bytes()) % workers as u64) as usize;
    (0..factor.min(workers)).map(|i| (first + i) % workers).collect()
}

/// FNV-1a: a stable hash (unlike `std`'s randomised one), so placement is the same in every
/// process and run.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Checks that `key` is safe to use as a file name: 1–128 bytes of ASCII letters, digits, `-`,
/// `_` and `.`, not starting with `.`.
pub(crate) fn validate_key(key: &str) -> Result<(), String> {
    let ok_chars = key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if key.is_empty() || key.len() > MAX_KEY_BYTES || !ok_chars || key.starts_with('.') {
        return Err(format!(
            "invalid key {key:?}: expected 1-{MAX_KEY_BYTES} characters of [A-Za-z0-9._-], \
             not starting with '.'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_deterministic_and_shaped() {
        let a = plan(40, 7);
        assert_eq!(a, plan(40, 7));
        assert_ne!(a, plan(40, 8));
        assert_eq!(a.len(), 40);
        let puts = a.iter().filter(|o| matches!(o, Op::Put { .. })).count();
        let counts = a.iter().filter(|o| matches!(o, Op::WordCount { .. })).count();
        assert_eq!(puts, 16);
        assert_eq!(counts, 4);
        assert!(a[..16].iter().all(|o| matches!(o, Op::Put { .. })), "puts come first");
        for n in 0..6 {
            assert_eq!(plan(n, 1).len(), n);
        }
    }

    #[test]
    fn words_are_counted_without_punctuation_or_case() {
        let (total, counts) = count_words("Ring ring, span.\nThe ring!  ");
        assert_eq!(total, 5);
        assert_eq!(counts["ring"], 3);
        assert_eq!(top_words(counts, 2), vec![("ring".to_string(), 3), ("span".to_string(), 1)]);
    }

    #[test]
    fn generated_text_has_the_promised_size() {
        let mut rng = Rng::new(3);
        for _ in 0..20 {
            let (total, _) = count_words(&block_text(&mut rng));
            assert!((150..=350).contains(&total), "{total}");
        }
    }

    #[test]
    fn replicas_are_distinct_and_stable() {
        for key in ["a", "block-0001", "block-0002"] {
            let r = replicas(key, 3, 2);
            assert_eq!(r.len(), 2);
            assert_ne!(r[0], r[1]);
            assert_eq!(r, replicas(key, 3, 2));
        }
        assert_eq!(replicas("a", 1, 2).len(), 1);
        assert!(replicas("a", 0, 2).is_empty());
    }

    #[test]
    fn keys_that_could_escape_the_data_dir_are_refused() {
        assert!(validate_key("block-0001").is_ok());
        for bad in ["", "..", "../etc/passwd", "a/b", ".hidden", "sp ace"] {
            assert!(validate_key(bad).is_err(), "{bad:?}");
        }
    }
}
