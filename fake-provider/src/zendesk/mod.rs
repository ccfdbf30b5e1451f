//! A stand-in for one Zendesk Support account, served over real HTTP on loopback, that holds
//! tickets and checks every request against Zendesk's published reference; a request the
//! real API would refuse is answered as it would be and kept in [`FakeZendesk::violations`]:
//! - basic authentication as `{email}/token:{api_token}` (else 401);
//! - Show Ticket and Update Ticket (`/api/v2/tickets/{id}.json`): the update's body is
//!   `{"ticket": {...}}` with known fields only; tags are added with `additional_tags` and
//!   removed with `remove_tags` (a `tags` field would replace the agents' and is counted as
//!   a violation); a safe update (`safe_update: true`) needs `updated_stamp`, and one older
//!   than the ticket's `updated_at` is answered 409 `UpdateConflict`; `priority` is one of
//!   Zendesk's four or `null`; a closed ticket's update is answered 422 `RecordInvalid`
//!   (`Status: closed prevents ticket update`);
//! - Show Self (`/api/v2/users/me.json`);
//! - the cursor-based Incremental Ticket Export (`/api/v2/incremental/tickets/cursor.json`),
//!   for admins only (an agent is answered 403, as Zendesk answers one; [`ADMIN_EMAIL`]):
//!   `start_time` (a Unix time) for the first page, `cursor` after it, never both; pages
//!   of [`FakeZendesk::set_page_size`] with `after_cursor` and `end_of_stream`;
//! - 429 with `Retry-After` (seconds) for the next requests a test scripts, for the next
//!   updates a test scripts, and for updates past Zendesk's 100 a minute per account (Update
//!   Ticket's own limit).
//!
//! It also speaks for Zendesk's webhooks: [`created_event`] and [`changed_event`] build the
//! ticket events' payloads, [`sign`] signs a body as Zendesk does.

mod server;
mod signing;

pub use signing::sign;

use std::{
    collections::{BTreeMap, VecDeque},
    net::SocketAddr,
    sync::{Arc, Mutex, MutexGuard},
};

use serde_json::{json, Value};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

/// A ticket as the fake keeps it (what the connector reads and writes of one).
#[derive(Debug, Clone, PartialEq)]
pub struct Ticket {
    pub id: i64,
    pub subject: String,
    pub description: String,
    pub status: String,
    pub group_id: Option<i64>,
    pub priority: Option<String>,
    pub tags: Vec<String>,
    /// Bumped by every change: seconds after the account's epoch.
    pub version: u32,
}

impl Ticket {
    pub fn new(id: i64, subject: &str, description: &str) -> Self {
        Self {
            id,
            subject: subject.into(),
            description: description.into(),
            status: "new".into(),
            group_id: None,
            priority: None,
            tags: Vec::new(),
            version: 0,
        }
    }

    /// Zendesk's `updated_at` (ISO 8601, seconds).
    pub fn updated_at(&self) -> String {
        let s = self.version;
        format!(
            "2026-12-01T{:02}:{:02}:{:02}Z",
            (s / 3600) % 24,
            (s / 60) % 60,
            s % 60
        )
    }

    /// Seconds since the Unix epoch of `updated_at` (2026-12-01T00:00:00Z is 1_796_083_200).
    pub fn updated_unix(&self) -> i64 {
        1_796_083_200 + i64::from(self.version)
    }

    fn json(&self) -> Value {
        json!({
            "id": self.id, "subject": self.subject, "description": self.description,
            "status": self.status, "group_id": self.group_id, "priority": self.priority,
            "tags": self.tags, "updated_at": self.updated_at(),
            "created_at": "2026-12-01T00:00:00Z",
        })
    }
}

/// One request as received, and how it was answered.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
    pub status: u16,
}

#[derive(Default)]
struct Account {
    /// The API token accepted (a rotation changes it).
    token: String,
    tickets: BTreeMap<i64, Ticket>,
    requests: Vec<Request>,
    violations: Vec<String>,
    /// Retry-After seconds of the 429s to answer next, in order.
    throttle: VecDeque<u32>,
    /// The same for the next ticket updates only.
    update_throttle: VecDeque<u32>,
    /// Updates answered in the current minute (since the Unix epoch's): Zendesk's Update
    /// Ticket limit is 100 a minute per account.
    updates_in_minute: (u64, u32),
    /// An agent's edit applied just before the next update is looked at (a concurrent edit).
    edit_before_update: Option<(i64, Option<i64>, Option<String>)>,
    page_size: usize,
    clock: u32,
}

struct Shared {
    email: String,
    api_user: i64,
    account: Mutex<Account>,
}

impl Shared {
    fn account(&self) -> MutexGuard<'_, Account> {
        self.account.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running fake; dropping it stops the server.
pub struct FakeZendesk {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _stop: oneshot::Sender<()>,
    _server: JoinHandle<()>,
}

/// The account id the fake's events carry.
pub const ACCOUNT_ID: i64 = 88_888_888;

/// An admin of the account: the API token authenticates as it too (Zendesk's tokens are the
/// account's), and only an admin may read the incremental export.
pub const ADMIN_EMAIL: &str = "admin@acme.example";

impl FakeZendesk {
    /// Serves on a free loopback port, accepting `email` with API token `token`; the API
    /// user (the connector's agent) is `api_user`.
    pub async fn start(email: &str, token: &str, api_user: i64) -> Self {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("a bound address");
        let shared = Arc::new(Shared {
            email: email.into(),
            api_user,
            account: Mutex::new(Account {
                token: token.into(),
                page_size: 100,
                clock: 1,
                ..Account::default()
            }),
        });
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(server::serve(listener, shared.clone(), stopped));
        Self {
            addr,
            shared,
            _stop: stop,
            _server: server,
        }
    }

    /// The account's base URL (`TRIAGE_ZENDESK_URL`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn add(&self, mut ticket: Ticket) {
        let mut account = self.shared.account();
        account.clock += 1;
        ticket.version = account.clock;
        account.tickets.insert(ticket.id, ticket);
    }

    pub fn ticket(&self, id: i64) -> Option<Ticket> {
        self.shared.account().tickets.get(&id).cloned()
    }

    /// An agent changes the ticket now (through Zendesk's UI: no API request).
    pub fn agent_edit(&self, id: i64, group_id: Option<i64>, priority: Option<&str>) {
        let mut account = self.shared.account();
        server::edit(&mut account, id, group_id, priority.map(str::to_string));
    }

    /// An agent sets the ticket's status (`solved`, `closed`): a closed ticket refuses every
    /// update with 422 `Status: closed prevents ticket update`, as Zendesk does (merged
    /// tickets are closed).
    pub fn set_status(&self, id: i64, status: &str) {
        let mut account = self.shared.account();
        server::change(&mut account, id, |ticket| ticket.status = status.into());
    }

    /// An agent's edit that lands between the connector's read and its next update.
    pub fn edit_before_next_update(&self, id: i64, group_id: Option<i64>, priority: Option<&str>) {
        self.shared.account().edit_before_update =
            Some((id, group_id, priority.map(str::to_string)));
    }

    /// The next requests are answered 429 with these `Retry-After` seconds.
    pub fn throttle(&self, retry_after: &[u32]) {
        self.shared.account().throttle.extend(retry_after);
    }

    /// 429s with these Retry-After seconds to the next ticket updates only.
    pub fn throttle_updates(&self, retry_after: &[u32]) {
        self.shared.account().update_throttle.extend(retry_after);
    }

    /// The token is rotated: from now on only `token` is accepted, every other one is 401.
    pub fn accept_only_token(&self, token: &str) {
        self.shared.account().token = token.into();
    }

    pub fn set_page_size(&self, size: usize) {
        self.shared.account().page_size = size.max(1);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.shared.account().requests.clone()
    }

    /// What the real API would have refused, one line each.
    pub fn violations(&self) -> Vec<String> {
        self.shared.account().violations.clone()
    }
}

/// A ticket event's payload as Zendesk's webhooks send it ("Ticket events").
fn event(kind: &str, event_id: &str, ticket: &Ticket, actor: i64, event: Value) -> Value {
    json!({
        "type": kind, "account_id": ACCOUNT_ID, "id": event_id,
        "time": ticket.updated_at(), "zendesk_event_version": "2022-11-06",
        "subject": format!("zen:ticket:{}", ticket.id),
        "detail": {
            "id": ticket.id.to_string(), "subject": ticket.subject,
            "description": ticket.description, "status": ticket.status.to_ascii_uppercase(),
            "group_id": ticket.group_id.map(|g| g.to_string()),
            "priority": ticket.priority.as_ref().map(|p| p.to_ascii_uppercase()),
            "tags": ticket.tags, "actor_id": actor.to_string(),
            "created_at": "2026-12-01T00:00:00Z", "updated_at": ticket.updated_at(),
            "via": {"channel": "web"},
        },
        "event": event,
    })
}

/// `zen:event-type:ticket.created` for `ticket`, sent by its requester.
pub fn created_event(event_id: &str, ticket: &Ticket) -> Value {
    event(
        "zen:event-type:ticket.created",
        event_id,
        ticket,
        1,
        json!({}),
    )
}

/// A group or priority change by `actor`, the ticket as it is after it.
pub fn changed_event(event_id: &str, ticket: &Ticket, actor: i64, group: bool) -> Value {
    if group {
        let current = ticket
            .group_id
            .map(|g| json!({"id": g.to_string(), "name": "Group"}));
        event(
            "zen:event-type:ticket.group_assignment_changed",
            event_id,
            ticket,
            actor,
            json!({"current": current, "previous": null}),
        )
    } else {
        let current = ticket.priority.as_ref().map(|p| p.to_ascii_uppercase());
        event(
            "zen:event-type:ticket.priority_changed",
            event_id,
            ticket,
            actor,
            json!({"current": current, "previous": null}),
        )
    }
}
