use super::{
    synthetic::{self, departments, Recipe},
    *,
};
use std::time::Instant;

fn report(model: &LocalModel, test: &[Example]) {
    let (mut d, mut u, mut both) = (0, 0, 0);
    let mut bands = [(0.0f64, 0.0f64, 0usize); 10];
    let mut nll = 0.0;
    for t in test {
        let a = model.predict(&t.subject, &t.message);
        let dr = a.department == t.department;
        let ur = (a.urgent_p >= 0.5) == t.is_urgent;
        d += dr as usize;
        u += ur as usize;
        both += (dr && ur) as usize;
        let b = &mut bands[((a.confidence * 10.0) as usize).min(9)];
        b.0 += a.confidence;
        b.1 += (dr && ur) as u8 as f64;
        b.2 += 1;
        let (p, up) = model.probabilities(&t.subject, &t.message);
        let k = model
            .departments
            .iter()
            .position(|x| *x == t.department)
            .unwrap();
        nll += -p[k].max(1e-12).ln()
            - if t.is_urgent {
                up.max(1e-12).ln()
            } else {
                (1.0 - up).max(1e-12).ln()
            };
    }
    let n = test.len() as f64;
    let ece: f64 = bands.iter().map(|b| (b.0 - b.1).abs() / n).sum();
    eprintln!(
        "cal {:?} dept {:.3} urg {:.3} both {:.3} ece {:.3} nll {:.3}",
        model.calibration,
        d as f64 / n,
        u as f64 / n,
        both as f64 / n,
        ece,
        nll / n
    );
    for (i, b) in bands.iter().enumerate() {
        if b.2 > 0 {
            eprintln!(
                "  band {i}: n {} stated {:.3} right {:.3}",
                b.2,
                b.0 / b.2 as f64,
                b.1 / b.2 as f64
            );
        }
    }
}

#[test]
#[ignore]
fn diagnose() {
    let model = LocalModel::train(
        &synthetic::tickets(3000, 1, Recipe::default()),
        &departments(),
    )
    .unwrap();
    report(
        &model,
        &synthetic::tickets(
            1000,
            2,
            Recipe {
                typos: 0.12,
                ..Recipe::default()
            },
        ),
    );
    let recipe = Recipe {
        noise: 0.05,
        ambiguous: 0.25,
        typos: 0.0,
    };
    let model = LocalModel::train(&synthetic::tickets(5000, 3, recipe), &departments()).unwrap();
    report(
        &model,
        &synthetic::tickets(
            4000,
            4,
            Recipe {
                typos: 0.05,
                ..recipe
            },
        ),
    );
}

#[test]
#[ignore]
fn timing() {
    let recipe = Recipe {
        noise: 0.05,
        ambiguous: 0.25,
        typos: 0.05,
    };
    let examples = synthetic::tickets(100_000, 5, recipe);
    let bytes: usize = examples
        .iter()
        .map(|e| e.subject.len() + e.message.len())
        .sum();
    eprintln!("mean ticket bytes {}", bytes / examples.len());
    let start = Instant::now();
    let model = LocalModel::train(&examples, &departments()).unwrap();
    eprintln!("train 100k: {:?}", start.elapsed());
    eprintln!(
        "artefact {} bytes, version {}",
        model.to_bytes().len(),
        model.version()
    );
    let test = synthetic::tickets(10_000, 6, recipe);
    let start = Instant::now();
    let mut sink = 0.0;
    for t in &test {
        sink += model.predict(&t.subject, &t.message).confidence;
    }
    eprintln!(
        "predict: {:?} each ({sink})",
        start.elapsed() / test.len() as u32
    );
    let long = "My invoice is wrong and I was charged twice. ".repeat(200);
    let start = Instant::now();
    for _ in 0..100 {
        sink += model.predict("Refund", &long).confidence;
    }
    eprintln!(
        "predict on {} bytes: {:?} each ({sink})",
        long.len(),
        start.elapsed() / 100
    );
    report(&model, &test);
}

pub(super) fn long_tickets(count: usize, seed: u64, recipe: Recipe) -> Vec<Example> {
    let a = synthetic::tickets(count, seed, recipe);
    let b = synthetic::tickets(count, seed + 1000, recipe);
    a.into_iter()
        .zip(b)
        .map(|(mut x, y)| {
            x.message = format!("{} {}", x.message, y.message);
            x
        })
        .collect()
}

#[test]
#[ignore]
fn timing_parts() {
    let recipe = Recipe {
        noise: 0.05,
        ambiguous: 0.25,
        typos: 0.05,
    };
    let examples = long_tickets(100_000, 5, recipe);
    let bytes: usize = examples
        .iter()
        .map(|e| e.subject.len() + e.message.len())
        .sum();
    eprintln!("mean ticket bytes {}", bytes / examples.len());
    let spec = train::feature_spec(5);
    let mut f = features::Features::default();
    let start = Instant::now();
    let mut n = 0;
    for e in &examples {
        n += f.extract(&spec, &e.subject, &e.message).len();
    }
    eprintln!(
        "extract 100k: {:?}, mean features {}",
        start.elapsed(),
        n / examples.len()
    );
    let start = Instant::now();
    let model = LocalModel::train(&examples, &departments()).unwrap();
    eprintln!("train 100k: {:?}", start.elapsed());
    let start = Instant::now();
    let mut sink = 0.0;
    for t in &examples[..10000] {
        sink += model.predict(&t.subject, &t.message).confidence;
    }
    eprintln!("predict: {:?} each ({sink})", start.elapsed() / 10000);
}

#[test]
#[ignore]
fn sweep() {
    let clean_train = synthetic::tickets(3000, 1, Recipe::default());
    let clean_test = synthetic::tickets(
        1000,
        2,
        Recipe {
            typos: 0.12,
            ..Recipe::default()
        },
    );
    let recipe = Recipe {
        noise: 0.05,
        ambiguous: 0.25,
        typos: 0.0,
    };
    let noisy_train = synthetic::tickets(5000, 3, recipe);
    let noisy_test = synthetic::tickets(
        4000,
        4,
        Recipe {
            typos: 0.05,
            ..recipe
        },
    );
    let spec: Vec<f32> = std::env::var("SWEEP")
        .unwrap()
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    for chunk in spec.chunks(3) {
        let hyper = train::Hyper {
            epochs: chunk[0] as u16,
            learning_rate: chunk[1],
            l2: chunk[2],
        };
        eprintln!("== {hyper:?}");
        let m = LocalModel::train_with(&clean_train, &departments(), &hyper).unwrap();
        report(&m, &clean_test);
        let m = LocalModel::train_with(&noisy_train, &departments(), &hyper).unwrap();
        report(&m, &noisy_test);
    }
}

#[test]
#[ignore]
fn controls() {
    let recipe = Recipe {
        noise: 0.05,
        ambiguous: 0.25,
        typos: 0.0,
    };
    let mut model =
        LocalModel::train(&synthetic::tickets(5000, 3, recipe), &departments()).unwrap();
    let test = synthetic::tickets(
        4000,
        4,
        Recipe {
            typos: 0.05,
            ..recipe
        },
    );
    let fitted = model.calibration;
    report(&model, &test);
    for (t, s) in [(0.5, 1.0), (2.0, 1.0), (1.0, 3.0), (1.0, 0.3)] {
        model.calibration = Calibration {
            temperature: fitted.temperature * t,
            urgent_scale: fitted.urgent_scale * s,
            ..fitted
        };
        eprintln!("T x{t} a x{s}");
        report(&model, &test);
    }
    model.calibration = Calibration::IDENTITY;
    eprintln!("identity");
    report(&model, &test);
}

#[test]
#[ignore]
fn controls_dup() {
    let recipe = Recipe {
        noise: 0.05,
        ambiguous: 0.25,
        typos: 0.0,
    };
    let reps: usize = std::env::var("REPS")
        .map(|r| r.parse().unwrap())
        .unwrap_or(3);
    let base = synthetic::tickets(5000 / reps, 3, recipe);
    let train: Vec<Example> = (0..reps).flat_map(|_| base.iter().cloned()).collect();
    let mut model = LocalModel::train(&train, &departments()).unwrap();
    let test = synthetic::tickets(
        4000,
        4,
        Recipe {
            typos: 0.05,
            ..recipe
        },
    );
    report(&model, &test);
    model.calibration = Calibration::IDENTITY;
    eprintln!("identity");
    report(&model, &test);
}
