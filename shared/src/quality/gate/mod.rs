//! The quality gate on `promote` (docs/quality.md): a pure decision over the newest eval runs
//! of the candidate and of the current version on the `test` split of the configured set.
//!
//! A figure worse than the current version's by more than the tolerance (the margin of
//! practical difference, `TRIAGE_EVAL_TOLERANCE`) refuses the candidate only when the paired
//! bootstrap over the families both runs scored says the loss is not noise (its 95% interval
//! lies below 0); otherwise the gate passes and says "no significant difference". Runs stored
//! before per-family counts cannot be paired: the figures alone decide, as before, and the
//! refusal says so. [`switch`] is the gate on a retrain's switch of a cascade's classifier.

pub mod switch;

use serde::Serialize;

use super::metrics::{paired_difference, FamilyTable, Gated};
use crate::config::Tolerance;

/// The gated figures of one version's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub macro_f1: f64,
    pub urgent_recall: f64,
    /// Each family's counts; `None` for a run stored before them.
    #[serde(skip)]
    pub by_family: Option<FamilyTable>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// With what the operator should know: a figure worse beyond the tolerance whose loss is
    /// within noise ("no significant difference").
    Pass(Option<String>),
    /// Why, with both versions' figures, for the operator.
    Refused(String),
}

/// `candidate` passes when it was evaluated, the current version was too, and neither figure
/// is worse than the current one's by more than `tolerance` allows, or the paired test finds
/// the loss within noise.
pub fn decide(
    candidate: Option<&Figures>,
    current: Option<&Figures>,
    tolerance: Tolerance,
) -> Verdict {
    let (Some(candidate), Some(current)) = (candidate, current) else {
        let missing = match (candidate, current) {
            (None, None) => "neither the candidate nor the current version has",
            (None, Some(_)) => "the candidate has",
            _ => "the current version has",
        };
        return Verdict::Refused(format!(
            "{missing} no eval run on the test split of the configured set: run \
             `triage eval --set PATH --split test --version ...` for both"
        ));
    };
    // A hair of slack so that exactly the tolerance passes despite floating point.
    const EPSILON: f64 = 1e-9;
    let gated = [
        (
            Gated::MacroF1,
            "macro-F1",
            candidate.macro_f1,
            current.macro_f1,
            tolerance.macro_f1,
        ),
        (
            Gated::UrgentRecall,
            "urgent recall",
            candidate.urgent_recall,
            current.urgent_recall,
            tolerance.urgent_recall,
        ),
    ];
    let (mut worse, mut noise, mut unpaired) = (Vec::new(), Vec::new(), false);
    for (figure, name, theirs, ours, margin) in gated {
        if theirs + margin + EPSILON >= ours {
            continue;
        }
        let stated = format!("{name} {theirs:.3} vs {ours:.3} (tolerance {margin}");
        let paired = match (&candidate.by_family, &current.by_family) {
            (Some(a), Some(b)) => paired_difference(a, b, figure),
            _ => None,
        };
        match paired {
            Some(d) => {
                let test = format!(
                    "paired over {} families: {:+.3} [{:+.3}, {:+.3}]",
                    d.families, d.diff, d.ci95.low, d.ci95.high
                );
                if d.significantly_worse() {
                    worse.push(format!("{stated}; {test})"));
                } else {
                    noise.push(format!("{stated}; {test}, which includes 0)"));
                }
            }
            None => {
                unpaired = true;
                worse.push(format!("{stated})"));
            }
        }
    }
    if !worse.is_empty() {
        let mut why = format!("worse than the current version: {}", worse.join("; "));
        if unpaired {
            why += " — unpaired: a run was stored without its families' counts (before they \
                    were kept), so the figures alone decide; evaluate both again for a paired test";
        }
        return Verdict::Refused(why);
    }
    if noise.is_empty() {
        Verdict::Pass(None)
    } else {
        Verdict::Pass(Some(format!(
            "no significant difference from the current version: {}",
            noise.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{
        super::metrics::{department, family_table, urgent, Prediction, Scored},
        *,
    };

    fn f(macro_f1: f64, urgent_recall: f64) -> Option<Figures> {
        Some(Figures {
            macro_f1,
            urgent_recall,
            by_family: None,
        })
    }

    /// A run over 40 families of 3 rows (4 departments, none urgent), wrong where `wrong` says.
    fn paired(wrong: fn(usize) -> bool) -> Option<Figures> {
        let labels = ["billing", "technical", "account", "sales"];
        let rows: Vec<Scored> = (0..120)
            .map(|i| {
                let label = labels[(i / 3) % 4];
                Scored {
                    family: format!("f{}", i / 3),
                    department: label.into(),
                    is_urgent: false,
                    predicted: Some(Prediction {
                        department: (if wrong(i) { "general" } else { label }).into(),
                        is_urgent: 0.1,
                    }),
                }
            })
            .collect();
        Some(Figures {
            macro_f1: department(&rows).macro_f1,
            urgent_recall: urgent(&rows, 0.5).recall,
            by_family: Some(family_table(&rows, 0.5)),
        })
    }

    fn unpaired(figures: Option<Figures>) -> Option<Figures> {
        figures.map(|f| Figures {
            by_family: None,
            ..f
        })
    }

    #[test]
    fn the_gate_decides_by_table() {
        let tol = Tolerance::default();
        // Expected: Ok(note the pass carries) or Err(what the refusal says).
        type Case = (
            Option<Figures>,
            Option<Figures>,
            Result<Option<&'static str>, &'static str>,
        );
        let few = paired(|i| i % 30 == 0);
        let other_few = paired(|i| i % 30 == 3 || i % 30 == 15);
        let many = paired(|i| i % 4 == 0);
        let cases: Vec<Case> = vec![
            (f(0.80, 0.90), f(0.80, 0.90), Ok(None)),
            (f(0.85, 0.95), f(0.80, 0.90), Ok(None)),
            // Exactly the tolerance passes; beyond it is refused, figure by figure.
            (f(0.79, 0.88), f(0.80, 0.90), Ok(None)),
            (f(0.78, 0.90), f(0.80, 0.90), Err("macro-F1 0.780 vs 0.800")),
            (
                f(0.80, 0.87),
                f(0.80, 0.90),
                Err("urgent recall 0.870 vs 0.900"),
            ),
            (
                f(0.70, 0.50),
                f(0.80, 0.90),
                Err("macro-F1 0.700 vs 0.800 (tolerance 0.01); urgent recall"),
            ),
            // Runs without families' counts: the figures alone, and the refusal says so.
            (
                f(0.78, 0.90),
                f(0.80, 0.90),
                Err("unpaired: a run was stored without"),
            ),
            (None, f(0.80, 0.90), Err("the candidate has no eval run")),
            (
                f(0.80, 0.90),
                None,
                Err("the current version has no eval run"),
            ),
            (None, None, Err("neither")),
            // Paired over the same families: a loss beyond the tolerance that is noise passes,
            // saying so; one beyond noise is refused with the paired interval.
            (
                other_few.clone(),
                few.clone(),
                Ok(Some(
                    "no significant difference from the current version: macro-F1",
                )),
            ),
            (many.clone(), few.clone(), Err("paired over 40 families: -")),
            // Better, paired or not, passes quietly.
            (few.clone(), many.clone(), Ok(None)),
            // One side stored before families: back to the figures alone.
            (other_few.clone(), unpaired(few.clone()), Err("unpaired")),
        ];
        for (candidate, current, expected) in &cases {
            let verdict = decide(candidate.as_ref(), current.as_ref(), tol);
            match (expected, &verdict) {
                (Ok(None), Verdict::Pass(None)) => {}
                (Ok(Some(note)), Verdict::Pass(Some(said))) if said.contains(note) => {}
                (Err(expected), Verdict::Refused(why)) if why.contains(expected) => {}
                _ => panic!(
                    "{:?} vs {:?}: {verdict:?}, expected {expected:?}",
                    candidate.as_ref().map(|c| (c.macro_f1, c.urgent_recall)),
                    current.as_ref().map(|c| (c.macro_f1, c.urgent_recall)),
                ),
            }
        }
        // The noise case is a loss beyond the tolerance, not a small one.
        let (a, b) = (other_few.unwrap(), few.unwrap());
        assert!(
            a.macro_f1 + tol.macro_f1 < b.macro_f1,
            "{} vs {}",
            a.macro_f1,
            b.macro_f1
        );
    }
}
