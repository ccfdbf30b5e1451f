//! A target, not a threshold (issue 39, item 2; docs/cascade.md, "A target precision"): the
//! operator says how precise local answers must be (say 0.97), and the thresholds that keep
//! it are derived from the examples by **cross-fitting**: the examples fall into [`FOLDS`]
//! folds by a hash of their text (deterministic), a classifier is trained on all folds but
//! one and answers the one it left out, so every example has an out-of-fold answer and
//! confidence from a classifier that never saw it. Then, per department the classifier
//! answered, the lowest threshold whose local answers' precision keeps the target with 95%
//! confidence (the one-sided Wilson lower bound, [`wilson_lower`]), and one global threshold
//! for the departments with too few answers of their own ([`choose`]). Pure: the same
//! examples and target give the same thresholds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Example, LocalModel};

/// Folds of the cross-fit: each classifier learns from four fifths.
pub const FOLDS: u32 = 5;
/// Out-of-fold answers a department needs for a threshold of its own; fewer take the global.
pub const MIN_SUPPORT: usize = 20;
/// One-sided 95%: the precision is at least the target with 95% confidence.
const Z: f64 = 1.645;

/// One answer judged: the department answered, how sure, and whether it was right.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub department: String,
    pub confidence: f64,
    pub right: bool,
}

/// One point of a risk–coverage curve: at `threshold`, the share answered locally and the
/// precision of those answers (`None` when none is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub threshold: f64,
    pub coverage: f64,
    pub precision: Option<f64>,
    pub local: usize,
}

/// The thresholds derived for a target, with what they keep out of fold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// The precision local answers must keep (`p0.97` in a cascade).
    pub target: f64,
    /// For departments without a threshold of their own; `None`: never answered locally.
    pub global: Option<f64>,
    /// Departments with enough out-of-fold answers: their own threshold (`None`: never local).
    pub departments: BTreeMap<String, Option<f64>>,
    pub folds: u32,
    /// Examples answered out of fold.
    pub rows: usize,
    /// Out of fold, under these thresholds: the share answered locally and its precision.
    pub coverage: f64,
    pub precision: Option<f64>,
    /// Out of fold, one global threshold at a time (0 to 1 by 0.05).
    pub curve: Vec<CurvePoint>,
}

impl Thresholds {
    /// The threshold an answer of `department` must reach; `None`: it is never local.
    pub fn for_department(&self, department: &str) -> Option<f64> {
        match self.departments.get(department) {
            Some(own) => *own,
            None => self.global,
        }
    }

    /// Whether an answer of `department` at `confidence` is given locally.
    pub fn answers(&self, department: &str, confidence: f64) -> bool {
        self.for_department(department)
            .is_some_and(|threshold| confidence >= threshold)
    }
}

/// The lower end of the one-sided 95% Wilson interval of `k` right out of `n`.
pub fn wilson_lower(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = Z * Z;
    let centre = p + z2 / (2.0 * n);
    let spread = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - spread) / (1.0 + z2 / n)).max(0.0)
}

/// The lowest threshold (a confidence of `rows`) whose answers at or above it keep `target`
/// by the Wilson lower bound; `None` when none does.
fn lowest_keeping(rows: &[&Judged], target: f64) -> Option<f64> {
    let mut sorted: Vec<&Judged> = rows.to_vec();
    sorted.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let (mut right, mut lowest) = (0, None);
    for (i, row) in sorted.iter().enumerate() {
        right += usize::from(row.right);
        // Ties enter together: a threshold takes every answer at its confidence.
        let last_of_tie = sorted
            .get(i + 1)
            .is_none_or(|next| next.confidence < row.confidence);
        if last_of_tie && wilson_lower(right, i + 1) >= target {
            lowest = Some(row.confidence);
        }
    }
    lowest
}

/// The risk–coverage curve of `rows` under one threshold at a time, 0 to 1 by 0.05.
pub fn curve(rows: &[Judged]) -> Vec<CurvePoint> {
    (0..=20)
        .map(|k| {
            let threshold = f64::from(k) / 20.0;
            point(rows, threshold, |row| row.confidence >= threshold)
        })
        .collect()
}

fn point(rows: &[Judged], threshold: f64, local: impl Fn(&Judged) -> bool) -> CurvePoint {
    let (mut n, mut right) = (0, 0);
    for row in rows.iter().filter(|row| local(row)) {
        n += 1;
        right += usize::from(row.right);
    }
    CurvePoint {
        threshold,
        coverage: if rows.is_empty() {
            0.0
        } else {
            n as f64 / rows.len() as f64
        },
        precision: (n > 0).then(|| right as f64 / n as f64),
        local: n,
    }
}

/// The thresholds keeping `target` on the out-of-fold answers `rows`: a department with at
/// least [`MIN_SUPPORT`] answers gets its own threshold when one keeps the target; otherwise
/// it takes the global one (derived the same way on every row) if it has too few answers to
/// tell, or if its own answers at the global threshold are at least `target` precise; else it
/// is never answered locally.
pub fn choose(rows: &[Judged], target: f64, folds: u32) -> Thresholds {
    let all: Vec<&Judged> = rows.iter().collect();
    let global = lowest_keeping(&all, target);
    let mut by_department: BTreeMap<&str, Vec<&Judged>> = BTreeMap::new();
    for row in rows {
        by_department.entry(&row.department).or_default().push(row);
    }
    let mut departments = BTreeMap::new();
    for (department, answered) in by_department {
        if answered.len() < MIN_SUPPORT {
            continue;
        }
        let own = lowest_keeping(&answered, target).or_else(|| {
            let at_global: Vec<&&Judged> = answered
                .iter()
                .filter(|r| global.is_some_and(|g| r.confidence >= g))
                .collect();
            let right = at_global.iter().filter(|r| r.right).count();
            let kept = !at_global.is_empty() && right as f64 >= target * at_global.len() as f64;
            global.filter(|_| kept || at_global.is_empty())
        });
        departments.insert(department.to_string(), own);
    }
    let mut thresholds = Thresholds {
        target,
        global,
        departments,
        folds,
        rows: rows.len(),
        coverage: 0.0,
        precision: None,
        curve: curve(rows),
    };
    let kept = point(rows, f64::NAN, |row| {
        thresholds.answers(&row.department, row.confidence)
    });
    thresholds.coverage = kept.coverage;
    thresholds.precision = kept.precision;
    thresholds
}

/// The fold of an example: a hash of its text (FNV-1a), so duplicates share one.
fn fold_of(example: &Example, folds: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in example
        .subject
        .bytes()
        .chain([0])
        .chain(example.message.bytes())
    {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(folds)) as u32
}

/// Every example answered by a classifier trained on the other folds (a fold whose others
/// cannot train one, too few or one-sided, is left out).
pub fn out_of_fold(examples: &[Example], departments: &[String], folds: u32) -> Vec<Judged> {
    let fold: Vec<u32> = examples.iter().map(|e| fold_of(e, folds)).collect();
    let mut judged = Vec::with_capacity(examples.len());
    for k in 0..folds {
        let train: Vec<Example> = examples
            .iter()
            .zip(&fold)
            .filter(|(_, f)| **f != k)
            .map(|(e, _)| e.clone())
            .collect();
        let Ok(model) = LocalModel::train(&train, departments) else {
            continue;
        };
        for (example, _) in examples.iter().zip(&fold).filter(|(_, f)| **f == k) {
            let answer = model.predict(&example.subject, &example.message);
            judged.push(Judged {
                right: answer.department == example.department,
                department: answer.department,
                confidence: answer.confidence,
            });
        }
    }
    judged
}

/// [`out_of_fold`] then [`choose`]: the thresholds for `target` from `examples`.
pub fn derive(examples: &[Example], departments: &[String], target: f64) -> Thresholds {
    choose(&out_of_fold(examples, departments, FOLDS), target, FOLDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(department: &str, confidence: f64, right: bool) -> Judged {
        Judged {
            department: department.into(),
            confidence,
            right,
        }
    }

    #[test]
    fn the_wilson_bound_asks_for_support_before_it_trusts_a_perfect_record() {
        assert_eq!(wilson_lower(0, 0), 0.0);
        // 10 of 10 right is not yet 90% with confidence; 100 of 100 is 97%.
        assert!(wilson_lower(10, 10) < 0.9);
        assert!(wilson_lower(100, 100) > 0.97);
        assert!(wilson_lower(50, 100) < 0.5);
    }

    #[test]
    fn a_reliable_department_gets_a_lower_threshold_than_a_shaky_one_and_a_rare_one_the_global() {
        let mut rows = Vec::new();
        // billing: right whatever the confidence, 200 answers from 0.40 up.
        for i in 0..200 {
            rows.push(judged("billing", 0.40 + f64::from(i) * 0.003, true));
        }
        // technical: wrong below 0.80, right above.
        for i in 0..200 {
            let confidence = 0.40 + f64::from(i) * 0.003;
            rows.push(judged("technical", confidence, confidence >= 0.80));
        }
        // sales: 5 answers, too few to tell.
        for i in 0..5 {
            rows.push(judged("sales", 0.95 + f64::from(i) * 0.01, true));
        }
        let t = choose(&rows, 0.95, FOLDS);
        let billing = t.for_department("billing").unwrap();
        let technical = t.for_department("technical").unwrap();
        assert!((billing - 0.40).abs() < 1e-9, "{t:?}");
        assert!(technical >= 0.80, "{t:?}");
        assert!(!t.departments.contains_key("sales"));
        assert_eq!(t.for_department("sales"), t.global);
        assert!(t.precision.unwrap() >= 0.95, "{t:?}");
        // A department whose answers never keep the target is never local.
        let never: Vec<Judged> = (0..50)
            .map(|i| judged("account", 0.99, i % 2 == 0))
            .collect();
        let t = choose(&never, 0.9, FOLDS);
        assert_eq!((t.global, t.for_department("account")), (None, None));
        assert_eq!(t.coverage, 0.0);
    }

    #[test]
    fn the_curve_runs_from_every_answer_local_to_none() {
        let rows: Vec<Judged> = (0..10)
            .map(|i| judged("billing", f64::from(i) / 10.0, i >= 5))
            .collect();
        let c = curve(&rows);
        assert_eq!(c.len(), 21);
        assert_eq!((c[0].coverage, c[0].precision), (1.0, Some(0.5)));
        assert_eq!((c[20].coverage, c[20].precision), (0.0, None));
    }
}
