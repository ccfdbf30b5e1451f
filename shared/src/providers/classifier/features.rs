//! A ticket as the linear models read it: a sparse vector of hashed, damped, L2-normalised
//! counts.
//!
//! Word unigrams and bigrams carry the vocabulary; character n-grams within a word's
//! boundaries (`<refund>` gives `<re`, `ref`, …, `und>`) let a typo, an inflection or a
//! Portuguese or Spanish cognate share weight with the form seen in training; the subject's
//! words are counted once more, marked apart, since a subject says more per word than the
//! body. Everything is hashed into `2^bucket_bits` buckets, so the model's size is fixed
//! whatever the vocabulary. The hash is FNV-1a 64, written out here rather than std's
//! `RandomState` (seeded per process): a bucket must mean the same thing in every process
//! that loads the artefact.
//!
//! Normalised (issue 50, item 4; classifiers of artefact format 2): the text is NFKC first
//! (a full-width `ＲＥＦＵＮＤ` or a ligature is the word it shows), a word of three digits
//! or more is an identifier whose digits are one shape (`order 48213` and `order 99120` are
//! the same words), and the character n-grams are read with accents folded (`cobrança`,
//! `cobranca` and `cobranza` share n-grams) while words keep theirs (`é` and `e` stay two
//! words in Portuguese).

use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};

/// Of each field, only this many bytes are read: bounds `predict` on a pasted log or a
/// forwarded thread, and the triage signal is at a ticket's start. Training reads no more of
/// a ticket than this either (`classifier::bounded`), so both see the same text.
pub(super) const MAX_FIELD_BYTES: usize = 8 * 1024;

/// How the text becomes features: stored in the artefact, since the weights mean nothing
/// under another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct FeatureSpec {
    pub bucket_bits: u8,
    pub char_min: u8,
    pub char_max: u8,
    /// One character n-gram against one word feature: a word has a dozen n-grams, which would
    /// otherwise drown the words themselves in the norm.
    pub char_weight: f32,
    /// NFKC, identifiers' digits collapsed, accents folded in n-grams (the module's header);
    /// `false` for classifiers stored in format 1, whose weights were learnt without.
    pub normalise: bool,
}

impl FeatureSpec {
    pub fn buckets(&self) -> usize {
        1 << self.bucket_bits
    }

    fn bucket(&self, hash: u64) -> u32 {
        // FNV's low bits mix poorly on short keys: fold the high half in.
        ((hash ^ (hash >> 32)) as u32) & ((1u32 << self.bucket_bits) - 1)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`, continuing from `hash` (start from [`fnv1a_start`]).
pub(super) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// FNV-1a's state after one namespace byte, so a word, a subject word, a bigram and an
/// n-gram of the same letters land in different buckets.
pub(super) fn fnv1a_start(namespace: u8) -> u64 {
    fnv1a(FNV_OFFSET, &[namespace])
}

const WORD: u8 = b'w';
const SUBJECT_WORD: u8 = b's';
const BIGRAM: u8 = b'b';
const CHARS: u8 = b'c';

/// The buffers of one extraction, kept between tickets so training allocates nothing per
/// example once they have grown.
#[derive(Debug, Default)]
pub(super) struct Features {
    text: String,
    words: Vec<(usize, usize)>,
    folded: String,
    padded: Vec<u8>,
    char_starts: Vec<usize>,
    /// `bucket << 1 | is_char_ngram`, one per occurrence.
    keys: Vec<u32>,
    /// Per bucket, occurrences of word features (low half) and n-grams (high half): counting
    /// in place is faster than sorting the keys, and two capped fields give fewer than 2^16
    /// of either.
    counts: Vec<u32>,
    entries: Vec<(u32, f32)>,
}

impl Features {
    /// The ticket's features as `(bucket, value)`, each bucket once, in order of first
    /// occurrence, with unit L2 norm (or none at all).
    pub fn extract(&mut self, spec: &FeatureSpec, subject: &str, message: &str) -> &[(u32, f32)] {
        self.keys.clear();
        self.field(spec, subject, true);
        self.field(spec, message, false);
        if self.counts.len() < spec.buckets() {
            self.counts.resize(spec.buckets(), 0);
        }
        self.entries.clear();
        for &key in &self.keys {
            let count = &mut self.counts[(key >> 1) as usize];
            if *count == 0 {
                self.entries.push((key >> 1, 0.0));
            }
            *count += if key & 1 == 1 { 1 << 16 } else { 1 };
        }
        let mut norm = 0.0f32;
        for (bucket, value) in &mut self.entries {
            let count = std::mem::take(&mut self.counts[*bucket as usize]);
            *value = damp(count & 0xffff) + spec.char_weight * damp(count >> 16);
            norm += *value * *value;
        }
        if norm > 0.0 {
            let scale = 1.0 / norm.sqrt();
            self.entries.iter_mut().for_each(|(_, v)| *v *= scale);
        }
        &self.entries
    }

    fn field(&mut self, spec: &FeatureSpec, raw: &str, is_subject: bool) {
        let Features {
            text,
            words,
            folded,
            padded,
            char_starts,
            keys,
            ..
        } = self;
        let raw = prefix(raw, MAX_FIELD_BYTES);
        if spec.normalise {
            lowercase_into(text, raw.nfkc());
        } else {
            lowercase_into(text, raw.chars());
        }
        split_words(text, words);
        if spec.normalise {
            collapse_identifiers(text, words);
        }
        let mut previous: Option<&str> = None;
        for &(start, end) in words.iter() {
            let word = &text[start..end];
            let bytes = word.as_bytes();
            keys.push(spec.bucket(fnv1a(fnv1a_start(WORD), bytes)) << 1);
            if is_subject {
                keys.push(spec.bucket(fnv1a(fnv1a_start(SUBJECT_WORD), bytes)) << 1);
            }
            if let Some(previous) = previous {
                let hash = fnv1a(fnv1a_start(BIGRAM), previous.as_bytes());
                keys.push(spec.bucket(fnv1a(fnv1a(hash, b" "), bytes)) << 1);
            }
            previous = Some(word);
            if spec.normalise {
                folded.clear();
                folded.extend(word.nfd().filter(|c| !is_combining_mark(*c)));
                char_ngrams(spec, folded, padded, char_starts, keys);
            } else {
                char_ngrams(spec, word, padded, char_starts, keys);
            }
        }
    }
}

/// `1 + ln(count)`: a word said three times is more evidence than once, not three times more.
fn damp(count: u32) -> f32 {
    match count {
        0 => 0.0,
        1 => 1.0,
        _ => 1.0 + (count as f32).ln(),
    }
}

/// The n-grams of `<word>` for every length in the spec, hashed incrementally from each
/// starting character.
fn char_ngrams(
    spec: &FeatureSpec,
    word: &str,
    padded: &mut Vec<u8>,
    char_starts: &mut Vec<usize>,
    keys: &mut Vec<u32>,
) {
    padded.clear();
    padded.push(b'<');
    padded.extend_from_slice(word.as_bytes());
    padded.push(b'>');
    char_starts.clear();
    char_starts.push(0);
    char_starts.extend(word.char_indices().map(|(i, _)| i + 1));
    char_starts.push(padded.len() - 1);
    char_starts.push(padded.len());
    let chars = char_starts.len() - 1;
    let (min, max) = (usize::from(spec.char_min), usize::from(spec.char_max));
    for first in 0..chars {
        let mut hash = fnv1a_start(CHARS);
        for last in first..chars.min(first + max) {
            hash = fnv1a(hash, &padded[char_starts[last]..char_starts[last + 1]]);
            if last + 1 - first >= min {
                keys.push(spec.bucket(hash) << 1 | 1);
            }
        }
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
pub(super) fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn lowercase_into(out: &mut String, text: impl Iterator<Item = char>) {
    out.clear();
    for ch in text {
        if ch.is_ascii() {
            out.push(ch.to_ascii_lowercase());
        } else {
            out.extend(ch.to_lowercase());
        }
    }
}

/// Digits of a word with three or more are `0`: an order, card or account number says what
/// kind of ticket it is by its shape, never by its value. In place: a digit and `0` are one
/// byte each.
fn collapse_identifiers(text: &mut String, words: &[(usize, usize)]) {
    // SAFETY of the bytes: only ASCII digits are replaced, by an ASCII digit, so the text stays
    // UTF-8; done on a Vec to say so without `unsafe`.
    let mut bytes = std::mem::take(text).into_bytes();
    for &(start, end) in words {
        let word = &mut bytes[start..end];
        if word.iter().filter(|b| b.is_ascii_digit()).count() >= 3 {
            word.iter_mut()
                .filter(|b| b.is_ascii_digit())
                .for_each(|b| *b = b'0');
        }
    }
    *text = String::from_utf8(bytes).expect("ASCII digits replaced by an ASCII digit");
}

/// Runs of letters and digits are words; each `!` is one too (it is how tickets shout).
fn split_words(text: &str, words: &mut Vec<(usize, usize)>) {
    words.clear();
    let mut start = None;
    for (i, ch) in text.char_indices() {
        if ch.is_alphanumeric() {
            start.get_or_insert(i);
            continue;
        }
        if let Some(s) = start.take() {
            words.push((s, i));
        }
        if ch == '!' {
            words.push((i, i + 1));
        }
    }
    if let Some(s) = start {
        words.push((s, text.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: FeatureSpec = FeatureSpec {
        bucket_bits: 16,
        char_min: 3,
        char_max: 5,
        char_weight: 0.5,
        normalise: false,
    };
    const NORMALISED: FeatureSpec = FeatureSpec {
        normalise: true,
        ..SPEC
    };

    fn shared(spec: &FeatureSpec, a: &str, b: &str) -> f32 {
        let mut features = Features::default();
        let a = features.extract(spec, "", a).to_vec();
        let b = features.extract(spec, "", b);
        a.iter()
            .filter_map(|(k, v)| b.iter().find(|(j, _)| j == k).map(|(_, w)| v * w))
            .sum()
    }

    /// Normalised features (issue 50, item 4): a full-width or ligature form is its word, an
    /// order number's value is not a feature, accents fold in n-grams but not in words; and
    /// none of it applies to a format-1 classifier's features.
    #[test]
    fn normalised_text_reads_the_same_word_however_it_is_written() {
        let mut features = Features::default();
        let plain = features
            .extract(&NORMALISED, "", "refund order 48213")
            .to_vec();
        assert_eq!(
            features.extract(&NORMALISED, "", "ＲＥＦＵＮＤ order 99120"),
            plain.as_slice()
        );
        assert_eq!(
            features
                .extract(&NORMALISED, "", "refund order 12")
                .to_vec(),
            features.extract(&SPEC, "", "refund order 12"),
            "short numbers and plain words are as before"
        );
        assert_ne!(
            features.extract(&SPEC, "", "refund order 99120").to_vec(),
            plain,
            "unnormalised: the number is a feature of its own"
        );
        // Accents: the n-grams are one, the words two.
        let folded = shared(&NORMALISED, "cobrança", "cobranca");
        assert!(
            folded > shared(&SPEC, "cobrança", "cobranca") + 0.2,
            "{folded}"
        );
        assert!(folded < 0.99, "the words differ: {folded}");
        assert!(
            shared(&NORMALISED, "ﬁle", "file") > 0.99,
            "a ligature is its letters"
        );
    }

    #[test]
    fn the_hash_is_fnv1a_64_as_published() {
        // Published test vectors: an artefact's buckets depend on exactly this function.
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn features_are_distinct_unit_norm_and_ignore_case() {
        let mut features = Features::default();
        let upper = features.extract(&SPEC, "Refund", "CHARGED twice!").to_vec();
        let lower = features.extract(&SPEC, "refund", "charged twice!").to_vec();
        assert_eq!(upper, lower);
        let mut buckets: Vec<u32> = upper.iter().map(|(b, _)| *b).collect();
        buckets.sort_unstable();
        buckets.dedup();
        assert_eq!(buckets.len(), upper.len());
        let norm: f32 = upper.iter().map(|(_, v)| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        assert!(features.extract(&SPEC, "", " ... ").is_empty());
    }

    fn cosine(a: &str, b: &str) -> f32 {
        shared(&SPEC, a, b)
    }

    #[test]
    fn a_typo_or_a_cognate_keeps_much_of_a_word_and_another_word_shares_nothing() {
        // As whole words these share no feature at all; their n-grams carry them.
        assert!(cosine("cobrança", "cobrnça") > 0.3);
        assert!(cosine("cobrança", "cobranza") > 0.3);
        assert!(cosine("password", "pasword") > 0.3);
        assert!(cosine("cobrança", "password") < 0.05);
    }

    #[test]
    fn ngrams_respect_characters_and_fields_are_capped() {
        let mut keys = Vec::new();
        char_ngrams(&SPEC, "ação", &mut Vec::new(), &mut Vec::new(), &mut keys);
        // `<ação>` is 6 characters: 4 trigrams, 3 four-grams, 2 five-grams.
        assert_eq!(keys.len(), 9);
        assert_eq!(prefix("aé", 2), "a");
        let long = "é".repeat(MAX_FIELD_BYTES);
        assert!(!Features::default().extract(&SPEC, "", &long).is_empty());
    }
}
