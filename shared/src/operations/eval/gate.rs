//! The quality gate on `promote` (docs/quality.md): a pure decision over the newest eval runs
//! of the candidate and of the current version on the `test` split of the configured set.

use serde::Serialize;

use crate::config::Tolerance;

/// The gated figures of one version's run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figures {
    pub macro_f1: f64,
    pub urgent_recall: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Pass,
    /// Why, with both versions' figures, for the operator.
    Refused(String),
}

/// `candidate` passes when it was evaluated, the current version was too, and neither figure
/// is worse than the current one's by more than `tolerance` allows.
pub fn decide(
    candidate: Option<Figures>,
    current: Option<Figures>,
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
    let mut worse = Vec::new();
    if candidate.macro_f1 + tolerance.macro_f1 + EPSILON < current.macro_f1 {
        worse.push(format!(
            "macro-F1 {:.3} vs {:.3} (tolerance {})",
            candidate.macro_f1, current.macro_f1, tolerance.macro_f1
        ));
    }
    if candidate.urgent_recall + tolerance.urgent_recall + EPSILON < current.urgent_recall {
        worse.push(format!(
            "urgent recall {:.3} vs {:.3} (tolerance {})",
            candidate.urgent_recall, current.urgent_recall, tolerance.urgent_recall
        ));
    }
    if worse.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Refused(format!(
            "worse than the current version: {}",
            worse.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(macro_f1: f64, urgent_recall: f64) -> Option<Figures> {
        Some(Figures {
            macro_f1,
            urgent_recall,
        })
    }

    #[test]
    fn the_gate_decides_by_table() {
        let tol = Tolerance::default();
        let cases: &[(Option<Figures>, Option<Figures>, Option<&str>)] = &[
            (f(0.80, 0.90), f(0.80, 0.90), None),
            (f(0.85, 0.95), f(0.80, 0.90), None),
            // Exactly the tolerance passes; beyond it is refused, figure by figure.
            (f(0.79, 0.88), f(0.80, 0.90), None),
            (
                f(0.78, 0.90),
                f(0.80, 0.90),
                Some("macro-F1 0.780 vs 0.800"),
            ),
            (
                f(0.80, 0.87),
                f(0.80, 0.90),
                Some("urgent recall 0.870 vs 0.900"),
            ),
            (
                f(0.70, 0.50),
                f(0.80, 0.90),
                Some("macro-F1 0.700 vs 0.800 (tolerance 0.01); urgent recall"),
            ),
            (None, f(0.80, 0.90), Some("the candidate has no eval run")),
            (
                f(0.80, 0.90),
                None,
                Some("the current version has no eval run"),
            ),
            (None, None, Some("neither")),
        ];
        for (candidate, current, refused) in cases {
            let verdict = decide(*candidate, *current, tol);
            match (refused, &verdict) {
                (None, Verdict::Pass) => {}
                (Some(expected), Verdict::Refused(why)) if why.contains(expected) => {}
                _ => panic!("{candidate:?} vs {current:?}: {verdict:?}, expected {refused:?}"),
            }
        }
    }
}
