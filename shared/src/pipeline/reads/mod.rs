//! The read side: a ticket and its evaluation as callers see them ([`read`]), and the
//! operators' numbers ([`report`]: stats, the sweeper's report, the console overview).

pub mod read;
pub mod report;
