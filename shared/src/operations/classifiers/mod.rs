//! The local classifiers a cascade names, as operators handle them: `triage train` builds and
//! stores one, `triage models` lists, retires and switches them, `triage retrain` keeps a
//! configured cascade's fresh behind the switch gate (docs/cascade.md).

pub mod models;
pub mod retrain;
pub mod train;
