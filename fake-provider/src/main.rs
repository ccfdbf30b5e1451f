//! `fake-provider [--listen ADDR] [--delay-ms N] [--strict] [--limit-rpm N
//! [--withhold-limit-headers]] [--labels PATH [--error-rate R] [--error-rate-for MODEL=R]...]
//! [--batch-delay-ms N] [--flex-delay-ms N] [--flex-unavailable-every N]`: the fake
//! OpenAI/Anthropic API with its default behaviour, for running the pipeline by hand and for
//! `scripts/bench`. Every answer waits `--delay-ms` first (a slow provider, without touching
//! the library's script); `--strict` refuses request shapes the real APIs refuse;
//! `--limit-rpm` enforces a request limit (429 beyond it); `--labels` answers from a labelled
//! set, wrong at the given rate (per model with `--error-rate-for`), for `triage eval`
//! (docs/quality.md); batches end `--batch-delay-ms` after creation; flex calls wait
//! `--flex-delay-ms` more and every n-th is "resource unavailable". Prints the base URL,
//! serves until Ctrl-C. Faults for a running process (`scripts/soak`): SIGUSR1 starts or ends
//! an outage (every call a 503), SIGUSR2 starts or ends a spell of 429s (`Retry-After: 1`).

use std::{net::SocketAddr, process::ExitCode, time::Duration};

use fake_provider::{classifier::Classifier, Behavior, FakeProvider, Flex, LimitHeaders};

const USAGE: &str = "usage: fake-provider [--listen ADDR] [--delay-ms N] [--strict] \
[--limit-rpm N [--withhold-limit-headers]] [--labels PATH [--error-rate R] \
[--error-rate-for MODEL=R]...] [--batch-delay-ms N] [--flex-delay-ms N] \
[--flex-unavailable-every N]   (defaults 127.0.0.1:0, 0, lenient, no limit, hash answers, \
rate 0, 0, 0, never)";

#[tokio::main]
async fn main() -> ExitCode {
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut delay = Duration::ZERO;
    let mut strict = false;
    let mut limit_rpm = None;
    let mut limit_headers = LimitHeaders::Sent;
    let mut batch_delay = Duration::ZERO;
    let mut flex = Flex::default();
    let mut labels = None;
    let mut error_rate = 0.0;
    let mut model_rates = Vec::new();
    let rate = |text: &str| text.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => match args.next().and_then(|a| a.parse().ok()) {
                Some(addr) => listen = addr,
                None => {
                    eprintln!("--listen needs an address like 127.0.0.1:8080\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--delay-ms" => match args.next().and_then(|a| a.parse().ok()) {
                Some(ms) => delay = Duration::from_millis(ms),
                None => {
                    eprintln!("--delay-ms needs a whole number of milliseconds\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--strict" => strict = true,
            "--limit-rpm" => match args.next().and_then(|a| a.parse().ok()) {
                Some(rpm) if rpm > 0 => limit_rpm = Some(rpm),
                _ => {
                    eprintln!("--limit-rpm needs a positive whole number of requests\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--withhold-limit-headers" => limit_headers = LimitHeaders::Withheld,
            "--batch-delay-ms" | "--flex-delay-ms" | "--flex-unavailable-every" => {
                let Some(n) = args.next().and_then(|a| a.parse::<u32>().ok()) else {
                    eprintln!("{arg} needs a whole number\n{USAGE}");
                    return ExitCode::from(2);
                };
                let ms = Duration::from_millis(u64::from(n));
                match arg.as_str() {
                    "--batch-delay-ms" => batch_delay = ms,
                    "--flex-delay-ms" => flex.delay = ms,
                    _ => flex.unavailable_every = n,
                }
            }
            "--labels" => match args.next().map(std::fs::read_to_string) {
                Some(Ok(text)) => labels = Some(text),
                _ => {
                    eprintln!("--labels needs a readable JSONL file\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--error-rate" => match args.next().as_deref().and_then(rate) {
                Some(r) => error_rate = r,
                None => {
                    eprintln!("--error-rate needs a number in [0, 1]\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--error-rate-for" => {
                let pair = args.next().unwrap_or_default();
                match pair
                    .split_once('=')
                    .and_then(|(m, r)| Some((m.to_owned(), rate(r)?)))
                {
                    Some(model_rate) => model_rates.push(model_rate),
                    None => {
                        eprintln!("--error-rate-for needs MODEL=R, R in [0, 1]\n{USAGE}");
                        return ExitCode::from(2);
                    }
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let fake = match FakeProvider::bind(listen).await {
        Ok(fake) => fake,
        Err(e) => {
            eprintln!("cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    fake.set_default(Behavior::Classify.after(delay));
    if let Some(text) = labels {
        let classifier = match Classifier::from_jsonl(&text, error_rate) {
            Ok(c) => model_rates
                .into_iter()
                .fold(c, |c, (model, r)| c.with_rate(&model, r)),
            Err(e) => {
                eprintln!("--labels: {e}");
                return ExitCode::from(2);
            }
        };
        fake.classify_from_labels(classifier);
    }
    fake.set_strict(strict);
    fake.set_batch_delay(batch_delay);
    fake.set_flex(flex);
    if let Some(rpm) = limit_rpm {
        fake.limit_requests(rpm, limit_headers);
    }
    println!("{}", fake.url());
    if let Err(e) = serve_until_ctrl_c(&fake).await {
        eprintln!("cannot wait for signals: {e}");
    }
    fake.shutdown().await;
    ExitCode::SUCCESS
}

/// Serves until Ctrl-C, turning the signals' faults on and off (each signal toggles its own;
/// the outage wins while both are on).
async fn serve_until_ctrl_c(fake: &FakeProvider) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut usr2 = signal(SignalKind::user_defined2())?;
    let (mut outage, mut limited) = (false, false);
    loop {
        tokio::select! {
            stopped = tokio::signal::ctrl_c() => return stopped,
            _ = usr1.recv() => outage = !outage,
            _ = usr2.recv() => limited = !limited,
        }
        let fault = if outage {
            Some(Behavior::Status(503))
        } else if limited {
            Some(Behavior::RateLimited {
                retry_after: Some(Duration::from_secs(1)),
            })
        } else {
            None
        };
        eprintln!("fake-provider: outage {outage}, 429s {limited}");
        fake.set_outage(fault);
    }
}
