//! The local classifiers a cascade names, as operators handle them: `triage train` builds and
//! stores one, `triage models` lists, retires and switches them, `triage retrain` keeps a
//! configured cascade's fresh behind the switch gate, `triage cascade` shows its audited live
//! precision and ends a suspension (docs/cascade.md).

pub mod cascade;
pub mod models;
pub mod retrain;
mod sources;
pub mod train;
