//! The versions' parsing and canonical forms.

use super::*;

#[test]
fn a_model_version_needs_both_model_and_effort() {
    let v: ModelVersion = "org/gpt-6-luna@high".parse().unwrap();
    assert_eq!((v.model(), v.effort()), ("org/gpt-6-luna", "high"));
    for bad in ["gpt-6-luna", "gpt-6-luna@", "@high", "", " gpt@high"] {
        assert!(bad.parse::<ModelVersion>().is_err(), "{bad:?}");
    }
    assert!(ModelVersion::rules().is_rules());
}

#[test]
fn a_cascade_is_a_model_version_written_canonically_and_called_as_its_large_model() {
    let v: ModelVersion = "cascade(local-3f2a9c,0.920,org/gpt-6-luna@high)"
        .parse()
        .unwrap();
    assert_eq!(v.as_str(), "cascade(local-3f2a9c,0.92,org/gpt-6-luna@high)");
    assert_eq!((v.model(), v.effort()), ("org/gpt-6-luna", "high"));
    let cascade = v.cascade().unwrap();
    assert_eq!(
        (
            cascade.local.as_str(),
            cascade.threshold.confidence().unwrap()
        ),
        ("local-3f2a9c", 0.92)
    );
    assert_eq!(cascade.large.as_str(), "org/gpt-6-luna@high");
    assert_eq!(ModelVersion::from_stored(v.as_str()), v);
    assert!("gpt-6-luna@high"
        .parse::<ModelVersion>()
        .unwrap()
        .cascade()
        .is_none());
    for bad in [
        "cascade(local-3f2a9c,0.92)",
        "cascade(local-3f2a9c,1.5,gpt@high)",
        "cascade(local-XYZ,0.9,gpt@high)",
        "cascade(model,0.9,gpt@high)",
        "cascade(local-3f,0.9,gpt)",
        "cascade(local-3f,0.9,rules@offline)",
        "cascade(local-3f,0.9,cascade(local-3f,0.9,gpt@high))",
        "cascade(local-3f,NaN,gpt@high)",
    ] {
        assert!(bad.parse::<ModelVersion>().is_err(), "{bad:?}");
    }
    // The same cascade answered by another classifier: only LOCAL changes.
    assert_eq!(
        v.with_local("local-0b1c2d").unwrap().as_str(),
        "cascade(local-0b1c2d,0.92,org/gpt-6-luna@high)"
    );
    assert!(cascade.large.with_local("local-0b1c2d").is_none());
    // In a version spec, a prompt and then the cascade.
    let spec: VersionSpec = "triage-v5/cascade(local-3f,0.9,gpt@high)".parse().unwrap();
    assert_eq!(
        spec.model_version.unwrap().cascade().unwrap().threshold,
        Threshold::Confidence(0.9)
    );
    // A target precision: the classifier's derived thresholds (`triage train --precision`).
    let v: ModelVersion = "cascade(local-3f,p0.970,gpt@high)".parse().unwrap();
    assert_eq!(v.as_str(), "cascade(local-3f,p0.97,gpt@high)");
    assert_eq!(v.cascade().unwrap().threshold, Threshold::Target(0.97));
    for bad in ["p0", "p1.5", "p", "pNaN", "q0.9"] {
        let text = format!("cascade(local-3f,{bad},gpt@high)");
        assert!(text.parse::<ModelVersion>().is_err(), "{bad:?}");
    }
}

#[test]
fn a_spec_is_a_prompt_or_a_prompt_and_a_model() {
    let configured: ModelVersion = "gpt-6-luna@medium".parse().unwrap();
    let spec: VersionSpec = "triage-v4/org/m@high".parse().unwrap();
    assert_eq!(
        spec.resolve(&configured).to_string(),
        "triage-v4/org/m@high"
    );
    let spec: VersionSpec = "triage-v4".parse().unwrap();
    assert_eq!(
        spec.resolve(&configured).to_string(),
        "triage-v4/gpt-6-luna@medium"
    );
    for bad in ["", "/m@e", "triage-v4/", "triage-v4/gpt"] {
        assert!(bad.parse::<VersionSpec>().is_err(), "{bad:?}");
    }
}
