//! TLS to the database is verify-full: the certificate must chain to a trusted CA and name the
//! host. Plain TCP happens only when the configuration says so.

use triage::{config::Config, db, db::DbTls};

use crate::{
    helpers::fresh_database,
    tls_postgres::{server, uses_tls},
};

#[tokio::test]
async fn the_right_ca_and_host_give_an_encrypted_session() {
    let server = server();
    let config = server.config("localhost", "postgres", &server.ca);
    let client = db::pool(&config.database).unwrap().get().await.unwrap();
    assert!(uses_tls(&client).await);
}

#[tokio::test]
async fn migrations_run_over_verified_tls() {
    let server = server();
    let dbname = server.fresh_database().await;
    let config = server.config("localhost", &dbname, &server.ca);
    assert!(db::migrate(&config.database).await.unwrap() > 0);
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused() {
    let server = server();
    let config = server.config("localhost", "postgres", &server.other_ca);
    let err = db::client(&db::pool(&config.database).unwrap())
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn a_certificate_for_another_host_is_refused() {
    let server = server();
    // Same server, same CA, but the certificate names `localhost`, not `127.0.0.1`.
    let config = server.config("127.0.0.1", "postgres", &server.ca);
    let err = db::migrate(&config.database).await.unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn by_default_only_the_embedded_rds_cas_are_trusted() {
    let server = server();
    let mut config = server.config("localhost", "postgres", &server.ca);
    config.database.tls = None;
    assert!(db::migrate(&config.database).await.is_err());
}

#[tokio::test]
async fn a_url_without_sslmode_disable_never_falls_back_to_plain_tcp() {
    // The plain local server speaks no TLS: only its `sslmode=disable` URL reaches it.
    let url = fresh_database().await;
    assert!(url.ends_with("?sslmode=disable"), "{url}");
    assert!(db::migrate(&Config::local(&url).database).await.is_ok());
    for (url, tls) in [
        (url.replace("?sslmode=disable", ""), None),
        (url.replace("sslmode=disable", "sslmode=prefer"), None),
        (
            url.clone(),
            Some(DbTls::VerifyFull {
                roots: triage::tls::CaRoots::RDS,
            }),
        ),
    ] {
        let mut config = Config::local(&url);
        config.database.tls = tls;
        let err = db::migrate(&config.database).await.unwrap_err();
        assert!(err.to_string().contains("TLS"), "{err}");
    }
}
