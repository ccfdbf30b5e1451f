//! Operations as the ops Lambda (or the CLI) runs them: a JSON payload in, the response it
//! would send out.

use serde_json::Value;
use triage::operations;

use super::TestApp;

/// Runs a payload as the ops Lambda would, and returns the response it would send.
pub async fn op(app: &TestApp, payload: Value) -> Value {
    serde_json::to_value(try_op(app, payload).await.expect("operation succeeds")).unwrap()
}

pub async fn try_op(app: &TestApp, payload: Value) -> triage::Result<operations::Outcome> {
    let request: operations::Request = serde_json::from_value(payload).expect("payload parses");
    let operator = operations::Operator::lambda("arn:aws:lambda:test:ops", "request-1");
    operations::run(&app.pool, &app.config, request, &operator).await
}

/// Runs a payload as the CLI would (`triage eval` without waiting): the only place a set may
/// be a local file.
pub async fn op_cli(app: &TestApp, payload: Value) -> Value {
    serde_json::to_value(try_op_cli(app, payload).await.expect("operation succeeds")).unwrap()
}

pub async fn try_op_cli(app: &TestApp, payload: Value) -> triage::Result<operations::Outcome> {
    let request: operations::Request = serde_json::from_value(payload).expect("payload parses");
    let operator = operations::Operator::os_user();
    operations::run(&app.pool, &app.config, request, &operator).await
}
