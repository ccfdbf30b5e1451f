//! Calibration: a model fitted for several epochs is sure of itself beyond what it has
//! earned, and a cascade's threshold reads its probabilities literally. So the scores are
//! rescaled on tickets the model did not see: one temperature for the department softmax
//! (Guo et al. 2017) and Platt's scaling for urgency, both fitted by minimising the held-out
//! log loss, which makes a stated 0.9 right nine times in ten.

/// How raw scores become probabilities.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Calibration {
    /// Department logits are divided by it.
    pub temperature: f32,
    /// P(urgent) = σ(scale · z + shift) for the urgency logit z.
    pub urgent_scale: f32,
    pub urgent_shift: f32,
}

impl Calibration {
    /// The raw scores, for a set too small to hold any out.
    pub const IDENTITY: Self = Self {
        temperature: 1.0,
        urgent_scale: 1.0,
        urgent_shift: 0.0,
    };

    /// The same, with P(urgent) a constant: `side` for every example of `weight` in all, so
    /// Laplace's `(weight + 1) / (weight + 2)` for that side, whatever the ticket says.
    pub fn with_constant_urgency(self, side: bool, weight: f64) -> Self {
        let unseen = 1.0 / (weight + 2.0);
        let p = if side { 1.0 - unseen } else { unseen };
        Self {
            urgent_scale: 0.0,
            urgent_shift: (p / (1.0 - p)).ln() as f32,
            ..self
        }
    }

    /// Whether urgency was learnt (not a constant: [`Self::with_constant_urgency`]).
    pub fn learnt_urgency(&self) -> bool {
        self.urgent_scale != 0.0
    }
}

/// One held-out ticket's raw scores and labels.
pub(super) struct Scored {
    pub department_logits: Vec<f32>,
    pub urgent_logit: f32,
    pub class: usize,
    pub is_urgent: bool,
    pub weight: f32,
}

pub(super) fn fit(holdout: &[Scored]) -> Calibration {
    Calibration {
        temperature: (1.0 / fit_inverse_temperature(holdout)) as f32,
        ..fit_platt(holdout)
    }
}

/// β minimising Σ w·(logsumexp(β·l) − β·l_y): convex in β, so a golden-section search over
/// [1/20, 20] finds it.
fn fit_inverse_temperature(holdout: &[Scored]) -> f64 {
    let loss = |beta: f64| -> f64 {
        holdout
            .iter()
            .map(|s| {
                let scaled = s.department_logits.iter().map(|&l| beta * f64::from(l));
                let max = scaled.clone().fold(f64::NEG_INFINITY, f64::max);
                let log_sum = max + scaled.map(|l| (l - max).exp()).sum::<f64>().ln();
                f64::from(s.weight) * (log_sum - beta * f64::from(s.department_logits[s.class]))
            })
            .sum()
    };
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut low, mut high) = (0.05f64, 20.0f64);
    for _ in 0..80 {
        let a = high - ratio * (high - low);
        let b = low + ratio * (high - low);
        if loss(a) <= loss(b) {
            high = b;
        } else {
            low = a;
        }
    }
    (low + high) / 2.0
}

/// Platt's (a, b) by Newton's method with step halving, on his smoothed targets
/// ((N₊ + 1)/(N₊ + 2) and 1/(N₋ + 2)), so a small holdout cannot make it certain. The scale
/// is kept positive: more urgent-looking never means less likely urgent.
fn fit_platt(holdout: &[Scored]) -> Calibration {
    let positives: f64 = holdout
        .iter()
        .filter(|s| s.is_urgent)
        .map(|s| f64::from(s.weight))
        .sum();
    let negatives: f64 = holdout
        .iter()
        .filter(|s| !s.is_urgent)
        .map(|s| f64::from(s.weight))
        .sum();
    let (high, low) = (
        (positives + 1.0) / (positives + 2.0),
        1.0 / (negatives + 2.0),
    );
    let points: Vec<(f64, f64, f64)> = holdout
        .iter()
        .map(|s| {
            let target = if s.is_urgent { high } else { low };
            (f64::from(s.urgent_logit), target, f64::from(s.weight))
        })
        .collect();
    let loss = |a: f64, b: f64| -> f64 {
        points
            .iter()
            .map(|&(z, t, w)| {
                let u = a * z + b;
                // log(1 + e^u) − t·u, stably.
                w * (u.max(0.0) + (-u.abs()).exp().ln_1p() - t * u)
            })
            .sum()
    };
    let (mut a, mut b) = (1.0f64, 0.0f64);
    let mut current = loss(a, b);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-9, 0.0, 1e-9);
        for &(z, t, w) in &points {
            let p = 1.0 / (1.0 + (-(a * z + b)).exp());
            let d = w * (p - t);
            let h = w * p * (1.0 - p);
            ga += d * z;
            gb += d;
            haa += h * z * z;
            hab += h * z;
            hbb += h;
        }
        let det = haa * hbb - hab * hab;
        if det.abs() < 1e-300 {
            break;
        }
        let (da, db) = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det);
        let mut step = 1.0;
        let mut improved = false;
        while step > 1e-10 {
            let candidate = loss(a - step * da, b - step * db);
            if candidate < current {
                a -= step * da;
                b -= step * db;
                improved = current - candidate > 1e-12 * current.abs().max(1.0);
                current = candidate;
                break;
            }
            step /= 2.0;
        }
        if !improved {
            break;
        }
    }
    Calibration {
        temperature: 1.0,
        urgent_scale: a.clamp(1e-3, 1e3) as f32,
        urgent_shift: b.clamp(-50.0, 50.0) as f32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(logits: [f32; 2], class: usize, urgent_logit: f32, is_urgent: bool) -> Scored {
        Scored {
            department_logits: logits.to_vec(),
            urgent_logit,
            class,
            is_urgent,
            weight: 1.0,
        }
    }

    #[test]
    fn an_overconfident_model_is_cooled_and_an_honest_one_is_left_alone() {
        // Logit gap 6 (p ≈ 0.9975) but right only 3 times in 4: the temperature must rise.
        let overconfident: Vec<Scored> = (0..400)
            .map(|i| scored([6.0, 0.0], usize::from(i % 4 == 0), 4.0, i % 4 != 0))
            .collect();
        let calibration = fit(&overconfident);
        let p = 1.0 / (1.0 + (-6.0 / f64::from(calibration.temperature)).exp());
        assert!((p - 0.75).abs() < 0.01, "{p}");
        let urgent = 1.0
            / (1.0
                + (-(f64::from(calibration.urgent_scale) * 4.0
                    + f64::from(calibration.urgent_shift)))
                .exp());
        assert!((urgent - 0.75).abs() < 0.01, "{urgent}");

        // Gap ln 3 (p = 0.75) and right 3 times in 4: nothing to correct.
        let honest: Vec<Scored> = (0..400)
            .map(|i| scored([3f32.ln(), 0.0], usize::from(i % 4 == 0), 0.0, i % 2 == 0))
            .collect();
        let calibration = fit(&honest);
        assert!((calibration.temperature - 1.0).abs() < 0.01);
    }
}
