//! What the tests of every crate share: a fresh database on one real PostgreSQL server, and
//! a Lambda Runtime API emulator that runs the real function binaries over loopback.

pub mod lambda;
mod postgres;

pub use postgres::{fresh_database, server_url};
