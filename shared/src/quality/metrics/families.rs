//! Each family's counts, stored with a run (`eval_run.metrics.by_family`), so that the promote
//! gate can compare two runs *paired*, over the families both saw (docs/quality.md): a
//! bootstrap over the shared families of the difference in macro-F1 or urgent recall, each
//! resample drawing the same families for both versions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    f1,
    intervals::{percentiles, resample},
    ratio, Interval, Scored,
};

/// What one family's rows scored under one version: enough to recompute accuracy, macro-F1
/// and urgent recall over any multiset of families.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilyCounts {
    pub rows: u32,
    /// Rows whose department is right.
    pub correct: u32,
    /// Rows labelled urgent, and of those the ones flagged (at the policy's threshold).
    pub urgent: u32,
    pub caught: u32,
    /// Per department seen in the labels or the answers: `[right, answered, labelled]`.
    pub classes: BTreeMap<String, [u32; 3]>,
}

/// Family → its counts.
pub type FamilyTable = BTreeMap<String, FamilyCounts>;

/// A figure the gate compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gated {
    MacroF1,
    UrgentRecall,
}

/// The counts of every family of `rows`.
pub fn family_table(rows: &[Scored], threshold: f64) -> FamilyTable {
    let mut table = FamilyTable::new();
    for row in rows {
        let counts = table.entry(row.family.clone()).or_default();
        counts.rows += 1;
        let answer = row.predicted.as_ref();
        let right = answer.is_some_and(|p| p.department == row.department);
        counts.correct += u32::from(right);
        if row.is_urgent {
            counts.urgent += 1;
            counts.caught += u32::from(answer.is_some_and(|p| p.is_urgent >= threshold));
        }
        counts.classes.entry(row.department.clone()).or_default()[2] += 1;
        if let Some(p) = answer {
            let class = counts.classes.entry(p.department.clone()).or_default();
            class[1] += 1;
            class[0] += u32::from(right);
        }
    }
    table
}

/// `figure` over the families drawn (repeats counted), as [`super::department`] and
/// [`super::urgent`] compute it over their rows.
fn figure<'a>(drawn: impl Iterator<Item = &'a FamilyCounts>, gated: Gated) -> f64 {
    let mut total = FamilyCounts::default();
    for counts in drawn {
        total.urgent += counts.urgent;
        total.caught += counts.caught;
        for (class, c) in &counts.classes {
            let sum = total.classes.entry(class.clone()).or_default();
            for k in 0..3 {
                sum[k] += c[k];
            }
        }
    }
    match gated {
        Gated::UrgentRecall => ratio(total.caught.into(), total.urgent.into()),
        Gated::MacroF1 => {
            let seen: Vec<f64> = total
                .classes
                .values()
                .filter(|[_, answered, labelled]| answered + labelled > 0)
                .map(|&[right, answered, labelled]| {
                    f1(
                        ratio(right.into(), answered.into()),
                        ratio(right.into(), labelled.into()),
                    )
                })
                .collect();
            if seen.is_empty() {
                0.0
            } else {
                seen.iter().sum::<f64>() / seen.len() as f64
            }
        }
    }
}

/// The candidate's figure minus the current version's, over the families both runs scored
/// with the same rows, and its 95% paired-bootstrap interval.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedDifference {
    pub families: usize,
    pub diff: f64,
    pub ci95: Interval,
}

impl PairedDifference {
    /// The interval lies below 0: the candidate is worse beyond noise.
    pub fn significantly_worse(&self) -> bool {
        self.ci95.high < 0.0
    }
}

/// `None` when the runs share no family.
pub fn paired_difference(
    candidate: &FamilyTable,
    current: &FamilyTable,
    gated: Gated,
) -> Option<PairedDifference> {
    let shared: Vec<(&FamilyCounts, &FamilyCounts)> = candidate
        .iter()
        .filter_map(|(family, a)| current.get(family).map(|b| (a, b)))
        .filter(|(a, b)| a.rows == b.rows)
        .collect();
    if shared.is_empty() {
        return None;
    }
    let diff_of = |drawn: &[usize]| {
        figure(drawn.iter().map(|&i| shared[i].0), gated)
            - figure(drawn.iter().map(|&i| shared[i].1), gated)
    };
    let all: Vec<usize> = (0..shared.len()).collect();
    Some(PairedDifference {
        families: shared.len(),
        diff: diff_of(&all),
        ci95: percentiles(&mut resample(shared.len(), diff_of)),
    })
}

#[cfg(test)]
mod tests {
    use super::{super::*, *};

    fn row(family: &str, label: &str, answer: Option<&str>, urgent: bool, p: f64) -> Scored {
        Scored {
            family: family.into(),
            department: label.into(),
            is_urgent: urgent,
            predicted: answer.map(|a| Prediction {
                department: a.into(),
                is_urgent: p,
            }),
        }
    }

    #[test]
    fn the_family_counts_give_back_the_runs_figures() {
        let rows = vec![
            row("a", "billing", Some("billing"), true, 0.9),
            row("a", "billing", Some("technical"), true, 0.2),
            row("b", "technical", Some("technical"), false, 0.6),
            row("b", "technical", None, true, 0.5),
            row("c", "sales", Some("billing"), false, 0.1),
        ];
        let table = family_table(&rows, 0.5);
        assert_eq!(
            table["a"],
            FamilyCounts {
                rows: 2,
                correct: 1,
                urgent: 2,
                caught: 1,
                classes: [
                    ("billing".into(), [1, 1, 2]),
                    ("technical".into(), [0, 1, 0])
                ]
                .into(),
            }
        );
        assert_eq!(table["b"].classes["technical"], [1, 1, 2]);
        let d = department(&rows);
        let u = urgent(&rows, 0.5);
        assert_eq!(figure(table.values(), Gated::MacroF1), d.macro_f1);
        assert_eq!(figure(table.values(), Gated::UrgentRecall), u.recall);
    }

    #[test]
    fn the_paired_difference_sees_a_clear_loss_and_not_noise() {
        let labels = ["billing", "technical", "account", "sales"];
        // 40 families of 3 rows; the current version right everywhere.
        let rows = |wrong: &dyn Fn(usize) -> bool| -> Vec<Scored> {
            (0..120)
                .map(|i| {
                    let label = labels[(i / 3) % 4];
                    let answer = if wrong(i) { "general" } else { label };
                    row(&format!("f{}", i / 3), label, Some(answer), false, 0.1)
                })
                .collect()
        };
        let current = family_table(&rows(&|_| false), 0.5);
        let worse = family_table(&rows(&|i| i % 4 == 0), 0.5);
        let d = paired_difference(&worse, &current, Gated::MacroF1).unwrap();
        assert_eq!(d.families, 40);
        assert!(d.diff < -0.1 && d.significantly_worse(), "{d:?}");
        // Two versions wrong on different families, as often: no significant difference.
        let one = family_table(&rows(&|i| i % 30 == 0), 0.5);
        let other = family_table(&rows(&|i| i % 30 == 3 || i % 30 == 15), 0.5);
        let d = paired_difference(&other, &one, Gated::MacroF1).unwrap();
        assert!(d.diff < 0.0 && !d.significantly_worse(), "{d:?}");
        assert_eq!(
            paired_difference(&other, &one, Gated::MacroF1),
            Some(d),
            "a fixed seed"
        );
        assert_eq!(
            paired_difference(&one, &FamilyTable::new(), Gated::UrgentRecall),
            None
        );
    }
}
