//! `/reports/stock-valuation` and `/reports/margins`: stock valued from the
//! movement ledger at batch cost (any past day answers what the books said
//! then), expired and quarantined stock apart, and margins net of VAT and
//! credit notes with the cost of what returns put back taken off.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

struct Books {
    app: TestApp,
    branch: Uuid,
    admin: String,
    keeper: String,
    pain: Value,
    vitamin: Value,
    vitamin_batch: Value,
}

impl Books {
    async fn open() -> Books {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, keeper) = app.signed_in(branch, Role::InventoryManager).await;
        let pain = app
            .medicine(
                &admin,
                json!({"name": "Paracetamol", "selling_price": 100, "category": "Analgesics"}),
            )
            .await;
        let vitamin = app
            .medicine(
                &admin,
                json!({"name": "Vitamin C", "selling_price": 150, "category": "Vitamins"}),
            )
            .await;
        let supplier = app.supplier("Wholesale").await;
        let receive = |m: &Value, qty: i64, cost: &str| {
            json!({"supplier_id": supplier, "medicine_id": m["id"], "branch_id": branch,
                   "batch_number": format!("B-{}", Uuid::now_v7().simple()),
                   "expiry_date": "2030-12-31", "quantity": qty, "unit_cost": cost})
        };
        let (status, pain_batch) = app
            .post("/purchases", &admin, receive(&pain, 10, "40.00"))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{pain_batch}");
        let (status, vitamin_batch) = app
            .post("/purchases", &admin, receive(&vitamin, 5, "60.00"))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{vitamin_batch}");
        Books {
            app,
            branch,
            admin,
            keeper,
            pain,
            vitamin,
            vitamin_batch,
        }
    }

    async fn today(&self) -> String {
        let client = self.app.pool.get().await.unwrap();
        let d: chrono::NaiveDate = client
            .query_one("SELECT org_today()", &[])
            .await
            .unwrap()
            .get(0);
        d.to_string()
    }
}

fn row<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name} in {report}"))
}

#[tokio::test]
async fn stock_is_valued_at_batch_cost_from_the_ledger_on_any_day() {
    let b = Books::open().await;
    let (status, v) = b.app.get("/reports/stock-valuation", &b.keeper).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["group_by"], "medicine");
    assert_eq!(v["total_quantity"], 15);
    assert_eq!(v["total_value"], "700.00");
    assert_eq!(row(&v, "Paracetamol")["value"], "400.00");
    assert_eq!(row(&v, "Paracetamol")["key"], b.pain["id"]);
    assert_eq!(row(&v, "Vitamin C")["quantity"], 5);
    // Highest value first.
    assert_eq!(v["items"][0]["name"], "Paracetamol");
    // The dashboard shows the same value to those who may read it.
    let (_, dash) = b.app.get("/dashboard/summary", &b.keeper).await;
    assert_eq!(dash["stock_value"], "700.00", "{dash}");
    assert_eq!(dash["month_gross_margin"], "0.00");
    let (_, cashier) = b.app.signed_in(b.branch, Role::Cashier).await;
    let (_, dash) = b.app.get("/dashboard/summary", &cashier).await;
    assert!(dash["stock_value"].is_null(), "{dash}");

    let (status, sale) = b
        .app
        .post(
            "/sales",
            &b.admin,
            json!({"items": [{"medicine_id": b.pain["id"], "quantity": 3}],
                   "payment_method": "cash"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let (_, v) = b.app.get("/reports/stock-valuation", &b.keeper).await;
    assert_eq!(v["total_value"], "580.00");
    assert_eq!(row(&v, "Paracetamol")["quantity"], 7);

    // Yesterday's end: nothing had been received yet.
    let today: chrono::NaiveDate = b.today().await.parse().unwrap();
    let yesterday = today.pred_opt().unwrap();
    let (status, v) = b
        .app
        .get(
            &format!("/reports/stock-valuation?as_of={yesterday}"),
            &b.admin,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["total_value"], "0.00");
    assert_eq!(v["items"].as_array().unwrap().len(), 0);

    // Quarantined stock is shown apart (and still counted).
    let (status, body) = b
        .app
        .post(
            &format!(
                "/supplier-finance/batches/{}/quarantine",
                b.vitamin_batch["id"].as_str().unwrap()
            ),
            &b.admin,
            json!({"status": "quarantined"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, v) = b
        .app
        .get("/reports/stock-valuation?group_by=category", &b.admin)
        .await;
    assert_eq!(v["quarantined_value"], "300.00");
    assert_eq!(v["expired_value"], "0.00");
    assert_eq!(row(&v, "vitamins")["quarantined_value"], "300.00");
    assert_eq!(row(&v, "analgesics")["value"], "280.00");
    assert_eq!(v["total_value"], "580.00");

    // CSV: one line per group under a header.
    let res = b
        .app
        .http
        .get(format!("{}/reports/stock-valuation?format=csv", b.app.base))
        .bearer_auth(&b.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("key,name,quantity,value"), "{text}");
    assert_eq!(lines.len(), 3, "{text}");
}

#[tokio::test]
async fn margins_are_net_of_vat_and_credit_notes_less_restocked_cost() {
    let b = Books::open().await;
    let (status, sale) = b
        .app
        .post(
            "/sales",
            &b.admin,
            json!({"items": [{"medicine_id": b.pain["id"], "quantity": 4},
                             {"medicine_id": b.vitamin["id"], "quantity": 1}],
                   "payment_method": "cash"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let net = |item: &Value| -> f64 {
        let total: f64 = item["line_total"].as_str().unwrap().parse().unwrap();
        let vat: f64 = item["vat_amount"].as_str().unwrap().parse().unwrap();
        total - vat
    };
    let pain_line = &sale["items"][0];
    let pain_net = net(pain_line);
    // One paracetamol back on the shelf.
    let (status, note) = b
        .app
        .post(
            &format!("/sales/{}/returns", sale["id"].as_str().unwrap()),
            &b.admin,
            json!({"items": [{"sale_item_id": pain_line["id"], "quantity": 1}],
                   "reason": "unopened", "restock": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    let returned_net: f64 = note["subtotal"].as_str().unwrap().parse().unwrap();

    let (status, m) = b.app.get("/reports/margins", &b.keeper).await;
    assert_eq!(status, StatusCode::OK, "{m}");
    let pain = row(&m, "Paracetamol");
    let revenue: f64 = pain["revenue"].as_str().unwrap().parse().unwrap();
    assert!((revenue - (pain_net - returned_net)).abs() < 0.005, "{m}");
    // 4 sold at 40, 1 restocked: cost 120.
    assert_eq!(pain["cost_of_goods_sold"], "120.00");
    let margin: f64 = pain["gross_margin"].as_str().unwrap().parse().unwrap();
    assert!((margin - (revenue - 120.0)).abs() < 0.005);
    let pct = pain["margin_pct"].as_f64().unwrap();
    assert!((pct - (100.0 * margin / revenue * 10.0).round() / 10.0).abs() < 0.051);
    assert_eq!(row(&m, "Vitamin C")["cost_of_goods_sold"], "60.00");
    assert_eq!(m["totals"]["cost_of_goods_sold"], "180.00");

    // The sales report's top sellers agree with the margins, medicine by
    // medicine, on the same window.
    let (status, sales) = b.app.get("/reports/sales", &b.admin).await;
    assert_eq!(status, StatusCode::OK, "{sales}");
    for top in sales["top_selling"].as_array().unwrap() {
        let name = top["name"].as_str().unwrap();
        let margins = row(&m, name);
        let as_num = |v: &Value| -> f64 { v.as_str().unwrap().parse().unwrap() };
        assert!(
            (top["gross_profit"].as_f64().unwrap() - as_num(&margins["gross_margin"])).abs()
                < 0.005,
            "{name}: {top} vs {margins}"
        );
        assert!(
            (top["cost"].as_f64().unwrap() - as_num(&margins["cost_of_goods_sold"])).abs() < 0.005
        );
        assert_eq!(top["margin_pct"], margins["margin_pct"], "{name}");
    }

    // By day: one row, today's.
    let (_, by_day) = b.app.get("/reports/margins?group_by=day", &b.admin).await;
    let days = by_day["items"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{by_day}");
    assert_eq!(days[0]["key"], b.today().await);
    assert_eq!(days[0]["revenue"], m["totals"]["revenue"]);

    // Bad input: 400 naming the field; other roles are refused.
    for (query, field) in [
        ("group_by=supplier", "group_by"),
        ("format=xml", "format"),
        ("from_date=2026-02-30", "from_date"),
    ] {
        let (status, problem) = b
            .app
            .get(&format!("/reports/margins?{query}"), &b.admin)
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{query}");
    }
    let (_, cashier) = b.app.signed_in(b.branch, Role::Cashier).await;
    let (status, problem) = b.app.get("/reports/margins", &cashier).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_zero_revenue_group_has_a_zero_margin_percent() {
    let b = Books::open().await;
    let (status, m) = b.app.get("/reports/margins", &b.admin).await;
    assert_eq!(status, StatusCode::OK, "{m}");
    assert_eq!(m["items"].as_array().unwrap().len(), 0);
    assert_eq!(m["totals"]["revenue"], "0.00");
    assert_eq!(m["totals"]["margin_pct"], 0.0);
}
