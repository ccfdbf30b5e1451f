//! Connectors to the help desks where agents work (docs/zendesk.md): each speaks its desk's
//! published API and webhooks, and nothing else. A layer beside `providers`: an outside API
//! with its settings type, no database; the pipeline decides what to do with what it says.
//! Uses secret, tls and the domain.

pub mod zendesk;
