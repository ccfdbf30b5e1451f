//! `triage import zendesk --since DURATION --out FILE` (docs/zendesk.md, "The desk's
//! history"): the account's solved and closed tickets, read with Zendesk's cursor-based
//! Incremental Ticket Export, written as a labelled set (JSONL rows of SPEC's shape) that
//! `triage train` and `triage eval` read. The final group is mapped back to a department
//! through the taxonomy (`--taxonomy`, default the configured policy); tickets in a group no
//! department has are left out and counted. Nothing is triaged, nothing is billed.
//!
//! Resumable: after each page its rows are appended and the page's `after_cursor` written
//! to `FILE.cursor`; a run that finds that file continues from it (an interrupted run, or a
//! later one that picks up what changed since). Zendesk exports again every ticket updated
//! since (solved → closed is routine), so a run ends by keeping each id's newest row only.
//! Within its rate limit: each page takes a slot of a shared limit (the export's own, 10
//! requests a minute per Zendesk's reference), and a 429 waits its `Retry-After`.
//!
//! The export is for admins only: `--email` names an admin to authenticate as with the
//! account's API token (the connector's own user is an agent). Both files hold customers'
//! text and are created readable by their owner only (0600; docs/runbook.md, erasure).

use std::{
    collections::HashMap,
    fs::{OpenOptions, Permissions},
    io::Write,
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    time::Duration,
};

use deadpool_postgres::Pool;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::{
    config::RateLimitPolicy,
    connectors::zendesk::{
        api::{ApiError, Start, Ticket},
        ZendeskConfig,
    },
    db,
    domain::error::{ConfigError, Error, InvalidRequest, Result},
    pipeline::{
        limits::rate_limit::{self, Pace, Take},
        zendesk::groups::{Back, Mapping},
    },
    quality::set::{Row, Split},
};

/// Zendesk's limit on the incremental export endpoints ("Incremental Exports": 10 a minute).
pub const EXPORT_RPM: u32 = 10;
/// Retries of one page after 429s before the run stops (its cursor kept for the next run).
const MAX_THROTTLED: u32 = 20;

/// What one run asks for.
#[derive(Debug, Clone)]
pub struct ImportZendesk {
    pub since: Duration,
    pub out: PathBuf,
    /// The taxonomy the groups are mapped through.
    pub policy_version: String,
    pub requests_per_minute: u32,
    /// An admin's email to authenticate as (`--email`); `None`: `TRIAGE_ZENDESK_EMAIL`.
    pub email: Option<String>,
}

/// Who may read the files: their owner only.
const PRIVATE: u32 = 0o600;

/// What a run did (also `--json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Imported {
    pub rows: u64,
    /// Solved or closed tickets in a group no department has (or in none).
    pub unmapped: u64,
    /// Solved or closed tickets in a group several departments share: no department label
    /// (which one the agents meant is not known).
    pub shared_group: u64,
    /// Tickets not solved or closed yet.
    pub open: u64,
    pub pages: u64,
    /// The run continued from the cursor of an earlier one.
    pub resumed: bool,
    /// Rows replaced by a newer export of the same ticket (the file keeps one row per id).
    pub superseded: u64,
}

fn cursor_file(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".cursor");
    PathBuf::from(name)
}

/// The split a row belongs to, from its id alone (evals/assemble.py's rule), so a rerun
/// never moves a ticket between dev and test.
fn split_of(id: &str) -> Split {
    if Sha256::digest(id.as_bytes())[0] < 141 {
        Split::Test
    } else {
        Split::Dev
    }
}

/// Why a ticket of the export is no row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skipped {
    Open,
    Unmapped,
    SharedGroup,
}

/// A solved or closed ticket as a labelled row, or why it is none.
fn row(ticket: &Ticket, mapping: &Mapping, account: &str) -> std::result::Result<Row, Skipped> {
    if !matches!(ticket.status.as_deref(), Some("solved" | "closed")) {
        return Err(Skipped::Open);
    }
    let department = match ticket.group_id.map(|g| mapping.department_of(g)) {
        Some(Back::One(department)) => department,
        Some(Back::Shared) => return Err(Skipped::SharedGroup),
        Some(Back::None) | None => return Err(Skipped::Unmapped),
    };
    let id = format!("zendesk-{account}-{}", ticket.id);
    Ok(Row {
        split: split_of(&id),
        id,
        subject: ticket.subject.clone().unwrap_or_default(),
        message: ticket.description.clone().unwrap_or_default(),
        department: department.to_string(),
        is_urgent: ticket.priority.as_deref() == Some("urgent"),
        tags: vec!["zendesk".into()],
        family: None,
        ticket: None,
    })
}

pub async fn zendesk(
    pool: &Pool,
    config: &ZendeskConfig,
    timeout: Duration,
    run: &ImportZendesk,
) -> Result<Imported> {
    let config = ZendeskConfig {
        email: run.email.clone().unwrap_or_else(|| config.email.clone()),
        ..config.clone()
    };
    let api = config
        .api(timeout)
        .ok_or_else(|| {
            ConfigError::invalid(
                "TRIAGE_ZENDESK_URL",
                "the account to import from is not set".into(),
            )
        })?
        .map_err(|e| ConfigError::invalid("TRIAGE_ZENDESK_URL", e.to_string()))?;
    let client = db::client(pool).await?;
    let mapping = Mapping::of(&client, &run.policy_version).await?;
    let io = |e: std::io::Error| {
        Error::from(InvalidRequest::new(
            "out",
            format!("{}: {e}", run.out.display()),
        ))
    };
    let state = cursor_file(&run.out);
    let mut imported = Imported::default();
    let mut start = match std::fs::read_to_string(&state) {
        Ok(cursor) if !cursor.trim().is_empty() => {
            imported.resumed = true;
            Start::Cursor(cursor.trim().to_string())
        }
        _ => Start::Time(
            (chrono::Utc::now() - chrono::Duration::from_std(run.since).unwrap_or_default())
                .timestamp(),
        ),
    };
    let mut out = private()
        .append(imported.resumed)
        .truncate(!imported.resumed)
        .open(&run.out)
        .map_err(io)?;
    // A file an earlier version created with the default umask.
    out.set_permissions(Permissions::from_mode(PRIVATE))
        .map_err(io)?;
    let limit = format!("zendesk-export:{}", api.host());
    let pace = Pace::new(
        RateLimitPolicy {
            requests_per_minute: Some(run.requests_per_minute.max(1)),
            tokens_per_minute: None,
        },
        RateLimitPolicy::default(),
    );
    let mut throttled = 0;
    loop {
        match rate_limit::take(&client, &limit, &pace, 0, Duration::from_secs(120)).await? {
            Take::Reserved { wait } => tokio::time::sleep(wait).await,
            Take::Full { opens_in } => {
                tokio::time::sleep(opens_in).await;
                continue;
            }
        }
        let page = match api.export(&start).await {
            Ok(page) => page,
            Err(ApiError::RateLimited { retry_after }) if throttled < MAX_THROTTLED => {
                throttled += 1;
                let hold = rate_limit::hold_after_refusal(retry_after);
                rate_limit::settle(
                    &client,
                    &limit,
                    &pace,
                    rate_limit::Settlement::refused(0, Some(hold)),
                )
                .await?;
                continue;
            }
            Err(ApiError::Status(403)) => {
                let why = format!(
                    "Zendesk answered 403 to {}: the incremental export is for admins only; \
                     name an admin with --email (the API token authenticates as any user)",
                    config.email
                );
                return Err(InvalidRequest::new("email", why).into());
            }
            Err(error) => return Err(Error::unavailable("Zendesk", error.to_string())),
        };
        imported.pages += 1;
        let account = api.host().to_string();
        let mut lines = String::new();
        for ticket in &page.tickets {
            match row(ticket, &mapping, &account) {
                Ok(row) => {
                    imported.rows += 1;
                    lines.push_str(&serde_json::to_string(&row).expect("a row serialises"));
                    lines.push('\n');
                }
                Err(Skipped::Unmapped) => imported.unmapped += 1,
                Err(Skipped::SharedGroup) => imported.shared_group += 1,
                Err(Skipped::Open) => imported.open += 1,
            }
        }
        out.write_all(lines.as_bytes())
            .and_then(|()| out.sync_data())
            .map_err(io)?;
        // Only once the page's rows are on disk: a crash in between re-reads the page, and
        // its rows are written twice at worst, never lost.
        if let Some(cursor) = &page.after_cursor {
            private()
                .truncate(true)
                .open(&state)
                .and_then(|mut file| file.write_all(cursor.as_bytes()))
                .map_err(io)?;
            start = Start::Cursor(cursor.clone());
        }
        if page.end_of_stream || page.after_cursor.is_none() {
            imported.superseded = keep_newest(&run.out).map_err(io)?;
            return Ok(imported);
        }
    }
}

/// A file opened for writing, created readable by its owner only.
fn private() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.create(true).write(true).mode(PRIVATE);
    options
}

/// Rewrites the set at `path` with each id's last row only, where the newest export of a
/// ticket was appended (in place: a new file renamed over it, so a crash leaves one or the
/// other whole); how many rows it dropped.
fn keep_newest(path: &Path) -> std::io::Result<u64> {
    let text = std::fs::read_to_string(path)?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let id = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|row| row["id"].as_str().map(str::to_string))
    };
    let mut last = HashMap::new();
    for (at, line) in lines.iter().enumerate() {
        if let Some(id) = id(line) {
            last.insert(id, at);
        }
    }
    let kept: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(at, line)| id(line).is_none_or(|id| last[&id] == *at))
        .map(|(_, line)| *line)
        .collect();
    let dropped = (lines.len() - kept.len()) as u64;
    if dropped > 0 {
        let mut next = path.as_os_str().to_owned();
        next.push(".next");
        let next = PathBuf::from(next);
        let mut file = private().truncate(true).open(&next)?;
        file.write_all((kept.join("\n") + "\n").as_bytes())?;
        file.sync_data()?;
        std::fs::rename(&next, path)?;
    }
    Ok(dropped)
}
