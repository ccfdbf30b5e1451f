//! Fitting the two linear models (a softmax over the departments and a logistic urgency) by
//! AdaGrad on the hashed features: one weight row per bucket, a department column each and
//! the urgency last, so one feature's update touches one short run of memory. The step size
//! adapts per bucket (its row's squared gradients summed), not per weight: a rare word still
//! moves fast and a common one slowly, which is what AdaGrad buys on text, for one square
//! root per feature and an accumulator table a sixth the size of the weights'.
//!
//! Deterministic by construction: each fit visits the examples in an order shuffled by a
//! fixed seed, on one thread, so the same examples give the same weights, bit for bit, on
//! one target (`exp` and `ln` come from the platform's maths library, whose last bits may
//! differ between targets).

use std::collections::HashSet;

use super::{
    calibrate::{self, Calibration, Scored},
    features::{fnv1a, fnv1a_start, FeatureSpec, Features},
    Example, TrainError, MAX_DEPARTMENTS,
};

/// Below this many examples no holdout is spared for calibration (temperature 1).
const MIN_FOR_HOLDOUT: usize = 50;
/// Nor when the holdout would be smaller than this.
const MIN_HOLDOUT: usize = 10;
/// The weight table's budget: the largest bucket count (at most 2^17) that keeps it within
/// this, so an artefact stays well under 5 MB however many departments a policy has.
const TABLE_BYTES: usize = 4 << 20;

/// How the weights were fitted: stored in the artefact, part of what its version stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Hyper {
    pub epochs: u16,
    pub learning_rate: f32,
    /// Applied to a weight whenever its feature is seen: rare buckets, mostly collisions and
    /// one-off words, stay small, frequent ones may grow.
    pub l2: f32,
}

pub(super) const HYPER: Hyper = Hyper {
    epochs: 5,
    learning_rate: 0.3,
    l2: 1e-4,
};

/// The fitted weights: `buckets × (classes + 1)` and one bias per column.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Weights {
    pub classes: usize,
    pub table: Vec<f32>,
    pub bias: Vec<f32>,
}

impl Weights {
    pub fn zeros(classes: usize, buckets: usize) -> Self {
        Self {
            classes,
            table: vec![0.0; buckets * (classes + 1)],
            bias: vec![0.0; classes + 1],
        }
    }

    pub fn stride(&self) -> usize {
        self.classes + 1
    }

    /// The department logits then the urgency logit, into `out` (`classes + 1` long).
    pub fn scores(&self, features: &[(u32, f32)], out: &mut [f32]) {
        let stride = self.stride();
        out.copy_from_slice(&self.bias);
        for &(bucket, x) in features {
            let row = &self.table[bucket as usize * stride..][..stride];
            for (o, w) in out.iter_mut().zip(row) {
                *o += w * x;
            }
        }
    }
}

/// An example checked and resolved to its department's index.
#[derive(Debug, Clone, Copy)]
pub(super) struct Labelled<'a> {
    pub example: &'a Example,
    pub class: usize,
}

/// Checks the set, then fits the calibration on a holdout and the final weights on
/// everything: two independent fits, run side by side when a second thread is to be had
/// (each is sequential and seeded, so the result is the same either way).
pub(super) fn train(
    examples: &[Example],
    departments: &[String],
    hyper: &Hyper,
) -> Result<(FeatureSpec, Calibration, Weights), TrainError> {
    check_departments(departments)?;
    let labelled = label(examples, departments)?;
    let one_side = check_both_sides(&labelled, departments)?;
    let classes = departments.len();
    let spec = feature_spec(classes);
    let calibrate = || {
        let fitted = calibrate_on_holdout(&labelled, departments, &spec, hyper);
        match one_side {
            Some(side) => fitted.with_constant_urgency(side, positive_weight(&labelled)),
            None => fitted,
        }
    };
    let (calibration, weights) = std::thread::scope(|scope| {
        match std::thread::Builder::new().spawn_scoped(scope, calibrate) {
            Ok(holdout) => {
                let weights = fit(&labelled, classes, &spec, hyper);
                let calibration = holdout
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (calibration, weights)
            }
            Err(_) => (calibrate(), fit(&labelled, classes, &spec, hyper)),
        }
    });
    Ok((spec, calibration, weights))
}

fn check_departments(departments: &[String]) -> Result<(), TrainError> {
    if departments.is_empty() {
        return Err(TrainError::NoDepartments);
    }
    if departments.len() > MAX_DEPARTMENTS {
        return Err(TrainError::TooManyDepartments {
            count: departments.len(),
        });
    }
    let mut seen = HashSet::new();
    for department in departments {
        if department.len() > usize::from(u16::MAX) {
            return Err(TrainError::DepartmentTooLong {
                bytes: department.len(),
            });
        }
        if !seen.insert(department) {
            return Err(TrainError::DuplicateDepartment {
                department: department.clone(),
            });
        }
    }
    Ok(())
}

fn label<'a>(
    examples: &'a [Example],
    departments: &[String],
) -> Result<Vec<Labelled<'a>>, TrainError> {
    examples
        .iter()
        .enumerate()
        .map(|(index, example)| {
            let class = departments
                .iter()
                .position(|d| *d == example.department)
                .ok_or_else(|| TrainError::UnknownDepartment {
                    index,
                    department: example.department.clone(),
                })?;
            if !example.weight.is_finite() || example.weight < 0.0 {
                return Err(TrainError::BadWeight {
                    index,
                    weight: example.weight,
                });
            }
            Ok(Labelled { example, class })
        })
        .collect()
}

/// The examples' total positive weight.
fn positive_weight(labelled: &[Labelled<'_>]) -> f64 {
    labelled
        .iter()
        .map(|l| f64::from(l.example.weight))
        .filter(|w| *w > 0.0)
        .sum()
}

/// Some weight on two departments at least; `Some(side)` when every example of positive
/// weight is on one side of urgency (issue 50, item 5: a desk that never sees an urgent ticket
/// can still train, and its classifier says so with the certainty its examples give).
fn check_both_sides(
    labelled: &[Labelled<'_>],
    departments: &[String],
) -> Result<Option<bool>, TrainError> {
    let mut counted = labelled.iter().filter(|l| l.example.weight > 0.0);
    let first = counted.next().ok_or(TrainError::NoExamples)?;
    let mut other_class = false;
    let mut other_side = false;
    for l in counted {
        other_class |= l.class != first.class;
        other_side |= l.example.is_urgent != first.example.is_urgent;
    }
    if !other_class {
        return Err(TrainError::OneDepartment {
            department: departments[first.class].clone(),
        });
    }
    Ok((!other_side).then_some(first.example.is_urgent))
}

/// 2^17 buckets for up to seven departments, fewer beyond, within [`TABLE_BYTES`].
pub(super) fn feature_spec(classes: usize) -> FeatureSpec {
    let row_bytes = (classes + 1) * std::mem::size_of::<f32>();
    let bucket_bits = (12..=17u8)
        .rev()
        .find(|&bits| (row_bytes << bits) <= TABLE_BYTES)
        .unwrap_or(12);
    FeatureSpec {
        bucket_bits,
        char_min: 3,
        char_max: 5,
        char_weight: 0.4,
        normalise: true,
    }
}

/// Fits a model on about 80% of the examples, scores the rest, and fits the calibration to
/// those scores; the final model, trained on everything, keeps it. The identity when the
/// set is too small to spare a holdout, or what remains could not train.
fn calibrate_on_holdout(
    labelled: &[Labelled<'_>],
    departments: &[String],
    spec: &FeatureSpec,
    hyper: &Hyper,
) -> Calibration {
    let classes = departments.len();
    if labelled.len() < MIN_FOR_HOLDOUT {
        return Calibration::IDENTITY;
    }
    let (held, rest): (Vec<Labelled<'_>>, Vec<Labelled<'_>>) =
        labelled.iter().partition(|l| in_holdout(l.example));
    let held: Vec<Labelled<'_>> = held
        .into_iter()
        .filter(|l| l.example.weight > 0.0)
        .collect();
    if held.len() < MIN_HOLDOUT || check_both_sides(&rest, departments).is_err() {
        return Calibration::IDENTITY;
    }
    let weights = fit(&rest, classes, spec, hyper);
    let mut features = Features::default();
    let mut scores = vec![0.0f32; classes + 1];
    let scored: Vec<Scored> = held
        .iter()
        .map(|l| {
            weights.scores(
                features.extract(spec, &l.example.subject, &l.example.message),
                &mut scores,
            );
            Scored {
                department_logits: scores[..classes].to_vec(),
                urgent_logit: scores[classes],
                class: l.class,
                is_urgent: l.example.is_urgent,
                weight: l.example.weight,
            }
        })
        .collect();
    calibrate::fit(&scored)
}

/// Fits the weights to `examples` (zero-weight ones are skipped).
fn fit(examples: &[Labelled<'_>], classes: usize, spec: &FeatureSpec, hyper: &Hyper) -> Weights {
    let mut weights = Weights::zeros(classes, spec.buckets());
    let stride = weights.stride();
    // AdaGrad's running sums of squared gradients, started just above zero so the first step
    // of a vanishing gradient cannot divide by zero.
    let mut row_g2 = vec![1e-8f32; spec.buckets()];
    let mut bias_g2 = vec![1e-8f32; stride];
    let mut order: Vec<usize> = (0..examples.len())
        .filter(|&i| examples[i].example.weight > 0.0)
        .collect();
    let mut rng = SplitMix64(0x7472_6961_6765_2d6c); // "triage-l"
    let mut features = Features::default();
    let mut scores = vec![0.0f32; stride];
    let mut gradient = vec![0.0f32; stride];
    let lr = hyper.learning_rate;
    for _ in 0..hyper.epochs {
        rng.shuffle(&mut order);
        for &i in &order {
            let Labelled { example, class } = examples[i];
            let x = features.extract(spec, &example.subject, &example.message);
            weights.scores(x, &mut scores);
            softmax_f32(&mut scores[..classes]);
            for (k, g) in gradient[..classes].iter_mut().enumerate() {
                *g = example.weight * (scores[k] - f32::from(u8::from(k == class)));
            }
            gradient[classes] = example.weight
                * (sigmoid_f32(scores[classes]) - f32::from(u8::from(example.is_urgent)));
            for &(bucket, value) in x {
                let row = &mut weights.table[bucket as usize * stride..][..stride];
                let mut squares = 0.0;
                for (w, g) in row.iter().zip(&gradient) {
                    let step = g * value + hyper.l2 * w;
                    squares += step * step;
                }
                let g2 = &mut row_g2[bucket as usize];
                *g2 += squares;
                let rate = lr / g2.sqrt();
                for (w, g) in row.iter_mut().zip(&gradient) {
                    *w -= rate * (g * value + hyper.l2 * *w);
                }
            }
            for ((b, g2), g) in weights.bias.iter_mut().zip(&mut bias_g2).zip(&gradient) {
                *g2 += g * g;
                *b -= lr * g / g2.sqrt();
            }
        }
    }
    weights
}

/// Whether an example is in the calibration holdout: about one in five, decided by its text
/// alone, so the split does not depend on order and a duplicated ticket stays on one side.
fn in_holdout(example: &Example) -> bool {
    let hash = fnv1a(fnv1a_start(b'h'), example.subject.as_bytes());
    let hash = fnv1a(fnv1a(hash, b"\n"), example.message.as_bytes());
    SplitMix64(hash).next_u64().is_multiple_of(5)
}

fn softmax_f32(logits: &mut [f32]) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for l in logits.iter_mut() {
        *l = (*l - max).exp();
        sum += *l;
    }
    logits.iter_mut().for_each(|l| *l /= sum);
}

fn sigmoid_f32(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

/// splitmix64 (Steele, Lea and Flood): a tiny, fixed PRNG, so the shuffle is the same on
/// every run and every build.
#[derive(Debug, Clone)]
pub(super) struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; its bias is below 2^-32 for our sizes).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_its_reference_and_shuffles_the_same_way_twice() {
        // The reference implementation's first outputs from seed 0.
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let shuffled = |seed| {
            let mut items: Vec<u32> = (0..50).collect();
            SplitMix64(seed).shuffle(&mut items);
            items
        };
        assert_eq!(shuffled(7), shuffled(7));
        assert_ne!(shuffled(7), shuffled(8));
        let mut sorted = shuffled(7);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
    }
}
