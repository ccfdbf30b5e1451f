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
    assert_eq!(update.priority, Some(Some("urgent".into())));
    assert_eq!(update.additional_tags, ["triage_billing", "triage_urgent"]);
    assert!(update.remove_tags.is_empty(), "the agents' tags stay");
    assert!(update.safe_update);
    assert_eq!(update.updated_stamp, "2026-12-01T00:00:05Z");
    assert_eq!(written.group_id, Some(360001));
    assert_eq!(written.priority_before.as_deref(), Some("normal"));
    assert!(written.priority_raised);
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
        last.priority,
        Some(Some("low".into())),
        "our provisional urgent is undone"
    );
    assert_eq!(written.tags, ["triage_billing"]);
    assert_eq!(written.priority.as_deref(), Some("low"), "what we left");
    assert!(!written.priority_raised);
}

#[test]
fn an_urgency_an_agent_changed_after_us_is_left_alone() {
    let before = Written {
        priority: Some("urgent".into()),
        priority_raised: true,
        priority_before: Some("low".into()),
        tags: vec!["triage_billing".into(), URGENT_TAG.into()],
        at: Some(chrono::Utc::now()),
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

/// What we wrote last: `at` set, what the priority was left at, and whether (from what) we
/// raised it ourselves.
fn wrote(left: Option<&str>, raised_from: Option<Option<&str>>) -> Written {
    Written {
        priority: left.map(str::to_string),
        priority_raised: raised_from.is_some(),
        priority_before: raised_from.flatten().map(str::to_string),
        at: Some(chrono::Utc::now()),
        ..Written::default()
    }
}

#[test]
fn priority_by_table_only_while_the_ticket_still_has_what_we_left() {
    let urgent = Some("urgent");
    // (what we wrote before, the ticket's priority now, the answer urgent,
    //  sent: None unchanged / Some(None) null, left, raised)
    let cases = [
        // Nothing written yet: urgent raises whatever it is, else it is left alone.
        (
            Written::default(),
            Some("high"),
            true,
            Some(urgent),
            urgent,
            true,
        ),
        (Written::default(), None, false, None, None, false),
        (Written::default(), urgent, true, None, urgent, false),
        // Our provisional urgent, still there: confirmed, or undone (to null over empty).
        (wrote(urgent, Some(None)), urgent, true, None, urgent, true),
        (
            wrote(urgent, Some(None)),
            urgent,
            false,
            Some(None),
            None,
            false,
        ),
        (
            wrote(urgent, Some(Some("low"))),
            urgent,
            false,
            Some(Some("low")),
            Some("low"),
            false,
        ),
        // An agent changed it since (issue 51 item 5): theirs, whatever the answer, and it
        // stays theirs at the next write too.
        (
            wrote(urgent, Some(None)),
            Some("high"),
            true,
            None,
            urgent,
            false,
        ),
        (
            wrote(urgent, Some(None)),
            Some("low"),
            false,
            None,
            urgent,
            false,
        ),
        // What we left untouched (we never raised it): a later urgent may raise it.
        (
            wrote(Some("normal"), None),
            Some("normal"),
            true,
            Some(urgent),
            urgent,
            true,
        ),
        // An urgent an agent set before a non-urgent write is not ours to undo.
        (wrote(urgent, None), urgent, false, None, urgent, false),
    ];
    for (i, (before, now, is_urgent, sent, left, raised)) in cases.into_iter().enumerate() {
        let (update, written) = plan(
            &ticket(None, now, &[]),
            &answer("billing", is_urgent, false, None),
            &before,
        );
        let sent = sent.map(|p| p.map(str::to_string));
        assert_eq!(update.priority, sent, "case {i}: sent");
        assert_eq!(written.priority.as_deref(), left, "case {i}: left");
        assert_eq!(written.priority_raised, raised, "case {i}: raised");
    }
}

#[test]
fn a_final_answer_never_regroups_a_ticket_an_agent_regrouped_or_emptied() {
    let ours = Written {
        group_id: Some(360002),
        at: Some(chrono::Utc::now()),
        ..Written::default()
    };
    for agents in [Some(999), None] {
        let (update, written) = plan(
            &ticket(agents, None, &[]),
            &answer("billing", false, false, Some(360001)),
            &ours,
        );
        assert_eq!(update.group_id, None, "{agents:?}");
        assert_eq!(
            written.group_id,
            Some(360002),
            "still not the ticket's: not ours"
        );
    }
}
