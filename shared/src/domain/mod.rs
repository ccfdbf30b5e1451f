//! The domain: what the pipeline is about, with no I/O. The content key, ticket ids, the
//! versions an evaluation is made under, a desk's taxonomy, and the error types every layer
//! shares.
//! Uses nothing else in the crate.

pub mod error;
pub mod key;
pub mod rows;
pub mod taxonomy;
pub mod threshold;
pub mod ticket;
pub mod versions;
