//! AWS glue for the Lambda binaries: secrets read from Secrets Manager into the
//! configuration, the migration custom resource, the Lambda deadline, the worker fleet's
//! doorbell queue, EventBridge as the delivery bus, an object read from S3 (an operator's
//! labelled set).
//! An entry-point layer: may use everything below it (config, db, tls, secret, domain).

pub mod doorbell;
pub mod eventbridge;
pub mod lambda;
pub mod migrate_resource;
pub mod s3;
mod sdk;
pub mod secrets;
