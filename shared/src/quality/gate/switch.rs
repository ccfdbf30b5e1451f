//! The gate on a retrain's switch (docs/cascade.md, "Kept fresh"): a pure decision over the
//! candidate classifier and the live one, both judged on the same most recent tickets, which
//! the candidate did not learn from. The candidate passes when its local answers keep the
//! cascade's target precision and it answers locally no fewer of the tickets than the live
//! one, beyond noise. Precision is a promise to the desk, so it is judged only against a truth
//! that is not the large model's answer on the tickets a classifier doubted (the desk's labels
//! and the audit's random sample), and held with confidence: the exact 95% lower bound of the
//! candidate's precision over at least [`MIN_LOCAL_ANSWERS`] such answers must reach the
//! target less [`MARGIN`]. The local share is what the switch is for, so only a loss the paired
//! test finds beyond noise keeps a candidate out.

use serde::Serialize;

use crate::quality::metrics::exact::clopper_pearson;

/// Fewer judged local answers than this (desk-labelled or audited) judge no precision: the
/// candidate is kept out.
pub const MIN_LOCAL_ANSWERS: usize = 100;

/// How far below the target the lower bound may be: a bound held at the target itself would
/// keep out every candidate but a near-perfect one on a few hundred answers; with 0.05, at a 0.9
/// target, a candidate needs about 0.93 over 120 answers or 0.92 over 300 (a point estimate
/// at the target, 0.90 over 150, has a bound of 0.84 and is kept out).
pub const MARGIN: f64 = 0.05;

/// One classifier over the judged window, ticket by ticket in the window's order.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Judged {
    /// For each ticket with a truth of its own (the desk's label, else the large model's
    /// answer): answered locally, and (when so) whether the answer was right.
    #[serde(skip)]
    pub rows: Vec<Option<bool>>,
    /// For every ticket of the window, whoever answered it (a cascade's local answers have no
    /// large model's answer, so they are not among `rows`): whether this one answers it locally.
    #[serde(skip)]
    pub covers: Vec<bool>,
}

impl Judged {
    /// Tickets of the window.
    pub fn n(&self) -> usize {
        self.covers.len()
    }
    /// Local answers with a truth to judge them by.
    pub fn local(&self) -> usize {
        self.rows.iter().filter(|r| r.is_some()).count()
    }
    pub fn right(&self) -> usize {
        self.rows.iter().filter(|r| **r == Some(true)).count()
    }
    /// The share of every ticket of the window it answers locally.
    pub fn local_share(&self) -> f64 {
        ratio(self.covers.iter().filter(|c| **c).count(), self.n())
    }
    /// Of its local answers, the share right; `None` without any.
    pub fn precision(&self) -> Option<f64> {
        (self.local() > 0).then(|| ratio(self.right(), self.local()))
    }
}

/// The gate's answer, with the figures said either way.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Switch(String),
    KeepOut(String),
}

/// `candidate` against `live` over the same rows, for the cascade's `target` precision.
pub fn decide(candidate: &Judged, live: &Judged, target: f64) -> Decision {
    debug_assert_eq!(candidate.n(), live.n(), "judged over the same tickets");
    let figures = format!(
        "of {} tickets, candidate {:.1}% local, precision {} over {} judged; \
         live {:.1}% local, precision {} over {} judged",
        candidate.n(),
        100.0 * candidate.local_share(),
        shown(candidate.precision()),
        candidate.local(),
        100.0 * live.local_share(),
        shown(live.precision()),
        live.local(),
    );
    if candidate.local() < MIN_LOCAL_ANSWERS {
        return Decision::KeepOut(format!(
            "{} local answers in the window with a desk or audit truth judge no precision \
             (at least {MIN_LOCAL_ANSWERS}); {figures}",
            candidate.local()
        ));
    }
    let precision = candidate.precision().unwrap_or(0.0);
    let low = clopper_pearson(candidate.right() as u64, candidate.local() as u64).low;
    if low + 1e-9 < target - MARGIN {
        return Decision::KeepOut(format!(
            "precision {precision:.3}: its exact 95% lower bound {low:.3} is below the target \
             {target} less {MARGIN}; {figures}"
        ));
    }
    let (diff, low, high) = paired_share_difference(candidate, live);
    let test = format!("local share {diff:+.3} [{low:+.3}, {high:+.3}] paired");
    if high < 0.0 {
        return Decision::KeepOut(format!(
            "it answers fewer tickets locally, beyond noise ({test}); {figures}"
        ));
    }
    Decision::Switch(format!("{test}; {figures}"))
}

/// The candidate's local share minus the live one's over the same tickets, with its 95%
/// interval (normal approximation of the paired difference: only tickets where they differ
/// count).
fn paired_share_difference(candidate: &Judged, live: &Judged) -> (f64, f64, f64) {
    let n = candidate.n().max(1) as f64;
    let (mut only_candidate, mut only_live) = (0.0, 0.0);
    for (a, b) in candidate.covers.iter().zip(&live.covers) {
        match (*a, *b) {
            (true, false) => only_candidate += 1.0,
            (false, true) => only_live += 1.0,
            _ => {}
        }
    }
    let diff = (only_candidate - only_live) / n;
    let variance = ((only_candidate + only_live) / n - diff * diff).max(0.0);
    let half = 1.96 * (variance / n).sqrt();
    (diff, diff - half, diff + half)
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn shown(p: Option<f64>) -> String {
    p.map_or("-".to_string(), |p| format!("{p:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` rows: the first `local` answered locally, the first `right` of those right.
    fn judged(n: usize, local: usize, right: usize) -> Judged {
        shifted(n, 0, local, right)
    }

    /// The same from row `start` on: two classifiers differ on which tickets they are sure of.
    /// Every ticket has a truth here.
    fn shifted(n: usize, start: usize, local: usize, right: usize) -> Judged {
        let rows: Vec<Option<bool>> = (0..n)
            .map(|i| {
                (start..start + local)
                    .contains(&i)
                    .then_some(i < start + right)
            })
            .collect();
        let covers = rows.iter().map(Option::is_some).collect();
        Judged { rows, covers }
    }

    #[test]
    fn a_candidate_switches_only_keeping_the_precision_and_the_local_share() {
        let switches = |candidate: &Judged, live: &Judged| {
            matches!(decide(candidate, live, 0.95), Decision::Switch(_))
        };
        let live = judged(1000, 600, 590);
        // Better or the same: switched.
        assert!(switches(&judged(1000, 700, 690), &live));
        assert!(switches(&judged(1000, 600, 590), &live));
        // A little fewer local answers, on tickets partly other than the live one's, is
        // noise; the same ten fewer, on exactly the live one's tickets, is not; many fewer is not.
        assert!(switches(&shifted(1000, 20, 590, 580), &live));
        assert!(!switches(&judged(1000, 590, 580), &live));
        let why = match decide(&judged(1000, 500, 495), &live, 0.95) {
            Decision::KeepOut(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(why.contains("fewer tickets locally, beyond noise"), "{why}");
        // Below the target precision with confidence: kept out, however many it answers.
        let why = match decide(&judged(1000, 900, 800), &live, 0.95) {
            Decision::KeepOut(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(
            why.contains("precision 0.889: its exact 95% lower bound 0.867 is below"),
            "{why}"
        );
        // Too few local answers to judge: kept out, saying so; 30 all right are not enough.
        let why = match decide(&judged(1000, 30, 30), &judged(1000, 10, 10), 0.95) {
            Decision::KeepOut(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(why.contains("30 local answers"), "{why}");
    }

    /// The bound, not the point: at a 0.9 target, 0.90 over 100 answers (bound 0.824) is kept
    /// out, 0.92 over 300 (bound 0.883) passes, and 0.933 over 120 (bound 0.873) passes, where
    /// a point estimate would take the first and a bound at the target itself none of them.
    #[test]
    fn the_switch_is_held_to_the_exact_lower_bound_less_the_margin() {
        let switches = |n: usize, right: usize| {
            let candidate = judged(n, n, right);
            matches!(decide(&candidate, &candidate, 0.9), Decision::Switch(_))
        };
        assert!(!switches(100, 90));
        assert!(switches(300, 276));
        assert!(switches(120, 112));
        assert!(!switches(200, 160));
    }

    #[test]
    fn the_local_share_counts_the_tickets_the_live_cascade_answered_itself() {
        // 1,000 tickets: the live classifier answered the first 600 itself, so only the other
        // 400 have the large model's answer (a truth), and it answers none of those. The
        // candidate answers 100 of those 400 (all right) and 200 of the live one's 600.
        let live = Judged {
            rows: vec![None; 400],
            covers: (0..1000).map(|i| i < 600).collect(),
        };
        let candidate = Judged {
            rows: (0..400).map(|i| (i < 100).then_some(true)).collect(),
            covers: (0..1000)
                .map(|i| i < 200 || (600..700).contains(&i))
                .collect(),
        };
        // On the tickets with a truth alone it would look better (100 against 0); over the
        // window it answers 300 against 600: kept out.
        let why = match decide(&candidate, &live, 0.95) {
            Decision::KeepOut(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(why.contains("fewer tickets locally, beyond noise"), "{why}");
    }
}
