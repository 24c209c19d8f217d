//! `/goods-received`: deliveries drafted as notes and posted as batches at
//! landed cost. Charges spread by line value to the cent; lines receive
//! against open order lines (partly, with rejects) and never beyond what is
//! outstanding unless a manager allows it, even when two notes post at
//! once; expired and short-dated stock is refused unless accepted; a posted
//! note is never posted again; bad input names its field and writes
//! nothing; `POST /purchases` is a one-line note posted at once.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

struct Dock {
    app: TestApp,
    branch: Uuid,
    admin: String,
    manager: String,
    clerk: String,
    pharmacist: String,
    supplier: Uuid,
    medicine: String,
    other: String,
}

fn days_ahead(days: i64) -> String {
    (chrono::Utc::now().date_naive() + chrono::Duration::days(days)).to_string()
}

impl Dock {
    async fn open() -> Dock {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
        let (_, clerk) = app.signed_in(branch, Role::InventoryManager).await;
        let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let supplier = app.supplier("Quality Chemicals").await;
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Amoxicillin 500mg", "selling_price": 3}),
            )
            .await;
        let other = app
            .medicine(
                &admin,
                json!({"name": "Paracetamol 500mg", "selling_price": 1}),
            )
            .await;
        Dock {
            app,
            branch,
            admin,
            manager,
            clerk,
            pharmacist,
            supplier,
            medicine: medicine["id"].as_str().unwrap().to_owned(),
            other: other["id"].as_str().unwrap().to_owned(),
        }
    }

    fn line(&self, medicine: &str, batch: &str, qty: i64, cost: &str) -> Value {
        json!({"medicine_id": medicine, "batch_number": batch, "expiry_date": days_ahead(400),
               "quantity_received": qty, "unit_cost": cost})
    }

    async fn draft(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.app.post("/goods-received", token, body).await
    }

    async fn post(&self, token: &str, id: &Value, body: Value) -> (StatusCode, Value) {
        let path = format!("/goods-received/{}/post", id.as_str().unwrap());
        self.app.post(&path, token, body).await
    }

    /// An order of this supplier at this branch in `status`, with one line
    /// per `(medicine, quantity)`; answers the line ids.
    async fn order(&self, supplier: Uuid, status: &str, lines: &[(&str, i32)]) -> Vec<Uuid> {
        let client = self.app.pool.get().await.unwrap();
        let user: Uuid = client
            .query_one("SELECT id FROM users LIMIT 1", &[])
            .await
            .unwrap()
            .get(0);
        let id = Uuid::now_v7();
        let seq: i64 = client
            .query_one(
                "SELECT count(*) + 1 FROM purchase_orders WHERE branch_id = $1",
                &[&self.branch],
            )
            .await
            .unwrap()
            .get(0);
        client
            .execute(
                "INSERT INTO purchase_orders (id, branch_id, supplier_id, seq, po_number, status, \
                 created_by) VALUES ($1, $2, $3, $4, 'KLA-PO-' || lpad(($4::bigint)::text, 6, '0'), $5, $6)",
                &[&id, &self.branch, &supplier, &seq, &status, &user],
            )
            .await
            .unwrap();
        let mut ids = Vec::new();
        for (i, (medicine, qty)) in lines.iter().enumerate() {
            let line = Uuid::now_v7();
            let medicine: Uuid = medicine.parse().unwrap();
            client
                .execute(
                    "INSERT INTO purchase_order_lines (id, purchase_order_id, line_no, medicine_id, \
                     quantity_ordered, unit_cost, line_total) VALUES ($1, $2, $3, $4, $5, 2, 0)",
                    &[&line, &id, &(i as i32 + 1), &medicine, qty],
                )
                .await
                .unwrap();
            ids.push(line);
        }
        ids
    }

    async fn order_line(&self, id: Uuid) -> (i32, i32, bool, String) {
        let client = self.app.pool.get().await.unwrap();
        let r = client
            .query_one(
                "SELECT l.quantity_received, l.quantity_rejected, l.over_received, o.status \
                 FROM purchase_order_lines l JOIN purchase_orders o ON o.id = l.purchase_order_id \
                 WHERE l.id = $1",
                &[&id],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2), r.get(3))
    }

    async fn count(&self, table: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0)
    }
}

#[tokio::test]
async fn charges_are_spread_by_line_value_and_batches_cost_their_landed_cost() {
    let d = Dock::open().await;
    let body = json!({
        "supplier_id": d.supplier, "delivery_reference": "DN-4411",
        "lines": [d.line(&d.medicine, "AMX-1", 100, "2.00"), d.line(&d.other, "PCM-1", 50, "6.00")],
        "charges": [{"kind": "freight", "amount": "10.00"}, {"kind": "Insurance", "amount": 0.01}],
    });
    let (status, note) = d.draft(&d.clerk, body).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["status"], "draft");
    assert_eq!(note["grn_number"], "KLA-GRN-000001");
    assert_eq!(note["origin"], "delivery");
    assert_eq!(note["lines_total"], "500.00");
    assert_eq!(note["charges_total"], "10.01");
    assert_eq!(note["total"], "510.01");
    assert_eq!(note["charges"][1]["kind"], "insurance");
    // 10.01 × 200/500 = 4.004 → 4.00; × 300/500 = 6.006 → 6.01: Σ 10.01.
    let lines = note["lines"].as_array().unwrap();
    assert_eq!(lines[0]["charge_share"], "4.00");
    assert_eq!(lines[1]["charge_share"], "6.01");
    assert_eq!(lines[0]["landed_unit_cost"], "2.04");
    assert_eq!(lines[1]["landed_unit_cost"], "6.1202");
    assert!(lines[0]["batch_id"].is_null());
    // A draft moves no stock.
    assert_eq!(d.count("batches").await, 0);

    let (status, posted) = d.post(&d.pharmacist, &note["id"], json!({})).await;
    assert_eq!(status, StatusCode::OK, "{posted}");
    assert_eq!(posted["status"], "posted");
    assert!(posted["posted_at"].is_string());
    let batch = posted["lines"][1]["batch_id"].as_str().unwrap();
    let client = d.app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT qty_remaining, unit_cost::text, received_total::text FROM batches WHERE id = $1",
            &[&batch.parse::<Uuid>().unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 50);
    assert_eq!(row.get::<_, String>(1), "6.1202");
    assert_eq!(row.get::<_, String>(2), "306.01");
    // The stock is worth Σ lines + Σ charges to the cent.
    let (status, v) = d.app.get("/reports/stock-valuation", &d.admin).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["total_value"], "510.01");
    // The purchases report counts the posted note at landed cost, with the
    // charges shown apart.
    let (status, r) = d.app.get("/reports/purchases", &d.admin).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["totals"]["spend"], 510.01, "{r}");
    assert_eq!(r["totals"]["charges"], 10.01, "{r}");
    assert_eq!(r["totals"]["batch_count"], 2, "{r}");
    assert_eq!(r["by_supplier"][0]["charges"], 10.01, "{r}");
    d.app.assert_invariants().await;

    // A second post is a conflict and changes nothing.
    let (status, again) = d.post(&d.admin, &note["id"], json!({})).await;
    assert_problem(status, &again, StatusCode::CONFLICT);
    assert_eq!(d.count("stock_movements").await, 2);
}

#[tokio::test]
async fn deliveries_fill_an_order_partly_with_rejects_and_never_beyond_it_unasked() {
    let d = Dock::open().await;
    let lines = d.order(d.supplier, "sent", &[(&d.medicine, 100)]).await;
    let mut first = d.line(&d.medicine, "AMX-7", 60, "2.00");
    first["purchase_order_line_id"] = json!(lines[0]);
    first["quantity_rejected"] = json!(5);
    first["rejection_reason"] = json!("crushed boxes");
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN-1", "lines": [first]});
    let (_, note) = d.draft(&d.clerk, body).await;
    let (status, posted) = d.post(&d.clerk, &note["id"], json!({})).await;
    assert_eq!(status, StatusCode::OK, "{posted}");
    assert_eq!(
        d.order_line(lines[0]).await,
        (60, 5, false, "partially_received".into())
    );

    // 50 more of the 40 outstanding: refused, naming the line.
    let mut second = d.line(&d.medicine, "AMX-8", 50, "2.00");
    second["purchase_order_line_id"] = json!(lines[0]);
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN-2", "lines": [second]});
    let (_, note) = d.draft(&d.clerk, body).await;
    let (status, refused) = d.post(&d.clerk, &note["id"], json!({})).await;
    assert_problem(status, &refused, StatusCode::BAD_REQUEST);
    assert_eq!(refused["field"], "lines[0].quantity_received", "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("40"),
        "{refused}"
    );
    // Only a manager may allow it.
    let (status, body) = d
        .post(
            &d.pharmacist,
            &note["id"],
            json!({"allow_over_receipt": true}),
        )
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    assert_eq!(d.order_line(lines[0]).await.0, 60);
    let (status, posted) = d
        .post(&d.manager, &note["id"], json!({"allow_over_receipt": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{posted}");
    assert_eq!(posted["allow_over_receipt"], true);
    assert_eq!(
        d.order_line(lines[0]).await,
        (110, 5, true, "received".into())
    );
    d.app.assert_invariants().await;
}

#[tokio::test]
async fn two_notes_posted_at_once_never_receive_more_than_is_outstanding() {
    let d = Dock::open().await;
    let lines = d.order(d.supplier, "sent", &[(&d.medicine, 100)]).await;
    let mut ids = Vec::new();
    for n in 0..2 {
        let mut line = d.line(&d.medicine, &format!("AMX-{n}"), 60, "2.00");
        line["purchase_order_line_id"] = json!(lines[0]);
        let body = json!({"supplier_id": d.supplier, "delivery_reference": format!("DN-{n}"),
                          "lines": [line]});
        let (status, note) = d.draft(&d.clerk, body).await;
        assert_eq!(status, StatusCode::CREATED, "{note}");
        ids.push(note["id"].clone());
    }
    // Through two server processes, so the branch actor is not what
    // keeps them apart.
    let second = d.app.second_process();
    let path = |id: &Value| format!("/goods-received/{}/post", id.as_str().unwrap());
    let at = |base: &str, id: &Value| {
        let req = d
            .app
            .http
            .post(format!("{base}{}", path(id)))
            .bearer_auth(&d.clerk)
            .json(&json!({}));
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            (status, res.json::<Value>().await.unwrap())
        }
    };
    let (a, b) = tokio::join!(at(&d.app.base, &ids[0]), at(&second.base, &ids[1]));
    let statuses = [a.0, b.0];
    assert!(statuses.contains(&StatusCode::OK), "{a:?} {b:?}");
    assert!(statuses.contains(&StatusCode::BAD_REQUEST), "{a:?} {b:?}");
    assert_eq!(d.order_line(lines[0]).await.0, 60);
    assert_eq!(d.count("batches").await, 1);
    d.app.assert_invariants().await;
}

#[tokio::test]
async fn expired_and_short_dated_stock_is_refused_unless_accepted() {
    let d = Dock::open().await;
    let mut expired = d.line(&d.medicine, "OLD-1", 10, "2.00");
    expired["expiry_date"] = json!(days_ahead(-1));
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN-X", "lines": [expired]});
    let (_, note) = d.draft(&d.clerk, body).await;
    let (status, refused) = d
        .post(&d.manager, &note["id"], json!({"accept_short_dated": true}))
        .await;
    assert_problem(status, &refused, StatusCode::BAD_REQUEST);
    assert_eq!(refused["field"], "lines[0].expiry_date");

    let mut short = d.line(&d.medicine, "SHORT-1", 10, "2.00");
    short["expiry_date"] = json!(days_ahead(30));
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN-S", "lines": [short]});
    let (_, note) = d.draft(&d.clerk, body).await;
    let (status, refused) = d.post(&d.clerk, &note["id"], json!({})).await;
    assert_problem(status, &refused, StatusCode::BAD_REQUEST);
    assert_eq!(refused["field"], "lines[0].expiry_date");
    assert!(refused["detail"].as_str().unwrap().contains("90 days"));
    // An inventory manager may not accept it; a pharmacist may.
    let (status, body) = d
        .post(&d.clerk, &note["id"], json!({"accept_short_dated": true}))
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    assert_eq!(d.count("batches").await, 0);
    let (status, posted) = d
        .post(
            &d.pharmacist,
            &note["id"],
            json!({"accept_short_dated": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{posted}");
    assert_eq!(posted["accept_short_dated"], true);

    // The shelf life is a setting.
    let (status, s) = d
        .app
        .call(
            reqwest::Method::PUT,
            "/settings",
            Some(&d.admin),
            Some(json!({"min_shelf_life_days": 10})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    let mut short = d.line(&d.medicine, "SHORT-2", 10, "2.00");
    short["expiry_date"] = json!(days_ahead(30));
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN-T", "lines": [short]});
    let (_, note) = d.draft(&d.clerk, body).await;
    let (status, posted) = d.post(&d.clerk, &note["id"], json!({})).await;
    assert_eq!(status, StatusCode::OK, "{posted}");
}

#[tokio::test]
async fn bad_deliveries_name_their_field_and_write_nothing() {
    let d = Dock::open().await;
    let elsewhere = d.app.supplier("Another Supplier").await;
    let theirs = d.order(elsewhere, "sent", &[(&d.medicine, 10)]).await;
    let drafted = d.order(d.supplier, "draft", &[(&d.medicine, 10)]).await;
    let ours = d.order(d.supplier, "sent", &[(&d.medicine, 10)]).await;
    let good = d.line(&d.medicine, "B-1", 10, "2.00");
    let with = |k: &str, v: Value| {
        let mut l = good.clone();
        l[k] = v;
        l
    };
    let mut wrong_medicine = with("purchase_order_line_id", json!(ours[0]));
    wrong_medicine["medicine_id"] = json!(d.other);
    let cases = [
        (
            json!([with("purchase_order_line_id", json!(theirs[0]))]),
            json!([]),
            "lines[0].purchase_order_line_id",
        ),
        (
            json!([with("purchase_order_line_id", json!(drafted[0]))]),
            json!([]),
            "lines[0].purchase_order_line_id",
        ),
        (json!([wrong_medicine]), json!([]), "lines[0].medicine_id"),
        (
            json!([with("medicine_id", json!(Uuid::now_v7()))]),
            json!([]),
            "lines[0].medicine_id",
        ),
        (
            json!([with("pack_id", json!(Uuid::now_v7()))]),
            json!([]),
            "lines[0].pack_id",
        ),
        (
            json!([with("quantity_received", json!(0))]),
            json!([]),
            "lines[0].quantity_received",
        ),
        (
            json!([with("quantity_received", json!(-3))]),
            json!([]),
            "lines[0].quantity_received",
        ),
        (
            json!([with("quantity_rejected", json!(2))]),
            json!([]),
            "lines[0].rejection_reason",
        ),
        (
            json!([with("unit_cost", json!("1.001"))]),
            json!([]),
            "lines[0].unit_cost",
        ),
        (
            json!([with("batch_number", json!(" "))]),
            json!([]),
            "lines[0].batch_number",
        ),
        (
            json!([good.clone()]),
            json!([{"kind": "bribe", "amount": 5}]),
            "charges[0].kind",
        ),
        (
            json!([good.clone()]),
            json!([{"kind": "freight", "amount": 0}]),
            "charges[0].amount",
        ),
        (json!([]), json!([]), "lines"),
    ];
    for (lines, charges, field) in cases {
        let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN", "lines": lines,
                          "charges": charges});
        let (status, p) = d.draft(&d.clerk, body).await;
        assert_problem(status, &p, StatusCode::BAD_REQUEST);
        assert_eq!(p["field"], field, "{p}");
    }
    let body = json!({"supplier_id": Uuid::now_v7(), "delivery_reference": "DN", "lines": [good]});
    let (status, p) = d.draft(&d.clerk, body).await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "supplier_id");
    let mut bad_date = d.line(&d.medicine, "B-2", 1, "1");
    bad_date["expiry_date"] = json!("2030-02-30");
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN", "lines": [bad_date]});
    let (status, p) = d.draft(&d.clerk, body).await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "", "lines": [d.line(&d.medicine, "B", 1, "1")]});
    let (status, p) = d.draft(&d.clerk, body).await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "delivery_reference");
    assert_eq!(d.count("goods_received_notes").await, 0);
    assert_eq!(d.count("goods_received_counters").await, 0);
}

#[tokio::test]
async fn notes_follow_roles_and_branches() {
    let d = Dock::open().await;
    let (_, cashier) = d.app.signed_in(d.branch, Role::Cashier).await;
    let (_, auditor) = d.app.signed_in(d.branch, Role::Auditor).await;
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN",
                      "lines": [d.line(&d.medicine, "B-1", 10, "2.00")]});
    let (status, p) = d.draft(&cashier, body.clone()).await;
    assert_problem(status, &p, StatusCode::FORBIDDEN);
    let (status, p) = d.draft(&auditor, body.clone()).await;
    assert_problem(status, &p, StatusCode::FORBIDDEN);
    let (_, note) = d.draft(&d.pharmacist, body).await;
    let id = note["id"].as_str().unwrap();

    let other = d.app.branch("EBB").await;
    let (_, stranger) = d.app.signed_in(other, Role::BranchManager).await;
    let (status, p) = d.app.get(&format!("/goods-received/{id}"), &stranger).await;
    assert_problem(status, &p, StatusCode::NOT_FOUND);
    let (status, p) = d.post(&stranger, &note["id"], json!({})).await;
    assert_problem(status, &p, StatusCode::NOT_FOUND);
    let (_, list) = d.app.get("/goods-received", &stranger).await;
    assert_eq!(list["total"], 0);
    let (status, p) = d
        .app
        .get(
            &format!("/goods-received?branch_id={}", d.branch),
            &stranger,
        )
        .await;
    assert_problem(status, &p, StatusCode::FORBIDDEN);

    let (status, list) = d.app.get("/goods-received?status=draft", &auditor).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["id"], id);
    let (_, list) = d.app.get("/goods-received?status=posted", &auditor).await;
    assert_eq!(list["total"], 0);
    let (status, p) = d.app.get("/goods-received?status=lost", &auditor).await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "status");
    let (status, p) = d.app.get(&format!("/goods-received/{id}"), &cashier).await;
    assert_problem(status, &p, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_purchase_is_a_one_line_note_posted_at_once() {
    let d = Dock::open().await;
    let batch = d
        .app
        .receive(&d.admin, &json!(d.medicine), d.branch, 12, &days_ahead(20))
        .await;
    let (_, list) = d.app.get("/goods-received", &d.admin).await;
    assert_eq!(list["total"], 1, "{list}");
    let note = &list["items"][0];
    assert_eq!(note["origin"], "purchase");
    assert_eq!(note["status"], "posted");
    assert_eq!(note["total"], "1200.00");
    assert_eq!(note["lines"][0]["batch_id"], batch["id"]);
    assert_eq!(note["lines"][0]["quantity_received"], 12);
}

#[tokio::test]
async fn a_delivery_of_a_batch_already_held_at_the_same_cost_adds_to_it() {
    let d = Dock::open().await;
    for (n, cost) in [(1, "2.00"), (2, "2.00"), (3, "2.50")] {
        let body = json!({"supplier_id": d.supplier, "delivery_reference": format!("DN-{n}"),
                          "lines": [d.line(&d.medicine, "AMX-SAME", 10, cost)]});
        let (_, note) = d.draft(&d.clerk, body).await;
        let (status, posted) = d.post(&d.clerk, &note["id"], json!({})).await;
        assert_eq!(status, StatusCode::OK, "{posted}");
    }
    let client = d.app.pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT qty_received, qty_remaining, unit_cost::text FROM batches ORDER BY unit_cost",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(i32, i32, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        got,
        vec![(20, 20, "2.0000".into()), (10, 10, "2.5000".into())]
    );
    d.app.assert_invariants().await;
}

#[tokio::test]
async fn the_invariant_checks_see_buying_books_out_of_step() {
    let d = Dock::open().await;
    let lines = d.order(d.supplier, "sent", &[(&d.medicine, 10)]).await;
    let mut line = d.line(&d.medicine, "AMX-9", 10, "2.00");
    line["purchase_order_line_id"] = json!(lines[0]);
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN", "lines": [line]});
    let (_, note) = d.draft(&d.clerk, body).await;
    let (status, _) = d.post(&d.clerk, &note["id"], json!({})).await;
    assert_eq!(status, StatusCode::OK);
    d.app.assert_invariants().await;
    let client = d.app.pool.get().await.unwrap();
    // Received beyond the order without an allowed over-receipt, and out
    // of step with the note; then a receipt line billed without invoices.
    client
        .execute(
            "ALTER TABLE purchase_order_lines DROP CONSTRAINT purchase_order_lines_received_within_ordered",
            &[],
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE purchase_order_lines SET quantity_received = 12",
            &[],
        )
        .await
        .unwrap();
    client
        .execute("UPDATE goods_received_lines SET quantity_invoiced = 3", &[])
        .await
        .unwrap();
    let broken = domain::stock::invariant_violations(&client).await.unwrap();
    let text = broken.join("\n");
    assert!(text.contains("without an allowed over-receipt"), "{text}");
    assert!(text.contains("its posted notes say 10"), "{text}");
    assert!(text.contains("its invoices bill 0"), "{text}");
}

#[tokio::test]
async fn a_draft_is_edited_or_discarded_until_it_is_posted_or_billed() {
    let d = Dock::open().await;
    let body = json!({"supplier_id": d.supplier, "delivery_reference": "DN-1",
                      "lines": [d.line(&d.medicine, "TYPO", 10, "2.00")]});
    let (_, note) = d.draft(&d.clerk, body).await;
    let path = format!("/goods-received/{}", note["id"].as_str().unwrap());
    let fixed = json!({"supplier_id": d.supplier, "delivery_reference": "DN-1",
                       "lines": [d.line(&d.medicine, "AMX-1", 12, "2.00")],
                       "charges": [{"kind": "freight", "amount": 3}]});
    let (status, edited) = d
        .app
        .call(
            reqwest::Method::PUT,
            &path,
            Some(&d.clerk),
            Some(fixed.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["grn_number"], note["grn_number"]);
    assert_eq!(edited["lines"][0]["batch_number"], "AMX-1");
    assert_eq!(edited["total"], "27.00");
    // A bad edit names its field and leaves the draft as it was.
    let mut bad = fixed.clone();
    bad["lines"][0]["quantity_received"] = json!(0);
    let (status, p) = d
        .app
        .call(reqwest::Method::PUT, &path, Some(&d.clerk), Some(bad))
        .await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    let (_, same) = d.app.get(&path, &d.clerk).await;
    assert_eq!(same["lines"], edited["lines"]);
    // Another branch sees nothing to edit.
    let other = d.app.branch("EBB").await;
    let (_, stranger) = d.app.signed_in(other, Role::InventoryManager).await;
    let (status, p) = d
        .app
        .call(reqwest::Method::DELETE, &path, Some(&stranger), None)
        .await;
    assert_problem(status, &p, StatusCode::NOT_FOUND);
    // Once posted, neither edit nor discard.
    let (status, _) = d.post(&d.clerk, &note["id"], json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, p) = d
        .app
        .call(
            reqwest::Method::PUT,
            &path,
            Some(&d.clerk),
            Some(fixed.clone()),
        )
        .await;
    assert_problem(status, &p, StatusCode::CONFLICT);
    let (status, p) = d
        .app
        .call(reqwest::Method::DELETE, &path, Some(&d.clerk), None)
        .await;
    assert_problem(status, &p, StatusCode::CONFLICT);

    // A draft no one bills is discarded.
    let (_, other_note) = d.draft(&d.clerk, fixed).await;
    let path = format!("/goods-received/{}", other_note["id"].as_str().unwrap());
    let (status, _) = d
        .app
        .call(reqwest::Method::DELETE, &path, Some(&d.clerk), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = d.app.get(&path, &d.clerk).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
