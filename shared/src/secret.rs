//! Values that must never reach a log line, and secrets that rotate under a running process.
//!
//! A [`RotatingSecret`] is read once and kept, then read again when what it holds is refused,
//! which is what a rotation looks like from here: the database refusing a new connection's
//! login (`crate::db` asks), the provider answering 401 or 403 (`crate::evaluate` asks),
//! Zendesk answering 401 or an event's signature not matching (`crate::connectors::zendesk`).
//! A [`Credential`] is either such a secret or a fixed value (local runs and tests).
//! Where the value comes from is a [`SecretSource`] (Secrets Manager, in `crate::aws`).
//! Uses only the domain.

use std::{
    fmt,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
pub use secrecy::{ExposeSecret, SecretString as Secret};
use sha2::{Digest, Sha256};

use crate::domain::error::{ConfigError, Result};

/// At most one re-read of a secret per process in this interval, unless the secret says
/// otherwise ([`RotatingSecret::refreshing_at_most_every`]): a password or key that is simply
/// wrong must not turn every attempt into a Secrets Manager call.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(2);

/// Where a rotating secret's raw text is read from.
pub trait SecretSource: Send + Sync + fmt::Debug {
    /// Names the secret in log lines (an ARN; never the value).
    fn name(&self) -> &str;
    fn read(&self) -> BoxFuture<'_, Result<Secret>>;
}

type Parser<T> = Box<dyn Fn(&Secret) -> Result<T, ConfigError> + Send + Sync>;

/// A secret read and parsed, cached for the process. Each re-read that changed the value gets
/// a new generation, so concurrent attempts that failed with the same value share one re-read.
pub struct RotatingSecret<T> {
    source: Box<dyn SecretSource>,
    /// What the secret holds, for log lines.
    what: &'static str,
    parse: Parser<T>,
    current: RwLock<Current<T>>,
    last_refresh: tokio::sync::Mutex<Option<Instant>>,
    min_interval: Duration,
}

struct Current<T> {
    generation: u64,
    value: Arc<T>,
    /// SHA-256 of the raw text: "has it changed" without keeping or comparing secrets.
    digest: [u8; 32],
    /// The value this one replaced, and when: what a sender may still use for a while.
    replaced: Option<(Arc<T>, Instant)>,
}

impl<T> fmt::Debug for RotatingSecret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RotatingSecret")
            .field("source", &self.source.name())
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

impl<T> RotatingSecret<T> {
    /// Reads and parses the secret once.
    pub async fn fetch(
        source: impl SecretSource + 'static,
        what: &'static str,
        parse: impl Fn(&Secret) -> Result<T, ConfigError> + Send + Sync + 'static,
    ) -> Result<Self> {
        let raw = source.read().await?;
        Ok(Self::read_as(source, &raw, what, parse)?)
    }

    /// Parses `raw`, already read from `source` (several values kept in one secret share
    /// their first read).
    pub fn read_as(
        source: impl SecretSource + 'static,
        raw: &Secret,
        what: &'static str,
        parse: impl Fn(&Secret) -> Result<T, ConfigError> + Send + Sync + 'static,
    ) -> Result<Self, ConfigError> {
        let current = Current {
            generation: 0,
            value: Arc::new(parse(raw)?),
            digest: digest(raw),
            replaced: None,
        };
        Ok(Self {
            source: Box::new(source),
            what,
            parse: Box::new(parse),
            current: RwLock::new(current),
            last_refresh: tokio::sync::Mutex::new(None),
            min_interval: MIN_REFRESH_INTERVAL,
        })
    }

    /// Re-reads at most once per `interval` instead of the default.
    pub fn refreshing_at_most_every(mut self, interval: Duration) -> Self {
        self.min_interval = interval;
        self
    }

    /// The value to use, and its generation (to hand back to [`Self::refresh`]).
    pub fn current(&self) -> (u64, Arc<T>) {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        (current.generation, current.value.clone())
    }

    /// The value the current one replaced, if that was less than `window` ago.
    pub fn replaced_within(&self, window: Duration) -> Option<Arc<T>> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        let (value, at) = current.replaced.as_ref()?;
        (at.elapsed() < window).then(|| value.clone())
    }

    /// Called after value `generation` was refused. Re-reads the secret (unless someone
    /// already replaced that value, or the last re-read was moments ago) and says whether
    /// there is now a different value worth one more attempt.
    pub async fn refresh(&self, generation: u64) -> bool {
        let mut last = self.last_refresh.lock().await;
        let (now_generation, now_digest) = {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            (current.generation, current.digest)
        };
        if now_generation != generation {
            return true;
        }
        if last.is_some_and(|at| at.elapsed() < self.min_interval) {
            return false;
        }
        *last = Some(Instant::now());
        let (secret, what) = (self.source.name(), self.what);
        let read = async {
            let raw = self.source.read().await?;
            let digest = digest(&raw);
            Ok::<_, crate::Error>((digest != now_digest).then_some((raw, digest)))
        };
        match read.await {
            Ok(Some((raw, digest))) => match (self.parse)(&raw) {
                Ok(value) => {
                    tracing::info!(%secret, what, "secret changed; using the new value");
                    let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
                    let replaced = Some((current.value.clone(), Instant::now()));
                    *current = Current {
                        generation: generation + 1,
                        value: Arc::new(value),
                        digest,
                        replaced,
                    };
                    true
                }
                Err(error) => {
                    tracing::warn!(%secret, what, %error, "the new secret is not usable");
                    false
                }
            },
            Ok(None) => {
                tracing::warn!(%secret, what, "refused, and the secret is unchanged");
                false
            }
            Err(error) => {
                tracing::warn!(%secret, what, %error, "re-reading the secret failed");
                false
            }
        }
    }
}

/// A secret value to send or check with: fixed (from the environment: local runs and tests)
/// or read from Secrets Manager and re-read when it is refused.
#[derive(Clone, Debug)]
pub enum Credential {
    /// In an `Arc` like a rotating value, so a call takes it without copying it.
    Fixed(Arc<Secret>),
    Rotating(Arc<RotatingSecret<Secret>>),
}

impl Credential {
    /// The value to use, and its generation (to hand back to [`Self::refused`]).
    pub fn current(&self) -> (u64, Arc<Secret>) {
        match self {
            Credential::Fixed(value) => (0, value.clone()),
            Credential::Rotating(secret) => secret.current(),
        }
    }

    /// Called after value `generation` was refused: whether there is now a different value
    /// worth one more attempt (the secret changed since). A fixed value stays as it is.
    pub async fn refused(&self, generation: u64) -> bool {
        match self {
            Credential::Fixed(_) => false,
            Credential::Rotating(secret) => secret.refresh(generation).await,
        }
    }

    /// The value the current one replaced less than `window` ago (never for a fixed one).
    pub fn replaced_within(&self, window: Duration) -> Option<Arc<Secret>> {
        match self {
            Credential::Fixed(_) => None,
            Credential::Rotating(secret) => secret.replaced_within(window),
        }
    }
}

impl From<Secret> for Credential {
    fn from(value: Secret) -> Self {
        Credential::Fixed(Arc::new(value))
    }
}

fn digest(raw: &Secret) -> [u8; 32] {
    Sha256::digest(raw.expose_secret().as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    };

    use super::*;

    /// A secret's stored value, as the test sets it, and how often it was read.
    #[derive(Debug, Default)]
    struct Stored {
        value: Mutex<String>,
        reads: AtomicUsize,
    }

    impl Stored {
        fn set(&self, value: &str) {
            *self.value.lock().unwrap() = value.into();
        }
    }

    impl SecretSource for Arc<Stored> {
        fn name(&self) -> &str {
            "test"
        }
        fn read(&self) -> BoxFuture<'_, Result<Secret>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let value = Secret::from(self.value.lock().unwrap().clone());
            Box::pin(async move { Ok(value) })
        }
    }

    #[tokio::test]
    async fn a_refused_value_is_read_again_at_most_once_per_interval_and_the_replaced_one_kept() {
        let stored = Arc::new(Stored::default());
        stored.set("old");
        let secret = RotatingSecret::fetch(stored.clone(), "test", |raw| {
            Ok(Secret::from(raw.expose_secret().to_string()))
        })
        .await
        .unwrap()
        .refreshing_at_most_every(Duration::from_secs(60));
        let window = Duration::from_secs(600);
        assert!(secret.replaced_within(window).is_none());

        stored.set("new");
        let (generation, _) = secret.current();
        assert!(secret.refresh(generation).await, "read again: changed");
        // Another refusal of the value already replaced reads nothing and retries.
        assert!(secret.refresh(generation).await);
        stored.set("third");
        assert!(
            !secret.refresh(generation + 1).await,
            "not within the minute"
        );
        assert_eq!(
            stored.reads.load(Ordering::SeqCst),
            2,
            "the first read and one more"
        );
        assert_eq!(secret.current().1.expose_secret(), "new");
        let replaced = secret
            .replaced_within(window)
            .expect("the old value, for the window");
        assert_eq!(replaced.expose_secret(), "old");
        assert!(secret.replaced_within(Duration::ZERO).is_none());
    }
}
