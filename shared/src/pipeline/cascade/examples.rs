//! What trains a local classifier, from the database: the large model's own answers
//! (distillation; never the classifier's own, never eval work) and the help desk's
//! corrections. A labelled set's dev rows come from `operations::train`. Erased tickets are
//! gone from both, so they never train the next classifier. Each source is read with each
//! ticket owner's share capped (`TRIAGE_TRAIN_OWNER_SHARE`, [`caps::owner_cap`]), so one caller's
//! traffic cannot make up a training set, and the desk's with each label giver's share of the
//! training set's weight capped (`TRIAGE_TRAIN_GIVER_SHARE`) and a lone giver's word against
//! both the model and the classifier held ([`hold`]; docs/labelling.md); streamed (a portal, a
//! batch of rows at a time) into a [`Gathered`] that holds what its budget allows, each
//! owner's newest first, and what was not read is counted, never silently left out.

use std::{collections::BTreeMap, sync::LazyLock};

use chrono::{DateTime, Utc};
use deadpool_postgres::Client;
use serde::Serialize;
use tokio_postgres::{types::ToSql, IsolationLevel};

use super::{
    caps::{self, Shares},
    gather::{Gathered, LeftOut, Standing, Taken},
    hold,
};
use crate::{
    domain::error::Result,
    providers::{classifier::Example, Policy},
};

/// How much one correction from the desk counts beside one answer of the model: the desk's
/// word is the truth the model's answers only approximate.
pub const FEEDBACK_WEIGHT: f32 = 3.0;

/// The most one audited answer counts. A ticket the audit drew at the share `s` stands for the
/// `1 / s` tickets the classifier answered itself, which have no model's answer to train on:
/// weighed so, the tickets a live cascade answers locally are in the training in proportion
/// and a retrain does not drift towards the hard tickets the model saw. Capped because at the
/// default share (0.03) one audited ticket would count 33 times, and a few mistaken ones would
/// outweigh what the rest teach.
pub const AUDIT_WEIGHT_CAP: f64 = 10.0;

/// The most rows one source gives: each owner's newest. Each is bounded in bytes
/// (`classifier::bounded`), and the gathering's budget bounds them all.
pub const MAX_EXAMPLES_PER_SOURCE: i64 = 300_000;

/// Rows fetched from the portal at a time: a few MB at most (each text is at most 8 KiB of
/// characters, so 32 KiB of bytes).
const BATCH_ROWS: i32 = 128;

/// How long one statement of a training's read may take, in place of the pool's online bound
/// (`TRIAGE_DB_STATEMENT_TIMEOUT_SECONDS`, 10 s): the first fetch ranks the whole source
/// (300,000 rows: about 2 s on an idle server, an external sort of some 40 MB), and the ops
/// function's own timeout (900 s) bounds the whole.
const READ_STATEMENT_TIMEOUT: &str = "SET LOCAL statement_timeout = '120s'";

/// Characters of a text read (`left`, which counts characters): at least the bytes the
/// classifier reads of it, however many bytes a character takes.
const READ_CHARS: i32 = 8 * 1024;

/// Production results answered by a model under the policy `$3` in the last `$1` days, with
/// the ticket they name, its owner and the model version that labelled it; `$2` turns the
/// answer's `is_urgent` into a label. A classifier learns one taxonomy. An answer on a ticket
/// the audit drew weighs `1 / share` times as much, at most `$4` ([`AUDIT_WEIGHT_CAP`]). No
/// text: it is read for the rows kept only ([`capped`]). A model's answer is never held.
const RESULTS: &str = r#"
SELECT t.id, coalesce(t.owner, '(none)') AS owner, r.department, r.is_urgent >= $2 AS is_urgent,
       r.model_version AS giver, r.computed_at AS at, r.idempotency_key AS tiebreak, false AS held,
       CASE WHEN drawn.share IS NULL THEN 1 ELSE least(1 / drawn.share, $4::float8) END AS factor,
       CASE WHEN drawn.share IS NULL THEN 'model' ELSE 'audit' END AS standing
FROM evaluation_result r
JOIN ticket t ON t.id = r.ticket_id AND t.workload = 'production'
LEFT JOIN LATERAL (
    SELECT min(a.share) AS share FROM cascade_audit a WHERE a.idempotency_key = r.idempotency_key
) drawn ON true
WHERE r.computed_at > now() - make_interval(days => $1) AND r.answered_by = 'model'
  AND r.policy_version = $3
"#;

/// A labeller's current labels given in the last `$1` days in the policy's departments (`$2`;
/// labels given under another taxonomy are not this classifier's), with the ticket's owner,
/// who gave them and whether they are held ([`hold::held`]). Feedback from a giver who may not
/// label never trains (docs/labelling.md); a label lacking a field (V40: a desk event labels
/// the field it changed) trains once both are labelled, and is no feedback example until then.
static FEEDBACK: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT t.id, coalesce(t.owner, '(none)') AS owner, f.department, f.is_urgent,
                f.given_by AS giver, f.created_at AS at, f.id AS tiebreak, {held} AS held,
                1::float8 AS factor, 'desk' AS standing
         FROM ticket_feedback f
         JOIN ticket t ON t.id = f.ticket_id
         WHERE f.superseded_at IS NULL AND f.labeller
           AND f.created_at > now() - make_interval(days => $1)
           AND f.department = ANY ($2::text[]) AND f.is_urgent IS NOT NULL",
        held = hold::held(2)
    )
});

/// How many of a source's rows each owner has that are not held, and how many are (tickets
/// stored before owners were, V8, are one owner, `(none)`).
fn per_owner(source: &str) -> String {
    format!(
        "SELECT owner, count(*) FILTER (WHERE NOT held), count(*) FILTER (WHERE held)
         FROM ({source}) AS s GROUP BY owner"
    )
}

/// Each owner's rows not held, newest first, ranked (`nth`) among its owner's.
fn ranked(source: &str) -> String {
    format!(
        "SELECT s.*, row_number() OVER (PARTITION BY owner ORDER BY at DESC, tiebreak) AS nth
         FROM ({source}) AS s WHERE NOT s.held"
    )
}

/// How many rows each giver has of a source of `params` parameters within the owner cap (the
/// next parameter).
fn per_giver(source: &str, params: usize) -> String {
    let ranked = ranked(source);
    format!(
        "SELECT giver, count(*) FROM ({ranked}) AS o WHERE nth <= ${} GROUP BY giver",
        params + 1
    )
}

/// A source of `params` parameters read capped: at most the next parameter's (the owner cap)
/// rows of each owner and of those at most the one after's (the giver cap) of each giver, the
/// newest, at most the third one after's rows in all, with the first characters (the fourth
/// one after) of the ticket's texts. Ordered by each row's rank among its owner's, newest
/// first, so that any first rows read hold each owner's newest and none more than its share
/// (a share that holds for the cap holds for fewer: `caps::owner_cap`). The texts are read after the
/// ordering and the limit, for the rows fetched only.
fn capped(source: &str, params: usize) -> String {
    let (cap, giver_cap, limit, chars) = (params + 1, params + 2, params + 3, params + 4);
    let ranked = ranked(source);
    format!(
        "SELECT text.subject, text.message, s.department, s.is_urgent, s.id, s.owner, s.giver,
                s.factor, s.standing
         FROM (
             SELECT * FROM (
                 SELECT o.*,
                        row_number() OVER (PARTITION BY giver ORDER BY at DESC, tiebreak) AS by_giver
                 FROM ({ranked}) AS o
                 WHERE nth <= ${cap}
             ) AS ranked
             WHERE by_giver <= ${giver_cap}
             ORDER BY nth, at DESC, tiebreak
             LIMIT ${limit}
         ) AS s
         CROSS JOIN LATERAL (
             SELECT left(t.subject, ${chars}) AS subject, left(t.message, ${chars}) AS message
             FROM ticket t WHERE t.id = s.id
         ) AS text
         ORDER BY s.nth, s.at DESC, s.tiebreak"
    )
}

/// What one source gave a training: how many of its rows were read (each an example, one per
/// text once merged), the production tickets they were read from (recorded with the
/// classifier, `trained_on`, for erasure), where they came from, and what was left out.
#[derive(Debug, Default)]
pub struct Read {
    pub rows: usize,
    pub tickets: Vec<uuid::Uuid>,
    pub provenance: Provenance,
    pub left_out: LeftOut,
}

/// Who a source's examples came from (`local_model.provenance`, V36): per ticket owner (the
/// digest stored on the ticket) and per giver (the model version that answered; the feedback's
/// giver as `ticket_feedback.given_by` records it), and the caps applied.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Provenance {
    pub owner_cap: Option<i64>,
    /// The owners the cap bit, with the rows it left out of each (their oldest).
    pub owner_capped: BTreeMap<String, u64>,
    pub owners: BTreeMap<String, usize>,
    /// Rows per giver.
    pub givers: BTreeMap<String, usize>,
    /// The weight each giver's rows carried (1 a model's answer, up to [`AUDIT_WEIGHT_CAP`] an
    /// audited one, [`FEEDBACK_WEIGHT`] a desk label).
    pub giver_weight: BTreeMap<String, f64>,
    /// The most rows one giver of the desk's labels gave (`TRIAGE_TRAIN_GIVER_SHARE`).
    pub giver_cap: Option<i64>,
    /// The givers that cap bit, with the labels it left out of each (their oldest).
    pub giver_capped: BTreeMap<String, u64>,
}

/// Which days a source reads: the last `days` (`until: None`), or the `days` before `until`
/// (what a classifier trained at `until` would have read: `triage eval --by-time`, retrain).
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub days: i32,
    pub until: Option<DateTime<Utc>>,
}

impl Window {
    pub fn last(days: u32) -> Self {
        Self {
            days: days as i32,
            until: None,
        }
    }

    pub fn before(until: DateTime<Utc>, days: u32) -> Self {
        Self {
            days: days as i32,
            until: Some(until),
        }
    }
}

/// Days back from now that reach any window [`before`] reads (`$1` of the sources).
const ANY_WINDOW: i32 = 366 * 100;

/// A source (its `days` parameter first) read over the window `[until - days, until)` only.
fn before(source: &str, params: usize) -> String {
    let (until, days) = (params + 1, params + 2);
    format!(
        "SELECT * FROM ({source}) AS w \
         WHERE w.at < ${until} AND w.at >= ${until} - make_interval(days => ${days})"
    )
}

/// How a source is read: its owners' share, and for the desk's labels their givers' share of
/// the set's weight beside `others` (the weight of the set's other examples).
#[derive(Debug, Clone, Copy)]
struct Capping {
    owner_share: f64,
    givers: Option<(f64, f64)>,
}

/// Reads `source` (its parameters after `$1`, the days, `own`) over `window`, capped as
/// `capping` says, into `gathered` (`None`: counted only), each row weighing `weight`, until
/// it holds what its budget allows. One read-only transaction at one snapshot: the counts and
/// the rows agree, so what was left out is exactly what the counts say remained.
async fn read(
    client: &mut Client,
    (source, own): (&str, &[&(dyn ToSql + Sync)]),
    window: Window,
    capping: Capping,
    weight: f32,
    gathered: Option<&mut Gathered>,
) -> Result<Read> {
    let source = match window.until {
        None => source.to_string(),
        Some(_) => before(source, own.len() + 1),
    };
    let days: &(dyn ToSql + Sync) = match window.until {
        None => &window.days,
        Some(_) => &ANY_WINDOW,
    };
    let mut params = vec![days];
    params.extend_from_slice(own);
    if let Some(until) = &window.until {
        params.extend([until as &(dyn ToSql + Sync), &window.days]);
    }
    let transaction = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    transaction.batch_execute(READ_STATEMENT_TIMEOUT).await?;
    let (mut owners, mut held) = (Vec::new(), 0);
    for row in transaction.query(&per_owner(&source), &params).await? {
        owners.push((row.get::<_, String>(0), row.get::<_, i64>(1)));
        held += row.get::<_, i64>(2);
    }
    let counts: Vec<i64> = owners.iter().map(|(_, n)| *n).collect();
    let cap = caps::owner_cap(&counts, capping.owner_share);
    let bound = cap.unwrap_or(i64::MAX);
    let all: i64 = counts.iter().sum();
    let capped_rows: i64 = counts.iter().map(|&n| n.min(bound)).sum();
    let (giver_cap, giver_capped) = match capping.givers {
        None => (None, BTreeMap::new()),
        Some((share, others)) => {
            let mut with_bound = params.clone();
            with_bound.push(&bound);
            let givers: Vec<(String, i64)> = transaction
                .query(&per_giver(&source, params.len()), &with_bound)
                .await?
                .iter()
                .map(|row| (row.get(0), row.get(1)))
                .collect();
            let counts: Vec<i64> = givers.iter().map(|(_, n)| *n).collect();
            // In the giver's units: `others` weighs as many of its labels as it is heavier.
            let cap = caps::cap(&counts, others / f64::from(weight), share);
            (cap, caps::cut(&givers, cap))
        }
    };
    let giver_left_out: u64 = giver_capped.values().sum();
    let kept = capped_rows - giver_left_out as i64;
    let limited = kept.min(MAX_EXAMPLES_PER_SOURCE);
    let mut read = Read {
        provenance: Provenance {
            owner_cap: cap,
            owner_capped: caps::cut(&owners, cap),
            giver_cap,
            giver_capped,
            ..Provenance::default()
        },
        ..Read::default()
    };
    let mut streamed = 0;
    if let Some(gathered) = gathered.filter(|g| limited > 0 && !g.is_full()) {
        let givers_bound = giver_cap.unwrap_or(i64::MAX);
        let (limit, chars) = (MAX_EXAMPLES_PER_SOURCE, READ_CHARS);
        let mut all_params = params.clone();
        all_params.extend([&bound as &(dyn ToSql + Sync), &givers_bound, &limit, &chars]);
        let statement = transaction.prepare(&capped(&source, params.len())).await?;
        let portal = transaction.bind(&statement, &all_params).await?;
        'portal: loop {
            let rows = transaction.query_portal(&portal, BATCH_ROWS).await?;
            for row in &rows {
                let (example, standing) = example(row, weight);
                let weighs = f64::from(example.weight);
                if gathered.take(example, standing) == Taken::Full {
                    break 'portal;
                }
                read.rows += 1;
                read.tickets.push(row.get(4));
                *read.provenance.owners.entry(row.get(5)).or_default() += 1;
                let giver: String = row.get(6);
                *read
                    .provenance
                    .giver_weight
                    .entry(giver.clone())
                    .or_default() += weighs;
                *read.provenance.givers.entry(giver).or_default() += 1;
            }
            if rows.len() < BATCH_ROWS as usize {
                break;
            }
        }
        streamed = read.rows;
    }
    transaction.commit().await?;
    read.left_out = LeftOut {
        held: held as u64,
        owner_cap: (all - capped_rows) as u64,
        giver_cap: giver_left_out,
        row_cap: (kept - limited) as u64,
        memory: limited as u64 - streamed as u64,
    };
    Ok(read)
}

/// The model's answers over `window`, each owner's share capped under `share`
/// (`TRIAGE_TRAIN_OWNER_SHARE`), into `gathered`.
pub async fn results(
    client: &mut Client,
    window: Window,
    policy: &Policy,
    share: f64,
    gathered: &mut Gathered,
) -> Result<Read> {
    read_results(client, window, policy, share, Some(gathered)).await
}

/// The weight [`results`] would give a training (each answer weighs 1) before the budget of
/// its memory: what the desk's givers' shares are reckoned beside.
pub async fn results_weight(
    client: &mut Client,
    window: Window,
    policy: &Policy,
    share: f64,
) -> Result<f64> {
    // Nothing gathered: every row the caps keep is counted as the memory's.
    let counted = read_results(client, window, policy, share, None).await?;
    Ok(counted.left_out.memory as f64)
}

async fn read_results(
    client: &mut Client,
    window: Window,
    policy: &Policy,
    share: f64,
    gathered: Option<&mut Gathered>,
) -> Result<Read> {
    let threshold = policy.urgent_threshold;
    let own: [&(dyn ToSql + Sync); 3] = [&threshold, &policy.version, &AUDIT_WEIGHT_CAP];
    let capping = Capping {
        owner_share: share,
        givers: None,
    };
    read(client, (RESULTS, &own), window, capping, 1.0, gathered).await
}

/// A labeller's current labels over `window`, each owner's share capped and each giver's
/// share of the training set's weight, `others` being the weight of its other examples (the
/// model's answers and a labelled set's rows: 1 each), into `gathered`.
pub async fn feedback(
    client: &mut Client,
    window: Window,
    policy: &Policy,
    (shares, others): (Shares, f64),
    gathered: &mut Gathered,
) -> Result<Read> {
    let own: [&(dyn ToSql + Sync); 1] = [&policy.departments];
    let capping = Capping {
        owner_share: shares.owner,
        givers: Some((shares.giver, others)),
    };
    let source = (FEEDBACK.as_str(), &own[..]);
    read(
        client,
        source,
        window,
        capping,
        FEEDBACK_WEIGHT,
        Some(gathered),
    )
    .await
}

/// A row as an example weighing `weight` times its own factor (an audited answer's), and whose
/// word its labels are.
fn example(row: &tokio_postgres::Row, weight: f32) -> (Example, Standing) {
    let example = Example {
        subject: row.get(0),
        message: row.get(1),
        department: row.get(2),
        is_urgent: row.get(3),
        weight: weight * row.get::<_, f64>(7) as f32,
    };
    let standing = match row.get::<_, &str>(8) {
        "desk" => Standing::Desk,
        "audit" => Standing::Audit,
        _ => Standing::Model,
    };
    (example, standing)
}
