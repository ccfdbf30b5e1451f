//! The read side: a ticket and its evaluation as callers see them ([`read`]), its labels
//! with their provenance ([`feedback`]), and the
//! operators' numbers ([`report`]: stats, the sweeper's report, the console overview).

pub mod feedback;
pub mod read;
pub mod report;
