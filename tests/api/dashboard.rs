//! `/dashboard`: every figure of the summary and the branch comparison on a
//! small hand-made chain whose right answers are written here.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// Asserts a JSON number (money and percentages are numbers on the wire).
pub fn assert_num(v: &Value, expected: f64) {
    let got = v
        .as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"));
    assert!(
        (got - expected).abs() < 1e-9,
        "expected {expected}, got {got}"
    );
}

/// The organisation's today plus `days`, as `YYYY-MM-DD`.
pub async fn org_day(app: &TestApp, days: i32) -> String {
    let client = app.pool.get().await.unwrap();
    client
        .query_one("SELECT (org_today() + $1::int)::text", &[&days])
        .await
        .unwrap()
        .get(0)
}

/// Moves a sale (or a batch) to `days_ago` at `hour`:00 in the organisation's time zone.
pub async fn backdate(app: &TestApp, table: &str, id: &Value, days_ago: i32, hour: i32) {
    let client = app.pool.get().await.unwrap();
    let id = Uuid::parse_str(id.as_str().unwrap()).unwrap();
    let sql = match table {
        "sales" => {
            "UPDATE sales SET created_at = ((org_today() - $2::int)::timestamp \
               + make_interval(hours => $3::int)) \
               AT TIME ZONE coalesce((SELECT time_zone FROM settings LIMIT 1), 'Africa/Kampala') \
             WHERE id = $1"
        }
        _ => {
            "UPDATE batches SET created_at = ((org_today() - $2::int)::timestamp \
               + make_interval(hours => $3::int)) \
               AT TIME ZONE coalesce((SELECT time_zone FROM settings LIMIT 1), 'Africa/Kampala') \
             WHERE id = $1"
        }
    };
    let n = client.execute(sql, &[&id, &days_ago, &hour]).await.unwrap();
    assert_eq!(n, 1);
    // A purchased batch's goods received note was posted when it arrived.
    client
        .execute(
            "UPDATE goods_received_notes n SET posted_at = b.created_at, created_at = b.created_at \
             FROM goods_received_lines l, batches b \
             WHERE l.note_id = n.id AND l.batch_id = $1 AND b.id = $1",
            &[&id],
        )
        .await
        .unwrap();
}

/// Turns VAT on at 18 % (PUT /settings is someone else's route).
pub async fn enable_vat(app: &TestApp) {
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO settings (org_id, tax_enabled, tax_rate) VALUES ($1, true, 0.18)
             ON CONFLICT (org_id) DO UPDATE SET tax_enabled = true, tax_rate = 0.18",
            &[&app.org_id],
        )
        .await
        .unwrap();
}

/// `POST /sales` of `(medicine, qty)` lines; panics unless 201.
pub async fn sell(app: &TestApp, token: &str, lines: &[(&Value, i64)], method: &str) -> Value {
    let items: Vec<Value> = lines
        .iter()
        .map(|(m, q)| json!({"medicine_id": m["id"], "quantity": q}))
        .collect();
    let (status, sale) = app
        .post(
            "/sales",
            token,
            json!({"items": items, "payment_method": method}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "sale: {sale}");
    sale
}

/// Two selling branches and one without sales, an admin on `a`.
struct Chain {
    app: TestApp,
    a: Uuid,
    b: Uuid,
    c: Uuid,
    admin: String,
    cashier_a: String,
    cashier_b: String,
    /// Standard-rated, 1180 (180.00 VAT a unit at 18 %).
    alpha: Value,
    /// Zero-rated, 500.
    beta: Value,
    /// Expiry batches only, never sold.
    epsilon: Value,
}

impl Chain {
    async fn new() -> Chain {
        let app = TestApp::spawn().await;
        enable_vat(&app).await;
        let a = app.branch("KLA").await;
        let b = app.branch("EBB").await;
        let c = app.branch("JJA").await;
        let (_, admin) = app.signed_in(a, Role::Admin).await;
        let (_, cashier_a) = app.signed_in(a, Role::Cashier).await;
        let (_, cashier_b) = app.signed_in(b, Role::Cashier).await;
        let med = |name: &str, price: i64, vat: &str| json!({"name": name, "selling_price": price, "vat_category": vat, "low_stock_threshold": 10});
        let alpha = app.medicine(&admin, med("Alpha", 1180, "standard")).await;
        let beta = app.medicine(&admin, med("Beta", 500, "zero")).await;
        // Gamma is low: 5 units against a threshold of 10.
        let gamma = app.medicine(&admin, med("Gamma", 300, "zero")).await;
        // Delta is never received: out of stock everywhere.
        app.medicine(&admin, med("Delta", 300, "zero")).await;
        let epsilon = app.medicine(&admin, med("Epsilon", 300, "zero")).await;
        // A deleted medicine counts nowhere.
        let gone = app.medicine(&admin, med("Gone", 300, "zero")).await;
        let (status, _) = app
            .call(
                reqwest::Method::DELETE,
                &format!("/medicines/{}", gone["id"].as_str().unwrap()),
                Some(&admin),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        app.receive(&admin, &alpha["id"], a, 100, "2030-12-31")
            .await;
        app.receive(&admin, &beta["id"], a, 100, "2030-12-31").await;
        app.receive(&admin, &beta["id"], b, 50, "2030-12-31").await;
        app.receive(&admin, &gamma["id"], a, 5, "2030-12-31").await;
        Chain {
            app,
            a,
            b,
            c,
            admin,
            cashier_a,
            cashier_b,
            alpha,
            beta,
            epsilon,
        }
    }

    /// Receives Epsilon at `branch` expiring `days` from today.
    async fn expiring(&self, branch: Uuid, qty: i64, days: i32) -> Value {
        let expiry = org_day(&self.app, days).await;
        self.app
            .receive(&self.admin, &self.epsilon["id"], branch, qty, &expiry)
            .await
    }

    async fn set_status(&self, batch: &Value, status: &str) {
        let path = format!(
            "/supplier-finance/batches/{}/quarantine",
            batch["id"].as_str().unwrap()
        );
        let (code, b) = self
            .app
            .post(&path, &self.admin, json!({"status": status}))
            .await;
        assert_eq!(code, StatusCode::OK, "{b}");
    }

    /// Sales at KLA today, yesterday, 5, 29 and 30 days ago; one at EBB today.
    async fn sales(&self) {
        let app = &self.app;
        let (alpha, beta) = (&self.alpha, &self.beta);
        sell(app, &self.cashier_a, &[(alpha, 2)], "cash").await; // 2360.00, VAT 360.00
        sell(app, &self.cashier_a, &[(beta, 3)], "card").await; // 1500.00
        for (lines, days) in [
            (vec![(alpha, 1)], 1), // 1180.00
            (vec![(beta, 2)], 1),  // 1000.00
            (vec![(beta, 1)], 5),  // 500.00
            (vec![(beta, 4)], 29), // 2000.00, the sparkline's first day
            (vec![(beta, 1)], 30), // 500.00, outside every 30-day window
        ] {
            let s = sell(app, &self.cashier_a, &lines, "cash").await;
            backdate(app, "sales", &s["id"], days, 10).await;
        }
        sell(app, &self.cashier_b, &[(beta, 2)], "mobile_money").await; // 1000.00
    }

    async fn summary(&self, token: &str, query: &str) -> Value {
        let (status, body) = self
            .app
            .get(&format!("/dashboard/summary{query}"), token)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

fn sparkline(body: &Value) -> Vec<f64> {
    body["sparkline_30d"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[tokio::test]
async fn the_summary_of_a_branch_carries_every_figure() {
    let chain = Chain::new().await;
    chain.sales().await;
    let a = chain.a;
    // Epsilon at KLA: expiring today, in 10 and 60 days (counted); in 60
    // days quarantined and in 20 days recalled (not counted); expired
    // yesterday (expired); 19 units in all, above its threshold.
    chain.expiring(a, 1, 0).await;
    chain.expiring(a, 3, 10).await;
    chain.expiring(a, 3, 60).await;
    let q = chain.expiring(a, 4, 60).await;
    chain.set_status(&q, "quarantined").await;
    let r = chain.expiring(a, 5, 20).await;
    chain.set_status(&r, "recalled").await;
    chain.expiring(a, 2, -1).await;
    // Beyond 90 days: not expiring yet.
    chain.expiring(a, 1, 91).await;
    // At EBB: one expiring batch, seen only by the organisation-wide summary.
    chain.expiring(chain.b, 4, 10).await;
    chain.app.assert_invariants().await;

    let s = chain
        .summary(&chain.admin, &format!("?branch_id={a}"))
        .await;
    assert_eq!(s["branch_id"], a.to_string());
    assert_eq!(s["date"], org_day(&chain.app, 0).await);
    assert_eq!(s["today_sales_count"], 2);
    assert_num(&s["today_revenue"], 3860.0);
    assert_num(&s["today_vat"], 360.0);
    // (3860 − 2180) / 2180 = 77.06 %.
    assert_num(&s["revenue_trend"], 77.1);
    let line = sparkline(&s);
    assert_eq!(line.len(), 30);
    let mut expected = vec![0.0; 30];
    expected[29] = 3860.0;
    expected[28] = 2180.0;
    expected[24] = 500.0;
    expected[0] = 2000.0;
    assert_eq!(line, expected);
    // Gamma is low (5 of 10), Delta out of stock; the deleted one is nowhere.
    assert_eq!(s["low_stock_count"], 1);
    assert_eq!(s["out_of_stock_count"], 1);
    assert_eq!(s["total_medicines"], 5);
    assert_eq!(s["expiring_90_count"], 3);
    assert_eq!(s["expiring_30_count"], 2);
    assert_eq!(s["expired_count"], 1);
    for field in ["today_sales_count", "low_stock_count", "expired_count"] {
        assert!(s[field].is_i64(), "{field} is an integer");
    }
}

#[tokio::test]
async fn the_organisation_summary_adds_up_the_branches_and_others_see_their_own() {
    let chain = Chain::new().await;
    chain.sales().await;
    chain.expiring(chain.a, 3, 10).await;
    chain.expiring(chain.b, 4, 10).await;

    let org = chain.summary(&chain.admin, "").await;
    assert!(org["branch_id"].is_null());
    assert_eq!(org["today_sales_count"], 3);
    assert_num(&org["today_revenue"], 4860.0);
    assert_num(&org["today_vat"], 360.0);
    // (4860 − 2180) / 2180 = 122.94 %.
    assert_num(&org["revenue_trend"], 122.9);
    // Chain stock: Gamma 5 (low), Delta 0 (out), Epsilon 7 (low).
    assert_eq!(org["low_stock_count"], 2);
    assert_eq!(org["out_of_stock_count"], 1);
    assert_eq!(org["expiring_90_count"], 2);
    assert_eq!(org["expiring_30_count"], 2);

    // EBB had no sales yesterday: the trend is 0. Its stock: Beta 48,
    // Epsilon 4 (low), Alpha, Gamma and Delta none.
    let (_, pharmacist_b) = chain.app.signed_in(chain.b, Role::Pharmacist).await;
    let ebb = chain.summary(&pharmacist_b, "").await;
    assert_eq!(ebb["branch_id"], chain.b.to_string());
    assert_eq!(ebb["today_sales_count"], 1);
    assert_num(&ebb["today_revenue"], 1000.0);
    assert_num(&ebb["revenue_trend"], 0.0);
    assert_eq!(ebb["low_stock_count"], 1);
    assert_eq!(ebb["out_of_stock_count"], 3);
    assert_eq!(ebb["expiring_90_count"], 1);
    assert_eq!(sparkline(&ebb)[29], 1000.0);
    assert_eq!(sparkline(&ebb).iter().sum::<f64>(), 1000.0);

    // A branch user naming another branch is refused; a cashier sees its own.
    let (status, body) = chain
        .app
        .get(
            &format!("/dashboard/summary?branch_id={}", chain.a),
            &pharmacist_b,
        )
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    let own = chain.summary(&chain.cashier_a, "").await;
    assert_eq!(own["branch_id"], chain.a.to_string());
    assert_eq!(own["today_sales_count"], 2);

    // A branch with no sales at all: zeros, and no trend.
    let c = chain
        .summary(&chain.admin, &format!("?branch_id={}", chain.c))
        .await;
    assert_eq!(c["today_sales_count"], 0);
    assert_num(&c["today_revenue"], 0.0);
    assert_num(&c["revenue_trend"], 0.0);
    assert_eq!(sparkline(&c), vec![0.0; 30]);

    let (status, body) = chain
        .app
        .call(reqwest::Method::GET, "/dashboard/summary", None, None)
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_day_without_takings_after_a_day_with_them_trends_down_100() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Beta", "selling_price": 500}))
        .await;
    app.receive(&admin, &m["id"], branch, 10, "2030-12-31")
        .await;
    let s = sell(&app, &admin, &[(&m, 2)], "cash").await;
    backdate(&app, "sales", &s["id"], 1, 9).await;
    let (_, body) = app.get("/dashboard/summary", &admin).await;
    assert_eq!(body["today_sales_count"], 0);
    assert_num(&body["revenue_trend"], -100.0);
    assert_eq!(sparkline(&body)[28], 1000.0);
}

#[tokio::test]
async fn the_branch_comparison_ranks_every_active_branch_with_its_share() {
    let chain = Chain::new().await;
    chain.sales().await;
    // An inactive branch is left out.
    let d = chain.app.branch("OLD").await;
    let client = chain.app.pool.get().await.unwrap();
    client
        .execute("UPDATE branches SET is_active = false WHERE id = $1", &[&d])
        .await
        .unwrap();

    // Default window, the last 30 days: KLA 3860 + 2180 + 500 + 2000 = 8540
    // in 6 sales (the sale 30 days ago is outside), EBB 1000, JJA nothing.
    // Every branch: an admin's read (a non-admin sees only its own row).
    let (status, body) = chain
        .app
        .get("/dashboard/branch-comparison", &chain.admin)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["from_date"], org_day(&chain.app, -29).await);
    assert_eq!(body["to_date"], org_day(&chain.app, 0).await);
    assert_eq!(body["total"], 3);
    assert_eq!(body["total_sales_count"], 7);
    assert_num(&body["total_revenue"], 9540.0);
    let items = body["items"].as_array().unwrap();
    let rows: Vec<(&str, i64)> = items
        .iter()
        .map(|b| {
            (
                b["branch_name"].as_str().unwrap(),
                b["sales_count"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![("Branch KLA", 6), ("Branch EBB", 1), ("Branch JJA", 0)]
    );
    assert_eq!(items[0]["branch_id"], chain.a.to_string());
    assert_num(&items[0]["revenue"], 8540.0);
    // 8540 / 9540 = 89.518 %, 1000 / 9540 = 10.482 %.
    assert_num(&items[0]["share_pct"], 89.5);
    assert_num(&items[1]["share_pct"], 10.5);
    assert_num(&items[2]["revenue"], 0.0);
    assert_num(&items[2]["share_pct"], 0.0);

    // Today only: KLA 3860, EBB 1000: 79.42 % and 20.58 %.
    let today = org_day(&chain.app, 0).await;
    let (_, body) = chain
        .app
        .get(
            &format!("/dashboard/branch-comparison?from_date={today}&to_date={today}"),
            &chain.admin,
        )
        .await;
    assert_num(&body["items"][0]["share_pct"], 79.4);
    assert_num(&body["items"][1]["share_pct"], 20.6);

    // A window without sales: everyone at zero, ties ranked by name.
    let (_, body) = chain
        .app
        .get(
            "/dashboard/branch-comparison?from_date=2020-01-01&to_date=2020-01-31",
            &chain.admin,
        )
        .await;
    let names: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["branch_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Branch EBB", "Branch JJA", "Branch KLA"]);
    assert!(body["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["share_pct"] == json!(0.0)));

    for (query, field) in [
        ("?from_date=2026-13-01", "from_date"),
        ("?to_date=yesterday", "to_date"),
        ("?from_date=2026-03-02&to_date=2026-03-01", "from_date"),
    ] {
        let (status, body) = chain
            .app
            .get(
                &format!("/dashboard/branch-comparison{query}"),
                &chain.admin,
            )
            .await;
        assert_problem(status, &body, StatusCode::BAD_REQUEST);
        assert_eq!(body["field"], field, "{query}: {body}");
    }
}
