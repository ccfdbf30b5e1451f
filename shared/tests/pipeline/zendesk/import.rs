use std::time::Duration;

use std::os::unix::fs::PermissionsExt;

use fake_provider::zendesk::{FakeZendesk, Ticket, ADMIN_EMAIL};
use triage::{
    operations::{
        import::{self, ImportZendesk},
        train::{self, TrainSource},
        Operator,
    },
    providers::Policy,
};

use super::{
    spawn, start_fake,
    writeback::{desk_taxonomy, taxonomy_of, GROUPS},
};

/// Solved tickets of each department (the group's), plus one in a group no department has
/// and one still open.
fn history(fake: &FakeZendesk, from: i64, per_department: i64) {
    let subjects = [
        (
            "billing",
            "I was charged twice for my invoice",
            "Refund the duplicate payment please.",
        ),
        (
            "technical",
            "The app crashes on login",
            "Error 500 every time since the update.",
        ),
        (
            "account",
            "Cannot reset my password",
            "The reset email never arrives for my account.",
        ),
        (
            "sales",
            "Pricing for 50 seats",
            "We would like a quote for the enterprise plan.",
        ),
        (
            "general",
            "Where is your office",
            "Just a general question about opening hours.",
        ),
    ];
    let mut id = from;
    for n in 0..per_department {
        for (department, subject, message) in subjects {
            let group = GROUPS.iter().find(|(d, _)| *d == department).unwrap().1;
            let mut ticket = Ticket::new(id, &format!("{subject} ({n})"), message);
            ticket.status = if id % 2 == 0 { "solved" } else { "closed" }.into();
            ticket.group_id = Some(group);
            ticket.priority = Some(
                if department == "technical" {
                    "urgent"
                } else {
                    "normal"
                }
                .into(),
            );
            fake.add(ticket);
            id += 1;
        }
    }
    let mut unmapped = Ticket::new(id, "Old queue", "A group nobody maps.");
    unmapped.status = "solved".into();
    unmapped.group_id = Some(4242);
    fake.add(unmapped);
    fake.add(Ticket::new(id + 1, "Still open", "Not finished."));
}

/// An import of the last 30 days into `out`, as `email` (`None`: the connector's agent).
fn last_30_days(
    out: std::path::PathBuf,
    policy_version: String,
    email: Option<&str>,
) -> ImportZendesk {
    ImportZendesk {
        since: Duration::from_secs(30 * 24 * 3600),
        out,
        policy_version,
        // Zendesk's 10 a minute made fast for the test; the pacing is the shared limiter's.
        requests_per_minute: 6000,
        email: email.map(str::to_string),
    }
}

#[tokio::test]
async fn the_desks_history_becomes_a_labelled_set_that_trains_a_classifier_and_resumes() {
    let fake = start_fake().await;
    let app = spawn(Some(&fake)).await;
    let version = desk_taxonomy(&app).await;
    history(&fake, 1, 6);
    fake.set_page_size(7);
    fake.throttle(&[1]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("desk.jsonl");
    let run = last_30_days(out.clone(), version, Some(ADMIN_EMAIL));
    let first = import::zendesk(&app.pool, &app.config.zendesk, Duration::from_secs(5), &run)
        .await
        .unwrap();
    assert_eq!(
        (first.rows, first.unmapped, first.open, first.resumed),
        (30, 1, 1, false)
    );
    assert_eq!(first.pages, 5, "32 tickets in pages of 7");
    assert_eq!(fake.violations(), Vec::<String>::new());
    let exports: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("incremental"))
        .collect();
    assert_eq!(exports[0].status, 429, "Zendesk's limit, waited out");
    assert!(exports[1].query.contains("start_time=") && exports[2].query.contains("cursor="));

    // Customers' text: the owner's alone.
    for file in [out.clone(), out.with_extension("jsonl.cursor")] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    }

    // A later run picks up where the last one ended: only what changed since, which is the
    // new tickets and a solved one closed since (exported again: its newest row is kept).
    history(&fake, 100, 1);
    fake.set_status(2, "closed");
    let second = import::zendesk(&app.pool, &app.config.zendesk, Duration::from_secs(5), &run)
        .await
        .unwrap();
    assert!(second.resumed);
    assert_eq!((second.rows, second.unmapped, second.superseded), (6, 1, 1));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 35, "one row per ticket");
    let ids: std::collections::HashSet<&str> = text
        .lines()
        .map(|l| {
            l.split("\"id\":\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 35);
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call").await,
        0,
        "nothing billed"
    );

    let policy = Policy::load("policy-v1").unwrap();
    let source: TrainSource = format!("set:{}", out.display()).parse().unwrap();
    let (operator, shares) = (Operator::os_user(), (&app.config.labelling).into());
    let trained = train::train(&app.pool, &policy, &[source], None, &operator, shares, None)
        .await
        .unwrap();
    assert!(trained.examples > 0, "{trained:?}");
}

#[tokio::test]
async fn a_group_several_departments_share_is_no_row_and_the_report_says_so() {
    let fake = start_fake().await;
    let app = spawn(Some(&fake)).await;
    let shared = [
        ("billing", 360001),
        ("sales", 360001),
        ("technical", 360002),
    ];
    let version = taxonomy_of(&app, &shared).await;
    for (id, group) in [(1, 360001), (2, 360002)] {
        let mut ticket = Ticket::new(id, "Where is my refund", "It has been a week.");
        ticket.status = "solved".into();
        ticket.group_id = Some(group);
        fake.add(ticket);
    }
    let dir = tempfile::tempdir().unwrap();
    let run = last_30_days(dir.path().join("desk.jsonl"), version, Some(ADMIN_EMAIL));
    let imported = import::zendesk(&app.pool, &app.config.zendesk, Duration::from_secs(5), &run)
        .await
        .unwrap();
    assert_eq!(
        (imported.rows, imported.unmapped, imported.shared_group),
        (1, 0, 1),
        "billing or sales: not known, so no label"
    );
    let text = std::fs::read_to_string(&run.out).unwrap();
    assert!(
        text.contains("technical") && !text.contains("billing"),
        "{text}"
    );
}

/// The incremental export is for admins: as the connector's agent the import is refused
/// (Zendesk's 403), saying to name an admin, and writes no row.
#[tokio::test]
async fn the_import_as_the_connectors_agent_is_refused_naming_email() {
    let fake = start_fake().await;
    let app = spawn(Some(&fake)).await;
    let version = desk_taxonomy(&app).await;
    history(&fake, 1, 1);
    let dir = tempfile::tempdir().unwrap();
    let run = last_30_days(dir.path().join("desk.jsonl"), version, None);
    let refused = import::zendesk(&app.pool, &app.config.zendesk, Duration::from_secs(5), &run)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("email") && refused.contains("admins only"),
        "{refused}"
    );
    assert_eq!(std::fs::read_to_string(&run.out).unwrap_or_default(), "");
}
