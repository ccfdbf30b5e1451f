//! The running total, driven through the ledger's own functions on one claimed job.

use std::time::Duration;

use deadpool_postgres::Client;
use triage::{
    pipeline::{
        ledger::{self, CallId, CallOutcome, CallRecord},
        limits::budget,
        outbox::{budgeted, claim::Serves, ClaimedJob, Lanes},
    },
    providers::Usage,
};

use crate::helpers::{
    budget::{answered, spent_today, start},
    spawn_app, TestApp,
};

fn serves(app: &TestApp) -> Serves {
    Serves::for_model_version(&app.config.versions.model)
}

/// The decision (`budget_keep`, V15) by table: each case in a transaction rolled back,
/// with today's spend in the running totals and one claimed job holding `reserved`.
#[tokio::test]
async fn a_claim_keeps_jobs_while_money_is_left_before_each_so_one_call_at_most_crosses_the_line() {
    let app = spawn_app().await;
    let holder = app.claimed("Holds a reservation").await;
    let mut client = app.pool.get().await.unwrap();
    // (budget, spent, reserved, estimates, kept)
    let table: [(f64, f64, f64, &[f64], i32); 12] = [
        (1.0, 0.0, 0.0, &[0.1, 0.1, 0.1], 3),
        (1.0, 0.5, 0.25, &[0.1, 0.1, 0.1, 0.1], 3),
        (1.0, 0.5, 0.3, &[0.1, 0.1, 0.1], 2),
        (1.0, 0.0, 0.99, &[5.0, 0.1], 1),
        (1.0, 0.0, 0.5, &[0.1, 5.0, 0.1], 2),
        (1.0, 0.5, 0.0, &[0.0, 0.0, 0.0], 3),
        (1.0, 0.5, 0.0, &[], 0),
        (1.0, 0.5, 0.5, &[0.1], 0),
        (1.0, 0.5, 0.9, &[0.1], 0),
        (1.0, 1.0, 0.0, &[0.1], 0),
        (1.0, 1.2, 0.0, &[0.1], 0),
        (0.0, 0.0, 0.0, &[0.1], 0),
    ];
    for (budget, spent, reserved, estimates, kept) in table {
        let transaction = client.transaction().await.unwrap();
        transaction
            .execute(
                "INSERT INTO provider_call_hour (hour, provider, workload, prompt_version, lane, tier, cost_usd) \
                 VALUES (now(), 'openai', 'production', 'v', 'interactive', 'online', $1::float8::numeric)",
                &[&spent],
            )
            .await
            .unwrap();
        transaction
            .execute(
                "UPDATE evaluation_outbox SET reserved_usd = $2 WHERE id = $1",
                &[&holder.id.0, &reserved],
            )
            .await
            .unwrap();
        // Ids of no job: the decision counts them all the same.
        let ids: Vec<i64> = (1..=estimates.len() as i64).map(|i| -i).collect();
        let estimates = estimates.to_vec();
        let row = transaction
            .query_one(
                "SELECT kept FROM budget_keep($1, $2, $3)",
                &[&ids, &estimates, &budget],
            )
            .await
            .unwrap();
        assert_eq!(
            row.get::<_, i32>(0),
            kept,
            "{budget} {spent} {reserved} {estimates:?}"
        );
        transaction.rollback().await.unwrap();
    }
}

#[tokio::test]
async fn a_call_counts_at_its_estimate_until_its_usage_corrects_it_once() {
    let app = spawn_app().await;
    let job = app.claimed("Corrected").await;
    let client = app.pool.get().await.unwrap();
    let call = start(&client, &job, 0.5).await;
    assert_eq!(spent_today(&app).await, 0.5, "in flight: its worst case");
    for _ in 0..2 {
        // The second is a write repeated after a blink: nothing moves again.
        ledger::finish_call(&client, call, &answered(Some(0.125)), 0.0)
            .await
            .unwrap();
        assert_eq!(spent_today(&app).await, 0.125);
    }
    let rollup = app
        .row("SELECT sum(calls)::int8, sum(ok)::int8, sum(billed)::int8, sum(billing_unknown)::int8, sum(input_tokens)::int8 FROM provider_call_hour")
        .await;
    let counts: Vec<i64> = (0..5).map(|i| rollup.get(i)).collect();
    assert_eq!(counts, [1, 1, 1, 0, 100]);
}

#[tokio::test]
async fn a_call_of_unknown_outcome_keeps_its_estimate() {
    let app = spawn_app().await;
    let job = app.claimed("Timed out").await;
    let client = app.pool.get().await.unwrap();
    let call = start(&client, &job, 0.5).await;
    let timeout = CallRecord {
        outcome: CallOutcome::Failed(triage::providers::FailureKind::Timeout),
        usage: Usage::default(),
        ..answered(None)
    };
    ledger::finish_call(&client, call, &timeout, 0.0)
        .await
        .unwrap();
    assert_eq!(spent_today(&app).await, 0.5);
    assert_eq!(
        app.count("SELECT sum(billing_unknown)::int8 FROM provider_call_hour")
            .await,
        1
    );
}

#[tokio::test]
async fn a_claim_reserves_each_job_s_estimate_until_its_ledger_row_carries_it() {
    let app = spawn_app().await;
    for i in 0..4 {
        app.post_ticket(&format!("Reserved {i}"), "body").await;
    }
    let client = app.pool.get().await.unwrap();
    let claim = (
        "w",
        10,
        Duration::from_secs(60),
        serves(&app),
        Lanes::default(),
    );
    // 1.0 left: 0.4 and 0.4 fit, the third (0.4 more, 0.2 left before it) crosses the
    // line; the fourth goes back.
    let claimed = budgeted::claim_within(&client, 1.0, claim, |_| 0.4, &budget::Grant::default())
        .await
        .unwrap();
    let jobs = match claimed {
        budgeted::Budgeted::Claimed { jobs, cut } => {
            assert!(cut);
            jobs
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(jobs.len(), 3);
    let spend = budget::spend(&client).await.unwrap();
    assert!((spend.reserved_usd - 1.2).abs() < 1e-9, "{spend:?}");
    let again = budgeted::claim_within(&client, 1.0, claim, |_| 0.4, &budget::Grant::default())
        .await
        .unwrap();
    assert!(matches!(again, budgeted::Budgeted::Wait), "{again:?}");
    let untouched =
        "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0";
    assert_eq!(
        app.count(untouched).await,
        1,
        "nothing left: the claim rolled back"
    );

    start(&client, &jobs[0], 0.4).await;
    let spend = budget::spend(&client).await.unwrap();
    assert!((spend.reserved_usd - 0.8).abs() < 1e-9, "{spend:?}");
    assert!((spend.spent_today_usd - 0.4).abs() < 1e-9, "{spend:?}");
}

/// One claim of one job at $0.5 by `worker` under `budget_usd`.
async fn claim_one_at_half_a_dollar(
    app: &TestApp,
    client: &Client,
    (worker, budget_usd): (&str, f64),
    grant: &budget::Grant,
) -> budgeted::Budgeted {
    let claim = (
        worker,
        1,
        Duration::from_secs(60),
        serves(app),
        Lanes::default(),
    );
    budgeted::claim_within(client, budget_usd, claim, |_| 0.5, grant)
        .await
        .unwrap()
}

/// [`claim_one_at_half_a_dollar`], which must keep what it claimed.
async fn claim_one(
    app: &TestApp,
    client: &Client,
    claimant: (&str, f64),
    grant: &budget::Grant,
) -> Vec<ClaimedJob> {
    match claim_one_at_half_a_dollar(app, client, claimant, grant).await {
        budgeted::Budgeted::Claimed { jobs, .. } => jobs,
        other => panic!("{other:?}"),
    }
}

async fn grant_row(app: &TestApp, worker: &str) -> Option<f64> {
    let client = app.pool.get().await.unwrap();
    client
        .query_opt("SELECT usd FROM budget_grant WHERE worker = $1", &[&worker])
        .await
        .unwrap()
        .map(|row| row.get(0))
}

/// Jobs whose claim went through a decision hold a reservation of their own.
async fn decided(app: &TestApp) -> i64 {
    app.count("SELECT count(*) FROM evaluation_outbox WHERE reserved_usd IS NOT NULL")
        .await
}

#[tokio::test]
async fn far_from_the_line_one_decision_grants_room_for_claims_made_without_one_which_the_fleet_counts(
) {
    let app = spawn_app().await;
    let tickets: Vec<_> = (0..40)
        .map(|i| (format!("Granted {i}"), "body".to_string()))
        .collect();
    app.ingest_many(&tickets).await;
    let client = app.pool.get().await.unwrap();
    let grant = budget::Grant::default();

    // The decision keeps the job ($0.5 reserved on it) and grants 32 claims like it ($16):
    // $99.5 are left, half of it is more than asked.
    let first = claim_one(&app, &client, ("a", 100.0), &grant).await;
    assert_eq!((first.len(), decided(&app).await), (1, 1));
    assert_eq!(grant_row(&app, "a").await, Some(16.0));
    let spend = budget::spend(&client).await.unwrap();
    assert!((spend.reserved_usd - 16.5).abs() < 1e-9, "{spend:?}");

    // Thirty-two claims under the grant: no decision, no reservation of their own.
    let mut covered = Vec::new();
    for _ in 0..32 {
        covered.extend(claim_one(&app, &client, ("a", 100.0), &grant).await);
    }
    assert_eq!((covered.len(), decided(&app).await), (32, 1));
    assert_eq!(grant_row(&app, "a").await, Some(16.0));

    // Another worker's decision counts the grant: of $20, $3.5 are left before its job,
    // and it is granted half of what is left after it.
    let other = budget::Grant::default();
    assert_eq!(claim_one(&app, &client, ("b", 20.0), &other).await.len(), 1);
    assert_eq!(grant_row(&app, "b").await, Some(1.5));

    // The grant used up, the next claim is decided: the thirty not started are reported
    // ($15) and a new grant comes on top.
    let two_started = &covered[..2];
    for job in two_started {
        start(&client, job, 0.5).await;
        grant.started(job.id);
    }
    claim_one(&app, &client, ("a", 100.0), &grant).await;
    assert_eq!(decided(&app).await, 3);
    assert_eq!(grant_row(&app, "a").await, Some(15.0 + 16.0));

    // The invocation's end gives the room back; only the kept jobs' reservations and the
    // calls started stay counted.
    grant.release(&app.pool, "a").await.unwrap();
    other.release(&app.pool, "b").await.unwrap();
    assert_eq!(grant_row(&app, "a").await, None);
    let spend = budget::spend(&client).await.unwrap();
    assert!((spend.spent_today_usd - 1.0).abs() < 1e-9, "{spend:?}");
    assert!((spend.reserved_usd - 1.5).abs() < 1e-9, "{spend:?}");
}

#[tokio::test]
async fn near_the_line_grants_shrink_and_claims_under_them_never_cross_it() {
    let app = spawn_app().await;
    let tickets: Vec<_> = (0..20)
        .map(|i| (format!("Near {i}"), "body".to_string()))
        .collect();
    app.ingest_many(&tickets).await;
    let client = app.pool.get().await.unwrap();
    let grant = budget::Grant::default();
    // $2 at $0.5 a job: the first is decided ($1.5 left after it, half of it granted),
    // the second is claimed under the grant, the third and fourth are decided (grants of
    // $0.25, then nothing), the fifth waits: $2 claimed, and not a job more.
    let mut kept = 0;
    let mut waited = false;
    for _ in 0..6 {
        match claim_one_at_half_a_dollar(&app, &client, ("a", 2.0), &grant).await {
            budgeted::Budgeted::Claimed { jobs, .. } => kept += jobs.len(),
            budgeted::Budgeted::Wait => waited = true,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(kept, 4, "$2 at $0.5 a job, with and without decisions");
    assert!(waited);
    let spend = budget::spend(&client).await.unwrap();
    assert!(
        spend.reserved_usd <= 2.0 + 1e-9,
        "never more claimed than the budget: {spend:?}"
    );
}

#[tokio::test]
async fn a_claim_cut_by_the_budget_gives_the_rest_back_untouched() {
    let app = spawn_app().await;
    for i in 0..3 {
        app.post_ticket(&format!("Cut {i}"), "body").await;
    }
    let client = app.pool.get().await.unwrap();
    let claim = (
        "w",
        10,
        Duration::from_secs(60),
        serves(&app),
        Lanes::default(),
    );
    let claimed = budgeted::claim_within(&client, 0.1, claim, |_| 0.4, &budget::Grant::default())
        .await
        .unwrap();
    assert!(
        matches!(&claimed, budgeted::Budgeted::Claimed { jobs, cut: true } if jobs.len() == 1),
        "{claimed:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0 AND claim_token IS NULL")
            .await,
        2
    );
}

#[tokio::test]
async fn a_call_started_before_midnight_is_yesterday_s_spend_and_so_is_its_correction() {
    let app = spawn_app().await;
    let job = app.claimed("Late night").await;
    let client = app.pool.get().await.unwrap();
    let call = start(&client, &job, 0.5).await;
    // The call started one second before today's 00:00 UTC (a move into yesterday's
    // partition: counted out of today once, into yesterday once).
    let started_at = app
        .row("UPDATE provider_call SET started_at = date_trunc('day', now(), 'UTC') - interval '1 second' RETURNING started_at")
        .await
        .get(0);
    let call = CallId { started_at, ..call };
    assert_eq!(spent_today(&app).await, 0.0, "yesterday's call");
    ledger::finish_call(&client, call, &answered(Some(0.25)), 0.0)
        .await
        .unwrap();
    assert_eq!(
        spent_today(&app).await,
        0.0,
        "its correction is yesterday's too"
    );
    let yesterday = app
        .row("SELECT sum(cost_usd)::float8 FROM provider_call_hour WHERE hour < date_trunc('day', now(), 'UTC')")
        .await
        .get::<_, f64>(0);
    assert_eq!(yesterday, 0.25);
}
