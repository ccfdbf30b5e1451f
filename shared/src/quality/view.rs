//! Quality's read side, one face for its readers (the console's Quality page): the newest runs
//! per version on the gate's set, the baseline, the sweeps, the runs under way, and the
//! figures' types, whatever file of `quality` holds them.

pub use super::{
    by_time::{
        store::{newest as newest_time_split, StoredTimeSplit},
        Report as TimeSplit, Slice,
    },
    metrics::{confusions, ClassFigures, NO_ANSWER},
    runs::{baseline, eval_ticket_texts, newest_per_version, StoredRun},
    set::Split,
    source::configured_digest_now,
    thresholds::sweeps::{newest_per_cascade, StoredSweep},
    under_way, RunFigures,
};
