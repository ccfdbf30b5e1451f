//! Whether two versions differ, on the same rows: McNemar's exact test on department
//! correctness (rows), and a paired bootstrap of the macro-F1 difference (over families,
//! [`super::intervals`]).

use serde::{Deserialize, Serialize};

use super::{
    intervals::{bootstrap_interval, groups, percentiles, resample_groups},
    is_correct, macro_f1, Interval, Scored,
};

/// Whether two versions differ, on the same rows (in the same order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Rows the baseline got right and the other wrong.
    pub only_baseline_right: u64,
    /// Rows the other got right and the baseline wrong.
    pub only_other_right: u64,
    /// McNemar's exact (binomial) two-sided p-value on department correctness.
    pub mcnemar_p: f64,
    /// Macro-F1 of the other minus the baseline's.
    pub macro_f1_diff: f64,
    pub macro_f1_diff_ci95: Interval,
    /// Paired bootstrap over families: twice the share of resamples where the difference has the other sign.
    pub bootstrap_p: f64,
    /// Both tests below 0.05.
    pub significant: bool,
}

pub fn paired(baseline: &[Scored], other: &[Scored]) -> Paired {
    assert_eq!(baseline.len(), other.len(), "paired rows");
    let (mut b, mut c) = (0, 0);
    for (x, y) in baseline.iter().zip(other) {
        match (is_correct(x), is_correct(y)) {
            (true, false) => b += 1,
            (false, true) => c += 1,
            _ => {}
        }
    }
    let all: Vec<usize> = (0..baseline.len()).collect();
    let families = groups(baseline.iter().map(|r| r.family.as_str()));
    let diff_of = |sample: &[usize]| macro_f1(other, sample) - macro_f1(baseline, sample);
    let diff = diff_of(&all);
    let mut diffs = resample_groups(&families, diff_of);
    let against = diffs
        .iter()
        .filter(|d| if diff >= 0.0 { **d <= 0.0 } else { **d >= 0.0 })
        .count();
    let bootstrap_p = if baseline.is_empty() {
        1.0
    } else {
        (2.0 * against as f64 / diffs.len() as f64).min(1.0)
    };
    let mcnemar_p = mcnemar_exact(b, c);
    Paired {
        only_baseline_right: b,
        only_other_right: c,
        mcnemar_p,
        macro_f1_diff: diff,
        macro_f1_diff_ci95: percentiles(&mut diffs),
        bootstrap_p,
        significant: mcnemar_p < 0.05 && bootstrap_p < 0.05,
    }
}

/// The other's department accuracy minus the baseline's on the same rows, with its 95%
/// paired bootstrap interval over families (the same families drawn for both).
pub fn accuracy_difference(baseline: &[Scored], other: &[Scored]) -> (f64, Interval) {
    assert_eq!(baseline.len(), other.len(), "paired rows");
    let diff_of = |sample: &[usize]| {
        let n = sample.len().max(1) as f64;
        let right = |rows: &[Scored]| sample.iter().filter(|&&i| is_correct(&rows[i])).count();
        (right(other) as f64 - right(baseline) as f64) / n
    };
    let all: Vec<usize> = (0..baseline.len()).collect();
    let families = groups(baseline.iter().map(|r| r.family.as_str()));
    (diff_of(&all), bootstrap_interval(&families, diff_of))
}

/// Two-sided exact binomial test of `b` against `c` at p = 1/2.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    // P(X <= min) under Binomial(n, 1/2), in logs so large n does not overflow.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut tail = 0.0;
    for k in 0..=b.min(c) {
        if k > 0 {
            ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        tail += (ln_choose + ln_half_n).exp();
    }
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::{super::tests::row, *};

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn mcnemar_is_the_exact_binomial_test() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        close(mcnemar_exact(0, 5), 2.0 / 32.0);
        // b = 1, c = 9: 2 · (1 + 10) / 1024.
        close(mcnemar_exact(1, 9), 22.0 / 1024.0);
        close(mcnemar_exact(9, 1), 22.0 / 1024.0);
        assert_eq!(mcnemar_exact(4, 4), 1.0);
    }

    #[test]
    fn the_paired_test_finds_a_clear_difference_and_not_a_null_one() {
        let labels = ["billing", "technical", "account", "sales", "general"];
        let truth: Vec<&str> = (0..200).map(|i| labels[i % 5]).collect();
        let good: Vec<Scored> = truth
            .iter()
            .map(|l| row(l, false, Some((l, 0.1))))
            .collect();
        // Wrong on every third row.
        let bad: Vec<Scored> = truth
            .iter()
            .enumerate()
            .map(|(i, l)| {
                row(
                    l,
                    false,
                    Some((if i % 3 == 0 { "general" } else { l }, 0.1)),
                )
            })
            .collect();
        let p = paired(&bad, &good);
        assert!(
            p.only_other_right > 50 && p.only_baseline_right == 0,
            "{p:?}"
        );
        assert!(p.significant && p.macro_f1_diff > 0.0, "{p:?}");
        assert!(p.macro_f1_diff_ci95.low > 0.0);
        let same = paired(&good, &good);
        assert_eq!((same.mcnemar_p, same.macro_f1_diff), (1.0, 0.0));
        assert!(!same.significant);
        // A fixed seed: the same rows give the same interval every time.
        assert_eq!(paired(&bad, &good), p);
    }
}
