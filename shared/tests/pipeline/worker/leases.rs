//! Leases that follow the work (docs/fencing.md): a call longer than the lease keeps its job,
//! a crashed holder's jobs are claimed again within about one lease, a stalled holder's
//! renewal changes nothing, and a lease running when the server started runs again from its
//! start.

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider, Gate};
use triage::pipeline::{
    outbox::{
        claim,
        lease::{self, Queue},
        Lanes,
    },
    sweep,
};

use crate::helpers::{spawn_app_with_fake, TestApp};

use super::post;

const LEASE: Duration = Duration::from_secs(1);

async fn claim_one(
    app: &TestApp,
    who: &str,
    lease: Duration,
) -> triage::pipeline::outbox::ClaimedJob {
    let client = app.pool.get().await.unwrap();
    claim::claim(
        &client,
        who,
        1,
        lease,
        claim::Serves::Models,
        Lanes::default(),
    )
    .await
    .unwrap()
    .remove(0)
}

#[tokio::test]
async fn a_call_longer_than_the_lease_keeps_its_job_and_is_billed_once() {
    let fake = FakeProvider::start().await;
    let gate = Gate::new();
    fake.push(Behavior::Classify.held(&gate));
    let app = spawn_app_with_fake(&fake, |c| {
        c.worker.lease = LEASE;
        // The held call must not time out: it outlasts the lease, not its own timeout.
        c.worker.call_timeout = Duration::from_secs(10);
        c.worker.invocation_budget = Duration::from_secs(20);
    })
    .await;
    post(&app, "A slow answer").await;
    let worker = app.worker();
    let invocation = app.run_worker_once(&worker);
    let meanwhile = async {
        gate.wait_held(1, Duration::from_secs(10))
            .await
            .expect("the call is held");
        // Past the lease the claim took, and renewed since: still the worker's.
        let claimed_until = app
            .row("SELECT locked_until::text FROM evaluation_outbox")
            .await
            .get::<_, String>(0);
        app.wait_until(
            &format!(
                "SELECT count(*) FROM evaluation_outbox
                 WHERE status = 'processing' AND now() > '{claimed_until}'::timestamptz + interval '1 second'
                   AND locked_until > now()"
            ),
            |n| n == 1,
            "the lease renewed past the claim's",
        )
        .await;
        let swept = sweep::return_expired_leases(&app.pool, &app.config.worker)
            .await
            .unwrap();
        let other = app.run_worker_once(&app.worker()).await;
        gate.release();
        (swept, other)
    };
    let (report, (swept, other)) = tokio::join!(invocation, meanwhile);
    assert_eq!(swept.leases_returned, 0, "nothing expired: {swept:?}");
    assert_eq!(other.claimed, 0, "no other worker took the job");
    assert_eq!((report.evaluated, report.fenced), (1, 0), "{report:?}");
    assert_eq!(fake.billed_calls().len(), 1);
}

#[tokio::test]
async fn a_crashed_holders_job_is_claimed_again_by_the_next_claim_after_its_lease() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| c.worker.lease = LEASE).await;
    post(&app, "Its worker died").await;
    // A holder that renews nothing: a worker killed mid-call.
    let crashed = claim_one(&app, "crashed", LEASE).await;
    app.wait_until_lease_expired().await;
    // No sweeper runs: the next claimer returns the expired lease itself.
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.claimed, report.evaluated), (1, 1), "{report:?}");
    let attempts = app
        .row("SELECT attempts FROM evaluation_outbox")
        .await
        .get::<_, i32>(0);
    assert_eq!(attempts, crashed.attempts + 1, "the crash counted");
    assert_eq!(fake.billed_calls().len(), 1);
}

#[tokio::test]
async fn a_stalled_holders_renewal_changes_nothing_once_another_holds_the_job() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Contended").await;
    let stalled = claim_one(&app, "stalled", Duration::from_millis(50)).await;
    app.wait_until_lease_expired().await;
    sweep::return_expired_leases(&app.pool, &app.config.worker)
        .await
        .unwrap();
    let fresh = claim_one(&app, "fresh", Duration::from_secs(60)).await;
    let client = app.pool.get().await.unwrap();
    let before = app
        .row("SELECT locked_until::text FROM evaluation_outbox")
        .await
        .get::<_, String>(0);
    let renewed = lease::renew(
        &client,
        Queue::Evaluation,
        (&[stalled.id.0], &[stalled.claim_token]),
        Duration::from_secs(600),
    )
    .await
    .unwrap();
    assert!(
        renewed.is_empty(),
        "the stalled holder's token is fenced out"
    );
    let after = app
        .row("SELECT locked_until::text FROM evaluation_outbox")
        .await
        .get::<_, String>(0);
    assert_eq!(before, after, "the new holder's lease is untouched");
    let renewed = lease::renew(
        &client,
        Queue::Evaluation,
        (&[fresh.id.0], &[fresh.claim_token]),
        Duration::from_secs(600),
    )
    .await
    .unwrap();
    assert_eq!(renewed, vec![fresh.id.0]);
}

#[tokio::test]
async fn a_lease_running_when_the_server_started_runs_again_from_its_start() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Held across a restart").await;
    post(&app, "Held and expired since").await;
    for who in ["across", "expired"] {
        claim_one(&app, who, Duration::from_secs(60)).await;
    }
    // Both leases ran out before now. One was taken before the server's start, for longer
    // than the server has been up: its holder could not renew it while the server was away,
    // so it runs again from the start. The other was taken since, and is simply expired.
    app.exec(
        "UPDATE evaluation_outbox SET
             leased_at = pg_postmaster_start_time() - interval '1 day',
             locked_until = pg_postmaster_start_time() - interval '1 day'
                            + (now() - pg_postmaster_start_time()) + interval '1 hour'
         WHERE locked_by = 'across'",
    )
    .await;
    app.exec(
        "UPDATE evaluation_outbox SET leased_at = now() - interval '2 minutes',
                                      locked_until = now() - interval '1 minute'
         WHERE locked_by = 'expired'",
    )
    .await;
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE locked_until < now()")
            .await,
        2,
        "both expired by the clock"
    );
    let swept = sweep::return_expired_leases(&app.pool, &app.config.worker)
        .await
        .unwrap();
    assert_eq!(swept.leases_returned, 1, "{swept:?}");
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'processing' AND locked_by = 'across'"
        )
        .await,
        1,
        "the lease the restart interrupted is still held"
    );
}
