//! The figures of one eval run, and the paired tests between two: pure functions over
//! (label, prediction) pairs, unit-tested against hand-computed cases. Intervals come from a
//! bootstrap over scenario families ([`intervals`]); [`families`] keeps each family's counts
//! with a stored run so that the promote gate can compare two runs family by family.
//!
//! Conventions (scikit-learn's, so the figures read as people expect): a class with no
//! predictions has precision 0, with no support recall 0; macro-F1 averages the classes seen
//! in the labels or the predictions; a missing prediction (a dead letter) is wrong for the
//! department and counts as "not urgent, p = 0.5" for urgency.

pub mod confusions;
pub mod exact;
mod families;
pub mod intervals;
mod paired;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use self::intervals::{bootstrap_interval, groups, wilson};
pub use self::{
    families::{
        family_table, paired_difference, FamilyCounts, FamilyTable, Gated, PairedDifference,
    },
    paired::{accuracy_difference, mcnemar_exact, paired, Paired},
};

/// Bootstrap resamples for confidence intervals and the paired test.
pub const BOOTSTRAP_RESAMPLES: usize = 1000;
/// The bootstrap's seed: the same run always reports the same intervals.
pub const BOOTSTRAP_SEED: u64 = 0x7269_6167_6521;
/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// One labelled row and what a version answered for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// The row's scenario family (its id when the set names none): the bootstrap's unit.
    pub family: String,
    pub department: String,
    pub is_urgent: bool,
    /// `None`: no answer (dead letter, or still pending).
    pub predicted: Option<Prediction>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub department: String,
    /// The model's probability that the ticket is urgent.
    pub is_urgent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassFigures {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub support: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepartmentFigures {
    pub accuracy: f64,
    /// Wilson score interval, over rows (kept for earlier readers; [`Self::accuracy_ci`] is
    /// the one shown).
    pub accuracy_ci95: Interval,
    /// `[low, high]`: 95% percentile bootstrap over families ([`BOOTSTRAP_RESAMPLES`],
    /// [`BOOTSTRAP_SEED`]). `None` in runs stored before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_ci: Option<[f64; 2]>,
    pub macro_f1: f64,
    /// Percentile bootstrap over families ([`BOOTSTRAP_RESAMPLES`], [`BOOTSTRAP_SEED`]).
    pub macro_f1_ci95: Interval,
    pub per_class: BTreeMap<String, ClassFigures>,
    /// `confusion[label][predicted]`; a missing answer is predicted `"(none)"`.
    pub confusion: BTreeMap<String, BTreeMap<String, u64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrgentFigures {
    /// The policy's threshold on `is_urgent`.
    pub threshold: f64,
    pub precision: f64,
    pub recall: f64,
    /// Percentile bootstrap over families. `None` in runs stored before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_ci95: Option<Interval>,
    pub f1: f64,
    pub brier: f64,
    /// `None` when the labels hold one class only.
    pub auc: Option<f64>,
}

/// What "no answer" is called in the confusion matrix.
pub const NO_ANSWER: &str = "(none)";

pub fn department(rows: &[Scored]) -> DepartmentFigures {
    let n = rows.len() as u64;
    let correct = rows.iter().filter(|r| is_correct(r)).count() as u64;
    let mut confusion: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for row in rows {
        let predicted = row
            .predicted
            .as_ref()
            .map_or(NO_ANSWER, |p| p.department.as_str());
        *confusion
            .entry(row.department.clone())
            .or_default()
            .entry(predicted.to_string())
            .or_default() += 1;
    }
    let indices: Vec<usize> = (0..rows.len()).collect();
    let families = groups(rows.iter().map(|r| r.family.as_str()));
    let accuracy_ci = bootstrap_interval(&families, |sample| {
        let right = sample.iter().filter(|&&i| is_correct(&rows[i])).count();
        ratio(right as u64, sample.len() as u64)
    });
    DepartmentFigures {
        accuracy: ratio(correct, n),
        accuracy_ci95: wilson(correct, n),
        accuracy_ci: Some([accuracy_ci.low, accuracy_ci.high]),
        macro_f1: macro_f1(rows, &indices),
        macro_f1_ci95: bootstrap_interval(&families, |sample| macro_f1(rows, sample)),
        per_class: per_class(rows, &indices),
        confusion,
    }
}

pub fn urgent(rows: &[Scored], threshold: f64) -> UrgentFigures {
    let probability = |r: &Scored| r.predicted.as_ref().map_or(0.5, |p| p.is_urgent);
    let flagged = |r: &Scored| {
        r.predicted
            .as_ref()
            .is_some_and(|p| p.is_urgent >= threshold)
    };
    let tp = rows.iter().filter(|r| r.is_urgent && flagged(r)).count() as u64;
    let predicted = rows.iter().filter(|r| flagged(r)).count() as u64;
    let actual = rows.iter().filter(|r| r.is_urgent).count() as u64;
    let (precision, recall) = (ratio(tp, predicted), ratio(tp, actual));
    let brier = if rows.is_empty() {
        0.0
    } else {
        rows.iter()
            .map(|r| (probability(r) - f64::from(u8::from(r.is_urgent))).powi(2))
            .sum::<f64>()
            / rows.len() as f64
    };
    let scores: Vec<(f64, bool)> = rows.iter().map(|r| (probability(r), r.is_urgent)).collect();
    let families = groups(rows.iter().map(|r| r.family.as_str()));
    let recall_ci95 = bootstrap_interval(&families, |sample| {
        let urgent = sample.iter().filter(|&&i| rows[i].is_urgent);
        let (caught, all) = urgent.fold((0, 0), |(c, a), &i| {
            (c + u64::from(flagged(&rows[i])), a + 1)
        });
        ratio(caught, all)
    });
    UrgentFigures {
        threshold,
        precision,
        recall,
        recall_ci95: Some(recall_ci95),
        f1: f1(precision, recall),
        brier,
        auc: roc_auc(&scores),
    }
}

fn is_correct(row: &Scored) -> bool {
    row.predicted
        .as_ref()
        .is_some_and(|p| p.department == row.department)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn f1(precision: f64, recall: f64) -> f64 {
    if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    }
}

/// Per class over the rows at `sample` (indices, repeats allowed, for the bootstrap).
fn per_class(rows: &[Scored], sample: &[usize]) -> BTreeMap<String, ClassFigures> {
    let mut classes = BTreeSet::new();
    for &i in sample {
        classes.insert(rows[i].department.as_str());
        if let Some(p) = &rows[i].predicted {
            classes.insert(p.department.as_str());
        }
    }
    classes
        .into_iter()
        .map(|class| {
            let (mut tp, mut predicted, mut support) = (0, 0, 0);
            for &i in sample {
                let row = &rows[i];
                let said = row
                    .predicted
                    .as_ref()
                    .is_some_and(|p| p.department == class);
                let is = row.department == class;
                tp += u64::from(said && is);
                predicted += u64::from(said);
                support += u64::from(is);
            }
            let (precision, recall) = (ratio(tp, predicted), ratio(tp, support));
            let figures = ClassFigures {
                precision,
                recall,
                f1: f1(precision, recall),
                support,
            };
            (class.to_string(), figures)
        })
        .collect()
}

fn macro_f1(rows: &[Scored], sample: &[usize]) -> f64 {
    let classes = per_class(rows, sample);
    if classes.is_empty() {
        return 0.0;
    }
    classes.values().map(|c| c.f1).sum::<f64>() / classes.len() as f64
}

/// ROC AUC as the Mann–Whitney statistic with mid-ranks, so tied scores count one half.
/// `None` without both classes.
pub fn roc_auc(scores: &[(f64, bool)]) -> Option<f64> {
    let positives = scores.iter().filter(|(_, y)| *y).count();
    let negatives = scores.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut sorted: Vec<(f64, bool)> = scores.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their mean.
        let mid_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum += mid_rank * sorted[i..j].iter().filter(|(_, y)| *y).count() as f64;
        i = j;
    }
    let (p, n) = (positives as f64, negatives as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(super) fn row(label: &str, urgent: bool, predicted: Option<(&str, f64)>) -> Scored {
        // Each row its own family, as in a set that names none.
        static ROWS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = ROWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Scored {
            family: format!("row-{n}"),
            department: label.into(),
            is_urgent: urgent,
            predicted: predicted.map(|(d, p)| Prediction {
                department: d.into(),
                is_urgent: p,
            }),
        }
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    /// Hand-computed: 6 rows, labels billing ×3, technical ×2, sales ×1;
    /// predictions billing, billing, technical | technical, billing | none.
    /// billing: tp 2, predicted 3, support 3 → P 2/3, R 2/3, F1 2/3.
    /// technical: tp 1, predicted 2, support 2 → P 1/2, R 1/2, F1 1/2.
    /// sales: tp 0, predicted 0 (a class with no predictions), support 1 → P 0, R 0, F1 0.
    /// accuracy 3/6; macro-F1 (2/3 + 1/2 + 0) / 3 = 7/18.
    fn six() -> Vec<Scored> {
        vec![
            row("billing", true, Some(("billing", 0.9))),
            row("billing", false, Some(("billing", 0.2))),
            row("billing", false, Some(("technical", 0.6))),
            row("technical", true, Some(("technical", 0.6))),
            row("technical", false, Some(("billing", 0.2))),
            row("sales", true, None),
        ]
    }

    #[test]
    fn department_figures_match_the_hand_computed_case() {
        let d = department(&six());
        close(d.accuracy, 0.5);
        close(d.macro_f1, 7.0 / 18.0);
        let billing = &d.per_class["billing"];
        close(billing.precision, 2.0 / 3.0);
        close(billing.recall, 2.0 / 3.0);
        assert_eq!(billing.support, 3);
        close(d.per_class["technical"].f1, 0.5);
        let sales = &d.per_class["sales"];
        assert_eq!(
            (sales.precision, sales.recall, sales.f1, sales.support),
            (0.0, 0.0, 0.0, 1)
        );
        assert_eq!(d.confusion["billing"]["technical"], 1);
        assert_eq!(d.confusion["sales"][NO_ANSWER], 1);
        assert_eq!(d.confusion["technical"]["billing"], 1);
        // Wilson for 3/6: centre (0.5 + z²/12) / (1 + z²/6) = 0.5, half-width 0.3244...
        close(d.accuracy_ci95.low + d.accuracy_ci95.high, 1.0);
        assert!(
            (d.accuracy_ci95.low - 0.1876).abs() < 1e-3,
            "{:?}",
            d.accuracy_ci95
        );
        assert!(d.macro_f1_ci95.low <= d.macro_f1 && d.macro_f1 <= d.macro_f1_ci95.high);
    }

    #[test]
    fn urgent_figures_match_the_hand_computed_case() {
        // Threshold 0.5: flagged rows 1, 3, 4 (p 0.9, 0.6, 0.6); urgent rows 1, 4, 6.
        // tp 2 → P 2/3, R 2/3. Brier: (0.01 + 0.04 + 0.36 + 0.16 + 0.04 + 0.25) / 6 = 0.86/6.
        let u = urgent(&six(), 0.5);
        close(u.precision, 2.0 / 3.0);
        close(u.recall, 2.0 / 3.0);
        close(u.f1, 2.0 / 3.0);
        close(u.brier, 0.86 / 6.0);
        // Positives 0.9, 0.6, 0.5; negatives 0.2, 0.6, 0.2. Pairs won: 0.9 beats 3, 0.6 beats
        // 2 and ties 1 (½), 0.5 beats 2 → 7.5 / 9.
        close(u.auc.unwrap(), 7.5 / 9.0);
    }

    #[test]
    fn a_set_with_one_class_has_perfect_figures_and_no_auc() {
        let rows = vec![
            row("billing", false, Some(("billing", 0.1))),
            row("billing", false, Some(("billing", 0.3))),
        ];
        let d = department(&rows);
        close(d.accuracy, 1.0);
        close(d.macro_f1, 1.0);
        assert_eq!(d.per_class.len(), 1);
        close(d.macro_f1_ci95.low, 1.0);
        let u = urgent(&rows, 0.5);
        assert_eq!(u.auc, None);
        assert_eq!((u.precision, u.recall), (0.0, 0.0));
        close(u.brier, (0.01 + 0.09) / 2.0);
    }

    #[test]
    fn auc_counts_ties_as_one_half() {
        assert_eq!(roc_auc(&[(0.5, true), (0.5, false)]), Some(0.5));
        assert_eq!(roc_auc(&[(0.9, true), (0.1, false)]), Some(1.0));
        assert_eq!(roc_auc(&[(0.1, true), (0.9, false)]), Some(0.0));
        // 2 positives, 2 negatives, all tied but one: (0.7 vs 0.7 → ½) + ...
        let scores = [(0.7, true), (0.7, false), (0.2, false), (0.2, true)];
        // Pairs: (0.7+, 0.7-) ½, (0.7+, 0.2-) 1, (0.2+, 0.7-) 0, (0.2+, 0.2-) ½ → 2/4.
        assert_eq!(roc_auc(&scores), Some(0.5));
        assert_eq!(roc_auc(&[(0.3, true)]), None);
    }
}
