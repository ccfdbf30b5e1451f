//! `triage eval` at a terminal: the operation waits for its jobs while workers of this
//! process answer them (the same `Worker` as `triage worker`, for the configured provider
//! and, when a version asks for it, the offline rules; eval work only, so a terminal pointed
//! at production's database answers none of its tickets), with a progress bar and ETA on a
//! terminal and a plain line every few seconds elsewhere. Ctrl-C stops the workers claiming
//! (in-flight calls finish and are stored) and the report says what is missing.

use std::{
    io::IsTerminal,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use deadpool_postgres::Pool;
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use triage::{
    config::Config,
    domain::versions::ModelVersion,
    operations::{self, Operator, Outcome, Request},
    pipeline::worker::{self, Worker},
    providers::{AnyProvider, ProviderKind},
    quality::{Tell, Watch},
};

/// How often the plain progress line is printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub async fn run(
    pool: &Pool,
    config: &Arc<Config>,
    request: Request,
    operator: &Operator,
    stop: CancellationToken,
) -> anyhow::Result<Outcome> {
    let workers = workers(config, &request)?;
    let working = stop.child_token();
    let watch = Watch {
        wait: true,
        stop: stop.clone(),
        progress: Some(progress()),
    };
    let evaluation = async {
        let outcome = operations::run_with(pool, config, request, operator, &watch).await;
        working.cancel();
        outcome
    };
    let answering = futures::future::try_join_all(
        workers
            .iter()
            .map(|w| worker::run_until_stopped(w, crate::WORKER_IDLE, working.clone())),
    );
    let (outcome, answered) = tokio::join!(evaluation, answering);
    answered?;
    Ok(outcome?)
}

/// A worker for the configured provider, and one for the offline rules when a version asks
/// for `rules@offline` and the configured provider is another.
fn workers(config: &Arc<Config>, request: &Request) -> anyhow::Result<Vec<Worker<AnyProvider>>> {
    let mut workers = vec![crate::build_worker(config)?.eval_only()];
    let models: Vec<&ModelVersion> = match request {
        Request::Eval { versions, .. } => versions
            .iter()
            .filter_map(|v| v.model_version.as_ref())
            .collect(),
        _ => Vec::new(),
    };
    // Otherwise the run would wait for jobs no worker here claims.
    if config.provider.kind == ProviderKind::Rules {
        if let Some(model) = models.iter().find(|m| !m.is_rules()) {
            anyhow::bail!(
                "TRIAGE_PROVIDER=rules cannot answer {model}: set TRIAGE_PROVIDER, \
                 TRIAGE_PROVIDER_URL and its key, or evaluate rules@offline"
            );
        }
    }
    let wants_rules = models.iter().any(|m| m.is_rules());
    if wants_rules && config.provider.kind != ProviderKind::Rules {
        let mut rules = (**config).clone();
        rules.provider.kind = ProviderKind::Rules;
        rules.versions.model = ModelVersion::rules();
        workers.push(crate::build_worker(&Arc::new(rules))?.eval_only());
    }
    Ok(workers)
}

fn progress() -> Tell {
    if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} eval [{bar:40}] {pos}/{len} answered {msg} ({elapsed}, ETA {eta})",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        Arc::new(move |p| {
            bar.set_length(p.total);
            bar.set_position(p.answered + p.dead);
            bar.set_message(if p.dead > 0 {
                format!("({} dead)", p.dead)
            } else {
                String::new()
            });
            if p.finished() {
                bar.finish_and_clear();
            }
        })
    } else {
        let last: Mutex<Option<Instant>> = Mutex::new(None);
        Arc::new(move |p| {
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            if p.finished() || last.is_none_or(|at| at.elapsed() >= PLAIN_EVERY) {
                eprintln!(
                    "eval: {} of {} answered, {} dead",
                    p.answered, p.total, p.dead
                );
                *last = Some(Instant::now());
            }
        })
    }
}
