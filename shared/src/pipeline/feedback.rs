//! The help desk's feedback (`POST /tickets/{id}/feedback`, the ops Lambda's `feedback`): the
//! department and urgency an agent settled on for a ticket. Stored with who gave it and when; a
//! later one replaces it and the history stays (`ticket_feedback`, V25), its newest labels
//! only, up to a cap (`Limits::feedback_history`), so no caller grows a ticket's history
//! without bound. When it is given, each
//! version's answer for the ticket is matched against it (`feedback_match`), and a trigger
//! keeps the matches' running totals per day and version (`feedback_agreement_day`), from
//! which [`agreement`] reads the 7- and 30-day figures in a few rows, never a scan. Erasing a
//! ticket erases its feedback and, through the same trigger, its share of the totals; eval
//! tickets take no feedback.
//!
//! A label may carry one field only ([`Fields`]: a help desk's event labels the field it
//! changed, docs/labelling.md): the other is kept from the ticket's current label of the same
//! kind, or stays NULL, which every reader takes as "no label for that field" (agreement counts
//! the field only where it is labelled; `eval --set feedback` and training read labels that
//! carry both).
//!
//! Only a labeller's feedback is the desk's (docs/labelling.md): feedback from a giver who may
//! not label is stored, and supersedes only that kind's earlier label, but is matched against
//! nothing, so it moves no agreement figure, and is read by neither `triage eval --set
//! feedback` ([`labelled`]) nor training (`cascade::examples`).

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde::{Deserialize, Serialize};

use crate::{
    db,
    domain::{error::Result, ticket::TicketId},
};

/// The labels the desk settled on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    pub department: String,
    pub is_urgent: bool,
}

/// The labels one feedback gives: `None` is no label for that field (the current label's is
/// kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    pub department: Option<String>,
    pub is_urgent: Option<bool>,
}

impl From<&Labels> for Fields {
    fn from(labels: &Labels) -> Self {
        Self {
            department: Some(labels.department.clone()),
            is_urgent: Some(labels.is_urgent),
        }
    }
}

/// Feedback as stored (`None`: the ticket has no label for that field).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Given {
    pub ticket_id: TicketId,
    pub department: Option<String>,
    pub is_urgent: Option<bool>,
    pub given_at: DateTime<Utc>,
    /// It replaced earlier feedback on the ticket (kept as history).
    pub replaced: bool,
    /// The versions whose answer for the ticket it was matched against.
    pub versions_matched: i64,
    /// Its giver may label: it trains and judges. False: stored, counted for nothing.
    pub labeller: bool,
}

/// Two feedbacks on one ticket are stored one after the other: a lock on the ticket's id for
/// the transaction (an advisory one: the API's role may not lock `ticket`'s rows).
const ONE_AT_A_TIME: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('feedback' || $1::uuid::text, 0))";

/// The ticket, if it is a production ticket `$2` (its owner) may read.
const OWNED_TICKET: &str = "SELECT 1 FROM ticket WHERE id = $1 AND workload = 'production' \
                            AND owner = $2";
/// The ticket, if it is a production ticket, whoever owns it: for the desk's own givers (an
/// operator, a connector), without reading `owner`, which the deliverer may not (V40).
const ANY_TICKET: &str = "SELECT 1 FROM ticket WHERE id = $1 AND workload = 'production'";

/// The current feedback of the same kind (a labeller's or not, `$2`) steps aside: its matches
/// (and so its share of the totals) go; its labels are what a label of one field keeps of the
/// other (one current label per kind: at most one row).
const SUPERSEDE: &str = r#"
WITH old AS (
    UPDATE ticket_feedback SET superseded_at = now()
    WHERE ticket_id = $1 AND superseded_at IS NULL AND labeller = $2
    RETURNING id, department, is_urgent
), gone AS (
    DELETE FROM feedback_match WHERE feedback_id IN (SELECT id FROM old)
)
SELECT (SELECT count(*) FROM old), (SELECT department FROM old), (SELECT is_urgent FROM old)
"#;

/// A ticket's history beyond its newest `$2` labels goes (superseded ones only: they have no
/// matches, so the totals do not move).
const PRUNE: &str = r#"
DELETE FROM ticket_feedback
WHERE ticket_id = $1 AND superseded_at IS NOT NULL
  AND id NOT IN (SELECT id FROM ticket_feedback WHERE ticket_id = $1 ORDER BY id DESC LIMIT $2)
"#;

const INSERT: &str =
    "INSERT INTO ticket_feedback (ticket_id, department, is_urgent, given_by, labeller) \
     VALUES ($1, $2, $3, $4, $5) RETURNING id, created_at";

/// Each version's answer for the ticket's content against the desk's labels, on the day the
/// feedback was given; an answer is urgent at the policy's threshold (`$5`). A field the label
/// lacks (NULL) matches as NULL: the totals do not count it.
const MATCH: &str = r#"
INSERT INTO feedback_match (feedback_id, prompt_version, model_version, day,
                            department_agrees, predicted_urgent, desk_urgent)
SELECT $1, r.prompt_version, r.model_version, ($2::timestamptz AT TIME ZONE 'UTC')::date,
       r.department = $3, r.is_urgent >= $5, $4
FROM ticket_evaluation te JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
WHERE te.ticket_id = $6
ON CONFLICT DO NOTHING
"#;

/// Who gives feedback, and how it is judged and kept.
#[derive(Debug, Clone, Copy)]
pub struct Giver<'a> {
    /// Whose tickets it may label (`None`: any).
    pub owner: Option<&'a str>,
    /// As recorded.
    pub given_by: &'a str,
    /// The policy's: an answer is urgent from it.
    pub urgent_threshold: f64,
    /// Labels kept per ticket, the current one included.
    pub history: usize,
    /// The giver may label (docs/labelling.md): its feedback trains and judges.
    pub labeller: bool,
}

/// Stores `labels` for `ticket` as `giver` gives them, a field it lacks kept from the current
/// label of the giver's kind; `None` when the ticket does not exist, is not the giver's, or is
/// eval work (the same answer, so existence is not revealed).
pub async fn give(
    pool: &Pool,
    ticket: TicketId,
    labels: &Fields,
    giver: Giver<'_>,
) -> Result<Option<Given>> {
    let Giver {
        owner,
        given_by,
        urgent_threshold,
        history,
        labeller,
    } = giver;
    let mut client = db::client(pool).await?;
    let transaction = client.transaction().await?;
    transaction.execute(ONE_AT_A_TIME, &[&ticket.0]).await?;
    let found = match owner {
        Some(owner) => {
            transaction
                .query_opt(OWNED_TICKET, &[&ticket.0, &owner])
                .await?
        }
        None => transaction.query_opt(ANY_TICKET, &[&ticket.0]).await?,
    };
    if found.is_none() {
        return Ok(None);
    }
    let old = transaction
        .query_one(SUPERSEDE, &[&ticket.0, &labeller])
        .await?;
    let replaced: i64 = old.get(0);
    let department = labels.department.clone().or(old.get(1));
    let is_urgent = labels.is_urgent.or(old.get(2));
    let row = transaction
        .query_one(
            INSERT,
            &[&ticket.0, &department, &is_urgent, &given_by, &labeller],
        )
        .await?;
    let (id, given_at): (i64, DateTime<Utc>) = (row.get(0), row.get(1));
    let kept = i64::try_from(history.max(1)).unwrap_or(i64::MAX);
    transaction.execute(PRUNE, &[&ticket.0, &kept]).await?;
    let matched = if !labeller {
        0
    } else {
        transaction
            .execute(
                MATCH,
                &[
                    &id,
                    &given_at,
                    &department,
                    &is_urgent,
                    &urgent_threshold,
                    &ticket.0,
                ],
            )
            .await?
    };
    transaction.commit().await?;
    Ok(Some(Given {
        ticket_id: ticket,
        department,
        is_urgent,
        given_at,
        replaced: replaced > 0,
        versions_matched: matched as i64,
        labeller,
    }))
}

/// A production ticket with the desk's current labels (`triage eval --set feedback`).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledTicket {
    pub ticket_id: TicketId,
    pub subject: String,
    pub message: String,
    pub department: String,
    pub is_urgent: bool,
    /// Where the label came from (`ticket_feedback.source`, V39): `desk`, `audit` or `model`.
    pub source: String,
}

/// The tickets whose current labeller's feedback was given in the last `days` days, in ticket
/// order; a label that lacks a field is no row (a set's row carries both).
pub async fn labelled(client: &impl GenericClient, days: u32) -> Result<Vec<LabelledTicket>> {
    let rows = client
        .query(
            "SELECT t.id, t.subject, t.message, f.department, f.is_urgent, f.source \
             FROM ticket_feedback f JOIN ticket t ON t.id = f.ticket_id \
             WHERE f.superseded_at IS NULL AND f.labeller AND t.workload = 'production' \
               AND f.department IS NOT NULL AND f.is_urgent IS NOT NULL \
               AND f.created_at > now() - make_interval(days => $1) \
             ORDER BY t.id",
            &[&(days as i32)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| LabelledTicket {
            ticket_id: TicketId(row.get(0)),
            subject: row.get(1),
            message: row.get(2),
            department: row.get(3),
            is_urgent: row.get(4),
            source: row.get(5),
        })
        .collect())
}

/// Agreement with the desk for one version over a window (SPEC: `agreement` in `triage stats`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    pub window_days: i32,
    pub prompt_version: String,
    pub model_version: String,
    /// Tickets with a department label and an answer of this version.
    pub n: i64,
    pub department_accuracy: f64,
    /// `None` while this version called nothing urgent that the desk labelled.
    pub urgent_precision: Option<f64>,
    /// `None` while the desk labelled nothing urgent.
    pub urgent_recall: Option<f64>,
    /// What the figures are judged against: always the desk's labels (`ticket_feedback`'s
    /// `desk` source), never the large model's own answers.
    pub truth: &'static str,
}

/// The windows `triage stats` reports, in days.
pub const WINDOWS: [i32; 2] = [7, 30];

/// The last 7 and 30 UTC days (today included) per version, from the running totals (`n`: the
/// labels with a department, V40; a version judged on urgency only still has its row).
const AGREEMENT: &str = r#"
SELECT w.days, t.prompt_version, t.model_version, sum(t.n)::int8, sum(t.department_agrees)::int8,
       sum(t.urgent_tp)::int8, sum(t.urgent_fp)::int8, sum(t.urgent_fn)::int8
FROM unnest($1::int4[]) AS w (days)
JOIN feedback_agreement_day t ON t.day > (now() AT TIME ZONE 'UTC')::date - w.days
GROUP BY 1, 2, 3
HAVING sum(t.n) > 0 OR sum(t.urgent_tp + t.urgent_fp + t.urgent_fn) > 0
ORDER BY 1, 4 DESC, 2, 3
"#;

pub async fn agreement(client: &impl GenericClient) -> Result<Vec<Agreement>> {
    let windows = WINDOWS.to_vec();
    let rows = client.query(AGREEMENT, &[&windows]).await?;
    Ok(rows
        .iter()
        .map(|row| {
            let (n, agrees, tp, fp, fn_): (i64, i64, i64, i64, i64) =
                (row.get(3), row.get(4), row.get(5), row.get(6), row.get(7));
            let share = |part: i64, whole: i64| (whole > 0).then(|| part as f64 / whole as f64);
            Agreement {
                window_days: row.get(0),
                prompt_version: row.get(1),
                model_version: row.get(2),
                n,
                department_accuracy: share(agrees, n).unwrap_or(0.0),
                urgent_precision: share(tp, tp + fp),
                urgent_recall: share(tp, tp + fn_),
                truth: "desk",
            }
        })
        .collect())
}
