//! Secrets Manager: the database credentials, the provider key and the Zendesk token and
//! signing secret in Lambda. [`resolve`] reads each secret the configuration names once per
//! container (the binaries call it at init) into a [`RotatingSecret`], which reads it again
//! when what it holds is refused. Secret values live only in [`Secret`]s: no error message or
//! log line quotes them.

use std::sync::Arc;

use aws_sdk_secretsmanager::{
    error::{DisplayErrorContext, ProvideErrorMetadata, SdkError},
    Client,
};
use futures::future::BoxFuture;
use serde_json::Value;

use super::sdk;
use crate::{
    config::Config,
    connectors::zendesk::SECRET_REFRESH_INTERVAL,
    db::{DbLogin, DbSecretRef},
    domain::error::{ConfigError, Error, Result},
    secret::{Credential, ExposeSecret, RotatingSecret, Secret, SecretSource},
};

/// A Secrets Manager client configured from the environment Lambda provides.
#[derive(Clone, Debug)]
pub struct SecretsManager {
    client: Client,
}

impl SecretsManager {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Region and the function role's credentials from the standard `AWS_*` variables (Lambda
    /// sets them); `AWS_ENDPOINT_URL_SECRETS_MANAGER` or `AWS_ENDPOINT_URL` redirect the client
    /// (tests, a local emulator).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let settings = sdk::settings(get, "SECRETS_MANAGER", "to read secrets")?;
        Ok(Self {
            client: Client::new(&settings),
        })
    }

    /// The SDK client, for what this module does not wrap (tests create and rotate secrets).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The `SecretString` of `arn`; `setting` names the variable that pointed at it, for errors.
    async fn secret_string(&self, arn: &str, setting: &str) -> Result<Secret> {
        let output = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|err| fetch_error(err, setting))?;
        output.secret_string.map(Secret::from).ok_or_else(|| {
            ConfigError::invalid(setting, "the secret has no SecretString".into()).into()
        })
    }
}

/// A refused request (access denied, no such secret) is a deployment mistake; anything else
/// (timeouts, throttling, the service's own errors) is Secrets Manager being away for now.
fn fetch_error<E, R>(err: SdkError<E, R>, setting: &str) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = err.code().unwrap_or_default().to_string();
    let refused = matches!(err, SdkError::ServiceError(_))
        && !code.contains("Throttl")
        && code != "InternalServiceError";
    if refused {
        let reason = format!("Secrets Manager: {}", DisplayErrorContext(&err));
        ConfigError::invalid(setting, reason).into()
    } else {
        Error::unavailable("Secrets Manager", DisplayErrorContext(&err).to_string())
    }
}

/// One secret in Secrets Manager, as a [`SecretSource`]: `setting` names the variable that
/// pointed at it, for error messages.
#[derive(Debug)]
struct ManagedSecret {
    manager: SecretsManager,
    arn: String,
    setting: &'static str,
}

impl SecretSource for ManagedSecret {
    fn name(&self) -> &str {
        &self.arn
    }
    fn read(&self) -> BoxFuture<'_, Result<Secret>> {
        Box::pin(self.manager.secret_string(&self.arn, self.setting))
    }
}

/// Fetches what `config` names: the database secret into `config.database.credentials`, the
/// provider secret into `config.provider.api_key`, the Zendesk secrets into
/// `config.zendesk.api_token` and `webhook_secret` (the signing secret from its own secret
/// when one is named, else from the combined one). No secret ARNs, no client, no network.
pub async fn resolve(config: &mut Config) -> Result<()> {
    if config.database.secret.is_none()
        && config.provider.api_key_secret_arn.is_none()
        && config.zendesk.secret_arn.is_none()
        && config.zendesk.signing_secret_arn.is_none()
    {
        return Ok(());
    }
    resolve_with(config, &SecretsManager::from_env()?).await
}

pub async fn resolve_with(config: &mut Config, manager: &SecretsManager) -> Result<()> {
    let source = |arn: &str, setting| ManagedSecret {
        manager: manager.clone(),
        arn: arn.to_string(),
        setting,
    };
    if let Some(secret) = &config.database.secret {
        let overrides = secret.clone();
        let credentials = RotatingSecret::fetch(
            source(&secret.arn, "TRIAGE_DB_SECRET_ARN"),
            "database login",
            move |raw| db_login(raw, &overrides),
        )
        .await?;
        config.database.credentials = Some(Arc::new(credentials));
    }
    if let Some(arn) = &config.provider.api_key_secret_arn {
        let key = RotatingSecret::fetch(
            source(arn, "TRIAGE_PROVIDER_SECRET_ARN"),
            "provider key",
            |raw| plain_or_field(raw, "api_key", "TRIAGE_PROVIDER_SECRET_ARN"),
        )
        .await?;
        config.provider.api_key = Credential::Rotating(Arc::new(key));
    }
    if let Some(arn) = &config.zendesk.signing_secret_arn {
        let secret = RotatingSecret::fetch(
            source(arn, SIGNING_SETTING),
            "Zendesk signing secret",
            |raw| plain_or_field(raw, "webhook_secret", SIGNING_SETTING),
        )
        .await?;
        config.zendesk.webhook_secret = Some(zendesk_credential(secret));
    }
    if let Some(arn) = &config.zendesk.secret_arn {
        // One read for both fields; each is re-read on its own when refused.
        let raw = source(arn, ZENDESK_SETTING).read().await?;
        let rotating = |field: &'static str, what| {
            if json_field(&raw, field, ZENDESK_SETTING)?.is_none() {
                return Ok::<_, ConfigError>(None);
            }
            let source = source(arn, ZENDESK_SETTING);
            let secret = RotatingSecret::read_as(source, &raw, what, move |raw| {
                json_field(raw, field, ZENDESK_SETTING)?.ok_or_else(|| {
                    ConfigError::invalid(ZENDESK_SETTING, format!("the secret has no `{field}`"))
                })
            })?;
            Ok(Some(zendesk_credential(secret)))
        };
        if let Some(token) = rotating("api_token", "Zendesk API token")? {
            config.zendesk.api_token = token;
        }
        if config.zendesk.signing_secret_arn.is_none() {
            if let Some(secret) = rotating("webhook_secret", "Zendesk signing secret")? {
                config.zendesk.webhook_secret = Some(secret);
            }
        }
    }
    Ok(())
}

/// The variables naming the Zendesk secrets: the token (and, combined, the signing secret)
/// and the signing secret on its own.
const ZENDESK_SETTING: &str = "TRIAGE_ZENDESK_SECRET_ARN";
const SIGNING_SETTING: &str = "TRIAGE_ZENDESK_SIGNING_SECRET_ARN";

fn zendesk_credential(secret: RotatingSecret<Secret>) -> Credential {
    Credential::Rotating(Arc::new(
        secret.refreshing_at_most_every(SECRET_REFRESH_INTERVAL),
    ))
}

/// Field `name` of a secret that is a JSON object (the Zendesk secret: `api_token`, the
/// dedicated agent's API token, and `webhook_secret`, the webhook's signing secret); `None`
/// when absent or empty, as a function may not need it.
fn json_field(raw: &Secret, name: &str, setting: &str) -> Result<Option<Secret>, ConfigError> {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(raw.expose_secret()) else {
        return Err(ConfigError::invalid(
            setting,
            "the secret is not a JSON object".into(),
        ));
    };
    match fields.get(name) {
        Some(Value::String(value)) if !value.trim().is_empty() => {
            Ok(Some(Secret::from(value.trim().to_string())))
        }
        None | Some(Value::Null | Value::String(_)) => Ok(None),
        Some(_) => Err(ConfigError::invalid(
            setting,
            format!("`{name}` is not a string"),
        )),
    }
}

/// A secret stored as the plain `SecretString` (docs/deploy.md); a JSON object with a string
/// field `name` is accepted too, as consoles like to create key/value secrets.
fn plain_or_field(raw: &Secret, name: &str, setting: &str) -> Result<Secret, ConfigError> {
    let value = match serde_json::from_str::<Value>(raw.expose_secret()) {
        Ok(Value::Object(_)) => json_field(raw, name, setting)?.ok_or_else(|| {
            ConfigError::invalid(
                setting,
                format!("the secret is JSON without a string `{name}`"),
            )
        })?,
        _ => Secret::from(raw.expose_secret().trim().to_string()),
    };
    if value.expose_secret().is_empty() {
        return Err(ConfigError::invalid(setting, "the secret is empty".into()));
    }
    Ok(value)
}

/// The RDS JSON shape (`username`, `password`, `host`, `port` as a number or a string,
/// `dbname`), completed or overridden by `TRIAGE_DB_HOST` / `TRIAGE_DB_NAME`: an RDS-managed
/// master secret holds only username and password. The port defaults to 5432.
fn db_login(raw: &Secret, overrides: &DbSecretRef) -> Result<DbLogin, ConfigError> {
    // serde's messages quote the offending value, which may be the password: name the
    // field instead.
    let invalid = |reason: String| ConfigError::invalid("TRIAGE_DB_SECRET_ARN", reason);
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(raw.expose_secret()) else {
        return Err(invalid("the secret is not a JSON object".into()));
    };
    let text = |name: &str| match fields.get(name) {
        Some(Value::String(v)) if !v.is_empty() => Ok(Some(v.clone())),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(invalid(format!("`{name}` is not a string"))),
    };
    let required = |value: Option<String>, name: &str, setting: &str| {
        value.ok_or_else(|| {
            let also = if setting.is_empty() {
                String::new()
            } else {
                format!(" and {setting} is not set")
            };
            invalid(format!("the secret has no `{name}`{also}"))
        })
    };
    let port = match fields.get("port") {
        None | Some(Value::Null) => 5432,
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| invalid("`port` is not a port number".into()))?,
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| invalid("`port` is not a port number".into()))?,
        Some(_) => return Err(invalid("`port` is not a port number".into())),
    };
    Ok(DbLogin {
        user: required(text("username")?, "username", "")?,
        password: Secret::from(required(text("password")?, "password", "")?),
        host: required(
            overrides.host.clone().or(text("host")?),
            "host",
            "TRIAGE_DB_HOST",
        )?,
        port,
        dbname: required(
            overrides.dbname.clone().or(text("dbname")?),
            "dbname",
            "TRIAGE_DB_NAME",
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides(host: Option<&str>, dbname: Option<&str>) -> DbSecretRef {
        DbSecretRef {
            arn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:triage/db-AbCdEf".into(),
            host: host.map(Into::into),
            dbname: dbname.map(Into::into),
        }
    }

    fn login(json: &str, host: Option<&str>, dbname: Option<&str>) -> Result<DbLogin, ConfigError> {
        db_login(&Secret::from(json), &overrides(host, dbname))
    }

    #[test]
    fn rds_shape_with_port_as_number_or_string() {
        for port in ["6543", "\"6543\""] {
            let l = login(
                &format!(r#"{{"engine":"postgres","username":"u","password":"p","host":"h","port":{port},"dbname":"d"}}"#),
                None,
                None,
            )
            .unwrap();
            assert_eq!(
                (
                    l.user.as_str(),
                    l.password.expose_secret(),
                    l.host.as_str(),
                    l.port,
                    l.dbname.as_str()
                ),
                ("u", "p", "h", 6543, "d")
            );
        }
    }

    #[test]
    fn a_master_secret_is_completed_by_the_environment() {
        let l = login(
            r#"{"username":"u","password":"p"}"#,
            Some("proxy"),
            Some("triage"),
        )
        .unwrap();
        assert_eq!(
            (l.host.as_str(), l.port, l.dbname.as_str()),
            ("proxy", 5432, "triage")
        );
        let err = login(r#"{"username":"u","password":"p"}"#, None, Some("triage")).unwrap_err();
        assert!(err.to_string().contains("TRIAGE_DB_HOST"), "{err}");
    }

    #[test]
    fn the_environment_overrides_host_and_dbname() {
        let l = login(
            r#"{"username":"u","password":"p","host":"db","dbname":"x"}"#,
            Some("proxy"),
            Some("y"),
        )
        .unwrap();
        assert_eq!((l.host.as_str(), l.dbname.as_str()), ("proxy", "y"));
    }

    #[test]
    fn errors_name_fields_never_values() {
        for json in [
            r#"{"username":"u","password":4711,"host":"h","dbname":"d"}"#,
            r#"{"username":"u","password":"p","host":"h","port":"4711x","dbname":"d"}"#,
            "4711 not json",
        ] {
            let err = login(json, None, None).unwrap_err().to_string();
            assert!(!err.contains("4711"), "{err}");
        }
    }

    #[test]
    fn provider_key_is_plain_or_json_api_key() {
        let key = |raw: &str| {
            plain_or_field(&Secret::from(raw), "api_key", "TRIAGE_PROVIDER_SECRET_ARN")
                .map(|s| s.expose_secret().to_string())
        };
        assert_eq!(key("sk-abc\n").unwrap(), "sk-abc");
        assert_eq!(key(r#"{"api_key": "sk-abc"}"#).unwrap(), "sk-abc");
        assert!(key(r#"{"key": "sk-abc"}"#).is_err());
        assert!(key("  ").is_err());
    }
}
