//! The split of a set that gives none (a desk's own set): rows that are the same ticket, word
//! for word or nearly (a signature added, a forward, a follow-up quoting it, case and spacing),
//! go to the same split, so a version is never tested on a ticket it was tuned on.
//!
//! Near duplicates are found by MinHash over word 3-shingles of the normalised text (lowercase,
//! letters and digits only), leaving out the shingles more than 1% of the rows share (at
//! least [`COMMON`]: forward headers, signatures, greetings, which say nothing of the
//! ticket). A row is a near duplicate of another when about [`NEAR`] or more of the smaller
//! one's shingles are in the larger (containment, from the MinHash estimate of their Jaccard
//! similarity and their sizes), so a ticket and its forward or a follow-up quoting it match
//! though the copy is longer. Candidates come from locality-sensitive hashing ([`BANDS`]
//! bands of [`ROWS`] hashes), each checked against at most [`CHECKED`] rows per bucket, so
//! the cost grows with the rows, not their square. Every hash is specified here (FNV-1a,
//! SplitMix64, multiply-shift), so a set splits the same way on every machine and toolchain:
//! the figures of a run stay tied to its digest.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::Split;

const HASHES: usize = 64;
pub const BANDS: usize = 32;
pub const ROWS: usize = 2;
/// The smaller row's share of shingles in the larger that makes them one ticket.
pub const NEAR: f64 = 0.7;
pub const CHECKED: usize = 4;
/// A shingle in more rows than this (or 1% of them) is boilerplate, not the ticket.
pub const COMMON: usize = 5;

/// What the split needs of a row: its text, and its family and time when the set gives them.
pub struct Item<'a> {
    pub text: String,
    pub family: Option<&'a str>,
    pub time: Option<DateTime<Utc>>,
}

/// Each row's family (its group: the set's family when given, joined with every near
/// duplicate) and split. A group takes the name of its first row's family, else `dup-` and its
/// first row's id when it has several rows, else no family (the row is its own). By time, the
/// oldest groups (by their first ticket) are dev until dev holds 45% of the rows, the rest
/// test: the newest tickets judge. Otherwise the split is the shipped set's rule, a function
/// of the group's name ([`split_of`]), so adding rows never moves a group.
pub fn assign(items: &[Item], ids: &[&str]) -> Vec<(Option<String>, Split)> {
    let mut groups = Groups::new(items.len());
    let mut by_family: HashMap<&str, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(family) = item.family {
            let first = *by_family.entry(family).or_insert(i);
            groups.join(first, i);
        }
    }
    near_duplicates(items, &mut groups);
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..items.len() {
        members.entry(groups.root(i)).or_default().push(i);
    }
    let mut order: Vec<&Vec<usize>> = members.values().collect();
    order.sort_by_key(|rows| rows[0]);
    let name = |rows: &[usize]| match items[rows[0]].family {
        Some(family) => Some(family.to_string()),
        None if rows.len() > 1 => Some(format!("dup-{}", ids[rows[0]])),
        None => None,
    };
    let mut out = vec![(None, Split::Test); items.len()];
    let timed = items.iter().all(|i| i.time.is_some());
    if timed {
        let first = |rows: &[usize]| rows.iter().filter_map(|&i| items[i].time).min();
        order.sort_by_key(|rows| (first(rows), rows[0]));
    }
    let mut dev_rows = 0;
    for rows in order {
        let family = name(rows);
        let split = if timed {
            let dev = (dev_rows as f64) < 0.45 * items.len() as f64;
            dev_rows += if dev { rows.len() } else { 0 };
            if dev {
                Split::Dev
            } else {
                Split::Test
            }
        } else {
            split_of(family.as_deref().unwrap_or(ids[rows[0]]))
        };
        for &i in rows {
            out[i] = (family.clone(), split);
        }
    }
    out
}

/// The shipped set's rule (evals/assemble.py's `split_of`): test when the first byte of the
/// SHA-256 of the family's name is below 141 (about 55%), else dev.
pub fn split_of(family: &str) -> Split {
    if Sha256::digest(family.as_bytes())[0] < 141 {
        Split::Test
    } else {
        Split::Dev
    }
}

fn near_duplicates(items: &[Item], groups: &mut Groups) {
    // Exact duplicates (once normalised) are joined outright, whatever the buckets hold.
    let mut exact: HashMap<u64, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let words = normalised(&item.text);
        let first = *exact.entry(fnv(words.join(" ").bytes())).or_insert(i);
        groups.join(first, i);
    }
    let shingled: Vec<Vec<u64>> = items.iter().map(|i| shingles(&i.text)).collect();
    let mut rows_with: HashMap<u64, usize> = HashMap::new();
    for shingle in shingled.iter().flatten() {
        *rows_with.entry(*shingle).or_default() += 1;
    }
    let common = COMMON.max(items.len() / 100);
    let signatures: Vec<Option<(usize, [u64; HASHES])>> = shingled
        .iter()
        .map(|s| {
            let kept: Vec<u64> = s
                .iter()
                .copied()
                .filter(|h| rows_with[h] <= common)
                .collect();
            (!kept.is_empty()).then(|| (kept.len(), signature(&kept)))
        })
        .collect();
    let mut buckets: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
    for (i, sig) in signatures.iter().enumerate() {
        let Some((size, sig)) = sig else { continue };
        for band in 0..BANDS {
            let key = fnv(sig[band * ROWS..(band + 1) * ROWS]
                .iter()
                .flat_map(|h| h.to_le_bytes()));
            let bucket = buckets.entry((band, key)).or_default();
            for &j in bucket.iter().take(CHECKED) {
                let Some((other, theirs)) = &signatures[j] else {
                    continue;
                };
                if contained(agreement(sig, theirs), *size, *other) >= NEAR {
                    groups.join(j, i);
                }
            }
            if bucket.len() < CHECKED {
                bucket.push(i);
            }
        }
    }
}

/// The share of the smaller set in the larger, from their Jaccard similarity and sizes:
/// |A∩B| = J(|A| + |B|) / (1 + J).
fn contained(jaccard: f64, a: usize, b: usize) -> f64 {
    jaccard * (a + b) as f64 / ((1.0 + jaccard) * a.min(b) as f64)
}

/// Lowercase words of letters and digits: case, spacing and punctuation do not tell two
/// tickets apart.
pub fn normalised(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The row's distinct word 3-shingles (its whole text when shorter), hashed.
fn shingles(text: &str) -> Vec<u64> {
    let words: Vec<u64> = normalised(text).iter().map(|w| fnv(w.bytes())).collect();
    let shingle = |w: &[u64]| w.iter().fold(0, |h, &x| splitmix(h ^ x));
    let mut out: Vec<u64> = if words.len() < 3 {
        vec![shingle(&words)]
    } else {
        words.windows(3).map(shingle).collect()
    };
    out.sort_unstable();
    out.dedup();
    out
}

fn signature(shingles: &[u64]) -> [u64; HASHES] {
    // The k-th hash of a shingle is a·s + b with the k-th odd a and b (multiply-shift
    // hashing): one multiplication each.
    let keys: [(u64, u64); HASHES] =
        std::array::from_fn(|k| (splitmix(k as u64) | 1, splitmix(k as u64 + HASHES as u64)));
    let mut sig = [u64::MAX; HASHES];
    for &s in shingles {
        let s = splitmix(s);
        for (slot, (a, b)) in sig.iter_mut().zip(keys) {
            *slot = (*slot).min(a.wrapping_mul(s).wrapping_add(b));
        }
    }
    sig
}

fn agreement(a: &[u64; HASHES], b: &[u64; HASHES]) -> f64 {
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / HASHES as f64
}

fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Union-find over row indices; a group's root is its first row.
struct Groups(Vec<usize>);

impl Groups {
    fn new(n: usize) -> Self {
        Self((0..n).collect())
    }
    fn root(&mut self, mut i: usize) -> usize {
        while self.0[i] != i {
            self.0[i] = self.0[self.0[i]];
            i = self.0[i];
        }
        i
    }
    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.root(a), self.root(b));
        let (first, last) = (a.min(b), a.max(b));
        self.0[last] = first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` unrelated tickets of 30 words from a vocabulary of 2,000.
    fn tickets(n: usize, seed: u64) -> Vec<String> {
        (0..n as u64)
            .map(|t| {
                (0..30)
                    .map(|w| format!("w{}", splitmix(seed ^ (t << 8) ^ w) % 2000))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    fn items(texts: &[String]) -> Vec<Item<'_>> {
        let item = |t: &String| Item {
            text: t.clone(),
            family: None,
            time: None,
        };
        texts.iter().map(item).collect()
    }

    #[test]
    fn copies_of_a_ticket_share_its_split_and_others_spread_over_both() {
        let bases = tickets(2000, 1);
        let mut texts = bases.clone();
        for (n, base) in bases.iter().enumerate().filter(|(n, _)| n % 4 == 0) {
            texts.push(match n % 3 {
                0 => base.to_uppercase().replace(' ', "  "),
                1 => format!("{base}\n\n--\nSarah, Head of Support\nSent from my phone"),
                _ => format!("Any update?\n\nOn Monday you wrote:\n> {base}"),
            });
        }
        let ids: Vec<String> = (0..texts.len()).map(|i| format!("r{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let out = assign(&items(&texts), &ids);
        for (copy, base) in (2000..texts.len()).zip((0..2000).step_by(4)) {
            assert_eq!(
                out[copy], out[base],
                "{} is a copy of {}",
                ids[copy], ids[base]
            );
            assert_eq!(
                out[base].0.as_deref(),
                Some(format!("dup-r{base}").as_str())
            );
        }
        let families: std::collections::HashSet<_> = out.iter().map(|o| &o.0).collect();
        assert_eq!(
            out.iter().filter(|o| o.0.is_none()).count(),
            1500,
            "the others alone"
        );
        assert!(families.len() > 1);
        let test = out[..2000].iter().filter(|o| o.1 == Split::Test).count();
        assert!(
            (1000..1200).contains(&test),
            "{test} of 2000 in test (about 55%)"
        );
    }

    #[test]
    fn by_time_the_oldest_are_dev_and_a_copy_goes_with_its_first_ticket() {
        let mut texts = tickets(100, 2);
        texts.push(format!("{} thanks", texts[10]));
        let day = |d: i64| Some(DateTime::UNIX_EPOCH + chrono::Duration::days(d));
        let mut all = items(&texts);
        for (d, item) in all.iter_mut().enumerate() {
            item.time = day(d as i64);
        }
        let ids: Vec<String> = (0..texts.len()).map(|i| i.to_string()).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let out = assign(&all, &ids);
        let dev = out.iter().filter(|o| o.1 == Split::Dev).count();
        assert_eq!(dev, 46, "45% of 101 rows, the copy with its day-10 ticket");
        assert_eq!(out[100], out[10]);
        assert!(out[..45].iter().all(|o| o.1 == Split::Dev));
        assert!(out[45..100].iter().all(|o| o.1 == Split::Test));
    }

    #[test]
    fn given_families_are_kept_and_joined_by_their_copies() {
        let texts = tickets(3, 3);
        let texts = vec![
            texts[0].clone(),
            texts[1].clone(),
            texts[0].clone(),
            texts[2].clone(),
        ];
        let mut all = items(&texts);
        all[0].family = Some("a");
        all[1].family = Some("a");
        all[2].family = Some("b");
        let out = assign(&all, &["0", "1", "2", "3"]);
        assert_eq!(out[0].0.as_deref(), Some("a"));
        assert_eq!(out[2], out[0], "b's row is a's copy: one family");
        assert_eq!(out[1], out[0]);
        assert_eq!(out[3].0, None);
    }

    #[test]
    fn many_rows_and_many_copies_split_in_time_linear_in_the_rows() {
        // Unrelated rows, then as many copies of one ticket: each row is checked against at
        // most CHECKED rows per band, so neither costs the square of the rows.
        let mut texts = tickets(20_000, 4);
        texts.extend(std::iter::repeat_n(texts[0].clone(), 20_000));
        let ids: Vec<String> = (0..texts.len()).map(|i| i.to_string()).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let out = assign(&items(&texts), &ids);
        println!("{} rows split in {:?}", texts.len(), started.elapsed());
        assert!(
            out[1..20_000].iter().all(|o| o.0.is_none()),
            "no false duplicates"
        );
        assert!(
            out[20_000..].iter().all(|o| *o == out[0]),
            "the copies together"
        );
    }
}
