//! Intervals: Wilson's for a share of rows, and the percentile bootstrap over *families*
//! (docs/quality.md). Rows of one scenario family (a ticket with its translations,
//! paraphrases, forwards and duplicates) are not independent: resampling rows would count a
//! family's copies as separate evidence and give intervals too narrow. So the bootstrap
//! draws families with replacement and recomputes the figure over every row of the drawn
//! families; a row without a family is its own, which makes it the row bootstrap exactly.

use super::{Interval, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Z95};

/// Wilson score interval for `k` successes in `n`.
pub(super) fn wilson(k: u64, n: u64) -> Interval {
    if n == 0 {
        return Interval {
            low: 0.0,
            high: 1.0,
        };
    }
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = Z95 * Z95;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    Interval {
        low: (centre - half).max(0.0),
        high: (centre + half).min(1.0),
    }
}

/// The rows of each family (indices into `families`, one name per row), families in the order
/// they first appear, so the same rows always give the same groups.
pub fn groups<'a>(families: impl IntoIterator<Item = &'a str>) -> Vec<Vec<usize>> {
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (row, family) in families.into_iter().enumerate() {
        let at = *index.entry(family).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push(row);
    }
    groups
}

/// The percentile interval of `statistic` over [`BOOTSTRAP_RESAMPLES`] resamples of
/// `groups` (see [`resample_groups`]).
pub(super) fn bootstrap_interval(
    groups: &[Vec<usize>],
    statistic: impl Fn(&[usize]) -> f64,
) -> Interval {
    if groups.is_empty() {
        return Interval {
            low: 0.0,
            high: 0.0,
        };
    }
    percentiles(&mut resample_groups(groups, statistic))
}

/// `statistic` over [`BOOTSTRAP_RESAMPLES`] resamples: each draws `groups.len()` groups with
/// replacement and hands `statistic` every row of the drawn groups (repeats included), from
/// a fixed seed. With one row per group this is the row bootstrap, draw for draw.
pub(super) fn resample_groups(
    groups: &[Vec<usize>],
    statistic: impl Fn(&[usize]) -> f64,
) -> Vec<f64> {
    resample(groups.len(), |drawn| {
        let sample: Vec<usize> = drawn
            .iter()
            .flat_map(|&g| groups[g].iter().copied())
            .collect();
        statistic(&sample)
    })
}

/// `statistic` over [`BOOTSTRAP_RESAMPLES`] resamples of `0..n` with replacement.
pub(super) fn resample(n: usize, statistic: impl Fn(&[usize]) -> f64) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let mut rng = SplitMix64(BOOTSTRAP_SEED);
    let mut sample = vec![0; n];
    (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            for slot in sample.iter_mut() {
                *slot = (rng.next() % n as u64) as usize;
            }
            statistic(&sample)
        })
        .collect()
}

/// The 2.5th and 97.5th percentiles (nearest rank).
pub(super) fn percentiles(values: &mut [f64]) -> Interval {
    if values.is_empty() {
        return Interval {
            low: 0.0,
            high: 0.0,
        };
    }
    values.sort_by(f64::total_cmp);
    let at =
        |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    Interval {
        low: at(0.025),
        high: at(0.975),
    }
}

/// A small seeded generator (Steele et al.'s SplitMix64): reproducible on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::{super::*, *};

    fn row(family: &str, label: &str, answer: &str) -> Scored {
        Scored {
            family: family.into(),
            department: label.into(),
            is_urgent: label == "technical",
            predicted: Some(Prediction {
                department: answer.into(),
                is_urgent: if answer == "technical" { 0.9 } else { 0.1 },
            }),
        }
    }

    /// 20 families of 5 rows each, every row of a family answered alike (as copies of one
    /// ticket are): 12 families right, 8 wrong.
    fn copies(each_its_own: bool) -> Vec<Scored> {
        let labels = ["billing", "technical", "account", "sales"];
        (0..100)
            .map(|i| {
                let family = i / 5;
                let label = labels[family % 4];
                let answer = if family % 5 < 3 { label } else { "general" };
                let name = if each_its_own {
                    format!("row-{i}")
                } else {
                    format!("fam-{family}")
                };
                row(&name, label, answer)
            })
            .collect()
    }

    #[test]
    fn groups_keep_the_order_families_first_appear_in() {
        assert_eq!(
            groups(["b", "a", "b", "c", "a"]),
            vec![vec![0, 2], vec![1, 4], vec![3]]
        );
    }

    #[test]
    fn copies_within_families_widen_the_intervals_and_the_same_rows_give_the_same_ones() {
        let by_family = copies(false);
        let by_row = copies(true);
        let (f, r) = (department(&by_family), department(&by_row));
        // The same point figures: only the intervals see the families.
        assert_eq!((f.accuracy, f.macro_f1), (r.accuracy, r.macro_f1));
        let width = |i: &Interval| i.high - i.low;
        let (fa, ra) = (f.accuracy_ci.unwrap(), r.accuracy_ci.unwrap());
        assert!(
            fa[1] - fa[0] > 1.5 * (ra[1] - ra[0]),
            "families {fa:?}, rows {ra:?}"
        );
        assert!(width(&f.macro_f1_ci95) > 1.5 * width(&r.macro_f1_ci95));
        let (fu, ru) = (
            urgent(&by_family, 0.5).recall_ci95.unwrap(),
            urgent(&by_row, 0.5).recall_ci95.unwrap(),
        );
        assert!(width(&fu) > width(&ru), "families {fu:?}, rows {ru:?}");
        // Each interval holds its figure; a fixed seed gives the same intervals every time.
        assert!(fa[0] <= f.accuracy && f.accuracy <= fa[1]);
        assert_eq!(department(&by_family), f);
        assert_eq!(urgent(&by_family, 0.5), urgent(&by_family, 0.5));
    }

    #[test]
    fn without_families_the_bootstrap_is_the_row_bootstrap() {
        let rows = copies(true);
        let all = groups(rows.iter().map(|r| r.family.as_str()));
        let accuracy = |sample: &[usize]| {
            sample.iter().filter(|&&i| is_correct(&rows[i])).count() as f64 / sample.len() as f64
        };
        assert_eq!(
            resample_groups(&all, accuracy),
            resample(rows.len(), accuracy)
        );
    }
}
