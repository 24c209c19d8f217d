//! `/reports`: figures and orderings of every report on a small hand-made
//! chain whose right answers are written here, the date windows and the
//! role gates.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};
use crate::dashboard::{assert_num, backdate, enable_vat, org_day, sell};

/// Two branches (KLA, EBB) with purchases, a transfer and sales. VAT is on
/// at 18 %. Sales (today unless noted; amounts VAT included):
///
/// | sale | who | lines | method | total | VAT |
/// |---|---|---|---|---|---|
/// | T1 | Amina @KLA | vitamin C ×2, paracetamol ×2 | cash | 3360 | 360 |
/// | T2 | Amina @KLA | condoms ×1, paracetamol ×1 | card | 1500 | 0 |
/// | T3 | Peter @KLA | vitamin C ×1 | mobile_money | 1180 | 180 |
/// | T4 | Brenda @EBB | paracetamol ×4 | cash | 2000 | 0 |
/// | T6 | Amina @KLA, 2 days ago | vitamin C ×1 | cash | 1180 | 180 |
/// | T7 | Amina @KLA | sample ×1 (price 0) | cash | 0 | 0 |
/// | T8–T10 | Brenda @EBB | paracetamol ×1 each | cash | 500 each | 0 |
/// | T11 | Ada (admin) @KLA | paracetamol ×1 | card | 500 | 0 |
/// | T12 | Ada (admin) @EBB | paracetamol ×1 | card | 500 | 0 |
/// | T5 | Amina @KLA, 40 days ago | paracetamol ×2 | cash | 1000 | 0 |
struct Books {
    app: TestApp,
    a: Uuid,
    b: Uuid,
    admin: String,
    cashier_a: String,
    pharmacist_a: String,
    cashier_b: String,
    vitamin: Value,
    paracetamol: Value,
    condoms: Value,
    lowmed: Value,
    outmed: Value,
    sample: Value,
    s1: Uuid,
    s2: Uuid,
    /// Sale ids T1..T12 (index 0 is T1; T5 is index 4).
    sales: Vec<Value>,
}

async fn rename(app: &TestApp, user: Uuid, name: &str) {
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE users SET full_name = $1 WHERE id = $2",
            &[&name, &user],
        )
        .await
        .unwrap();
}

impl Books {
    async fn new() -> Books {
        let app = TestApp::spawn().await;
        enable_vat(&app).await;
        let a = app.branch("KLA").await;
        let b = app.branch("EBB").await;
        let (admin_user, admin) = app.signed_in(a, Role::Admin).await;
        let (cashier_a_user, cashier_a) = app.signed_in(a, Role::Cashier).await;
        let (pharmacist_user, pharmacist_a) = app.signed_in(a, Role::Pharmacist).await;
        let (cashier_b_user, cashier_b) = app.signed_in(b, Role::Cashier).await;
        rename(&app, admin_user.id, "Ada Admin").await;
        rename(&app, cashier_a_user.id, "Amina Cashier").await;
        rename(&app, pharmacist_user.id, "Peter Pharmacist").await;
        rename(&app, cashier_b_user.id, "Brenda Cashier").await;
        let med = |name: &str, price: i64, vat: &str, category: Option<&str>, low: i64| {
            json!({"name": name, "selling_price": price, "vat_category": vat,
                   "category": category, "low_stock_threshold": low})
        };
        let vitamin = app
            .medicine(
                &admin,
                med("Vitamin C", 1180, "standard", Some("Supplements"), 10),
            )
            .await;
        let paracetamol = app
            .medicine(
                &admin,
                med("Paracetamol", 500, "zero", Some("Analgesics"), 10),
            )
            .await;
        let condoms = app
            .medicine(
                &admin,
                med("Condoms", 1000, "exempt", Some("Family planning"), 10),
            )
            .await;
        let lowmed = app
            .medicine(&admin, med("Lowmed", 200, "zero", Some("Analgesics"), 10))
            .await;
        let outmed = app
            .medicine(&admin, med("Outmed", 300, "zero", None, 10))
            .await;
        let sample = app
            .medicine(&admin, med("Sample", 0, "zero", Some("Supplements"), 5))
            .await;
        let s1 = app.supplier("Quality Chemicals").await;
        let s2 = app.supplier("Abacus Pharma").await;
        let mut books = Books {
            app,
            a,
            b,
            admin,
            cashier_a,
            pharmacist_a,
            cashier_b,
            vitamin,
            paracetamol,
            condoms,
            lowmed,
            outmed,
            sample,
            s1,
            s2,
            sales: Vec::new(),
        };
        books.stock().await;
        books.sell_all().await;
        books
    }

    async fn purchase(
        &self,
        m: &Value,
        branch: Uuid,
        qty: i64,
        cost: i64,
        s: Uuid,
        exp: &str,
    ) -> Value {
        let body = json!({
            "supplier_id": s, "medicine_id": m["id"], "branch_id": branch,
            "batch_number": format!("B-{}", Uuid::now_v7().simple()), "expiry_date": exp,
            "quantity": qty, "unit_cost": cost,
        });
        let (status, batch) = self.app.post("/purchases", &self.admin, body).await;
        assert_eq!(status, StatusCode::CREATED, "purchase: {batch}");
        batch
    }

    /// Purchases (spend in brackets) and a transfer of 5 paracetamol KLA → EBB.
    async fn stock(&self) {
        let (a, b, s1, s2) = (self.a, self.b, self.s1, self.s2);
        let end = "2030-12-31";
        self.purchase(&self.vitamin, a, 50, 600, s1, end).await; // 30000
        self.purchase(&self.paracetamol, a, 100, 200, s2, end).await; // 20000
        self.purchase(&self.condoms, a, 20, 400, s1, end).await; // 8000
        self.purchase(&self.lowmed, a, 4, 100, s2, end).await; // 400
        self.purchase(&self.sample, a, 10, 100, s1, end).await; // 1000
        self.purchase(&self.paracetamol, b, 40, 200, s2, end).await; // 8000
                                                                     // Received 40 days ago: outside the default window.
        let old = self
            .purchase(&self.paracetamol, a, 10, 250, s1, "2031-06-30")
            .await;
        backdate(&self.app, "batches", &old["id"], 40, 9).await;
        let (_, manager_b) = self.app.signed_in(b, Role::BranchManager).await;
        let (status, t) = self
            .app
            .post(
                "/transfers",
                &self.admin,
                json!({"medicine_id": self.paracetamol["id"], "from_branch_id": a,
                       "to_branch_id": b, "qty": 5}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{t}");
        let path = format!("/transfers/{}/receive", t["id"].as_str().unwrap());
        let (status, t) = self.app.post(&path, &manager_b, json!({})).await;
        assert_eq!(status, StatusCode::OK, "{t}");
    }

    async fn sell_all(&mut self) {
        let app = &self.app;
        let (v, p, c, s) = (
            &self.vitamin,
            &self.paracetamol,
            &self.condoms,
            &self.sample,
        );
        let (ca, ph, cb) = (&self.cashier_a, &self.pharmacist_a, &self.cashier_b);
        let mut sales = vec![
            sell(app, ca, &[(v, 2), (p, 2)], "cash").await,
            sell(app, ca, &[(c, 1), (p, 1)], "card").await,
            sell(app, ph, &[(v, 1)], "mobile_money").await,
            sell(app, cb, &[(p, 4)], "cash").await,
        ];
        let t5 = sell(app, ca, &[(p, 2)], "cash").await;
        backdate(app, "sales", &t5["id"], 40, 11).await;
        sales.push(t5);
        let t6 = sell(app, ca, &[(v, 1)], "cash").await;
        backdate(app, "sales", &t6["id"], 2, 11).await;
        sales.push(t6);
        sales.push(sell(app, ca, &[(s, 1)], "cash").await);
        for _ in 0..3 {
            sales.push(sell(app, cb, &[(p, 1)], "cash").await);
        }
        sales.push(sell(app, &self.admin, &[(p, 1)], "card").await);
        let (status, t12) = app
            .post(
                "/sales",
                &self.admin,
                json!({"items": [{"medicine_id": p["id"], "quantity": 1}],
                       "payment_method": "card", "branch_id": self.b}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{t12}");
        sales.push(t12);
        self.sales = sales;
        app.assert_invariants().await;
    }

    async fn report(&self, path: &str, token: &str) -> Value {
        let (status, body) = self.app.get(path, token).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        body
    }
}

fn strs<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v[field].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_sales_report_totals_days_methods_top_sellers_and_recent_sales() {
    let books = Books::new().await;
    let r = books.report("/reports/sales", &books.admin).await;
    assert_eq!(r["from_date"], org_day(&books.app, -29).await);
    assert_eq!(r["to_date"], org_day(&books.app, 0).await);
    assert!(r["branch_id"].is_null());

    // T5 (40 days ago) is outside the default window.
    let t = &r["totals"];
    assert_eq!(t["count"], 11);
    assert_num(&t["revenue"], 11720.0);
    assert_num(&t["vat"], 720.0);
    assert_num(&t["subtotal"], 11000.0);
    assert_num(&t["average"], 1065.45);

    let days = r["by_day"].as_array().unwrap();
    assert_eq!(days.len(), 30);
    assert_eq!(days[0]["date"], org_day(&books.app, -29).await);
    assert_eq!(days[29]["date"], org_day(&books.app, 0).await);
    assert_eq!(days[29]["count"], 10);
    assert_num(&days[29]["total"], 10540.0);
    assert_eq!(days[27]["date"], org_day(&books.app, -2).await);
    assert_eq!(days[27]["count"], 1);
    assert_num(&days[27]["total"], 1180.0);
    let quiet: i64 = days.iter().map(|d| d["count"].as_i64().unwrap()).sum();
    assert_eq!(quiet, 11, "no sale lands on any other day");

    let pay = &r["by_payment"];
    assert_eq!(
        strs(pay, "payment_method"),
        ["cash", "card", "mobile_money"]
    );
    assert_eq!(pay[0]["count"], 7);
    assert_num(&pay[0]["total"], 8040.0);
    assert_eq!(pay[1]["count"], 3);
    assert_num(&pay[1]["total"], 2500.0);
    assert_eq!(pay[2]["count"], 1);
    assert_num(&pay[2]["total"], 1180.0);

    // Revenue, cost (quantity × cost_at_sale), profit and margin per medicine;
    // profit and margin as the margins report has them, net of VAT (Vitamin
    // C: 4720 with 720 VAT is 4000 net, 1600 over its cost of 2400).
    let top = &r["top_selling"];
    assert_eq!(
        strs(top, "name"),
        ["Paracetamol", "Vitamin C", "Condoms", "Sample"]
    );
    let expect = [
        (12, 6000.0, 2400.0, 3600.0, 60.0),
        (4, 4720.0, 2400.0, 1600.0, 40.0),
        (1, 1000.0, 400.0, 600.0, 60.0),
        (1, 0.0, 100.0, -100.0, 0.0),
    ];
    for (row, (qty, revenue, cost, profit, margin)) in top.as_array().unwrap().iter().zip(expect) {
        assert_eq!(row["quantity"], qty, "{row}");
        assert_num(&row["revenue"], revenue);
        assert_num(&row["cost"], cost);
        assert_num(&row["gross_profit"], profit);
        assert_num(&row["margin_pct"], margin);
    }
    assert_eq!(top[0]["medicine_id"], books.paracetamol["id"]);

    // The 8 most recent, newest first: T12, T11, T10, T9, T8, T7, T4, T3.
    let recent = r["recent_sales"].as_array().unwrap();
    let order = [11, 10, 9, 8, 7, 6, 3, 2];
    let expected: Vec<&Value> = order.iter().map(|&i| &books.sales[i]["id"]).collect();
    let got: Vec<&Value> = recent.iter().map(|s| &s["id"]).collect();
    assert_eq!(got, expected);
    let t3 = &recent[7];
    assert_eq!(t3["invoice_number"], books.sales[2]["invoice_number"]);
    assert_eq!(t3["pharmacist_name"], "Peter Pharmacist");
    assert_num(&t3["total"], 1180.0);
    assert_eq!(t3["payment_method"], "mobile_money");
    assert!(t3["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(recent[0]["pharmacist_name"], "Ada Admin");
    assert_eq!(recent[0]["branch_id"], books.b.to_string());

    // One branch: KLA has T1, T2, T3, T6, T7 and T11.
    let kla = books
        .report(
            &format!("/reports/sales?branch_id={}", books.a),
            &books.admin,
        )
        .await;
    assert_eq!(kla["branch_id"], books.a.to_string());
    assert_eq!(kla["totals"]["count"], 6);
    assert_num(&kla["totals"]["revenue"], 7720.0);
    assert_num(&kla["totals"]["vat"], 720.0);
    assert!(strs(&kla["recent_sales"], "invoice_number")
        .iter()
        .all(|n| n.starts_with("KLA-")));

    // A wider window takes in T5; a window with no sales has zeros.
    let from = org_day(&books.app, -45).await;
    let wide = books
        .report(&format!("/reports/sales?from_date={from}"), &books.admin)
        .await;
    assert_eq!(wide["totals"]["count"], 12);
    assert_eq!(wide["by_day"].as_array().unwrap().len(), 46);
    let empty = books
        .report(
            "/reports/sales?from_date=2020-02-01&to_date=2020-02-29",
            &books.admin,
        )
        .await;
    assert_eq!(empty["totals"]["count"], 0);
    assert_num(&empty["totals"]["average"], 0.0);
    assert_eq!(empty["by_day"].as_array().unwrap().len(), 29);
    assert!(empty["top_selling"].as_array().unwrap().is_empty());
    assert!(empty["recent_sales"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn sales_by_pharmacist_are_per_user_and_branch_revenue_first() {
    let books = Books::new().await;
    let r = books
        .report("/reports/sales/by-pharmacist", &books.admin)
        .await;
    let items = &r["items"];
    assert_eq!(
        strs(items, "name"),
        [
            "Amina Cashier",
            "Brenda Cashier",
            "Peter Pharmacist",
            "Ada Admin",
            "Ada Admin"
        ]
    );
    // The admin sold at both branches: one row each, ties by branch name.
    assert_eq!(
        strs(items, "branch_name"),
        [
            "Branch KLA",
            "Branch EBB",
            "Branch KLA",
            "Branch EBB",
            "Branch KLA"
        ]
    );
    let expect = [
        (4, 6040.0, 540.0, 1510.0),
        (4, 3500.0, 0.0, 875.0),
        (1, 1180.0, 180.0, 1180.0),
        (1, 500.0, 0.0, 500.0),
        (1, 500.0, 0.0, 500.0),
    ];
    for (row, (count, revenue, vat, average)) in items.as_array().unwrap().iter().zip(expect) {
        assert_eq!(row["count"], count, "{row}");
        assert_num(&row["revenue"], revenue);
        assert_num(&row["vat"], vat);
        assert_num(&row["average"], average);
        assert!(row["user_id"].is_string() && row["branch_id"].is_string());
    }
    assert_eq!(items[0]["role"], "cashier");
    assert_eq!(items[3]["branch_id"], books.b.to_string());

    let ebb = books
        .report(
            &format!("/reports/sales/by-pharmacist?branch_id={}", books.b),
            &books.admin,
        )
        .await;
    assert_eq!(strs(&ebb["items"], "name"), ["Brenda Cashier", "Ada Admin"]);
}

#[tokio::test]
async fn the_inventory_report_values_stock_by_category_and_lists_the_emptiest() {
    let books = Books::new().await;
    // Stock now: vitamin C 46 (KLA); paracetamol 99 (KLA) + 37 (EBB);
    // condoms 19, lowmed 4 (low), outmed 0 (out), sample 9 (threshold 5).
    let r = books.report("/reports/inventory", &books.admin).await;
    assert!(r["branch_id"].is_null());
    assert_eq!(r["total_medicines"], 6);
    assert_eq!(r["low_stock_count"], 1);
    assert_eq!(r["out_of_stock_count"], 1);
    assert_eq!(r["total_units"], 214);
    assert_num(&r["total_value"], 142080.0);
    let cats = &r["by_category"];
    assert_eq!(
        strs(cats, "name"),
        [
            "Analgesics",
            "Supplements",
            "Family planning",
            "Uncategorised"
        ]
    );
    assert_eq!(cats[0]["category"], "analgesics");
    assert!(cats[3]["category"].is_null());
    let expect = [
        (2, 140, 68800.0),
        (2, 55, 54280.0),
        (1, 19, 19000.0),
        (1, 0, 0.0),
    ];
    for (row, (count, units, value)) in cats.as_array().unwrap().iter().zip(expect) {
        assert_eq!(row["medicine_count"], count, "{row}");
        assert_eq!(row["units"], units, "{row}");
        assert_num(&row["value"], value);
    }
    assert_eq!(strs(&r["low_stock_list"], "name"), ["Outmed", "Lowmed"]);
    assert_eq!(r["low_stock_list"][1]["stock_quantity"], 4);
    assert_eq!(r["low_stock_list"][1]["low_stock_threshold"], 10);
    assert_eq!(r["low_stock_list"][1]["medicine_id"], books.lowmed["id"]);
    assert_eq!(r["low_stock_list"][0]["medicine_id"], books.outmed["id"]);

    // EBB: only paracetamol (40 bought + 5 transferred − 8 sold), from its
    // ledger; everything else is out of stock there.
    let ebb = books
        .report(
            &format!("/reports/inventory?branch_id={}", books.b),
            &books.admin,
        )
        .await;
    assert_eq!(ebb["branch_id"], books.b.to_string());
    assert_eq!(ebb["total_units"], 37);
    assert_num(&ebb["total_value"], 18500.0);
    assert_eq!(ebb["low_stock_count"], 0);
    assert_eq!(ebb["out_of_stock_count"], 5);
    assert_eq!(
        strs(&ebb["by_category"], "name"),
        [
            "Analgesics",
            "Family planning",
            "Supplements",
            "Uncategorised"
        ]
    );
    assert_eq!(
        strs(&ebb["low_stock_list"], "name"),
        ["Condoms", "Lowmed", "Outmed", "Sample", "Vitamin C"]
    );

    // The ledger sum the branch report uses equals the batches' stock.
    let client = books.app.pool.get().await.unwrap();
    for branch in [books.a, books.b] {
        let row = client
            .query_one(
                "SELECT (SELECT coalesce(sum(qty), 0) FROM stock_movements WHERE branch_id = $1)::bigint,
                        (SELECT coalesce(sum(qty_remaining), 0) FROM batches WHERE branch_id = $1)::bigint",
                &[&branch],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), row.get::<_, i64>(1));
        let report = books
            .report(
                &format!("/reports/inventory?branch_id={branch}"),
                &books.admin,
            )
            .await;
        assert_eq!(report["total_units"], row.get::<_, i64>(0));
    }
    books.app.assert_invariants().await;
}

#[tokio::test]
async fn the_purchases_report_counts_purchased_batches_in_the_window_only() {
    let books = Books::new().await;
    // The transfer-in batch at EBB and the batch received 40 days ago are out.
    let r = books.report("/reports/purchases", &books.admin).await;
    assert_eq!(r["totals"]["batch_count"], 6);
    assert_eq!(r["totals"]["units"], 224);
    assert_num(&r["totals"]["spend"], 67400.0);
    let sup = &r["by_supplier"];
    assert_eq!(
        strs(sup, "supplier_name"),
        ["Quality Chemicals", "Abacus Pharma"]
    );
    assert_eq!(sup[0]["supplier_id"], books.s1.to_string());
    assert_eq!(sup[0]["batch_count"], 3);
    assert_eq!(sup[0]["units"], 80);
    assert_num(&sup[0]["spend"], 39000.0);
    assert_eq!(sup[1]["batch_count"], 3);
    assert_num(&sup[1]["spend"], 28400.0);
    let med = &r["by_medicine"];
    assert_eq!(
        strs(med, "name"),
        ["Vitamin C", "Paracetamol", "Condoms", "Sample", "Lowmed"]
    );
    assert_eq!(med[1]["batch_count"], 2);
    assert_eq!(med[1]["units"], 140);
    assert_num(&med[1]["spend"], 28000.0);

    // From 60 days back the old batch counts and paracetamol leads.
    let from = org_day(&books.app, -60).await;
    let wide = books
        .report(
            &format!("/reports/purchases?from_date={from}"),
            &books.admin,
        )
        .await;
    assert_eq!(wide["totals"]["batch_count"], 7);
    assert_num(&wide["totals"]["spend"], 69900.0);
    assert_num(&wide["by_supplier"][0]["spend"], 41500.0);
    assert_eq!(wide["by_medicine"][0]["name"], "Paracetamol");
    assert_num(&wide["by_medicine"][0]["spend"], 30500.0);
    assert_eq!(wide["by_medicine"][0]["batch_count"], 3);

    let ebb = books
        .report(
            &format!("/reports/purchases?branch_id={}", books.b),
            &books.admin,
        )
        .await;
    assert_eq!(ebb["totals"]["batch_count"], 1);
    assert_num(&ebb["totals"]["spend"], 8000.0);
}

/// Moves a sale to `day` of the month `months_back` before this one (noon,
/// organisation time zone); returns that month as `YYYY-MM`.
async fn in_month(app: &TestApp, sale: &Value, months_back: i32, day: i32) -> String {
    let client = app.pool.get().await.unwrap();
    let id = Uuid::parse_str(sale["id"].as_str().unwrap()).unwrap();
    client
        .query_one(
            "UPDATE sales SET created_at = ((date_trunc('month', org_today())
                 - make_interval(months => $2::int) + make_interval(days => $3::int - 1))::date
                 + time '12:00') AT TIME ZONE 'Africa/Kampala'
             WHERE id = $1
             RETURNING to_char(created_at AT TIME ZONE 'Africa/Kampala', 'YYYY-MM')",
            &[&id, &months_back, &day],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn the_vat_report_splits_zero_and_standard_rated_sales_by_month() {
    let app = TestApp::spawn().await;
    enable_vat(&app).await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, auditor) = app.signed_in(a, Role::Auditor).await;
    let std = app
        .medicine(
            &admin,
            json!({"name": "Vitamin C", "selling_price": 1180, "vat_category": "standard"}),
        )
        .await;
    let zero = app
        .medicine(
            &admin,
            json!({"name": "Paracetamol", "selling_price": 500, "vat_category": "zero"}),
        )
        .await;
    let exempt = app
        .medicine(
            &admin,
            json!({"name": "Condoms", "selling_price": 1000, "vat_category": "exempt"}),
        )
        .await;
    for m in [&std, &zero, &exempt] {
        app.receive(&admin, &m["id"], a, 50, "2030-12-31").await;
    }
    app.receive(&admin, &zero["id"], b, 50, "2030-12-31").await;

    // This month: 1180 (net 1000, VAT 180) + 500; and 1000 at EBB.
    sell(&app, &admin, &[(&std, 1), (&zero, 1)], "cash").await;
    let (_, cashier_b) = app.signed_in(b, Role::Cashier).await;
    sell(&app, &cashier_b, &[(&zero, 2)], "cash").await;
    // Last month: 2360 (net 2000, VAT 360) + 1000 exempt.
    let s = sell(&app, &admin, &[(&std, 2), (&exempt, 1)], "card").await;
    let last = in_month(&app, &s, 1, 15).await;
    // Two months ago: 1500 zero-rated, and a standard-rated 1180 sold while
    // tax was off, which carried no VAT.
    let s = sell(&app, &admin, &[(&zero, 3)], "cash").await;
    let earlier = in_month(&app, &s, 2, 10).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute("UPDATE settings SET tax_enabled = false", &[])
        .await
        .unwrap();
    let s = sell(&app, &admin, &[(&std, 1)], "cash").await;
    assert_eq!(s["vat"], "0.00");
    in_month(&app, &s, 2, 11).await;
    let this: String = client
        .query_one("SELECT to_char(org_today(), 'YYYY-MM')", &[])
        .await
        .unwrap()
        .get(0);
    let from: String = client
        .query_one(
            "SELECT (date_trunc('month', org_today()) - interval '2 months')::date::text",
            &[],
        )
        .await
        .unwrap()
        .get(0);

    // The chain: an admin's read (an auditor is held to its own branch).
    let r = {
        let (status, body) = app
            .get(&format!("/reports/vat?from_date={from}"), &admin)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    };
    assert_eq!(r["from_date"], from);
    let months = r["by_month"].as_array().unwrap();
    assert_eq!(
        strs(&r["by_month"], "month"),
        [this.as_str(), last.as_str(), earlier.as_str()]
    );
    let expect = [
        (1500.0, 1000.0, 180.0, 2680.0),
        (1000.0, 2000.0, 360.0, 3360.0),
        (2680.0, 0.0, 0.0, 2680.0),
    ];
    for (row, (t0, t18, vat, grand)) in months.iter().zip(expect) {
        assert_num(&row["taxable_0"], t0);
        assert_num(&row["taxable_18"], t18);
        assert_eq!(row["taxable_15"], row["taxable_18"], "{row}");
        assert_num(&row["vat_collected"], vat);
        assert_num(&row["grand_total"], grand);
    }
    let t = &r["totals"];
    assert_num(&t["taxable_0"], 5180.0);
    assert_num(&t["taxable_18"], 3000.0);
    assert_eq!(t["taxable_15"], t["taxable_18"]);
    assert_num(&t["vat_collected"], 540.0);
    assert_num(&t["grand_total"], 8720.0);

    // KLA alone: EBB's 1000 drops out of this month. KLA's auditor reads
    // the same without naming its branch.
    for query in [
        format!("from_date={from}&branch_id={a}"),
        format!("from_date={from}"),
    ] {
        let (_, kla) = app.get(&format!("/reports/vat?{query}"), &auditor).await;
        assert_eq!(kla["branch_id"], a.to_string(), "{kla}");
        assert_num(&kla["by_month"][0]["taxable_0"], 500.0);
        assert_num(&kla["by_month"][0]["grand_total"], 1680.0);
        assert_num(&kla["totals"]["grand_total"], 7720.0);
    }

    // Lines carry their sale's time and branch, also after the sale moved.
    let drift: i64 = client
        .query_one(
            "SELECT count(*) FROM sale_items i JOIN sales s ON s.id = i.sale_id
             WHERE i.sold_at <> s.created_at OR i.branch_id <> s.branch_id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(drift, 0);
}

#[tokio::test]
async fn report_windows_are_checked_and_roles_gated() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, auditor) = app.signed_in(a, Role::Auditor).await;
    let (_, manager) = app.signed_in(a, Role::BranchManager).await;
    let windowed = [
        "/reports/sales",
        "/reports/sales/by-pharmacist",
        "/reports/purchases",
        "/reports/vat",
    ];
    for path in windowed {
        for (query, field) in [
            ("from_date=2026-02-30", "from_date"),
            ("from_date=01-02-2026", "from_date"),
            ("to_date=tomorrow", "to_date"),
            ("from_date=2026-03-02&to_date=2026-03-01", "from_date"),
        ] {
            let (status, body) = app.get(&format!("{path}?{query}"), &admin).await;
            assert_problem(status, &body, StatusCode::BAD_REQUEST);
            assert_eq!(body["field"], field, "{path}?{query}: {body}");
        }
        // A from_date after the default to_date (today) is refused too.
        let (status, body) = app
            .get(&format!("{path}?from_date=2999-01-01"), &admin)
            .await;
        assert_problem(status, &body, StatusCode::BAD_REQUEST);
        // The same day on both sides is a one-day window.
        let (status, body) = app
            .get(
                &format!("{path}?from_date=2026-03-01&to_date=2026-03-01"),
                &admin,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["from_date"], "2026-03-01");
        assert_eq!(body["to_date"], "2026-03-01");
    }
    let all = windowed
        .iter()
        .copied()
        .chain(["/reports/inventory"])
        .collect::<Vec<_>>();
    for role in [Role::Cashier, Role::Pharmacist, Role::InventoryManager] {
        let (_, token) = app.signed_in(a, role).await;
        for path in &all {
            let (status, body) = app.get(path, &token).await;
            assert_problem(status, &body, StatusCode::FORBIDDEN);
        }
    }
    for path in &all {
        // Admins read the whole chain or any branch.
        let (status, body) = app.get(path, &admin).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(body["branch_id"].is_null(), "{path}: {body}");
        let (status, body) = app.get(&format!("{path}?branch_id={b}"), &admin).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(body["branch_id"], b.to_string());
        // A branch manager and an auditor are held to their own branch.
        for token in [&manager, &auditor] {
            let (status, body) = app.get(path, token).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
            assert_eq!(body["branch_id"], a.to_string());
            let (status, body) = app.get(&format!("{path}?branch_id={b}"), token).await;
            assert_problem(status, &body, StatusCode::FORBIDDEN);
        }
        let (status, body) = app.call(reqwest::Method::GET, path, None, None).await;
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    }
}

#[tokio::test]
async fn the_openapi_document_describes_the_dashboard_and_reports() {
    let app = TestApp::spawn().await;
    let doc: Value = app
        .http
        .get(format!("{}/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in [
        "/api/v1/dashboard/summary",
        "/api/v1/dashboard/branch-comparison",
        "/api/v1/reports/sales",
        "/api/v1/reports/sales/by-pharmacist",
        "/api/v1/reports/inventory",
        "/api/v1/reports/purchases",
        "/api/v1/reports/vat",
    ] {
        assert!(doc["paths"][path]["get"].is_object(), "missing {path}");
    }
    let schemas = &doc["components"]["schemas"];
    for schema in ["Summary", "BranchComparison", "SalesReport", "VatReport"] {
        assert!(schemas[schema].is_object(), "missing schema {schema}");
    }
    assert!(schemas["VatFigures"]["properties"]["taxable_15"].is_object());
}
