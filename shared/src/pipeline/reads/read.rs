//! The read side (`GET /tickets/{id}`): a ticket and the evaluation of its content.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;

use crate::{
    db,
    domain::{error::Result, ticket::TicketId, versions::Versions},
};

#[derive(Debug, Clone, Serialize)]
pub struct TicketView {
    pub id: TicketId,
    pub subject: String,
    pub message: String,
    pub created_at: DateTime<Utc>,
    pub evaluation: EvaluationView,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvaluationView {
    /// `pending`, `processing`, `done` or `dead`; `provisional` while only the local
    /// classifier's provisional answer exists (the job still queued).
    pub status: String,
    /// Whether the answer shown is provisional (the final one replaces it).
    pub provisional: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultView>,
    /// Versions whose evaluation this is (also while it is still pending).
    pub requested_prompt_version: String,
    pub requested_model_version: String,
    pub shown_because: ShownBecause,
}

/// Why these versions are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShownBecause {
    /// They are the promoted version (`triage promote`).
    Promoted,
    /// Nothing is promoted and they are the configured version.
    Configured,
    /// The active version (promoted, else configured) has no result for this ticket: this is
    /// the newest result it has, or, with none, the newest version it is queued under.
    Newest,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResultView {
    pub is_urgent: f64,
    pub department: String,
    pub urgency_score: f64,
    pub model_version: String,
    pub prompt_version: String,
    pub policy_version: String,
    pub evaluated_at: DateTime<Utc>,
    /// Which stage of a cascade answered: `local` or `model`.
    pub answered_by: String,
}

/// A ticket resolves to the evaluation of its *content* (via its key), so duplicates show the
/// one shared result. The active version is the newest promotion, else the configured one
/// (`$2`, `$3`), read in this same statement. A ticket shows a result when it has one: under
/// the active version if there, else the newest; with no result, the active version's status.
/// A finished job whose outbox row was removed by retention is still `done`: the result is
/// what counts. Dedup reveals nothing across callers: a result computed for someone else's
/// earlier ticket shows as evaluated no earlier than this ticket was created (the versions
/// shown are this ticket's own). Only `owner`'s tickets are found (`$4`; NULL, any ticket).
/// With no result, a provisional answer of the shown key (a cascade's local answer given while
/// the model could not be asked) is shown as such. A held ticket (its content sent first by
/// another owner, `ingest`) shows no answer until `held_until`, and then as evaluated then:
/// what a fresh evaluation looks like (docs/dedup.md). Like one, it is `pending` (a fresh job
/// waiting for its claim) and then `processing` (its provider call): it turns at a point of
/// the hold between its first tenth and two-fifths, taken from the ticket id's last byte (a
/// random one), so the turn is neither absent nor at the same share of every hold.
const SELECT_TICKET: &str = r#"
SELECT t.id, t.subject, t.message, t.created_at,
       shown.prompt_version, shown.model_version,
       o.status,
       coalesce(shown.is_urgent, pr.is_urgent), coalesce(shown.department, pr.department),
       coalesce(shown.urgency_score, pr.urgency_score),
       coalesce(shown.result_model_version, pr.model_version),
       coalesce(shown.result_prompt_version, pr.prompt_version),
       coalesce(shown.policy_version, pr.policy_version),
       greatest(coalesce(shown.computed_at, pr.computed_at), t.created_at, t.held_until),
       shown.is_active, active.promoted,
       shown.department IS NULL AND pr.department IS NOT NULL,
       coalesce(shown.answered_by, 'local'),
       coalesce(t.held_until > now(), false),
       coalesce(now() >= t.created_at + (t.held_until - t.created_at)
                         * (0.1 + 0.3 * get_byte(uuid_send(t.id), 15) / 255.0), false)
FROM ticket t
CROSS JOIN (
    SELECT coalesce(p.prompt_version, $2) AS prompt_version,
           coalesce(p.model_version, $3) AS model_version,
           p.prompt_version IS NOT NULL AS promoted
    FROM (SELECT 1) AS one
    LEFT JOIN (SELECT prompt_version, model_version FROM version_promotion
               ORDER BY id DESC LIMIT 1) p ON true
) active
LEFT JOIN LATERAL (
    SELECT te.idempotency_key, te.prompt_version, te.model_version,
           (te.prompt_version = active.prompt_version
            AND te.model_version = active.model_version) AS is_active,
           r.is_urgent, r.department, r.urgency_score,
           r.model_version AS result_model_version, r.prompt_version AS result_prompt_version,
           r.policy_version, r.computed_at, r.answered_by
    FROM ticket_evaluation te
    LEFT JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
    WHERE te.ticket_id = t.id
    ORDER BY (r.idempotency_key IS NOT NULL) DESC, is_active DESC, te.created_at DESC
    LIMIT 1
) shown ON true
LEFT JOIN evaluation_outbox o ON o.idempotency_key = shown.idempotency_key
LEFT JOIN provisional_result pr
       ON pr.idempotency_key = shown.idempotency_key AND shown.department IS NULL
WHERE t.id = $1 AND ($4::text IS NULL OR t.owner = $4)
"#;

/// The ticket `id` as `owner` may see it: `None` when it does not exist or is someone
/// else's (the same answer, so existence is not revealed). `owner: None` reads any ticket
/// (the read-all scope, the console).
pub async fn find(
    pool: &Pool,
    versions: &Versions,
    id: TicketId,
    owner: Option<&str>,
) -> Result<Option<TicketView>> {
    let client = db::client(pool).await?;
    let Some(row) = client
        .query_opt(
            SELECT_TICKET,
            &[&id.0, &versions.prompt, &versions.model, &owner],
        )
        .await?
    else {
        return Ok(None);
    };
    let held: bool = row.get(18);
    let result = row
        .get::<_, Option<String>>(8)
        .filter(|_| !held)
        .map(|department| ResultView {
            is_urgent: row.get(7),
            department,
            urgency_score: row.get(9),
            model_version: row.get(10),
            prompt_version: row.get(11),
            policy_version: row.get(12),
            evaluated_at: row.get(13),
            answered_by: row.get(17),
        });
    let provisional: bool = row.get(16);
    let claimed_if_fresh: bool = row.get(19);
    let status = match (&result, row.get::<_, Option<String>>(6)) {
        (None, _) if held && claimed_if_fresh => "processing".to_string(),
        (None, _) if held => "pending".to_string(),
        (Some(_), _) if provisional => "provisional".to_string(),
        (Some(_), _) => "done".to_string(),
        (None, Some(status)) => status,
        (None, None) => "pending".to_string(),
    };
    Ok(Some(TicketView {
        id: TicketId(row.get(0)),
        subject: row.get(1),
        message: row.get(2),
        created_at: row.get(3),
        evaluation: EvaluationView {
            status,
            provisional,
            result,
            requested_prompt_version: row.get::<_, Option<String>>(4).unwrap_or_default(),
            requested_model_version: row.get::<_, Option<String>>(5).unwrap_or_default(),
            shown_because: match (row.get::<_, Option<bool>>(14), row.get::<_, bool>(15)) {
                (Some(true), true) => ShownBecause::Promoted,
                (Some(true), false) => ShownBecause::Configured,
                _ => ShownBecause::Newest,
            },
        },
    }))
}
