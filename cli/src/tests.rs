//! The command line's parsing: what each operation accepts and refuses.

use triage::operations::Request;

use super::*;

const REPROCESS: [&str; 5] = [
    "reprocess",
    "--since",
    "1d",
    "--prompt-version",
    "triage-v5",
];

fn operation(args: &[&str]) -> Result<Request, clap::Error> {
    let cli = Cli::try_parse_from(std::iter::once("triage").chain(args.iter().copied()))?;
    match cli.command {
        Command::Operation(request) => Ok(request),
        _ => panic!("{args:?} is not an operation"),
    }
}

#[test]
fn erase_takes_one_or_more_ticket_ids_and_audit_and_confirm_are_flags() {
    let ids = [
        "0b6c3f6e-6f1e-4d53-9f1a-2f0a8c1e7d42",
        "7d8a1c2b-3e4f-4a5b-8c6d-9e0f1a2b3c4d",
    ];
    let Request::Erase { ticket_ids } = operation(&["erase", ids[0], ids[1]]).unwrap() else {
        panic!("not an erase");
    };
    assert_eq!(ticket_ids.len(), 2);
    assert!(operation(&["erase"]).is_err(), "at least one id");
    assert!(operation(&["erase", "not-a-uuid"]).is_err());
    assert_eq!(
        operation(&["audit", "--limit", "5"]).unwrap(),
        Request::Audit { limit: Some(5) }
    );
    let confirmed = operation(&["redrive", "--confirm"]).unwrap();
    assert!(matches!(confirmed, Request::Redrive { confirm: true, .. }));
    let unconfirmed = operation(&REPROCESS).unwrap();
    assert!(matches!(
        unconfirmed,
        Request::Reprocess { confirm: false, .. }
    ));
}

#[test]
fn reprocess_and_redrive_take_a_lane_and_refuse_any_other_name() {
    use triage::pipeline::outbox::Lane;
    let chosen = [&REPROCESS[..], &["--lane", "interactive"]].concat();
    assert!(matches!(
        operation(&chosen).unwrap(),
        Request::Reprocess {
            lane: Some(Lane::Interactive),
            ..
        }
    ));
    assert!(matches!(
        operation(&REPROCESS).unwrap(),
        Request::Reprocess { lane: None, .. }
    ));
    assert!(matches!(
        operation(&["redrive", "--lane", "bulk"]).unwrap(),
        Request::Redrive {
            lane: Some(Lane::Bulk),
            ..
        }
    ));
    let refused = operation(&["redrive", "--lane", "fast"]).err().unwrap();
    assert!(
        refused.to_string().contains("interactive or bulk"),
        "{refused}"
    );
}

#[test]
fn eval_takes_repeated_versions_or_list_and_a_forced_promote_needs_a_reason() {
    let Request::Eval {
        set,
        split,
        versions,
        list,
        ..
    } = operation(&[
        "eval",
        "--set",
        "evals/tickets.jsonl",
        "--split",
        "test",
        "--version",
        "triage-v5",
        "--version",
        "triage-v6/gpt-6-luna@high",
    ])
    .unwrap()
    else {
        panic!("not an eval");
    };
    assert_eq!(set.unwrap().to_string(), "evals/tickets.jsonl");
    assert_eq!(split.map(|s| s.to_string()).as_deref(), Some("test"));
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[1].to_string(), "triage-v6/gpt-6-luna@high");
    assert!(!list);
    assert!(matches!(
        operation(&["eval", "--list"]).unwrap(),
        Request::Eval { list: true, .. }
    ));
    assert!(operation(&["eval"]).is_err(), "--set or --list");
    let sweep = ["eval", "--set", "shipped", "--thresholds"];
    assert!(matches!(
        operation(&sweep).unwrap(),
        Request::Eval {
            thresholds: true,
            ..
        }
    ));
    assert!(operation(&["eval", "--list", "--thresholds"]).is_err());
    assert!(operation(&["eval", "--set", "x", "--split", "train"]).is_err());
    let promote = ["promote", "--prompt-version", "triage-v6", "--force"];
    assert!(operation(&promote).is_err(), "--force needs --reason");
    let forced = [&promote[..], &["--reason", "incident 42"]].concat();
    assert!(matches!(
        operation(&forced).unwrap(),
        Request::Promote {
            force: true,
            write_back: false,
            ..
        }
    ));
    let written = [&promote[..3], &["--write-back"]].concat();
    assert!(matches!(
        operation(&written).unwrap(),
        Request::Promote {
            write_back: true,
            ..
        }
    ));
    // The ops Lambda's payload: optional, false unless asked.
    let payload = |extra: &str| {
        let json = format!(r#"{{"op": "promote", "prompt_version": "triage-v6"{extra}}}"#);
        serde_json::from_str::<Request>(&json).unwrap()
    };
    assert!(matches!(
        payload(""),
        Request::Promote {
            write_back: false,
            ..
        }
    ));
    assert!(matches!(
        payload(r#", "write_back": true"#),
        Request::Promote {
            write_back: true,
            ..
        }
    ));
}

#[test]
fn pause_and_resume_take_one_lane_or_none() {
    use triage::pipeline::pause::Pausable;
    let paused = operation(&["pause", "--lane", "deliveries", "--reason", "incident 42"]);
    assert!(matches!(
        paused.unwrap(),
        Request::Pause {
            lane: Some(Pausable::Deliveries),
            reason: Some(_),
        }
    ));
    assert!(matches!(
        operation(&["resume"]).unwrap(),
        Request::Resume { lane: None }
    ));
    let refused = operation(&["pause", "--lane", "all"]).err().unwrap();
    assert!(
        refused
            .to_string()
            .contains("interactive, bulk or deliveries"),
        "{refused}"
    );
}

#[test]
fn eval_by_time_takes_a_split_and_a_precision_or_a_threshold_and_train_a_precision() {
    let Request::Eval {
        by_time,
        at,
        days,
        precision,
        set,
        ..
    } = operation(&[
        "eval",
        "--by-time",
        "--at",
        "2026-11-01T00:00:00Z",
        "--days",
        "14",
        "--precision",
        "0.97",
    ])
    .unwrap()
    else {
        panic!("not an eval");
    };
    assert!(by_time && set.is_none());
    assert_eq!(at.unwrap().to_string(), "2026-11-01T00:00:00Z");
    assert_eq!((days, precision), (Some(14), Some(0.97)));
    let both = [
        "eval",
        "--by-time",
        "--precision",
        "0.9",
        "--threshold",
        "0.5",
    ];
    assert!(operation(&both).is_err(), "a precision or a threshold");
    // Without --by-time a precision parses, and the operation refuses it (operations::eval).
    assert!(operation(&["eval", "--by-time", "--set", "shipped"]).is_err());
    let Request::Train { precision, .. } =
        operation(&["train", "--from", "results:30", "--precision", "0.97"]).unwrap()
    else {
        panic!("not a training");
    };
    assert_eq!(precision, Some(0.97));
}
