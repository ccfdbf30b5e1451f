use super::*;

fn ticket(group: Option<i64>, priority: Option<&str>, tags: &[&str]) -> Ticket {
    Ticket {
        id: 7,
        updated_at: "2026-12-01T00:00:05Z".into(),
        group_id: group,
        priority: priority.map(str::to_string),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        status: None,
        subject: None,
        description: None,
    }
}

fn answer(department: &str, urgent: bool, provisional: bool, group: Option<i64>) -> Answer<'_> {
    Answer {
        department,
        urgent,
        provisional,
        group,
    }
}

#[test]
fn a_first_answer_sets_group_priority_and_tags_as_a_safe_update() {
    let (update, written) = plan(
        &ticket(None, Some("normal"), &["vip"]),
        &answer("billing", true, false, Some(360001)),
        &Written::default(),
    );
    assert_eq!(update.group_id, Some(360001));
    assert_eq!(update.priority.as_deref(), Some("urgent"));
    assert_eq!(update.additional_tags, ["triage_billing", "triage_urgent"]);
    assert!(update.remove_tags.is_empty(), "the agents' tags stay");
    assert!(update.safe_update);
    assert_eq!(update.updated_stamp, "2026-12-01T00:00:05Z");
    assert_eq!(written.group_id, Some(360001));
    assert_eq!(written.priority_before.as_deref(), Some("normal"));
}

#[test]
fn a_group_an_agent_set_is_never_overwritten_but_our_own_is_replaced() {
    let agents = plan(
        &ticket(Some(999), None, &[]),
        &answer("billing", false, false, Some(360001)),
        &Written::default(),
    );
    assert_eq!(agents.0.group_id, None);
    assert_eq!(agents.1.group_id, None, "not ours");
    let ours = Written {
        group_id: Some(360002),
        ..Written::default()
    };
    let replaced = plan(
        &ticket(Some(360002), None, &[]),
        &answer("billing", false, false, Some(360001)),
        &ours,
    );
    assert_eq!(replaced.0.group_id, Some(360001));
}

#[test]
fn a_provisional_answer_is_tagged_and_the_final_one_replaces_it() {
    let (first, written) = plan(
        &ticket(None, Some("low"), &[]),
        &answer("technical", true, true, None),
        &Written::default(),
    );
    assert_eq!(
        first.additional_tags,
        ["triage_technical", "triage_urgent", PROVISIONAL_TAG]
    );
    assert_eq!(first.group_id, None, "the built-in policy has no groups");
    let now = ticket(
        None,
        Some("urgent"),
        &["triage_technical", "triage_urgent", PROVISIONAL_TAG],
    );
    let (last, written) = plan(&now, &answer("billing", false, false, None), &written);
    assert_eq!(last.additional_tags, ["triage_billing"]);
    assert_eq!(
        last.remove_tags,
        ["triage_technical", "triage_urgent", PROVISIONAL_TAG]
    );
    assert_eq!(
        last.priority.as_deref(),
        Some("low"),
        "our provisional urgent is undone"
    );
    assert_eq!(written.tags, ["triage_billing"]);
    assert_eq!(written.priority, None);
}

#[test]
fn an_urgency_an_agent_changed_after_us_is_left_alone() {
    let before = Written {
        priority: Some("urgent".into()),
        priority_before: Some("low".into()),
        tags: vec!["triage_billing".into(), URGENT_TAG.into()],
        ..Written::default()
    };
    let (update, _) = plan(
        &ticket(None, Some("high"), &["triage_billing", URGENT_TAG]),
        &answer("billing", false, false, None),
        &before,
    );
    assert_eq!(update.priority, None);
    assert_eq!(update.remove_tags, [URGENT_TAG]);
}
