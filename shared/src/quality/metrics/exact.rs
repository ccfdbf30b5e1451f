//! The exact (Clopper-Pearson) interval of a share: the bounds are quantiles of Beta
//! distributions, so the interval covers the true share with at least the stated confidence
//! for every `n`, small ones included. That is what a decision taken on few answers needs (a
//! cascade suspended on its first dozen audits, a switch over a hundred labels); Wilson's
//! interval is narrower and can undercover there.

use super::Interval;

/// The two-sided 95% Clopper-Pearson interval for `k` successes in `n` (`[0, 1]` for none).
pub fn clopper_pearson(k: u64, n: u64) -> Interval {
    const ALPHA: f64 = 0.05;
    let k = k.min(n);
    if n == 0 {
        return Interval {
            low: 0.0,
            high: 1.0,
        };
    }
    let (kf, nf) = (k as f64, n as f64);
    let low = if k == 0 {
        0.0
    } else {
        beta_quantile(ALPHA / 2.0, kf, nf - kf + 1.0)
    };
    let high = if k == n {
        1.0
    } else {
        beta_quantile(1.0 - ALPHA / 2.0, kf + 1.0, nf - kf)
    };
    Interval { low, high }
}

/// The `q` quantile of Beta(a, b), by bisection on the regularized incomplete beta function
/// (monotone in x): 60 halvings are below f64's resolution on [0, 1].
fn beta_quantile(q: f64, a: f64, b: f64) -> f64 {
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    for _ in 0..60 {
        let mid = 0.5 * (low + high);
        if incomplete_beta(mid, a, b) < q {
            low = mid;
        } else {
            high = mid;
        }
    }
    0.5 * (low + high)
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's
/// method), on the side where it converges fast.
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * continued_fraction(x, a, b) / a
    } else {
        1.0 - front * continued_fraction(1.0 - x, b, a) / b
    }
}

fn continued_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let tiny = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / tiny(1.0 - (a + b) * x / (a + 1.0));
    let mut f = d;
    for m in 1..=300 {
        let m = m as f64;
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / tiny(1.0 + even * d);
        c = tiny(1.0 + even / c);
        f *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / tiny(1.0 + odd * d);
        c = tiny(1.0 + odd / c);
        let step = d * c;
        f *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    f
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9): about 15 significant digits.
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = G[1..]
        .iter()
        .enumerate()
        .fold(G[0], |sum, (i, g)| sum + g / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Closed forms: at k = 0 the upper bound is 1 - (α/2)^(1/n), at k = n the lower one
    /// (α/2)^(1/n), and k = 1 of 2 is 1 - √0.975; 5 of 10 is R's `binom.test(5, 10)`.
    #[test]
    fn clopper_pearson_matches_the_closed_forms() {
        let table: [(u64, u64, f64, f64); 4] = [
            (0, 10, 0.0, 1.0 - 0.025_f64.powf(0.1)),
            (10, 10, 0.025_f64.powf(0.1), 1.0),
            (1, 2, 1.0 - 0.975_f64.sqrt(), 0.975_f64.sqrt()),
            (5, 10, 0.187_086_0, 0.812_914_0),
        ];
        for (k, n, low, high) in table {
            let got = clopper_pearson(k, n);
            assert!(
                (got.low - low).abs() < 1e-6,
                "{k}/{n}: low {} != {low}",
                got.low
            );
            assert!(
                (got.high - high).abs() < 1e-6,
                "{k}/{n}: high {} != {high}",
                got.high
            );
        }
    }

    /// The bounds' definition, by direct summation of the binomial: at the upper bound,
    /// P(X <= k) = α/2; at the lower bound, P(X >= k) = α/2.
    #[test]
    fn clopper_pearson_bounds_leave_2_5_percent_in_each_tail() {
        let cdf = |k: u64, n: u64, p: f64| -> f64 {
            let mut term = (1.0 - p).powi(n as i32);
            let mut sum = term;
            for i in 1..=k {
                term *= (n - i + 1) as f64 / i as f64 * p / (1.0 - p);
                sum += term;
            }
            sum
        };
        for (k, n) in [(95, 100), (90, 100), (1, 30), (130, 140), (17, 40)] {
            let got = clopper_pearson(k, n);
            let upper_tail = cdf(k, n, got.high);
            let lower_tail = 1.0 - cdf(k - 1, n, got.low);
            assert!((upper_tail - 0.025).abs() < 1e-7, "{k}/{n}: {upper_tail}");
            assert!((lower_tail - 0.025).abs() < 1e-7, "{k}/{n}: {lower_tail}");
        }
    }

    #[test]
    fn no_answers_say_nothing() {
        let got = clopper_pearson(0, 0);
        assert_eq!((got.low, got.high), (0.0, 1.0));
    }

    /// Exact bounds are wider than Wilson's, most of all at the edges where decisions are
    /// taken on few answers.
    #[test]
    fn exact_bounds_enclose_wilsons_at_the_edge() {
        let exact = clopper_pearson(30, 30);
        let wilson = super::super::intervals::wilson(30, 30);
        assert!(exact.low < wilson.low, "{} vs {}", exact.low, wilson.low);
    }
}
