//! The sweeper Lambda as Lambda runs it: the real binary, an EventBridge scheduled event
//! through the Runtime API emulator, a real PostgreSQL.

use std::time::Duration;

use testkit::lambda::{events, Function, RuntimeApi};
use triage::{
    config::Config,
    db,
    pipeline::ingest::{create_ticket, NewTicket, Submitter},
    pipeline::outbox::{
        claim::{claim, Serves},
        Lanes,
    },
    telemetry::NAMESPACE,
};

const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn scheduled_event_returns_an_expired_lease_to_pending_and_answers_with_the_report() {
    let url = testkit::fresh_database().await;
    let config = Config::local(&url);
    db::migrate(&config.database).await.unwrap();
    let pool = db::pool(&config.database).unwrap();
    let (subject, message) = ("Zanzibar invoice", "Quokka account locked since Tuesday");
    let ticket = NewTicket {
        subject: subject.into(),
        message: message.into(),
    };
    create_ticket(&pool, &config.versions, &ticket, Submitter::LOCAL)
        .await
        .unwrap();
    // A worker that claimed the job and died: its lease (zero long) has run out.
    let client = pool.get().await.unwrap();
    let claimed = claim(
        &client,
        "crashed-worker",
        1,
        Duration::ZERO,
        Serves::RulesOnly,
        Lanes::default(),
    )
    .await
    .unwrap();
    assert_eq!(claimed.len(), 1);
    let runtime = RuntimeApi::start().await;
    let function = Function::spawn(
        env!("CARGO_BIN_EXE_triage-sweeper"),
        &runtime,
        [("DATABASE_URL", &url)],
    );

    let invocation = runtime.invoke(events::scheduled(), TIMEOUT).await;

    let report = invocation.result.expect("the sweeper answered");
    assert_eq!(report["leases_returned"], 1, "{report}");
    assert_eq!(report["leases_dead_lettered"], 0, "{report}");
    assert_eq!(report["health"]["pending"], 1, "{report}");
    assert_eq!(report["health"]["processing"], 0, "{report}");
    let row = client
        .query_one(
            "SELECT status, locked_by, error_class FROM evaluation_outbox",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, &str>(0), "pending");
    assert_eq!(row.get::<_, Option<&str>>(1), None);
    assert_eq!(row.get::<_, Option<&str>>(2), Some("lease_expired"));

    function.stderr().wait_for("expired leases swept").await;
    function.stdout().wait_for("outbox.lease_expired").await;
    function.assert_telemetry(&invocation.request_id, NAMESPACE, &[subject, message]);
    function.print_init_and_size(&runtime).await;
}
