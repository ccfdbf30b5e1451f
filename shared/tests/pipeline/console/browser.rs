//! The console in a real browser: headless Chromium driven through chromedriver (WebDriver),
//! clicking the same buttons an operator does.
//!
//! `scripts/test` installs Chromium and sets `CHROMEDRIVER`; then a browser that cannot start
//! fails the test. A bare `cargo test` without chromedriver on the PATH skips it, loudly.
//! With `TRIAGE_CONSOLE_SCREENSHOTS=DIR` each page is saved as `DIR/<page>.png`
//! (`scripts/console-screenshots` refreshes `docs/console/`).

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

use super::{seeded_run, serve_console};

/// A chromedriver process of this test, killed when dropped.
pub(super) struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

impl Driver {
    /// `None` (skip) only when nothing asked for a browser and none is installed.
    pub(super) async fn start() -> Option<Driver> {
        let binary = match std::env::var_os("CHROMEDRIVER") {
            Some(path) => PathBuf::from(path),
            None => match on_path("chromedriver") {
                Some(path) => path,
                None => {
                    eprintln!(
                        "\n*** SKIPPED: no chromedriver on the PATH and CHROMEDRIVER unset; \
                         scripts/test installs Chromium and runs this test ***\n"
                    );
                    return None;
                }
            },
        };
        // A free port, released just before chromedriver binds it.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let mut driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        driver.wait_until_ready().await;
        Some(driver)
    }

    /// Polls `/status` until chromedriver says it is ready; fails at once if it exited.
    async fn wait_until_ready(&mut self) {
        let http = triage::tls::https_client_builder().build().unwrap();
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(response) = http.get(format!("{}/status", self.url)).send().await {
                let status: serde_json::Value = response.json().await.unwrap_or_default();
                if status["value"]["ready"] == true {
                    return;
                }
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("chromedriver exited before it was ready: {status}");
            }
            assert!(Instant::now() < until, "chromedriver never became ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(super) async fn browser(&self) -> Client {
        // The tests run as root in CI, where Chromium refuses to start with its sandbox; the
        // pages are our own, from loopback.
        let mut args = vec![
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1280,1600",
        ];
        args.push("--hide-scrollbars");
        let mut options = json!({ "args": args });
        if let Some(chromium) = std::env::var_os("CHROMIUM") {
            options["binary"] = json!(chromium.to_string_lossy());
        }
        let capabilities = json!({ "goog:chromeOptions": options });
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities.as_object().unwrap().clone())
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("Chromium did not start under chromedriver: {e}"))
    }
}

pub(super) async fn text(browser: &Client, css: &str) -> String {
    browser
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

async fn click(browser: &Client, css: &str) {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap();
}

pub(super) async fn screenshot(browser: &Client, name: &str) {
    let Some(dir) = std::env::var_os("TRIAGE_CONSOLE_SCREENSHOTS") else {
        return;
    };
    let png = browser.screenshot().await.unwrap();
    let path = PathBuf::from(dir).join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[tokio::test]
async fn in_chromium_the_overview_counts_and_a_redrive_from_the_page_requeues_dead_letters() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let seeded = seeded_run().await;
    let base = serve_console(&seeded.app, None).await;
    let browser = driver.browser().await;

    browser.goto(&format!("{base}/admin")).await.unwrap();
    for (stat, want) in [("pending", "0"), ("done", "12"), ("dead", "5")] {
        assert_eq!(
            text(&browser, &format!("[data-stat={stat}]")).await,
            want,
            "{stat}"
        );
    }
    screenshot(&browser, "overview").await;

    click(&browser, "a[href='/admin/dead-letters']").await;
    assert_eq!(
        text(&browser, "[data-dead-count=content_policy]").await,
        "3"
    );
    assert_eq!(
        text(&browser, "[data-dead-count=contract_violation]").await,
        "2"
    );
    screenshot(&browser, "dead-letters").await;

    click(&browser, "button[data-redrive=content_policy]").await;
    assert_eq!(text(&browser, "[data-would-move]").await, "3");
    let spread = browser.find(Locator::Id("spread")).await.unwrap();
    spread.clear().await.unwrap();
    spread.send_keys("0s").await.unwrap();
    screenshot(&browser, "redrive-confirm").await;
    click(&browser, "#confirm-redrive").await;
    assert_eq!(text(&browser, "[data-moved]").await, "3");
    screenshot(&browser, "redrive-done").await;
    let counts = seeded.app.status_counts().await;
    assert_eq!(
        (counts.get("pending"), counts.get("dead")),
        (Some(&3), Some(&2))
    );

    browser
        .goto(&format!("{base}/admin/versions"))
        .await
        .unwrap();
    click(&browser, "form[action='/admin/versions'] button").await;
    assert_eq!(text(&browser, "[data-stat=compared]").await, "8");
    screenshot(&browser, "versions").await;

    browser
        .goto(&format!("{base}/admin/tickets/{}", seeded.ticket_id))
        .await
        .unwrap();
    assert_eq!(text(&browser, "[data-stat=status]").await, "done");
    screenshot(&browser, "ticket").await;
    browser.close().await.unwrap();
}

#[tokio::test]
async fn in_chromium_the_quality_page_shows_versions_side_by_side_a_heat_map_and_the_misses() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let set = crate::eval::write_set();
    let fake = crate::eval::fake_classifier(&set).await;
    let path = set.path.to_string_lossy().to_string();
    let app = crate::helpers::spawn_app_with_fake(&fake, |config| {
        config.quality.set = Some(path);
    })
    .await;
    let versions = ["triage-v5/gpt-good@medium", "triage-v5/gpt-bad@medium"];
    let report = crate::eval::evaluate(&app, &set.path, "test", &versions).await;
    let base = serve_console(&app, None).await;
    let browser = driver.browser().await;

    browser
        .goto(&format!("{base}/admin/versions"))
        .await
        .unwrap();
    click(&browser, "main a[href='/admin/quality']").await;
    for (i, version) in versions.iter().enumerate() {
        let run = &report["runs"][i];
        let shown = text(&browser, &format!("[data-figure='macro_f1/{version}']")).await;
        let want = format!("{:.3}", run["department"]["macro_f1"].as_f64().unwrap());
        assert!(shown.starts_with(&want), "{version}: {shown} vs {want}");
        let recall = text(
            &browser,
            &format!("[data-figure='urgent_recall/{version}']"),
        )
        .await;
        // The figure, then its 95% interval by family.
        let want = format!("{:.3}", run["urgent"]["recall"].as_f64().unwrap());
        assert!(recall.starts_with(&want), "{version}: {recall} vs {want}");
    }
    // The best version first, its confusion as a heat map, then its misses with their text.
    let cell = text(&browser, "[data-cell='billing/billing'] text").await;
    assert_eq!(
        cell,
        report["runs"][0]["department"]["confusion"]["billing"]["billing"].to_string()
    );
    // Five departments: every one in the per-department table, most rows first.
    let classes = browser
        .find_all(Locator::Css("tr[data-class]"))
        .await
        .unwrap();
    assert_eq!(classes.len(), 5);
    let supports = column(&browser, "tr[data-class] td:nth-child(2)").await;
    assert!(supports.windows(2).all(|w| w[0] >= w[1]), "{supports:?}");
    assert!(browser
        .find(Locator::Css("[data-top-confusions]"))
        .await
        .is_err());
    screenshot(&browser, "quality").await;

    let bad = versions[1];
    click(&browser, &format!("th a[href$='version={bad}']")).await;
    let misses = browser
        .find_all(Locator::Css("tr[data-miss]"))
        .await
        .unwrap()
        .len();
    let expected = report["runs"][1]["misclassified"]
        .as_array()
        .unwrap()
        .len()
        .min(50);
    assert!(expected > 5, "gpt-bad errs often");
    assert_eq!(misses, expected);
    let first = text(&browser, "tr[data-miss] td:last-child").await;
    assert!(
        first.contains("Ticket ") && first.contains("Message number"),
        "{first}"
    );
    browser.close().await.unwrap();
}

/// The help desk's feedback round trip as an operator sees it: agreement on the Quality page,
/// exact, and following a correction.
#[tokio::test]
async fn in_chromium_the_quality_page_shows_live_agreement_that_follows_the_desks_corrections() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let fake = fake_provider::FakeProvider::start().await;
    let app = crate::helpers::spawn_app_with_fake(&fake, |_| {}).await;
    let answers = crate::feedback::evaluated(&app, 2).await;
    let (agreed, disputed) = (&answers[0], &answers[1]);
    let labels =
        |department: &str| serde_json::json!({"department": department, "is_urgent": false});
    crate::feedback::give(&app, &agreed.0, labels(&agreed.1)).await;
    let wrong = crate::feedback::other(&disputed.1);
    crate::feedback::give(&app, &disputed.0, labels(wrong)).await;
    let base = serve_console(&app, None).await;
    let browser = driver.browser().await;
    let week = format!(
        "[data-agreement='7:{}'] [data-stat=department_accuracy]",
        app.config.versions.pair()
    );

    browser
        .goto(&format!("{base}/admin/quality"))
        .await
        .unwrap();
    assert_eq!(text(&browser, &week).await, "0.500");
    screenshot(&browser, "quality-agreement").await;
    // The desk corrects itself: the model was right after all.
    crate::feedback::give(&app, &disputed.0, labels(&disputed.1)).await;
    browser.refresh().await.unwrap();
    assert_eq!(text(&browser, &week).await, "1.000");
    browser.close().await.unwrap();
}

/// The numbers of a column, as shown.
async fn column(browser: &Client, css: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for cell in browser.find_all(Locator::Css(css)).await.unwrap() {
        out.push(cell.text().await.unwrap().trim().parse().unwrap());
    }
    out
}

/// A taxonomy of 77 departments (a bank's intents) on the Quality page: one row per
/// department sorted by support (or F1, worst first), and the 20 most frequent confusions
/// listed instead of a 77×77 grid. The run's figures are a real run's with its departments
/// replaced, as a run under such a taxonomy stores them.
#[tokio::test]
async fn in_chromium_the_quality_page_reads_at_77_departments_sorted_with_the_top_confusions() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let set = crate::eval::write_set();
    let fake = crate::eval::fake_classifier(&set).await;
    let path = set.path.to_string_lossy().to_string();
    let app = crate::helpers::spawn_app_with_fake(&fake, |config| {
        config.quality.set = Some(path);
    })
    .await;
    crate::eval::evaluate(&app, &set.path, "test", &["triage-v5/gpt-good@medium"]).await;
    let name = |i: usize| format!("intent_{i:02}");
    let (mut per_class, mut confusion) = (json!({}), json!({}));
    for i in 0..77 {
        let support = 10 + (i * 37) % 50;
        let wrong = (i * 11) % 9 + if i % 25 == 3 { 8 } else { 0 };
        let f1 = 1.0 - wrong as f64 / support as f64;
        per_class[name(i)] = json!({"precision": f1, "recall": f1, "f1": f1, "support": support});
        confusion[name(i)] = json!({name(i): support - wrong, name((i + 5) % 77): wrong});
    }
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE eval_run SET metrics = jsonb_set(jsonb_set(metrics, '{department,per_class}', $1), \
             '{department,confusion}', $2)",
            &[&per_class, &confusion],
        )
        .await
        .unwrap();
    let base = serve_console(&app, None).await;
    let browser = driver.browser().await;
    browser
        .goto(&format!("{base}/admin/quality"))
        .await
        .unwrap();

    let classes = browser
        .find_all(Locator::Css("tr[data-class]"))
        .await
        .unwrap();
    assert_eq!(classes.len(), 77);
    let supports = column(&browser, "tr[data-class] td:nth-child(2)").await;
    assert!(
        supports.windows(2).all(|w| w[0] >= w[1]),
        "most rows first: {supports:?}"
    );
    assert!(
        browser.find(Locator::Css("[data-cell]")).await.is_err(),
        "no 77×77 grid"
    );
    let listed = browser
        .find_all(Locator::Css("tr[data-confusion]"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 20);
    let counts = column(&browser, "tr[data-confusion] td:nth-child(3)").await;
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    // The largest confusion: intent_53 (15 wrong rows) answered as intent_58.
    let top = text(&browser, "tr[data-confusion]").await;
    assert!(
        top.contains("intent_53") && top.contains("intent_58") && top.contains("15"),
        "{top}"
    );
    screenshot(&browser, "quality-77").await;

    click(&browser, "a[data-sort=f1]").await;
    let f1 = column(&browser, "tr[data-class] td[data-f1]").await;
    assert_eq!(f1.len(), 77);
    assert!(f1.windows(2).all(|w| w[0] <= w[1]), "worst first: {f1:?}");
    browser.close().await.unwrap();
}
