//! The console in a real browser: headless Chromium driven over WebDriver
//! (Debian's `chromium` and `chromium-driver`), against the real app on a
//! real database. Without a chromedriver these tests say so in one line
//! and pass, except under CI (`CI` set), where a missing driver fails them:
//! `.ci/run` installs it, so there they always run.
//!
//! Each test starts its own chromedriver (in its own process group, ended
//! with the test) and one browser at a time runs. With
//! `CONSOLE_SCREENSHOTS=<dir>` the tour saves a screenshot of every page
//! there (`docs/console/` holds the ones `docs/console.md` shows).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::error::{CmdError, ErrorStatus};
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{Role, TestApp, PASSWORD};
use crate::console::{conflict, sell, stocked};

/// One browser at a time: they are heavy on a 2-core machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn first_existing(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).map(PathBuf::from) {
        return p.exists().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in candidates {
        let direct = PathBuf::from(name);
        if direct.is_absolute() && direct.exists() {
            return Some(direct);
        }
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.exists() {
                return Some(p);
            }
        }
    }
    None
}

/// A chromedriver of this test and the browser session on it.
pub struct Browser {
    driver: Child,
    client: Option<Client>,
    _guard: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium at 1280×900, or `None`
    /// (after saying what to install) when there is none.
    pub async fn start() -> Option<Browser> {
        let driver_bin = first_existing("CHROMEDRIVER", &["/usr/bin/chromedriver", "chromedriver"]);
        let chrome_bin = first_existing(
            "CHROME_BIN",
            &[
                "/usr/bin/chromium",
                "chromium",
                "chromium-browser",
                "google-chrome",
            ],
        );
        let (Some(driver_bin), Some(chrome_bin)) = (driver_bin, chrome_bin) else {
            let msg = "console browser tests skipped: no chromedriver/chromium found; \
                       install Debian's `chromium` and `chromium-driver` packages \
                       (apt-get install chromium chromium-driver), or set CHROMEDRIVER and CHROME_BIN";
            assert!(
                std::env::var_os("CI").is_none(),
                "{msg} (required under CI)"
            );
            eprintln!("{msg}");
            return None;
        };
        let guard = ONE_AT_A_TIME.lock().await;
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let driver = {
            use std::os::unix::process::CommandExt;
            Command::new(&driver_bin)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("chromedriver starts")
        };
        let mut browser = Browser {
            driver,
            client: None,
            _guard: guard,
        };
        let url = format!("http://127.0.0.1:{port}");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": chrome_bin,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--disable-quic",
                    "--disable-extensions", "--window-size=1280,900",
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let mut last = None;
        for _ in 0..100 {
            match ClientBuilder::new(connector.clone())
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => {
                    browser.client = Some(client);
                    break;
                }
                Err(e) => {
                    last = Some(e.to_string());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        assert!(browser.client.is_some(), "no browser session: {last:?}");
        Some(browser)
    }

    pub fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    pub async fn goto(&self, app: &TestApp, path: &str) {
        self.c().goto(&format!("{}{path}", app.root)).await.unwrap();
    }

    pub async fn path(&self) -> String {
        self.c().current_url().await.unwrap().path().to_owned()
    }

    /// The text of the element `css` selects, waiting for it to appear (a
    /// form's answer may still be loading).
    pub async fn text(&self, css: &str) -> String {
        self.c()
            .wait()
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .text()
            .await
            .unwrap()
    }

    /// Waits up to ten seconds for the element `css` selects to have a
    /// text that `ok` accepts (a click's page may still be loading, and
    /// the old page can hold the same element with its old text); the last
    /// text seen when it never does.
    async fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> Result<(), String> {
        let mut seen = String::new();
        for _ in 0..100 {
            if let Ok(e) = self.c().find(Locator::Css(css)).await {
                if let Ok(t) = e.text().await {
                    if ok(&t) {
                        return Ok(());
                    }
                    seen = t;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(seen)
    }

    /// Checks that the element `css` selects reads `want`, once loaded.
    pub async fn see(&self, css: &str, want: impl AsRef<str>) {
        let want = want.as_ref();
        if let Err(seen) = self.wait_text(css, |t| t == want).await {
            assert_eq!(seen, want, "{css}");
        }
    }

    /// Checks that the element `css` selects comes to hold a text `ok`
    /// accepts (`what` says which, for the failure).
    pub async fn see_that(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) {
        if let Err(seen) = self.wait_text(css, ok).await {
            panic!("{css} never held {what}: {seen:?}");
        }
    }

    /// Checks that the element `css` selects holds `part`, once loaded.
    pub async fn see_containing(&self, css: &str, part: impl AsRef<str>) {
        let part = part.as_ref();
        if let Err(seen) = self.wait_text(css, |t| t.contains(part)).await {
            panic!("{css} never held {part:?}: {seen:?}");
        }
    }

    pub async fn source(&self) -> String {
        self.c().source().await.unwrap()
    }

    /// Clicks the element `css` selects, waiting for it first (the page a
    /// submitted form leads to may still be loading).
    /// An element found on a page that is being replaced goes stale before
    /// the click: it is found again on the new page.
    pub async fn click(&self, css: &str) {
        for attempt in 1.. {
            let found = self
                .c()
                .wait()
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"));
            match found.click().await {
                Ok(()) => return,
                Err(CmdError::Standard(e))
                    if e.error == ErrorStatus::StaleElementReference && attempt < 5 =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{css}: {e}"),
            }
        }
    }

    pub async fn sign_in(&self, app: &TestApp, email: &str) {
        self.goto(app, "/console/login").await;
        let c = self.c();
        c.find(Locator::Id("email"))
            .await
            .unwrap()
            .send_keys(email)
            .await
            .unwrap();
        c.find(Locator::Id("password"))
            .await
            .unwrap()
            .send_keys(PASSWORD)
            .await
            .unwrap();
        self.click("#sign-in").await;
        c.wait()
            .for_element(Locator::Id("signed-in-as"))
            .await
            .unwrap();
        assert_eq!(self.path().await, "/console/dashboard");
    }

    /// Saves the page as `<CONSOLE_SCREENSHOTS>/<name>.png` when asked to.
    pub async fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("CONSOLE_SCREENSHOTS") else {
            return;
        };
        let png = self.c().screenshot().await.unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(PathBuf::from(dir).join(format!("{name}.png")), png).unwrap();
    }

    /// Ends the browser session (the driver ends with the value).
    pub async fn finish(mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The driver and the browser it started share the process group
        // this test made; ending the group leaves nothing behind.
        let pgid = nix::unistd::Pid::from_raw(self.driver.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.driver.wait();
    }
}

/// Money as the console writes it, from the API's number.
fn money(v: &Value) -> String {
    let d = rust_decimal::Decimal::from_str_exact(&format!("{:.2}", v.as_f64().unwrap())).unwrap();
    pharmacy::console::money(d)
}

#[tokio::test]
async fn an_admin_signs_in_tours_every_page_group_and_signs_out() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let e = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let (_, cashier_e) = app.signed_in(e, Role::Cashier).await;
    let m = stocked(&app, &admin, a, "Paracetamol 500mg", 1500).await;
    app.receive(&admin, &m["id"], e, 40, "2031-12-31").await;
    let n = stocked(&app, &admin, a, "Amoxicillin 250mg", 4200).await;
    sell(&app, &cashier, &m, 4, "cash").await;
    sell(&app, &cashier, &n, 1, "mobile_money").await;
    sell(&app, &cashier_e, &m, 2, "cash").await;
    conflict(&app, &admin, a, true).await;
    app.post(
        "/approvals",
        &cashier,
        json!({"kind": "price_override", "reference_id": "INV-0001", "reason": "Damaged box"}),
    )
    .await;
    let user = app.user(a, Role::Admin).await;

    // Tall enough that each screenshot shows most of its page.
    b.c().set_window_size(1280, 1500).await.unwrap();
    b.sign_in(&app, &user.email).await;
    // The dashboard's figures are the API's.
    let (_, summary) = app.get("/dashboard/summary", &admin).await;
    b.see("#today-revenue", money(&summary["today_revenue"]))
        .await;
    b.see("#today-sales", summary["today_sales_count"].to_string())
        .await;
    b.see("#count-low-stock", summary["low_stock_count"].to_string())
        .await;
    assert!(b.source().await.contains("<svg"));
    b.screenshot("dashboard").await;

    // Keyboard: the first Tab reaches the skip link, and it moves focus to
    // the content.
    b.c()
        .find(Locator::Css("body"))
        .await
        .unwrap()
        .send_keys("\u{E004}")
        .await
        .unwrap();
    let focused = b.c().active_element().await.unwrap();
    assert_eq!(
        focused.attr("class").await.unwrap().as_deref(),
        Some("skip")
    );

    for (path, shot, heading) in [
        ("/console/reports/sales", "reports", "Reports: Sales"),
        (
            "/console/books/prescriptions",
            "books",
            "Books: Prescription book",
        ),
        (
            "/console/sync/conflicts",
            "sync-conflicts",
            "Sync conflicts",
        ),
        ("/console/devices", "devices", "Device register"),
        ("/console/approvals", "approvals", "Approvals"),
        ("/console/operations", "operations", "Operations"),
        ("/console/users", "users", "Users"),
        ("/console/settings", "settings", "Organisation settings"),
        ("/console/audit", "audit-log", "Audit log"),
    ] {
        b.goto(&app, path).await;
        b.see("h1", heading).await;
        // The one script loads under the pages' content security policy.
        let htmx: Value = b.c().execute("return typeof htmx;", vec![]).await.unwrap();
        assert_eq!(htmx, json!("object"), "{path}");
        b.screenshot(shot).await;
    }
    // Narrow screens get the same pages.
    b.c().set_window_size(390, 844).await.unwrap();
    b.goto(&app, "/console/dashboard").await;
    let width: Value = b
        .c()
        .execute("return document.documentElement.scrollWidth;", vec![])
        .await
        .unwrap();
    assert!(
        width.as_u64().unwrap() <= 390,
        "no sideways scrolling: {width}"
    );
    b.screenshot("dashboard-390px").await;
    b.c().set_window_size(1280, 800).await.unwrap();

    b.click("#sign-out").await;
    b.c()
        .wait()
        .for_element(Locator::Id("login-form"))
        .await
        .unwrap();
    assert_eq!(b.path().await, "/console/login");
    b.screenshot("sign-in").await;
    // Signed out means out: the dashboard sends back to the form.
    b.goto(&app, "/console/dashboard").await;
    assert_eq!(b.path().await, "/console/login");
    b.finish().await;
}

#[tokio::test]
async fn a_report_csv_downloaded_in_the_browser_matches_its_table() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let m = stocked(&app, &admin, a, "Cetirizine 10mg", 1250).await;
    sell(&app, &cashier, &m, 3, "cash").await;
    sell(&app, &cashier, &m, 1, "card").await;
    let user = app.user(a, Role::BranchManager).await;
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/reports/sales"]"#).await;
    let rows = b
        .c()
        .find_all(Locator::Css("#table-by_payment tbody tr"))
        .await
        .unwrap();
    let mut shown = Vec::new();
    for row in rows {
        let mut cells = Vec::new();
        for td in row.find_all(Locator::Css("td")).await.unwrap() {
            cells.push(td.text().await.unwrap());
        }
        shown.push(cells.join("|").replace(',', ""));
    }
    assert_eq!(shown.len(), 2, "{shown:?}");
    let href = b
        .c()
        .find(Locator::Id("csv-by_payment"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    // The browser fetches the download with its own session.
    let csv: Value = b
        .c()
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0]).then(r => r.text()).then(done);",
            vec![json!(href)],
        )
        .await
        .unwrap();
    let lines: Vec<String> = csv
        .as_str()
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.replace(',', "|"))
        .collect();
    assert_eq!(lines, shown);
    b.finish().await;
}

#[tokio::test]
async fn resolving_a_conflict_in_the_browser_changes_what_the_api_reports() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (customer, id) = conflict(&app, &admin, a, true).await;
    let user = app.user(a, Role::Admin).await;
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/sync/conflicts"]"#).await;
    let section = format!("#conflict-{id}");
    // A merge clashes, and says why.
    b.click(&format!(r#"{section} input[value="merge"]"#)).await;
    b.click(&format!("{section} button[type=submit]")).await;
    b.see_containing("#conflict-error", "changed").await;
    let (_, list) = app.get("/sync/conflicts", &admin).await;
    assert_eq!(list["total"], 1);
    // The till's version is taken.
    b.click(&format!(r#"{section} input[value="client"]"#))
        .await;
    b.click(&format!("{section} button[type=submit]")).await;
    b.see("#notice-ok", "The conflict was resolved.").await;
    let (_, list) = app.get("/sync/conflicts", &admin).await;
    assert_eq!(list["total"], 0);
    let (_, c) = app.get(&format!("/customers/{customer}"), &admin).await;
    assert_eq!(c["name"], "Sara Till");
    b.finish().await;
}

#[tokio::test]
async fn a_cashier_gets_no_users_page_and_no_other_branch_figures_even_by_url() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let e = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier_e) = app.signed_in(e, Role::Cashier).await;
    let m = stocked(&app, &admin, e, "Ibuprofen", 3300).await;
    sell(&app, &cashier_e, &m, 1, "cash").await;
    let user = app.user(a, Role::Cashier).await;
    b.sign_in(&app, &user.email).await;
    b.see("#today-revenue", "0.00").await;
    let nav = b.text("nav[aria-label=Main]").await;
    assert!(!nav.contains("Users") && !nav.contains("Reports"), "{nav}");
    b.goto(&app, "/console/users").await;
    b.see("h1", "Not allowed").await;
    b.see_containing("#error-message", "not allowed").await;
    b.goto(&app, &format!("/console/dashboard?branch_id={e}"))
        .await;
    b.see("h1", "Not allowed").await;
    assert!(!b.source().await.contains("3,300.00"));
    b.goto(&app, &format!("/console/reports/sales?branch_id={e}"))
        .await;
    b.see("h1", "Not allowed").await;
    b.finish().await;
}

#[tokio::test]
async fn a_form_posted_without_its_token_is_refused_in_the_browser() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let user = app.user(a, Role::Admin).await;
    b.sign_in(&app, &user.email).await;
    b.goto(&app, "/console/devices").await;
    b.c()
        .find(Locator::Id("device-name"))
        .await
        .unwrap()
        .send_keys("Till 7")
        .await
        .unwrap();
    // Another site's form would carry no token: take it out of this one.
    b.c()
        .execute(
            "document.querySelector('#register-device input[name=csrf]').remove();",
            vec![],
        )
        .await
        .unwrap();
    b.click("#register-device button[type=submit]").await;
    assert!(b
        .text("#error-message")
        .await
        .contains("nothing was changed"));
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM devices", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    // The same form with its token works.
    b.goto(&app, "/console/devices").await;
    b.c()
        .find(Locator::Id("device-name"))
        .await
        .unwrap()
        .send_keys("Till 7")
        .await
        .unwrap();
    b.click("#register-device button[type=submit]").await;
    b.see("#notice-ok", "The till was registered.").await;
    b.see_containing("#devices", "Till 7").await;
    b.finish().await;
}

#[tokio::test]
async fn a_deactivated_users_next_click_lands_on_the_sign_in_page() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let user = app.user(a, Role::BranchManager).await;
    b.sign_in(&app, &user.email).await;
    let (status, _) = app
        .call(
            reqwest::Method::PUT,
            &format!("/users/{}", user.id),
            Some(&admin),
            Some(json!({"is_active": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    b.click(r#"a[href="/console/approvals"]"#).await;
    b.c()
        .wait()
        .for_element(Locator::Id("login-form"))
        .await
        .unwrap();
    assert_eq!(b.path().await, "/console/login");
    assert!(b.source().await.contains("Your session has ended"));
    b.finish().await;
}
