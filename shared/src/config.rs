//! One typed configuration, built in one place from SPEC's environment names: plain data,
//! built without I/O (the binaries resolve the secrets it names through `crate::aws`).
//! Every policy number has its home here, with the article's default.
//! Uses db and evaluate (their settings types), secret and domain; used by the pipeline and
//! the entry points.

mod env;
mod policies;

use std::time::Duration;

use env::Env;
pub use policies::{
    AuditPolicy, DeliveryPolicy, FleetConfig, Labelling, Limits, QualityGate, RateLimitPolicy,
    RetentionPolicy, Tolerance, WorkerPolicy, DEFAULT_BULK_SHARE, DEFAULT_TRAIN_GIVER_SHARE,
    DEFAULT_TRAIN_OWNER_SHARE,
};

use crate::{
    connectors::zendesk::ZendeskConfig,
    db::{DatabaseConfig, DbSecretRef, DbTls},
    domain::{
        error::{ConfigError, InvalidRequest},
        versions::{ModelVersion, Versions},
    },
    providers::{PriceTable, ProviderConfig, ProviderKind, Tier},
    secret::Secret,
    tls::CaRoots,
};

#[derive(Debug, Clone)]
pub struct Config {
    pub database: DatabaseConfig,
    pub provider: ProviderConfig,
    pub versions: Versions,
    pub limits: Limits,
    pub worker: WorkerPolicy,
    pub rate_limit: RateLimitPolicy,
    pub fleet: FleetConfig,
    pub retention: RetentionPolicy,
    pub quality: QualityGate,
    pub delivery: DeliveryPolicy,
    pub zendesk: ZendeskConfig,
    pub labelling: Labelling,
    pub audit: AuditPolicy,
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Builds the configuration from any name lookup, so tests need not touch the process env.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env = Env(&get);
        let provider_kind = match env.string("TRIAGE_PROVIDER", "rules").as_str() {
            "rules" => ProviderKind::Rules,
            "openai" => ProviderKind::OpenAi,
            "anthropic" => ProviderKind::Anthropic,
            other => {
                return Err(ConfigError::invalid(
                    "TRIAGE_PROVIDER",
                    format!("unknown provider {other:?}"),
                ))
            }
        };
        let default_url = match provider_kind {
            ProviderKind::Anthropic => "https://api.anthropic.com/v1",
            _ => "https://api.openai.com/v1",
        };
        let model = env.string("TRIAGE_MODEL", "gpt-6-luna");
        let effort = env.string("TRIAGE_EFFORT", "medium");
        let model_version = if model.starts_with("cascade(") {
            // A cascade names its large model and effort itself (SPEC).
            if provider_kind == ProviderKind::Rules {
                return Err(ConfigError::invalid(
                    "TRIAGE_MODEL",
                    "a cascade calls a large model: set TRIAGE_PROVIDER to openai or anthropic"
                        .into(),
                ));
            }
            model
                .parse()
                .map_err(|e: InvalidRequest| ConfigError::invalid("TRIAGE_MODEL", e.reason))?
        } else if provider_kind == ProviderKind::Rules {
            // The offline classifier is not the named model; its results must not be cached
            // under the real model's keys.
            ModelVersion::rules()
        } else {
            ModelVersion::new(&model, &effort)
                .map_err(|e| ConfigError::invalid("TRIAGE_MODEL/TRIAGE_EFFORT", e.reason))?
        };
        let defaults = WorkerPolicy::default();
        let worker =
            WorkerPolicy {
                batch_size: env.number("TRIAGE_BATCH_SIZE", defaults.batch_size)?,
                concurrency: env.number("TRIAGE_CONCURRENCY", defaults.concurrency)?,
                lease: env.seconds("TRIAGE_LEASE_SECONDS", defaults.lease)?,
                max_attempts: env.number("TRIAGE_MAX_ATTEMPTS", defaults.max_attempts)?,
                backoff_base: env.seconds("TRIAGE_BACKOFF_BASE_SECONDS", defaults.backoff_base)?,
                backoff_max: env.seconds("TRIAGE_BACKOFF_MAX_SECONDS", defaults.backoff_max)?,
                jitter_max: env.seconds("TRIAGE_JITTER_MAX_SECONDS", defaults.jitter_max)?,
                call_timeout: env.seconds("TRIAGE_CALL_TIMEOUT_SECONDS", defaults.call_timeout)?,
                breaker_cooldown: env
                    .seconds("TRIAGE_BREAKER_COOLDOWN_SECONDS", defaults.breaker_cooldown)?,
                invocation_budget: env
                    .seconds("TRIAGE_INVOCATION_SECONDS", defaults.invocation_budget)?,
                daily_budget_usd: env.usd("TRIAGE_DAILY_BUDGET_USD")?,
                bulk_share: env.share("TRIAGE_BULK_SHARE", defaults.bulk_share)?,
                bulk_tier: match env.string("TRIAGE_BULK_TIER", "online").as_str() {
                    "online" => Tier::Online,
                    "flex" if provider_kind == ProviderKind::OpenAi => Tier::Flex,
                    "flex" => {
                        return Err(ConfigError::invalid(
                            "TRIAGE_BULK_TIER",
                            "flex is OpenAI's tier: TRIAGE_PROVIDER must be openai".into(),
                        ))
                    }
                    "batch" if provider_kind != ProviderKind::Rules => Tier::Batch,
                    "batch" => return Err(ConfigError::invalid(
                        "TRIAGE_BULK_TIER",
                        "batch needs a provider with batches: TRIAGE_PROVIDER openai or anthropic"
                            .into(),
                    )),
                    other => {
                        return Err(ConfigError::invalid(
                            "TRIAGE_BULK_TIER",
                            format!("{other:?} is not online, flex or batch"),
                        ))
                    }
                },
                flex_timeout: env.seconds("TRIAGE_FLEX_TIMEOUT_SECONDS", defaults.flex_timeout)?,
                batch_max_lines: env.number("TRIAGE_BATCH_MAX_LINES", defaults.batch_max_lines)?,
                provisional_after: env.seconds(
                    "TRIAGE_PROVISIONAL_AFTER_SECONDS",
                    defaults.provisional_after,
                )?,
            };
        if worker.batch_size < 1 || worker.concurrency < 1 || worker.max_attempts < 1 {
            return Err(ConfigError::invalid(
                "TRIAGE_BATCH_SIZE/TRIAGE_CONCURRENCY/TRIAGE_MAX_ATTEMPTS",
                "must be at least 1".into(),
            ));
        }
        let labelling = Labelling {
            labellers: env
                .string("TRIAGE_LABELLERS", "")
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            owner_share: env
                .positive_share("TRIAGE_TRAIN_OWNER_SHARE", DEFAULT_TRAIN_OWNER_SHARE)?,
            giver_share: env
                .positive_share("TRIAGE_TRAIN_GIVER_SHARE", DEFAULT_TRAIN_GIVER_SHARE)?,
        };
        let audit = AuditPolicy {
            share: env.share("TRIAGE_AUDIT_SHARE", AuditPolicy::default().share)?,
            window_days: env.number(
                "TRIAGE_AUDIT_WINDOW_DAYS",
                AuditPolicy::default().window_days,
            )?,
        };
        if audit.window_days < 1 {
            return Err(ConfigError::invalid(
                "TRIAGE_AUDIT_WINDOW_DAYS",
                "the window is at least 1 day".into(),
            ));
        }
        let tls = match env.string("TRIAGE_DB_TLS", "").as_str() {
            "" => None,
            "disable" => Some(DbTls::Disable),
            "verify-full" => Some(DbTls::VerifyFull {
                roots: CaRoots::RDS,
            }),
            other => {
                return Err(ConfigError::invalid(
                    "TRIAGE_DB_TLS",
                    format!("{other:?} is neither `verify-full` nor `disable`"),
                ))
            }
        };
        Ok(Self {
            database: DatabaseConfig {
                url: Secret::from(env.string("DATABASE_URL", "")),
                secret: env.optional("TRIAGE_DB_SECRET_ARN").map(|arn| DbSecretRef {
                    arn,
                    host: env.optional("TRIAGE_DB_HOST"),
                    dbname: env.optional("TRIAGE_DB_NAME"),
                }),
                credentials: None,
                tls,
                pool_size: env.number("TRIAGE_DB_POOL_SIZE", 8)?,
                connect_timeout: env
                    .seconds("TRIAGE_DB_CONNECT_TIMEOUT_SECONDS", Duration::from_secs(3))?,
                statement_timeout: env.seconds(
                    "TRIAGE_DB_STATEMENT_TIMEOUT_SECONDS",
                    Duration::from_secs(10),
                )?,
            },
            provider: ProviderConfig {
                kind: provider_kind,
                url: env
                    .string("TRIAGE_PROVIDER_URL", default_url)
                    .trim_end_matches('/')
                    .to_string(),
                api_key: Secret::from(env.string("TRIAGE_PROVIDER_API_KEY", "")).into(),
                api_key_secret_arn: env.optional("TRIAGE_PROVIDER_SECRET_ARN"),
                prices: match get("TRIAGE_PRICES") {
                    Some(spec) if !spec.is_empty() => PriceTable::parse(&spec)?,
                    _ => PriceTable::default(),
                },
            },
            versions: Versions {
                // triage-v5 sends the ticket as data in a message of its own, never pasted into
                // the instructions (v3, v4), which a ticket's text could then override.
                prompt: env.parsed("TRIAGE_PROMPT_VERSION", "triage-v5")?,
                model: model_version,
                policy: env.parsed("TRIAGE_POLICY_VERSION", "policy-v1")?,
            },
            limits: Limits {
                caller_daily_tickets: env.limit("TRIAGE_CALLER_DAILY_TICKETS")?,
                desk_daily_tickets: env.limit("TRIAGE_DESK_DAILY_TICKETS")?,
                caller_rpm: env.limit("TRIAGE_CALLER_RPM")?,
                dedup_hold: env
                    .seconds("TRIAGE_DEDUP_HOLD_SECONDS", policies::DEFAULT_DEDUP_HOLD)?,
                ..Limits::default()
            },
            worker,
            rate_limit: RateLimitPolicy {
                requests_per_minute: env.limit("TRIAGE_PROVIDER_RPM")?,
                tokens_per_minute: env.limit("TRIAGE_PROVIDER_TPM")?,
            },
            fleet: FleetConfig {
                max_workers: env
                    .number("TRIAGE_MAX_WORKERS", FleetConfig::default().max_workers)?,
                doorbell_queue_url: env.optional("TRIAGE_WORKER_QUEUE_URL"),
                max_deliverers: env.number(
                    "TRIAGE_MAX_DELIVERERS",
                    FleetConfig::default().max_deliverers,
                )?,
                deliverer_queue_url: env.optional("TRIAGE_DELIVERER_QUEUE_URL"),
            },
            retention: RetentionPolicy {
                keep_done: env.seconds(
                    "TRIAGE_RETENTION_SECONDS",
                    RetentionPolicy::default().keep_done,
                )?,
                keep_tickets: match env.optional("TRIAGE_TICKET_RETENTION_SECONDS") {
                    None => None,
                    Some(_) => {
                        Some(env.seconds("TRIAGE_TICKET_RETENTION_SECONDS", Duration::ZERO)?)
                    }
                },
                ..RetentionPolicy::default()
            },
            quality: QualityGate {
                set: env.optional("TRIAGE_EVAL_SET"),
                tolerance: env.parsed("TRIAGE_EVAL_TOLERANCE", "")?,
            },
            delivery: {
                let d = DeliveryPolicy::default();
                DeliveryPolicy {
                    batch_size: env.number("TRIAGE_DELIVERY_BATCH_SIZE", d.batch_size)?,
                    concurrency: env.number("TRIAGE_DELIVERY_CONCURRENCY", d.concurrency)?,
                    per_endpoint: env.number("TRIAGE_DELIVERY_PER_ENDPOINT", d.per_endpoint)?,
                    subscriptions_per_caller: env.number(
                        "TRIAGE_SUBSCRIPTIONS_PER_CALLER",
                        d.subscriptions_per_caller,
                    )?,
                    lease: env.seconds("TRIAGE_DELIVERY_LEASE_SECONDS", d.lease)?,
                    timeout: env.seconds("TRIAGE_WEBHOOK_TIMEOUT_SECONDS", d.timeout)?,
                    backoff_base: env
                        .seconds("TRIAGE_DELIVERY_BACKOFF_BASE_SECONDS", d.backoff_base)?,
                    backoff_max: env
                        .seconds("TRIAGE_DELIVERY_BACKOFF_MAX_SECONDS", d.backoff_max)?,
                    jitter_max: env.seconds("TRIAGE_DELIVERY_JITTER_MAX_SECONDS", d.jitter_max)?,
                    retry_window: env.seconds("TRIAGE_DELIVERY_RETRY_SECONDS", d.retry_window)?,
                    allowed_hosts: env
                        .string("TRIAGE_WEBHOOK_ALLOWED_HOSTS", "")
                        .split(',')
                        .map(|h| h.trim().to_ascii_lowercase())
                        .filter(|h| !h.is_empty())
                        .collect(),
                    event_bus: env.optional("TRIAGE_EVENT_BUS"),
                }
            },
            zendesk: ZendeskConfig {
                url: env
                    .optional("TRIAGE_ZENDESK_URL")
                    .map(|url| ZendeskConfig::checked_url(&url))
                    .transpose()?,
                email: env.string("TRIAGE_ZENDESK_EMAIL", ""),
                api_token: Secret::from(env.string("TRIAGE_ZENDESK_API_TOKEN", "")).into(),
                webhook_secret: env
                    .optional("TRIAGE_ZENDESK_WEBHOOK_SECRET")
                    .map(|secret| Secret::from(secret).into()),
                secret_arn: env.optional("TRIAGE_ZENDESK_SECRET_ARN"),
                signing_secret_arn: env.optional("TRIAGE_ZENDESK_SIGNING_SECRET_ARN"),
                requests_per_minute: env.limit("TRIAGE_ZENDESK_RPM")?,
                update_requests_per_minute: env
                    .limit("TRIAGE_ZENDESK_UPDATE_RPM")?
                    .unwrap_or(crate::connectors::zendesk::DEFAULT_UPDATE_RPM),
            },
            labelling,
            audit,
        })
    }

    /// Configuration for tests and `triage dev`: embedded defaults against `database_url`.
    pub fn local(database_url: &str) -> Self {
        let url = database_url.to_string();
        Self::from_lookup(move |name| (name == "DATABASE_URL").then(|| url.clone()))
            .expect("embedded defaults are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eval_gate_defaults_to_the_shipped_set_and_its_tolerance_parses_by_name() {
        let c = Config::local("postgres://x");
        assert_eq!(c.quality.set, None);
        assert_eq!(c.quality.tolerance, Tolerance::default());
        let cases = [
            ("", Ok((0.01, 0.02))),
            ("macro_f1=0.05", Ok((0.05, 0.02))),
            ("urgent_recall=0, macro_f1=0.002", Ok((0.002, 0.0))),
            ("macro_f1", Err("expected name=value")),
            ("macro_f1=2", Err("a number in [0, 1]")),
            ("accuracy=0.1", Err("not a gated figure")),
        ];
        for (text, want) in cases {
            let got = text
                .parse::<Tolerance>()
                .map(|t| (t.macro_f1, t.urgent_recall));
            match (&got, want) {
                (Ok(got), Ok(want)) => assert_eq!(*got, want, "{text}"),
                (Err(e), Err(want)) => assert!(e.contains(want), "{text}: {e}"),
                _ => panic!("{text}: {got:?}"),
            }
        }
        let env = |name: &str| (name == "TRIAGE_EVAL_TOLERANCE").then(|| "bogus".to_string());
        let error = Config::from_lookup(env).unwrap_err().to_string();
        assert!(error.contains("TRIAGE_EVAL_TOLERANCE"), "{error}");
    }

    #[test]
    fn the_zendesk_url_must_be_https_unless_it_is_loopback() {
        let load = |url: &'static str| {
            Config::from_lookup(move |name| (name == "TRIAGE_ZENDESK_URL").then(|| url.into()))
        };
        let error = load("http://example.zendesk.com").unwrap_err().to_string();
        assert!(error.contains("TRIAGE_ZENDESK_URL"), "{error}");
        assert!(error.contains("https"), "{error}");
        for url in ["https://example.zendesk.com/", "http://127.0.0.1:8080"] {
            let zendesk = load(url).unwrap().zendesk;
            assert_eq!(zendesk.url.as_deref(), Some(url.trim_end_matches('/')));
        }
    }

    #[test]
    fn defaults_are_the_articles_numbers() {
        let c = Config::local("postgres://x");
        // Not the article's 300 s: the lease is renewed while a job is held (docs/fencing.md).
        assert_eq!(c.worker.lease, Duration::from_secs(10));
        assert_eq!(c.worker.max_attempts, 5);
        assert_eq!(c.worker.backoff_max, Duration::from_secs(300));
        assert_eq!(c.worker.jitter_max, Duration::from_secs(30));
        assert_eq!(c.versions.prompt, "triage-v5");
        assert_eq!(c.versions.policy, "policy-v1");
        assert_eq!(c.versions.model, ModelVersion::RULES);
    }

    #[test]
    fn fractional_seconds_and_named_provider() {
        let c = Config::from_lookup(|n| match n {
            "TRIAGE_PROVIDER" => Some("openai".into()),
            "TRIAGE_EFFORT" => Some("high".into()),
            "TRIAGE_LEASE_SECONDS" => Some("0.5".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.versions.model, "gpt-6-luna@high");
        assert_eq!(c.worker.lease, Duration::from_millis(500));
    }

    #[test]
    fn bad_numbers_name_their_variable() {
        let err = Config::from_lookup(|n| (n == "TRIAGE_MAX_ATTEMPTS").then(|| "five".into()))
            .unwrap_err();
        assert!(err.to_string().contains("TRIAGE_MAX_ATTEMPTS"), "{err}");
    }

    #[test]
    fn the_daily_budget_is_unset_by_default_and_must_be_an_amount() {
        assert_eq!(Config::local("postgres://x").worker.daily_budget_usd, None);
        let budget = |value: &'static str| {
            Config::from_lookup(move |n| (n == "TRIAGE_DAILY_BUDGET_USD").then(|| value.into()))
        };
        assert_eq!(budget("2.5").unwrap().worker.daily_budget_usd, Some(2.5));
        for bad in ["-1", "NaN", "ten"] {
            let err = budget(bad).unwrap_err();
            assert!(err.to_string().contains("TRIAGE_DAILY_BUDGET_USD"), "{err}");
        }
    }

    #[test]
    fn provider_limits_are_unset_by_default_and_zero_is_refused() {
        assert_eq!(
            Config::local("postgres://x").rate_limit,
            RateLimitPolicy::default()
        );
        let c =
            Config::from_lookup(|n| (n == "TRIAGE_PROVIDER_RPM").then(|| "2400".into())).unwrap();
        assert_eq!(c.rate_limit.requests_per_minute, Some(2400));
        let err =
            Config::from_lookup(|n| (n == "TRIAGE_PROVIDER_TPM").then(|| "0".into())).unwrap_err();
        assert!(err.to_string().contains("TRIAGE_PROVIDER_TPM"), "{err}");
    }

    #[test]
    fn the_audit_share_is_a_share_and_its_window_at_least_a_day() {
        let audit = Config::local("postgres://x").audit;
        assert_eq!((audit.share, audit.window_days), (0.03, 7));
        for (name, bad) in [
            ("TRIAGE_AUDIT_SHARE", "1.5"),
            ("TRIAGE_AUDIT_SHARE", "-0.1"),
            ("TRIAGE_AUDIT_SHARE", "NaN"),
            ("TRIAGE_AUDIT_WINDOW_DAYS", "0"),
        ] {
            let err = Config::from_lookup(|n| (n == name).then(|| bad.into())).unwrap_err();
            assert!(err.to_string().contains(name), "{name}={bad}: {err}");
        }
    }

    #[test]
    fn secrets_do_not_print() {
        let c = Config::from_lookup(|n| {
            (n == "TRIAGE_PROVIDER_API_KEY").then(|| "sk-very-secret".into())
        })
        .unwrap();
        assert!(!format!("{c:?}").contains("sk-very-secret"));
    }
}
