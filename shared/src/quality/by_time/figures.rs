//! The time split's figures, from its judged rows: pure, so a table of cases tests them.

use serde::{Deserialize, Serialize};

use super::super::{
    metrics::{self, Interval, Prediction, Scored},
    score,
};
use crate::providers::classifier::target::{self, CurvePoint};

/// One ticket after the split: its truth, the large model's stored answer and what it cost,
/// and the candidate classifier's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedRow {
    /// Its content key: duplicates are one family, as in `--set feedback`.
    pub family: String,
    pub department: String,
    pub is_urgent: bool,
    /// The truth is the desk's label (else the large model's own answer).
    pub desk: bool,
    /// The ticket was drawn for the cascade's audit (`pipeline::cascade::audit`): the large
    /// model's answer on it is a truth drawn at random, not only where a classifier was unsure.
    pub audited: bool,
    /// How many tickets it stands for in a precision: `1 / share` for an audited ticket the
    /// desk did not label (the draw was uniform among the live classifier's local answers),
    /// else 1.
    pub weight: f64,
    pub large: Prediction,
    /// What the large model's answer cost; a content shared by several tickets counts once.
    pub cost_usd: f64,
    /// The classifier's answer and its confidence (`None`: it knows none of the departments).
    pub local: Option<(Prediction, f64)>,
    /// The cascade answered it locally under the rule.
    pub answered_locally: bool,
}

/// The figures over a set of judged rows: the cascade (the classifier where it answered, the
/// large model's stored answer elsewhere) against the large model alone, on the same rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    pub n: usize,
    /// Share of the rows the classifier answered.
    pub local_share: f64,
    /// Precision of its answers on these rows, each row weighted ([`JudgedRow::weight`]: the
    /// same as unweighted where no audit drew a row); `None`: it answered none.
    pub local_precision: Option<f64>,
    pub cascade_accuracy: f64,
    pub large_accuracy: f64,
    /// `cascade_accuracy - large_accuracy`, paired on the rows, with its 95% interval
    /// (bootstrap over contents).
    pub difference: f64,
    pub difference_ci95: Interval,
    /// McNemar's exact test on the same rows.
    pub mcnemar_p: f64,
    pub cascade_cost_per_ticket_usd: f64,
    pub large_cost_per_ticket_usd: f64,
    /// The cost over the rows whose department is right (`None`: none is).
    pub cascade_cost_per_correct_usd: Option<f64>,
    pub large_cost_per_correct_usd: Option<f64>,
}

fn scored(row: &JudgedRow, predicted: Option<Prediction>) -> Scored {
    Scored {
        family: row.family.clone(),
        department: row.department.clone(),
        is_urgent: row.is_urgent,
        predicted,
    }
}

/// The cascade's and the large model's rows, scored against each row's truth.
pub fn scored_pair(rows: &[&JudgedRow]) -> (Vec<Scored>, Vec<Scored>) {
    let cascade = rows
        .iter()
        .map(|row| {
            let answer = match &row.local {
                Some((local, _)) if row.answered_locally => local.clone(),
                _ => row.large.clone(),
            };
            scored(row, Some(answer))
        })
        .collect();
    let large = rows
        .iter()
        .map(|row| scored(row, Some(row.large.clone())))
        .collect();
    (cascade, large)
}

pub fn slice(rows: &[&JudgedRow]) -> Slice {
    let n = rows.len();
    let per_row = |x: f64| if n == 0 { 0.0 } else { x / n as f64 };
    let (cascade, large) = scored_pair(rows);
    let local: Vec<&&JudgedRow> = rows.iter().filter(|r| r.answered_locally).collect();
    let local_right: f64 = local
        .iter()
        .filter(|r| {
            r.local
                .as_ref()
                .is_some_and(|(p, _)| p.department == r.department)
        })
        .map(|r| r.weight)
        .sum();
    let local_weight: f64 = local.iter().map(|r| r.weight).sum();
    let large_cost: f64 = rows.iter().map(|r| r.cost_usd).sum();
    let cascade_cost: f64 = rows
        .iter()
        .filter(|r| !r.answered_locally)
        .map(|r| r.cost_usd)
        .sum();
    let (difference, difference_ci95) = metrics::accuracy_difference(&large, &cascade);
    let paired = metrics::paired(&large, &cascade);
    Slice {
        n,
        local_share: per_row(local.len() as f64),
        local_precision: (!local.is_empty()).then(|| local_right / local_weight),
        cascade_accuracy: metrics::department(&cascade).accuracy,
        large_accuracy: metrics::department(&large).accuracy,
        difference,
        difference_ci95,
        mcnemar_p: paired.mcnemar_p,
        cascade_cost_per_ticket_usd: per_row(cascade_cost),
        large_cost_per_ticket_usd: per_row(large_cost),
        cascade_cost_per_correct_usd: score::per_correct(cascade_cost, &cascade),
        large_cost_per_correct_usd: score::per_correct(large_cost, &large),
    }
}

/// The risk–coverage curve of the classifier on the judged rows (against their truth).
pub fn curve(rows: &[JudgedRow]) -> Vec<CurvePoint> {
    let judged: Vec<target::Judged> = rows
        .iter()
        .filter_map(|row| {
            let (answer, confidence) = row.local.as_ref()?;
            Some(target::Judged {
                department: answer.department.clone(),
                confidence: *confidence,
                right: answer.department == row.department,
            })
        })
        .collect();
    target::curve(&judged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(truth: &str, large: &str, local: &str, confidence: f64, desk: bool) -> JudgedRow {
        let prediction = |d: &str| Prediction {
            department: d.into(),
            is_urgent: 0.0,
        };
        JudgedRow {
            family: format!("{truth}{large}{local}{confidence}"),
            department: truth.into(),
            is_urgent: false,
            desk,
            audited: false,
            weight: 1.0,
            large: prediction(large),
            cost_usd: 0.01,
            local: Some((prediction(local), confidence)),
            answered_locally: confidence >= 0.9,
        }
    }

    #[test]
    fn local_answers_cost_nothing_and_count_against_the_same_truth_as_the_large_models() {
        let rows = [
            // Local and right where the large model erred.
            row("billing", "sales", "billing", 0.95, true),
            // Local and wrong.
            row("account", "account", "sales", 0.92, true),
            // Not local: the large model's answer stands.
            row("technical", "technical", "billing", 0.5, false),
            row("sales", "sales", "sales", 0.3, false),
        ];
        let all: Vec<&JudgedRow> = rows.iter().collect();
        let s = slice(&all);
        assert_eq!((s.n, s.local_share, s.local_precision), (4, 0.5, Some(0.5)));
        assert_eq!((s.cascade_accuracy, s.large_accuracy), (0.75, 0.75));
        assert_eq!(s.difference, 0.0);
        assert!((s.cascade_cost_per_ticket_usd - 0.005).abs() < 1e-12);
        assert!((s.large_cost_per_ticket_usd - 0.01).abs() < 1e-12);
        assert!((s.cascade_cost_per_correct_usd.unwrap() - 0.02 / 3.0).abs() < 1e-12);
        let c = curve(&rows);
        assert_eq!((c[0].coverage, c[0].precision), (1.0, Some(0.5)));
    }

    /// An audited ticket stands for the tickets its draw stood in for: at a share of 0.25, one
    /// wrong audited answer weighs as four desk-labelled ones.
    #[test]
    fn an_audited_answer_weighs_one_over_its_share_in_the_precision() {
        let audited = |truth: &str, local: &str| JudgedRow {
            audited: true,
            weight: 4.0,
            ..row(truth, truth, local, 0.95, false)
        };
        let rows = [
            row("billing", "billing", "billing", 0.95, true),
            row("sales", "sales", "sales", 0.95, true),
            row("account", "account", "account", 0.95, true),
            row("technical", "technical", "technical", 0.95, true),
            audited("billing", "sales"),
            audited("general", "general"),
        ];
        let all: Vec<&JudgedRow> = rows.iter().collect();
        // (4 desk + 4 audited right) of (4 + 8): not the unweighted 5 of 6.
        assert_eq!(slice(&all).local_precision, Some(8.0 / 12.0));
    }
}
