//! An emulator of the Lambda Runtime API (2018-06-01): the HTTP interface a function's
//! runtime long-polls for events and posts results to. One emulator per function process,
//! as in Lambda, where every execution environment has its own.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};
use serde_json::Value;
use tokio::{
    net::TcpListener,
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
};

/// How long past its deadline an invocation may take to be answered before the test fails:
/// the first invocation includes the process start, and CI may be a loaded 2-core machine.
const GRACE: Duration = Duration::from_secs(60);

/// What the runtime posts to an error endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionError {
    pub error_type: String,
    pub error_message: String,
}

impl FunctionError {
    fn parse(body: &[u8]) -> Self {
        let body: Value = serde_json::from_slice(body).unwrap_or_default();
        let field = |name: &str| body[name].as_str().unwrap_or_default().to_string();
        Self {
            error_type: field("errorType"),
            error_message: field("errorMessage"),
        }
    }
}

/// One answered invocation: the function's response, or the error it reported.
#[derive(Debug)]
pub struct Invocation {
    pub request_id: String,
    pub result: Result<Value, FunctionError>,
}

struct Queued {
    request_id: String,
    event: Value,
    timeout: Duration,
    /// Sent instead of "`timeout` from now": a local emulator's fixed deadline.
    deadline_ms: Option<u128>,
}

type Answer = Result<Value, FunctionError>;

struct Shared {
    /// Invocations not yet handed to the function; `/next` waits on it.
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Queued>>,
    /// Invocations handed out and not yet answered, by request id.
    answers: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    first_poll: watch::Sender<Option<Instant>>,
    init_error: watch::Sender<Option<FunctionError>>,
}

/// The emulator, serving on a free loopback port until dropped.
pub struct RuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    queue: mpsc::UnboundedSender<Queued>,
    server: JoinHandle<()>,
}

impl RuntimeApi {
    pub async fn start() -> Self {
        let (queue, queued) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            queue: tokio::sync::Mutex::new(queued),
            answers: Mutex::default(),
            first_poll: watch::Sender::new(None),
            init_error: watch::Sender::new(None),
        });
        let router = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(shared.clone());
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self {
            addr,
            shared,
            queue,
            server,
        }
    }

    /// `host:port`, as `AWS_LAMBDA_RUNTIME_API` expects it.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `event`, waits for the function's response or error, and returns it. The
    /// deadline the function sees is `timeout` from the moment it takes the event, as in
    /// Lambda. Panics when nothing is answered in time or the function fails its init.
    pub async fn invoke(&self, event: Value, timeout: Duration) -> Invocation {
        self.enqueue(event, timeout, None).await
    }

    /// Like [`RuntimeApi::invoke`], but the deadline sent is `deadline_ms` (milliseconds since
    /// the epoch) whatever the time: cargo-lambda's emulator sends 600000, in 1970. `wait`
    /// bounds the answer as `timeout` does there.
    pub async fn invoke_with_deadline_ms(
        &self,
        event: Value,
        deadline_ms: u128,
        wait: Duration,
    ) -> Invocation {
        self.enqueue(event, wait, Some(deadline_ms)).await
    }

    async fn enqueue(
        &self,
        event: Value,
        timeout: Duration,
        deadline_ms: Option<u128>,
    ) -> Invocation {
        let request_id = uuid::Uuid::new_v4().to_string();
        let (answer, answered) = oneshot::channel();
        self.shared
            .answers
            .lock()
            .unwrap()
            .insert(request_id.clone(), answer);
        self.queue
            .send(Queued {
                request_id: request_id.clone(),
                event,
                timeout,
                deadline_ms,
            })
            .expect("the emulator is running");
        let mut init_error = self.shared.init_error.subscribe();
        let result = tokio::select! {
            answer = tokio::time::timeout(timeout + GRACE, answered) => match answer {
                Ok(answer) => answer.expect("the emulator is running"),
                Err(_) => panic!(
                    "invocation {request_id}: no response or error within {:?}",
                    timeout + GRACE
                ),
            },
            Ok(error) = init_error.wait_for(Option::is_some) => {
                panic!("the function failed its init: {:?}", *error)
            }
        };
        Invocation { request_id, result }
    }

    /// When the function first asked for an event, i.e. when its init ended (where Lambda's
    /// "Init Duration" ends too). Panics if that does not happen within `timeout`.
    pub async fn first_poll(&self, timeout: Duration) -> Instant {
        let mut seen = self.shared.first_poll.subscribe();
        let at = tokio::time::timeout(timeout, seen.wait_for(Option::is_some))
            .await
            .unwrap_or_else(|_| panic!("the function did not poll for an event within {timeout:?}"))
            .expect("the emulator is running");
        at.expect("waited for Some")
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// `GET /invocation/next`: long-polls until an invocation is queued.
async fn next(State(shared): State<Arc<Shared>>) -> Response {
    shared.first_poll.send_if_modified(|at| {
        let first = at.is_none();
        if first {
            *at = Some(Instant::now());
        }
        first
    });
    let Some(queued) = shared.queue.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    let deadline = queued.deadline_ms.unwrap_or_else(|| {
        (SystemTime::now() + queued.timeout)
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis()
    });
    let headers = [
        ("lambda-runtime-aws-request-id", queued.request_id),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:eu-west-1:123456789012:function:test".to_string(),
        ),
        (
            "lambda-runtime-trace-id",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"
                .to_string(),
        ),
        ("content-type", "application/json".to_string()),
    ];
    (headers, queued.event.to_string()).into_response()
}

/// `POST /invocation/{id}/response`.
async fn response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    answer(&shared, &id, Ok(body))
}

/// `POST /invocation/{id}/error`.
async fn error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    answer(&shared, &id, Err(FunctionError::parse(&body)))
}

/// `POST /init/error`: the function could not start; every waiting invocation fails.
async fn init_error(State(shared): State<Arc<Shared>>, body: Bytes) -> StatusCode {
    shared
        .init_error
        .send_replace(Some(FunctionError::parse(&body)));
    StatusCode::ACCEPTED
}

fn answer(shared: &Shared, id: &str, answer: Answer) -> StatusCode {
    match shared.answers.lock().unwrap().remove(id) {
        Some(waiting) => {
            // The test may have given up waiting; the function's side is still done.
            let _ = waiting.send(answer);
            StatusCode::ACCEPTED
        }
        // Like Lambda: an unknown request id, or one answered already.
        None => StatusCode::BAD_REQUEST,
    }
}
