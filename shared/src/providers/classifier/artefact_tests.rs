//! The artefact: its bytes round-trip, a damaged copy is refused, a format-1 classifier keeps
//! its own gate and features, the same examples give the same version, and the size stays
//! bounded.

use super::{
    synthetic::departments,
    tests::{clean, small_model},
    *,
};
use calibrate::Calibration;
use fit::{Weights, HYPER};

#[test]
fn an_artefact_round_trips_and_a_damaged_one_is_refused() {
    let model = small_model();
    let bytes = model.to_bytes();
    let loaded = LocalModel::from_bytes(&bytes).unwrap();
    assert_eq!(loaded.version(), model.version());
    assert_eq!(loaded.to_bytes(), bytes);
    assert_eq!(loaded.departments(), model.departments());
    assert_eq!(loaded.examples(), 400);
    for t in clean(50, 12) {
        assert_eq!(
            loaded.predict(&t.subject, &t.message),
            model.predict(&t.subject, &t.message)
        );
    }

    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x10;
    assert!(matches!(
        LocalModel::from_bytes(&flipped),
        Err(ArtefactError::Digest)
    ));
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert!(matches!(
        LocalModel::from_bytes(&magic),
        Err(ArtefactError::Magic)
    ));
    let mut format = bytes.clone();
    format[8] = 99;
    assert!(matches!(
        LocalModel::from_bytes(&format),
        Err(ArtefactError::Format { found: 99, .. })
    ));
    for cut in [0, 5, 30, bytes.len() / 2, bytes.len() - 1] {
        let error = LocalModel::from_bytes(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(error, ArtefactError::Truncated { .. }),
            "{cut}: {error}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        LocalModel::from_bytes(&longer),
        Err(ArtefactError::TrailingBytes(1))
    ));
}

/// A classifier trained now gates on its department's probability alone (issue "It grades
/// itself", item 8), so an unsure urgency no longer defers a sure department; one stored in
/// format 1 still loads and gates on the whole answer, as its thresholds were derived.
#[test]
fn the_confidence_is_the_departments_probability_and_a_format_1_classifier_keeps_its_own() {
    let model = small_model();
    assert_eq!(model.gate(), Gate::Department);
    let unsure_urgency = clean(200, 13)
        .iter()
        .map(|t| model.predict(&t.subject, &t.message))
        .filter(|a| (0.2..0.8).contains(&a.urgent_p))
        .count();
    assert!(unsure_urgency > 0, "some answers are unsure of urgency");
    for t in clean(200, 13) {
        let answer = model.predict(&t.subject, &t.message);
        assert_eq!(answer.confidence, answer.department_p);
    }

    let mut old = model.to_bytes();
    old[8..10].copy_from_slice(&1u16.to_le_bytes());
    let body = old.len() - 32;
    let digest = sha2::Sha256::digest(&old[..body]);
    old[body..].copy_from_slice(&digest);
    let stored = LocalModel::from_bytes(&old).unwrap();
    assert_eq!(stored.gate(), Gate::WholeAnswer);
    assert_eq!(
        stored.to_bytes(),
        old,
        "it is written back as it was stored"
    );
    assert_ne!(stored.version(), model.version());
    for t in clean(50, 14) {
        let answer = stored.predict(&t.subject, &t.message);
        let whole = answer.department_p * answer.urgent_p.max(1.0 - answer.urgent_p);
        assert_eq!(answer.confidence, whole);
        assert_eq!(
            answer.department,
            model.predict(&t.subject, &t.message).department
        );
    }
}

#[test]
fn the_same_examples_give_the_same_version_and_other_examples_another() {
    let examples = clean(400, 11);
    let model = LocalModel::train(&examples, &departments()).unwrap();
    let again = LocalModel::train(&examples, &departments()).unwrap();
    assert_eq!(model.to_bytes(), again.to_bytes());
    let version = model.version();
    assert_eq!(version, again.version());
    assert!(
        version.starts_with("local-") && version.len() == 18,
        "{version}"
    );
    assert!(version[6..].chars().all(|c| c.is_ascii_hexdigit()));

    let mut relabelled = examples.clone();
    relabelled[0].is_urgent = !relabelled[0].is_urgent;
    let other = LocalModel::train(&relabelled, &departments()).unwrap();
    assert_ne!(other.version(), version);
}

#[test]
fn the_artefact_stays_under_5_mb_for_any_number_of_departments() {
    let trained = small_model().to_bytes().len();
    assert!(trained <= 5_000_000, "{trained} bytes");
    assert_eq!(fit::feature_spec(5).bucket_bits, 17);
    for classes in [2, 5, 7, 8, 40, MAX_DEPARTMENTS] {
        let spec = fit::feature_spec(classes);
        let names = (0..classes).map(|k| format!("department-{k}")).collect();
        let model = LocalModel::assemble(
            names,
            spec,
            HYPER,
            Calibration::IDENTITY,
            0,
            Weights::zeros(classes, spec.buckets()),
            Gate::Department,
        );
        let size = model.to_bytes().len();
        assert!(size <= 5_000_000, "{classes} departments: {size} bytes");
    }
}
