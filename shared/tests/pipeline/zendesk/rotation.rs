//! The Zendesk secrets rotated under a warm app (docs/deploy.md, "Rotating the Zendesk
//! secrets"): each read from Secrets Manager (moto), re-read when refused at most once a
//! minute (`SECRET_REFRESH_INTERVAL`, so the third value of a rotation within that minute is
//! not picked up), the signing secret it replaced accepted for `SIGNING_SECRET_OVERLAP`.

use std::time::Duration;

use fake_provider::{zendesk::created_event, zendesk::Ticket, FakeProvider};
use triage::{
    aws::secrets::{self, SecretsManager},
    config::Config,
    connectors::zendesk::{api::ApiError, ZendeskConfig},
};

use super::{start_fake, use_zendesk, API_USER, SECRET, TOKEN};
use crate::{
    helpers::{spawn_app_with, use_fake},
    secrets::{create_secret, moto, put_secret},
    zendesk::writeback::{desk_taxonomy, puts, triaged},
};

/// The Zendesk settings of a container whose environment is `env`, secrets read from moto.
async fn container(sm: &SecretsManager, env: &[(&str, &str)]) -> ZendeskConfig {
    let mut config = Config::from_lookup(|name| {
        env.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    secrets::resolve_with(&mut config, sm)
        .await
        .expect("the Zendesk secrets resolve");
    config.zendesk
}

#[tokio::test]
async fn a_reset_signing_secret_is_read_again_and_the_old_one_accepted_for_the_overlap() {
    let Some(sm) = moto() else {
        return;
    };
    // Split: the API function's signing secret on its own, as its plain SecretString.
    let arn = create_secret(&sm, SECRET).await;
    let signing = container(&sm, &[("TRIAGE_ZENDESK_SIGNING_SECRET_ARN", &arn)])
        .await
        .webhook_secret;
    let app = spawn_app_with(|config| {
        use_zendesk(config, None);
        config.zendesk.webhook_secret = signing;
    })
    .await;
    let event = |n: i64| created_event(&format!("rotation-{n}"), &Ticket::new(n, "Refund", "Hi"));
    assert_eq!(app.post_event(&event(1)).await.status, 200);

    // The reset in Zendesk, and the new secret stored: the warm app reads it on the first
    // event that does not match, and still takes events signed before the reset.
    let new = "bmV3X3NpZ25pbmdfc2VjcmV0X2FmdGVyX3RoZV9yZXNldA==";
    put_secret(&sm, &arn, new).await;
    let signed_new = app.post_event_signed(&event(2), new).await;
    assert_eq!(signed_new.status, 200, "{:?}", signed_new.body);
    let signed_old = app.post_event_signed(&event(3), SECRET).await;
    assert_eq!(signed_old.status, 200, "within the overlap");

    // Another reset within the minute is not read yet: a forged signature costs no read.
    let third = "dGhpcmRfc2lnbmluZ19zZWNyZXRfd2l0aGluX3RoZV9taW51dGU=";
    put_secret(&sm, &arn, third).await;
    assert_eq!(app.post_event_signed(&event(4), third).await.status, 401);
    assert_eq!(app.post_event_signed(&event(5), new).await.status, 200);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 4);
}

#[tokio::test]
async fn a_revoked_token_is_read_again_once_and_the_write_back_succeeds() {
    let Some(sm) = moto() else {
        return;
    };
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    // Combined, the older form: one secret with both fields.
    let combined = serde_json::json!({"api_token": TOKEN, "webhook_secret": SECRET});
    let arn = create_secret(&sm, &combined.to_string()).await;
    let zendesk = container(&sm, &[("TRIAGE_ZENDESK_SECRET_ARN", &arn)]).await;
    let url = model.url();
    let app = spawn_app_with(|config| {
        use_fake(config, url);
        config.versions.prompt = "triage-v6".parse().unwrap();
        use_zendesk(config, Some(&fake));
        config.zendesk.api_token = zendesk.api_token.clone();
        config.zendesk.webhook_secret = zendesk.webhook_secret.clone();
    })
    .await;
    let desk = app.under_policy(&desk_taxonomy(&app).await);
    triaged(&desk, &fake, 41, "Invoice shows the wrong amount").await;

    // The token is regenerated in Zendesk (the old one refused from now on), then stored.
    let new = "Zb3kP1newTokenAfterTheRotation0000000000";
    fake.accept_only_token(new);
    put_secret(
        &sm,
        &arn,
        &serde_json::json!({"api_token": new, "webhook_secret": SECRET}).to_string(),
    )
    .await;
    app.deliver_all(Duration::from_secs(30)).await;
    assert_eq!(
        app.count("SELECT count(*) FROM delivery WHERE status = 'done'")
            .await,
        1
    );
    assert_eq!(puts(&fake, 41, 200), 1, "written back with the new token");
    let refused = || fake.requests().iter().filter(|r| r.status == 401).count();
    assert_eq!(
        refused(),
        1,
        "one request met the old token, then one re-read"
    );

    // A second regeneration within the minute is not read yet: one 401, no re-read, no retry.
    fake.accept_only_token("a-third-token-within-the-same-minute-000");
    let api = app
        .config
        .zendesk
        .api(Duration::from_secs(2))
        .unwrap()
        .unwrap();
    assert_eq!(api.me().await, Err(ApiError::Status(401)));
    assert_eq!(refused(), 2);
    fake.accept_only_token(new);
    assert_eq!(api.me().await, Ok(API_USER));
}
