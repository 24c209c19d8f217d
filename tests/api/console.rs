//! `/console` without a browser: sign-in and the session cookie, form
//! tokens, idle expiry, deactivation, the role and branch rules of every
//! page, and the console's figures against the API's. The browser tests
//! are in `console_browser.rs`; the fixtures here serve both.

use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{Role, TestApp, PASSWORD};
use domain::Action;

/// A browser stand-in: its own cookie, the session's form token.
pub struct Console {
    root: String,
    http: reqwest::Client,
    cookie: String,
    pub csrf: String,
}

pub fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// The `Set-Cookie` line of `name`, if the answer sets it.
pub fn set_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

fn cookie_value(line: &str) -> String {
    line.split(';')
        .next()
        .and_then(|kv| kv.split_once('='))
        .map(|(_, v)| v.to_owned())
        .unwrap_or_default()
}

/// The first form token of a page.
pub fn csrf_of(html: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let at = html.find(marker).expect("a form token on the page") + marker.len();
    html[at..].split('"').next().unwrap().to_owned()
}

/// Undoes the template's escaping of text.
pub fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The text of the element with `id` (up to its first tag's end).
pub fn text_of(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!(r#"id="{id}""#))?;
    let start = at + html[at..].find('>')? + 1;
    let end = start + html[start..].find('<')?;
    Some(unescape(html[start..end].trim()))
}

/// The body rows of the table with `id`, cell texts.
pub fn table_rows(html: &str, id: &str) -> Vec<Vec<String>> {
    let start = html
        .find(&format!(r#"<table id="{id}""#))
        .unwrap_or_else(|| panic!("no table {id}"));
    let end = start + html[start..].find("</table>").unwrap();
    let table = &html[start..end];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let inner = &cell[cell.find('>').unwrap() + 1..];
                    let inner = &inner[..inner.find("</td>").unwrap()];
                    unescape(inner.trim())
                })
                .collect()
        })
        .collect()
}

impl Console {
    pub async fn sign_in(app: &TestApp, email: &str) -> Console {
        let (status, html, headers) = sign_in_attempt(app, email, PASSWORD).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "sign-in refused: {html}");
        let line = set_cookie(&headers, "console_session").expect("session cookie");
        let mut c = Console {
            root: app.root.clone(),
            http: no_redirects(),
            cookie: cookie_value(&line),
            csrf: String::new(),
        };
        let (status, html, _) = c.get("/console/dashboard").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        c.csrf = csrf_of(&html);
        c
    }

    /// A user of `role` on `branch`, signed in to the console.
    pub async fn of(app: &TestApp, branch: Uuid, role: Role) -> (domain::users::User, Console) {
        let user = app.user(branch, role).await;
        let console = Console::sign_in(app, &user.email).await;
        (user, console)
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        form: Option<Vec<(&str, &str)>>,
    ) -> (StatusCode, String, HeaderMap) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.root))
            .header(COOKIE, format!("console_session={}", self.cookie));
        if let Some(pairs) = form {
            let body = serde_urlencoded::to_string(&pairs).unwrap();
            req = req
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body);
        }
        let res = req.send().await.unwrap();
        let (status, headers) = (res.status(), res.headers().clone());
        (status, res.text().await.unwrap(), headers)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, String, HeaderMap) {
        self.request(Method::GET, path, None).await
    }

    /// Posts a form with the session's token.
    pub async fn post(
        &self,
        path: &str,
        fields: &[(&str, &str)],
    ) -> (StatusCode, String, HeaderMap) {
        let mut pairs = vec![("csrf", self.csrf.as_str())];
        pairs.extend_from_slice(fields);
        self.request(Method::POST, path, Some(pairs)).await
    }

    /// Posts a form exactly as given (no token added).
    pub async fn post_raw(
        &self,
        path: &str,
        fields: &[(&str, &str)],
    ) -> (StatusCode, String, HeaderMap) {
        self.request(Method::POST, path, Some(fields.to_vec()))
            .await
    }
}

/// One sign-in attempt through the form: the answer's status, body, headers.
pub async fn sign_in_attempt(
    app: &TestApp,
    email: &str,
    password: &str,
) -> (StatusCode, String, HeaderMap) {
    let http = no_redirects();
    let res = http
        .get(format!("{}/console/login", app.root))
        .send()
        .await
        .unwrap();
    let login_cookie = cookie_value(&set_cookie(res.headers(), "console_login").unwrap());
    let html = res.text().await.unwrap();
    let token = csrf_of(&html);
    let res = http
        .post(format!("{}/console/login", app.root))
        .header(COOKIE, format!("console_login={login_cookie}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            serde_urlencoded::to_string([
                ("email", email),
                ("password", password),
                ("csrf", token.as_str()),
            ])
            .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    (status, res.text().await.unwrap(), headers)
}

/// The user's sign-in sessions not ended.
async fn live_sessions(app: &TestApp, user: Uuid) -> i64 {
    let client = app.pool.get().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM auth_sessions WHERE user_id = $1 AND revoked_at IS NULL",
            &[&user],
        )
        .await
        .unwrap()
        .get(0)
}

pub fn redirected_to_sign_in(status: StatusCode, headers: &HeaderMap) -> bool {
    status == StatusCode::SEE_OTHER
        && headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|l| l.starts_with("/console/login"))
}

/// A medicine with stock at `branch`; returns it.
pub async fn stocked(app: &TestApp, admin: &str, branch: Uuid, name: &str, price: i64) -> Value {
    let m = app
        .medicine(admin, json!({"name": name, "selling_price": price}))
        .await;
    app.receive(admin, &m["id"], branch, 100, "2031-12-31")
        .await;
    m
}

/// `POST /sales` of `qty` of `medicine`; panics unless 201.
pub async fn sell(app: &TestApp, token: &str, medicine: &Value, qty: i64, method: &str) -> Value {
    let (status, sale) = app
        .post(
            "/sales",
            token,
            json!({"items": [{"medicine_id": medicine["id"], "quantity": qty}], "payment_method": method}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "sale: {sale}");
    sale
}

/// A pending sync conflict: a customer changed on the server (`phone`)
/// and by a till from the older revision (`name`, and `notes` when
/// `clash`, which the server changed too). Returns (customer id, conflict id).
pub async fn conflict(app: &TestApp, admin: &str, branch: Uuid, clash: bool) -> (String, String) {
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (s, device) = app
        .post(
            "/devices",
            admin,
            json!({"name": "Till 1", "branch_id": branch}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{device}");
    let (s, c) = app
        .post(
            "/customers",
            admin,
            json!({"name": "Sarah", "phone": "0700000001", "notes": "regular"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let id = c["id"].as_str().unwrap().to_owned();
    let (s, _) = app
        .call(
            Method::PUT,
            &format!("/customers/{id}"),
            Some(admin),
            Some(json!({"phone": "0700000002", "notes": "moved"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let mut payload = json!({"id": id, "base_rev": c["rev"], "name": "Sara Till"});
    if clash {
        payload["notes"] = json!("from the till");
    }
    let (s, body) = app
        .post(
            "/sync/push",
            &cashier,
            json!({"device_id": device["id"], "changes": [
                {"client_mutation_id": format!("u-{id}"), "entity": "customer", "op": "update", "payload": payload}
            ]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let conflict = body["rejected"][0]["conflict_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no conflict: {body}"))
        .to_owned();
    (id, conflict)
}

#[tokio::test]
async fn signing_in_sets_a_strict_http_only_cookie_and_signing_out_ends_the_session() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let user = app.user(branch, Role::BranchManager).await;
    let (status, _, headers) = sign_in_attempt(&app, &user.email, PASSWORD).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let line = set_cookie(&headers, "console_session").unwrap();
    let lower = line.to_lowercase();
    assert!(lower.contains("httponly"), "{line}");
    assert!(lower.contains("samesite=strict"), "{line}");
    assert!(lower.contains("path=/console"), "{line}");
    // Plain HTTP: a Secure cookie would never come back.
    assert!(!lower.contains("secure"), "{line}");
    // The sign-in form's own token cookie has the same flags.
    let res = no_redirects()
        .get(format!("{}/console/login", app.root))
        .send()
        .await
        .unwrap();
    let login = set_cookie(res.headers(), "console_login")
        .unwrap()
        .to_lowercase();
    assert!(login.contains("httponly") && login.contains("samesite=strict"));

    let console = Console::sign_in(&app, &user.email).await;
    let (status, html, headers) = console.get("/console/dashboard").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&user.full_name));
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(headers["cache-control"], "no-store");

    // Sign-out ends the session (and the sign-in it rode on).
    let (status, _, headers) = console.post("/console/logout", &[]).await;
    assert!(redirected_to_sign_in(status, &headers));
    let (status, _, headers) = console.get("/console/dashboard").await;
    assert!(redirected_to_sign_in(status, &headers), "{status}");
    let live = live_sessions(&app, user.id).await;
    // The first sign-in above was never signed out; the second one was.
    assert_eq!(live, 1);
    // No session at all: the same.
    let (status, _, headers) = no_redirects()
        .get(format!("{}/console/reports/sales", app.root))
        .send()
        .await
        .map(|r| (r.status(), (), r.headers().clone()))
        .unwrap();
    assert!(redirected_to_sign_in(status, &headers));
    // ... without telling a first visitor that a session "ended".
    assert_eq!(headers[LOCATION], "/console/login");
}

#[tokio::test]
async fn the_cookie_is_secure_behind_a_trusted_tls_proxy() {
    let app = TestApp::spawn_with(|c| c.http.trust_forwarded_for = true).await;
    let branch = app.branch("KLA").await;
    let user = app.user(branch, Role::Admin).await;
    let http = no_redirects();
    let res = http
        .get(format!("{}/console/login", app.root))
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    let login = set_cookie(res.headers(), "console_login").unwrap();
    assert!(login.to_lowercase().contains("secure"), "{login}");
    let token = csrf_of(&res.text().await.unwrap());
    let res = http
        .post(format!("{}/console/login", app.root))
        .header("x-forwarded-proto", "https")
        .header(COOKIE, format!("console_login={}", cookie_value(&login)))
        .form(&[
            ("email", user.email.as_str()),
            ("password", PASSWORD),
            ("csrf", token.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let line = set_cookie(res.headers(), "console_session").unwrap();
    assert!(line.to_lowercase().contains("secure"), "{line}");
}

#[tokio::test]
async fn failed_console_sign_ins_fill_the_same_window_as_the_api_login() {
    let app = TestApp::spawn_with(|c| c.auth.login_failures_per_email = 2).await;
    let branch = app.branch("KLA").await;
    let user = app.user(branch, Role::Admin).await;
    for _ in 0..2 {
        let (status, html, _) = sign_in_attempt(&app, &user.email, "wrong-password").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(
            html.contains("The email or password is incorrect."),
            "{html}"
        );
        assert!(!html.contains("\"status\""), "a page, not a problem body");
    }
    // The window is full: the console refuses even the right password ...
    let (status, html, _) = sign_in_attempt(&app, &user.email, PASSWORD).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{html}");
    assert!(html.contains("Too many failed sign-in attempts"), "{html}");
    // ... and so does the API: one window for both.
    let (status, _) = app.login(&user.email, PASSWORD).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_sign_in_without_its_form_token_is_refused() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let user = app.user(branch, Role::Admin).await;
    let res = no_redirects()
        .post(format!("{}/console/login", app.root))
        .form(&[("email", user.email.as_str()), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(set_cookie(res.headers(), "console_session").is_none());
}

#[tokio::test]
async fn a_form_post_without_the_session_token_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, console) = Console::of(&app, branch, Role::Admin).await;
    let count = || async {
        let client = app.pool.get().await.unwrap();
        let n: i64 = client
            .query_one("SELECT count(*) FROM devices", &[])
            .await
            .unwrap()
            .get(0);
        n
    };
    let (status, html, _) = console
        .post_raw("/console/devices", &[("name", "Till 9")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(html.contains("nothing was changed"), "{html}");
    let (status, _, _) = console
        .post_raw(
            "/console/devices",
            &[
                ("name", "Till 9"),
                ("csrf", "0123456789abcdef0123456789abcdef"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Another session's token does not do either.
    let (_, other) = Console::of(&app, branch, Role::Admin).await;
    let (status, _, _) = console
        .post_raw(
            "/console/devices",
            &[("name", "Till 9"), ("csrf", other.csrf.as_str())],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Signing out without it does not sign out.
    let (status, _, _) = console.post_raw("/console/logout", &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(count().await, 0);
    // With it, the same post works.
    let (status, _, _) = console
        .post("/console/devices", &[("name", "Till 9")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(count().await, 1);
}

#[tokio::test]
async fn an_idle_session_ends_with_its_sign_in() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (user, console) = Console::of(&app, branch, Role::Admin).await;
    let client = app.pool.get().await.unwrap();
    // Used a minute ago: still fine, and the use moves it on.
    client
        .execute(
            "UPDATE console_sessions SET last_seen_at = now() - interval '1 minute'",
            &[],
        )
        .await
        .unwrap();
    let (status, _, _) = console.get("/console/dashboard").await;
    assert_eq!(status, StatusCode::OK);
    // Idle longer than `auth.console_idle_secs` (30 minutes by default).
    client
        .execute(
            "UPDATE console_sessions SET last_seen_at = now() - interval '31 minutes'",
            &[],
        )
        .await
        .unwrap();
    let (status, _, headers) = console.get("/console/dashboard").await;
    assert!(redirected_to_sign_in(status, &headers), "{status}");
    let left: i64 = client
        .query_one("SELECT count(*) FROM console_sessions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    let live = live_sessions(&app, user.id).await;
    assert_eq!(live, 0, "the sign-in under an idle session ends too");
}

#[tokio::test]
async fn the_idle_limit_is_configurable() {
    let app = TestApp::spawn_with(|c| c.auth.console_idle_secs = 1).await;
    let branch = app.branch("KLA").await;
    let (_, console) = Console::of(&app, branch, Role::Admin).await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, _, headers) = console.get("/console/dashboard").await;
    assert!(redirected_to_sign_in(status, &headers), "{status}");
}

#[tokio::test]
async fn a_deactivated_or_changed_user_is_thrown_out_on_the_next_request() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (manager, console) = Console::of(&app, branch, Role::BranchManager).await;
    let (pharmacist, other) = Console::of(&app, branch, Role::Pharmacist).await;
    let (status, _) = app
        .call(
            Method::PUT,
            &format!("/users/{}", manager.id),
            Some(&admin),
            Some(json!({"is_active": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, headers) = console.get("/console/approvals").await;
    assert!(redirected_to_sign_in(status, &headers), "{status}");
    // A form post of a deactivated user does nothing either.
    let (status, _, headers) = console.post("/console/logout", &[]).await;
    assert!(redirected_to_sign_in(status, &headers));
    // A role change ends the console session as it ends the API's tokens.
    let (status, _) = app
        .call(
            Method::PUT,
            &format!("/users/{}", pharmacist.id),
            Some(&admin),
            Some(json!({"role": "cashier"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, headers) = other.get("/console/dashboard").await;
    assert!(redirected_to_sign_in(status, &headers));
    // And a deactivated user cannot sign in again.
    let (status, _, _) = sign_in_attempt(&app, &manager.email, PASSWORD).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// Every console page and the action the API asks for it (`None`: open to
/// every signed-in user, within its branch).
const PAGES: [(&str, Option<Action>); 28] = [
    ("/console/dashboard", None),
    ("/console/medicines", None),
    ("/console/medicines/new", Some(Action::WriteCatalogue)),
    ("/console/sales", None),
    ("/console/returns", None),
    ("/console/stock", None),
    ("/console/customers", None),
    ("/console/purchase-orders", Some(Action::ReadPurchaseOrders)),
    ("/console/fiscal", Some(Action::ReadFiscalDocuments)),
    ("/console/dashboard/alerts/low-stock", None),
    ("/console/reports/sales", Some(Action::ReadReports)),
    ("/console/reports/pharmacists", Some(Action::ReadReports)),
    ("/console/reports/inventory", Some(Action::ReadReports)),
    ("/console/reports/purchases", Some(Action::ReadReports)),
    ("/console/reports/vat", Some(Action::ReadReports)),
    ("/console/reports/stock-value", Some(Action::ReadStockValue)),
    ("/console/reports/margins", Some(Action::ReadStockValue)),
    ("/console/books/prescriptions", None),
    ("/console/books/classified", None),
    ("/console/books/destruction", None),
    ("/console/sync/conflicts", Some(Action::ResolveConflicts)),
    ("/console/devices", None),
    ("/console/approvals", None),
    ("/console/operations", Some(Action::OperateActors)),
    ("/console/users", Some(Action::ManageUsers)),
    ("/console/branches", None),
    ("/console/settings", None),
    ("/console/audit", Some(Action::ReadAuditLog)),
];

#[tokio::test]
async fn every_page_follows_the_role_policy_even_by_typed_address() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    for role in Role::ALL {
        let (_, console) = Console::of(&app, branch, role).await;
        let (_, dashboard, _) = console.get("/console/dashboard").await;
        for (path, action) in PAGES {
            let allowed = action.is_none_or(|a| a.permits(role));
            let (status, html, _) = console.get(path).await;
            let expected = if allowed {
                StatusCode::OK
            } else {
                StatusCode::FORBIDDEN
            };
            assert_eq!(status, expected, "{role} on {path}: {html}");
            if !allowed {
                assert!(html.contains("is not allowed"), "{role} {path}: {html}");
                // The menu does not offer it either (reports open on the
                // first tab the role may read).
                assert!(
                    !dashboard.contains(&format!(r#"href="{path}""#)),
                    "{role} is offered {path}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_non_admin_sees_only_its_own_branch() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    for (branch, name) in [(a, "Till of A"), (b, "Till of B")] {
        let (s, _) = app
            .post(
                "/devices",
                &admin,
                json!({"name": name, "branch_id": branch}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let (_, cashier_b) = app.signed_in(b, Role::Cashier).await;
    let (s, _) = app
        .post(
            "/approvals",
            &cashier_b,
            json!({"kind": "price_override", "reason": "B's refund"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let m = stocked(&app, &admin, b, "Amoxicillin", 2500).await;
    sell(&app, &cashier_b, &m, 2, "cash").await;

    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let (_, html, _) = manager.get("/console/devices").await;
    assert!(
        html.contains("Till of A") && !html.contains("Till of B"),
        "{html}"
    );
    let (_, html, _) = manager.get("/console/approvals?status=all").await;
    assert!(!html.contains("B&#39;s refund") && !html.contains("B's refund"));
    // Naming the other branch is refused, as the API refuses it.
    let (status, html, _) = manager
        .get(&format!("/console/dashboard?branch_id={b}"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{html}");
    let (status, html, _) = manager
        .get(&format!("/console/reports/sales?branch_id={b}"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        html.contains("You can only work on your own branch."),
        "{html}"
    );
    assert!(!html.contains("5,000.00"));
    // Its own dashboard has no sales; its comparison names only its branch.
    let (_, html, _) = manager.get("/console/dashboard").await;
    assert_eq!(text_of(&html, "today-revenue").unwrap(), "0.00");
    let rows = table_rows(&html, "table-comparison");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][1], "KLA");
    // An admin sees both, and the sale.
    let (_, admin_console) = Console::of(&app, a, Role::Admin).await;
    let (_, html, _) = admin_console.get("/console/dashboard").await;
    assert_eq!(text_of(&html, "today-revenue").unwrap(), "5,000.00");
    assert_eq!(table_rows(&html, "table-comparison").len(), 2);
}

#[tokio::test]
async fn the_dashboard_shows_the_figures_the_api_answers() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier_a) = app.signed_in(a, Role::Cashier).await;
    let (_, cashier_b) = app.signed_in(b, Role::Cashier).await;
    let m = stocked(&app, &admin, a, "Paracetamol", 1234).await;
    app.receive(&admin, &m["id"], b, 50, "2031-12-31").await;
    sell(&app, &cashier_a, &m, 3, "cash").await;
    sell(&app, &cashier_b, &m, 1, "mobile_money").await;
    let (_, console) = Console::of(&app, a, Role::Admin).await;
    let (_, html, _) = console.get("/console/dashboard").await;
    let (_, summary) = app.get("/dashboard/summary", &admin).await;
    let money = |v: &Value| {
        let d =
            rust_decimal::Decimal::from_str_exact(&format!("{:.2}", v.as_f64().unwrap())).unwrap();
        pharmacy::console::money(d)
    };
    assert_eq!(
        text_of(&html, "today-sales").unwrap(),
        summary["today_sales_count"].to_string()
    );
    assert_eq!(
        text_of(&html, "today-revenue").unwrap(),
        money(&summary["today_revenue"])
    );
    assert_eq!(
        text_of(&html, "today-vat").unwrap(),
        money(&summary["today_vat"])
    );
    for (id, field) in [
        ("count-low-stock", "low_stock_count"),
        ("count-out-of-stock", "out_of_stock_count"),
        ("count-expiring-30", "expiring_30_count"),
        ("count-expiring-90", "expiring_90_count"),
        ("count-expired", "expired_count"),
    ] {
        assert_eq!(
            text_of(&html, id).unwrap(),
            summary[field].to_string(),
            "{id}"
        );
    }
    let (_, comparison) = app.get("/dashboard/branch-comparison", &admin).await;
    let rows = table_rows(&html, "table-comparison");
    let items = comparison["items"].as_array().unwrap();
    assert_eq!(rows.len(), items.len());
    for (row, item) in rows.iter().zip(items) {
        assert_eq!(row[1], item["branch_code"].as_str().unwrap());
        assert_eq!(row[2], item["sales_count"].to_string());
        assert_eq!(row[3], money(&item["revenue"]));
        let shown: f64 = row[4].trim_end_matches('%').parse().unwrap();
        assert_eq!(shown, item["share_pct"].as_f64().unwrap());
    }
    // The charts are drawn on the server, with words for each bar.
    assert!(html.contains("<svg"), "{html}");
    assert!(html.contains("75% · 3,702.00"), "{html}");
    // A branch manager of EBB sees EBB's today.
    let (_, manager) = Console::of(&app, b, Role::BranchManager).await;
    let (_, html, _) = manager.get("/console/dashboard").await;
    assert_eq!(text_of(&html, "today-revenue").unwrap(), "1,234.00");
}

#[tokio::test]
async fn an_alert_count_links_to_its_list() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let low = app
        .medicine(
            &admin,
            json!({"name": "Low one", "selling_price": 100, "low_stock_threshold": 10}),
        )
        .await;
    app.receive(&admin, &low["id"], a, 3, "2031-12-31").await;
    let soon = app
        .medicine(
            &admin,
            json!({"name": "Soon one", "selling_price": 100, "low_stock_threshold": 1}),
        )
        .await;
    let client = app.pool.get().await.unwrap();
    let day: String = client
        .query_one("SELECT (org_today() + 10)::text", &[])
        .await
        .unwrap()
        .get(0);
    app.receive(&admin, &soon["id"], a, 20, &day).await;
    let (_, console) = Console::of(&app, a, Role::Pharmacist).await;
    let (_, html, _) = console.get("/console/dashboard").await;
    assert_eq!(text_of(&html, "count-low-stock").unwrap(), "1");
    assert!(html.contains("/console/dashboard/alerts/low-stock"));
    let (_, list, _) = console.get("/console/dashboard/alerts/low-stock").await;
    let rows = table_rows(&list, "table-items");
    assert_eq!(
        rows,
        vec![vec!["Low one".to_owned(), "3".to_owned(), "10".to_owned()]]
    );
    let (_, list, _) = console.get("/console/dashboard/alerts/expiring-30").await;
    let rows = table_rows(&list, "table-items");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][0], "Soon one");
    assert_eq!(rows[0][3], day);
}

#[tokio::test]
async fn a_report_csv_holds_exactly_the_table_shown() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let m = stocked(&app, &admin, a, "=cmd|' /C calc'!A0", 1500).await;
    let n = stocked(&app, &admin, a, "Ibuprofen, 200mg", 800).await;
    sell(&app, &cashier, &m, 2, "cash").await;
    sell(&app, &cashier, &n, 5, "mobile_money").await;
    let (_, console) = Console::of(&app, a, Role::Auditor).await;
    let (status, html, _) = console.get("/console/reports/sales").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    for key in ["totals", "by_payment", "top_selling", "by_day"] {
        let shown = table_rows(&html, &format!("table-{key}"));
        let link = format!(r#"id="csv-{key}""#);
        assert!(html.contains(&link), "no CSV link for {key}");
        let (status, csv, headers) = console
            .get(&format!("/console/reports/sales?format=csv&table={key}"))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv"));
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let rows: Vec<Vec<String>> = reader
            .records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect();
        assert_eq!(rows.len(), shown.len(), "{key}");
        for (csv_row, shown_row) in rows.iter().zip(&shown) {
            for (c, s) in csv_row.iter().zip(shown_row) {
                // Figures lose their thousands separators and the % sign;
                // text cells are neutralised against formulas.
                let s = s.replace(',', "").trim_end_matches('%').to_owned();
                let c = c.replace(',', "").trim_start_matches('\'').to_owned();
                assert_eq!(c, s, "{key}");
            }
        }
    }
    // Sorted as the API sorts: by payment, highest total first.
    let (_, report) = app.get("/reports/sales", &admin).await;
    let methods: Vec<String> = table_rows(&html, "table-by_payment")
        .iter()
        .map(|r| r[0].clone())
        .collect();
    let api: Vec<String> = report["by_payment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["payment_method"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(methods, api);
    // A formula in a name is written as text.
    let (_, csv, _) = console
        .get("/console/reports/sales?format=csv&table=top_selling")
        .await;
    assert!(csv.contains("'=cmd"), "{csv}");
}

#[tokio::test]
async fn a_bad_report_filter_is_shown_beside_its_field() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, console) = Console::of(&app, a, Role::Admin).await;
    let (status, html, _) = console
        .get("/console/reports/sales?from_date=2026-05-01&to_date=2026-04-01")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains(r#"id="from_date-error""#), "{html}");
    assert!(
        html.contains("from_date must not be after to_date"),
        "{html}"
    );
    let (status, html, _) = console
        .get("/console/books/classified?to_date=yesterday")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains(r#"id="to_date-error""#), "{html}");
}

#[tokio::test]
async fn resolving_a_conflict_in_the_console_is_what_the_api_then_reports() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (customer, id) = conflict(&app, &admin, a, true).await;
    let (_, console) = Console::of(&app, a, Role::Admin).await;
    let (status, html, _) = console.get("/console/sync/conflicts").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&format!("conflict-{id}")));
    // Side by side, with what differs marked.
    assert!(html.contains("Sara Till") && html.contains("0700000002"));
    assert!(html.contains("a merge clashes here"), "{html}");
    // A merge clashes (both changed the notes): refused, with the reason.
    let path = format!("/console/sync/conflicts/{id}/resolve");
    let (status, html, _) = console.post(&path, &[("strategy", "merge")]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(html.contains(r#"id="conflict-error""#), "{html}");
    let (_, list) = app.get("/sync/conflicts", &admin).await;
    assert_eq!(list["total"], 1);
    // An unknown strategy names the field.
    let (status, _, _) = console.post(&path, &[("strategy", "coin_toss")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // The till's version wins.
    let (status, _, headers) = console.post(&path, &[("strategy", "client")]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[LOCATION], "/console/sync/conflicts?done=resolved");
    let (_, list) = app.get("/sync/conflicts", &admin).await;
    assert_eq!(list["total"], 0);
    let (_, c) = app.get(&format!("/customers/{customer}"), &admin).await;
    assert_eq!(c["name"], "Sara Till");
    // Resolved once only.
    let (status, _, _) = console.post(&path, &[("strategy", "server")]).await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn approvals_are_decided_in_the_console_but_never_by_the_requester() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (requester, requester_console) = Console::of(&app, a, Role::BranchManager).await;
    let token = app.login(&requester.email, PASSWORD).await.1["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, approval) = app
        .post(
            "/approvals",
            &token,
            json!({"kind": "price_override", "reason": "damaged pack"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let id = approval["id"].as_str().unwrap();
    let (_, html, _) = requester_console.get("/console/approvals").await;
    assert!(html.contains("Your own request"), "{html}");
    assert!(!html.contains(&format!("/console/approvals/{id}/approve")));
    // Posting it anyway is refused by the API's own rule.
    let (status, html, _) = requester_console
        .post(&format!("/console/approvals/{id}/approve"), &[])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        html.contains("You cannot decide your own request"),
        "{html}"
    );
    // A cashier cannot decide at all.
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, _, _) = cashier
        .post(&format!("/console/approvals/{id}/approve"), &[])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Another manager can.
    let (_, other) = Console::of(&app, a, Role::BranchManager).await;
    let (status, _, _) = other
        .post(&format!("/console/approvals/{id}/reject"), &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let client = app.pool.get().await.unwrap();
    let status: String = client
        .query_one(
            "SELECT status FROM approvals WHERE id = $1",
            &[&Uuid::parse_str(id).unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "rejected");
    let (status, _, _) = other
        .post(&format!("/console/approvals/{id}/approve"), &[])
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn users_are_managed_within_the_api_rules() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    // A branch manager cannot create an admin, nor a user of another branch.
    let a_str = a.to_string();
    let b_str = b.to_string();
    let (status, html, _) = manager
        .post(
            "/console/users",
            &[
                ("full_name", "New Admin"),
                ("email", "boss@test.pharmacy"),
                ("password", "long-enough-1"),
                ("role", "admin"),
                ("branch_id", &a_str),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{html}");
    assert!(html.contains("Only an admin can manage admin users."));
    let (status, _, _) = manager
        .post(
            "/console/users",
            &[
                ("full_name", "Elsewhere"),
                ("email", "else@test.pharmacy"),
                ("password", "long-enough-1"),
                ("role", "cashier"),
                ("branch_id", &b_str),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A short password is named beside its field, the form kept.
    let (status, html, _) = manager
        .post(
            "/console/users",
            &[
                ("full_name", "Okello"),
                ("email", "okello@test.pharmacy"),
                ("password", "short"),
                ("role", "cashier"),
                ("branch_id", &a_str),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains(r#"id="password-error""#), "{html}");
    assert!(html.contains(r#"value="okello@test.pharmacy""#));
    let (status, _, _) = manager
        .post(
            "/console/users",
            &[
                ("full_name", "Okello"),
                ("email", "okello@test.pharmacy"),
                ("password", "long-enough-1"),
                ("role", "cashier"),
                ("branch_id", &a_str),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _) = app.login("okello@test.pharmacy", "long-enough-1").await;
    assert_eq!(status, StatusCode::OK);
    // Deactivating in the console ends the user's API tokens too.
    let (_, token) = app.signed_in(a, Role::Pharmacist).await;
    let client = app.pool.get().await.unwrap();
    let pharmacist: Uuid = client
        .query_one(
            "SELECT id FROM users WHERE role = 'pharmacist' AND branch_id = $1",
            &[&a],
        )
        .await
        .unwrap()
        .get(0);
    let (status, _, _) = manager
        .post(&format!("/console/users/{pharmacist}/deactivate"), &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _) = app.get("/auth/me", &token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Another branch's user is not found for a branch manager.
    let other = app.user(b, Role::Cashier).await;
    let (status, _, _) = manager.get(&format!("/console/users/{}", other.id)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_refused_setting_is_named_beside_its_field_and_nothing_is_saved() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, console) = Console::of(&app, a, Role::Admin).await;
    let (_, html, _) = console.get("/console/settings").await;
    assert!(html.contains(r#"id="save-settings""#));
    let mut fields: Vec<(String, String)> = Vec::new();
    for name in [
        "name",
        "base_currency",
        "rate_staleness_days",
        "server_mode",
        "server_url",
        "default_low_stock_threshold",
        "expiry_warning_days",
        "default_copies",
        "tax_rate",
        "time_zone",
        "min_shelf_life_days",
        "invoice_price_tolerance_percent",
    ] {
        let marker = format!(r#"name="{name}" value=""#);
        let at = html.find(&marker).unwrap_or_else(|| panic!("{name}")) + marker.len();
        let value = unescape(html[at..].split('"').next().unwrap());
        fields.push((name.to_owned(), value));
    }
    let with = |name: &str, value: &str| -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    if k == name {
                        value.to_owned()
                    } else {
                        v.clone()
                    },
                )
            })
            .collect()
    };
    let post = |f: Vec<(String, String)>| {
        let console = &console;
        async move {
            let pairs: Vec<(&str, &str)> =
                f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            console.post("/console/settings", &pairs).await
        }
    };
    let (status, html, _) = post(with("tax_rate", "5")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains(r#"id="tax_rate-error""#), "{html}");
    assert!(
        html.contains(r#"value="5""#),
        "the form keeps what was sent"
    );
    let (status, html, _) = post(with("time_zone", "Mars/Olympus")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains(r#"id="time_zone-error""#), "{html}");
    let (status, html, _) = post(with("invoice_price_tolerance_percent", "101")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        html.contains(r#"id="invoice_price_tolerance_percent-error""#),
        "{html}"
    );
    let (_, settings) = app
        .get("/settings", &app.signed_in(a, Role::Cashier).await.1)
        .await;
    assert_eq!(settings["updated_at"], Value::Null, "nothing was saved");
    let (status, _, _) = post(with("tax_rate", "0.16")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, settings) = app
        .get("/settings", &app.signed_in(a, Role::Cashier).await.1)
        .await;
    assert_eq!(settings["tax_rate"], json!(0.16));
    let (status, _, _) = post(with("min_shelf_life_days", "30")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, settings) = app
        .get("/settings", &app.signed_in(a, Role::Cashier).await.1)
        .await;
    assert_eq!(settings["min_shelf_life_days"], json!(30));
    // Anyone reads them; only an admin has the form to change them.
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, html, _) = cashier.get("/console/settings").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!html.contains(r#"id="save-settings""#));
    let (status, _, _) = cashier
        .post("/console/settings", &[("tax_rate", "0.1")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn operators_tune_a_branch_from_the_console() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, console) = Console::of(&app, a, Role::Admin).await;
    let (status, html, _) = console.get("/console/operations").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"id="pool""#) && html.contains(r#"id="routes""#));
    let path = format!("/console/operations/branches/{a}");
    let (status, html, _) = console
        .post(&path, &[("mailbox", "0"), ("sale_batch_max", "")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        html.contains(&format!(r#"id="mailbox-{a}-error""#)),
        "{html}"
    );
    let (status, _, _) = console
        .post(&path, &[("mailbox", "77"), ("sale_batch_max", "")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, tuning) = app.get(&format!("/ops/actors/branches/{a}"), &admin).await;
    assert_eq!(tuning["mailbox"], 77);
    assert_eq!(tuning["mailbox_source"], "database");
    let (status, _, _) = console.post(&format!("{path}/reset"), &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, tuning) = app.get(&format!("/ops/actors/branches/{a}"), &admin).await;
    assert_ne!(tuning["mailbox_source"], "database");
    // The live fragment the page refreshes.
    let (status, html, _) = console.get("/console/operations/live").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"<table id="actors""#));
}

#[tokio::test]
async fn the_books_page_export_and_keep_their_retention_notes() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, console) = Console::of(&app, a, Role::Pharmacist).await;
    for (path, note) in [
        (
            "/console/books/prescriptions",
            domain::books::PRESCRIPTION_BOOK_NOTE,
        ),
        (
            "/console/books/classified",
            domain::books::CLASSIFIED_BOOK_NOTE,
        ),
        (
            "/console/books/destruction",
            domain::books::DESTRUCTION_REGISTER_NOTE,
        ),
    ] {
        let (status, html, _) = console.get(path).await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains(&note.replace('\'', "&#39;")), "{path}");
        let (status, csv, headers) = console.get(&format!("{path}?format=csv")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers["content-disposition"]
            .to_str()
            .unwrap()
            .contains("attachment"));
        assert_eq!(csv.lines().count(), 1, "a header row only: {csv}");
    }
}

/// The destruction register page: every write-off line of a controlled
/// medicine with its witness, in its CSV too; not another branch's.
#[tokio::test]
async fn the_destruction_register_page_lists_controlled_write_offs_of_the_branch() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, pharmacist) = app.signed_in(a, Role::Pharmacist).await;
    let morphine = app
        .medicine(
            &admin,
            json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                   "requires_prescription": true, "control_schedule": "Class A"}),
        )
        .await;
    let batch = app
        .receive(&admin, &morphine["id"], a, 10, "2030-01-31")
        .await;
    let (status, w) = app
        .post(
            "/stock/write-offs",
            &pharmacist,
            json!({"reason": "damaged", "witness_name": "Inspector Nakato",
                   "items": [{"batch_id": batch["id"], "quantity": 3}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");

    let (_, console) = Console::of(&app, a, Role::Auditor).await;
    let (status, html, _) = console.get("/console/books/destruction").await;
    assert_eq!(status, StatusCode::OK);
    for shown in ["Morphine 10mg", "Class A", "Inspector Nakato", "damaged"] {
        assert!(html.contains(shown), "{shown} missing: {html}");
    }
    let (status, csv, _) = console.get("/console/books/destruction?format=csv").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(csv.contains("Inspector Nakato"));

    let (_, elsewhere) = Console::of(&app, b, Role::Auditor).await;
    let (status, html, _) = elsewhere.get("/console/books/destruction").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!html.contains("Inspector Nakato"), "another branch's row");
}

#[tokio::test]
async fn the_console_is_not_in_the_api_document_and_answers_pages_not_problems() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let res = reqwest::get(format!("{}/openapi.json", app.base))
        .await
        .unwrap();
    let doc = res.text().await.unwrap();
    assert!(
        !doc.contains("/console"),
        "console routes leaked into the document"
    );
    let (_, console) = Console::of(&app, a, Role::Admin).await;
    let (status, html, headers) = console.get("/console/no-such-page").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(html.contains("There is no such page"));
    // A malformed address is a page in words too.
    let (status, html, headers) = console.get("/console/books/prescriptions?page=abc").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(html.contains("The address is not valid"), "{html}");
    // Assets are served from the binary, with htmx's licence.
    for asset in ["htmx.min.js", "htmx-LICENSE.txt", "console.css"] {
        let res = reqwest::get(format!("{}/console/assets/{asset}", app.root))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{asset}");
    }
}

#[tokio::test]
async fn branches_are_added_in_the_console_by_admins_only() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = Console::of(&app, a, Role::Admin).await;
    let (status, _, _) = admin
        .post("/console/branches", &[("code", "MBR"), ("name", "Mbarara")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, html, _) = admin.get("/console/branches").await;
    assert!(table_rows(&html, "branches").iter().any(|r| r[1] == "MBR"));
    // A code taken is named beside the field.
    let (status, html, _) = admin
        .post("/console/branches", &[("code", "MBR"), ("name", "Again")])
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(html.contains(r#"id="code-error""#), "{html}");
    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let (status, html, _) = manager.get("/console/branches").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!html.contains(r#"id="create-branch""#));
    assert_eq!(
        table_rows(&html, "branches").len(),
        1,
        "its own branch only"
    );
    let (status, _, _) = manager
        .post("/console/branches", &[("code", "GUL"), ("name", "Gulu")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn two_managers_deciding_one_request_at_once_decide_it_once() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let (_, approval) = app
        .post(
            "/approvals",
            &cashier,
            json!({"kind": "price_override", "reason": "twice?"}),
        )
        .await;
    let id = approval["id"].as_str().unwrap().to_owned();
    let mut managers = Vec::new();
    for _ in 0..6 {
        managers.push(Console::of(&app, a, Role::BranchManager).await.1);
    }
    let answers = futures_util::future::join_all(managers.iter().enumerate().map(|(i, m)| {
        let verb = if i % 2 == 0 { "approve" } else { "reject" };
        let path = format!("/console/approvals/{id}/{verb}");
        async move { m.post(&path, &[]).await.0 }
    }))
    .await;
    let won = answers
        .iter()
        .filter(|s| **s == StatusCode::SEE_OTHER)
        .count();
    let lost = answers
        .iter()
        .filter(|s| **s == StatusCode::CONFLICT)
        .count();
    assert_eq!((won, lost), (1, 5), "{answers:?}");
    let client = app.pool.get().await.unwrap();
    let decisions: i64 = client
        .query_one(
            "SELECT count(*) FROM audit_log WHERE entity_type = 'approval' AND entity_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(decisions, 1, "one decision, audited once");
}

/// The stock value and margins pages show what `/reports/stock-valuation`
/// and `/reports/margins` answer, and an inventory manager (who reads no
/// other report) finds them from the menu.
#[tokio::test]
async fn stock_value_and_margins_pages_show_the_apis_figures() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = stocked(&app, &admin, branch, "Amoxicillin", 2500).await;
    sell(&app, &admin, &m, 2, "cash").await;
    let (_, api) = app.get("/reports/stock-valuation", &admin).await;
    let (_, margins) = app.get("/reports/margins", &admin).await;

    let (_, keeper) = Console::of(&app, branch, Role::InventoryManager).await;
    let (_, dashboard, _) = keeper.get("/console/dashboard").await;
    assert!(
        dashboard.contains(r#"href="/console/reports/stock-value""#),
        "{dashboard}"
    );
    let (status, html, _) = keeper.get("/console/reports/stock-value").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    // 98 capsules left at 100.00: the console groups thousands.
    assert_eq!(api["total_value"], "9800.00");
    assert!(html.contains("9,800.00"), "{html}");
    assert!(!html.contains(r#"href="/console/reports/sales""#));
    let (status, html, _) = keeper.get("/console/reports/margins").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("Amoxicillin"), "{html}");
    assert!(margins["totals"]["revenue"].is_string());
    let (status, html, _) = keeper
        .get("/console/reports/stock-value?as_of=2026-02-30")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(html.contains("as_of-error"), "{html}");
}
