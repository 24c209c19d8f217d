//! Supplier returns and their debit notes: stock leaves with a
//! `RETURN_TO_SUPPLIER` movement, only a supplier's own batches of the
//! branch go back, lines are valued at batch cost, debit-note numbers are
//! gapless per branch (also under concurrent returns through two server
//! processes), a debit note settles invoices of its own supplier and
//! branch for at most its unused value (also under concurrent payments),
//! and a controlled medicine's return is a row of the register of supplier
//! returns (paged and CSV).
//!
//! Over 600 lines: one fixture (`Dock`) serves every rule of the area, and
//! each test reads as one story of a return and its note.

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

const RETURNS: &str = "/supplier-returns";

struct Dock {
    app: TestApp,
    branch: Uuid,
    admin: String,
    manager: String,
    keeper: String,
    keeper_id: Uuid,
    pharmacist: String,
    auditor: String,
    supplier: Uuid,
    medicine: Value,
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

impl Dock {
    async fn open() -> Dock {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
        let (keeper, keeper_token) = app.signed_in(branch, Role::InventoryManager).await;
        let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let (_, auditor) = app.signed_in(branch, Role::Auditor).await;
        let supplier = app.supplier("Quality Chemicals").await;
        let medicine = app
            .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
            .await;
        Dock {
            app,
            branch,
            admin,
            manager,
            keeper: keeper_token,
            keeper_id: keeper.id,
            pharmacist,
            auditor,
            supplier,
            medicine,
        }
    }

    /// A batch of `qty` units of `medicine` from `supplier` at `branch`,
    /// unit cost 100, expiring on `expiry`.
    async fn batch_of(
        &self,
        medicine: &Value,
        supplier: Uuid,
        branch: Uuid,
        qty: i64,
        expiry: &str,
    ) -> Value {
        let (status, b) = self
            .app
            .post(
                "/purchases",
                &self.admin,
                json!({"supplier_id": supplier, "medicine_id": medicine["id"], "branch_id": branch,
                       "batch_number": format!("B-{}", Uuid::now_v7().simple()),
                       "expiry_date": expiry, "quantity": qty, "unit_cost": "100.00"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "purchase: {b}");
        b
    }

    /// A batch of the dock's medicine from the dock's supplier.
    async fn batch(&self, qty: i64) -> Value {
        self.batch_of(
            &self.medicine,
            self.supplier,
            self.branch,
            qty,
            "2030-01-31",
        )
        .await
    }

    fn body(&self, reason: &str, lines: &[(&Value, Value)]) -> Value {
        let lines: Vec<Value> = lines
            .iter()
            .map(|(b, q)| json!({"batch_id": b["id"], "quantity": q}))
            .collect();
        json!({"supplier_id": self.supplier, "reason": reason, "lines": lines})
    }

    async fn send_back(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.app.post(RETURNS, token, body).await
    }

    async fn remaining(&self, batch: &Value) -> i64 {
        self.scalar(&format!(
            "SELECT qty_remaining::bigint FROM batches WHERE id = '{}'",
            s(&batch["id"])
        ))
        .await
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    async fn text(&self, sql: &str) -> String {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    /// What a refused request must leave as it was.
    async fn footprint(&self) -> String {
        self.text(
            "SELECT (SELECT count(*) FROM supplier_returns)::text || '/' ||
                    (SELECT count(*) FROM supplier_return_items)::text || '/' ||
                    (SELECT count(*) FROM stock_movements)::text || '/' ||
                    (SELECT count(*) FROM change_log)::text || '/' ||
                    (SELECT coalesce(string_agg(id::text || ':' || qty_remaining, ',' ORDER BY id), '')
                     FROM batches) || '/' ||
                    (SELECT coalesce(string_agg(branch_id::text || ':' || last_seq, ','), '')
                     FROM debit_note_counters) || '/' ||
                    (SELECT coalesce(string_agg(id::text || ':' || used_value, ',' ORDER BY id), '')
                     FROM supplier_returns) || '/' ||
                    (SELECT count(*) FROM supplier_payments)::text || '/' ||
                    (SELECT coalesce(string_agg(id::text || ':' || paid_amount, ',' ORDER BY id), '')
                     FROM supplier_invoices)",
        )
        .await
    }

    async fn invoice(&self, supplier: Uuid, branch: Uuid, total: &str) -> Value {
        let (status, invoice) = self
            .app
            .post(
                "/supplier-finance/invoices",
                &self.admin,
                json!({"supplier_id": supplier, "branch_id": branch, "total_amount": total}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{invoice}");
        invoice
    }

    /// A payment by the branch manager.
    async fn pay(&self, invoice: &Value, body: Value) -> (StatusCode, Value) {
        self.pay_as(&self.manager, invoice, body).await
    }

    async fn pay_as(&self, token: &str, invoice: &Value, body: Value) -> (StatusCode, Value) {
        let path = format!("/supplier-finance/invoices/{}/payments", s(&invoice["id"]));
        self.app.post(&path, token, body).await
    }

    async fn stock_value(&self) -> String {
        let (status, v) = self
            .app
            .get(
                &format!("/reports/stock-valuation?branch_id={}", self.branch),
                &self.admin,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
        s(&v["total_value"]).to_owned()
    }
}

#[tokio::test]
async fn a_return_sends_stock_back_for_a_debit_note_valued_at_batch_cost() {
    let dock = Dock::open().await;
    let a = dock.batch(10).await;
    let b = dock.batch(6).await;
    assert_eq!(dock.stock_value().await, "1600.00");
    let body = dock.body("Damaged", &[(&a, json!(4)), (&b, json!(6))]);
    let mut body = body;
    body["notes"] = json!("Crushed in transit");
    let (status, r) = dock.send_back(&dock.keeper, body).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(r["debit_note_number"], "KLA-DN-00000001");
    assert_eq!(r["branch_id"], dock.branch.to_string());
    assert_eq!(r["supplier_id"], dock.supplier.to_string());
    assert_eq!(r["supplier_name"], "Quality Chemicals");
    assert_eq!(r["reason"], "damaged");
    assert_eq!(r["notes"], "Crushed in transit");
    assert_eq!(r["created_by"], dock.keeper_id.to_string());
    assert!(s(&r["created_at"]).ends_with('Z'));
    assert_eq!(r["total_value"], "1000.00");
    assert_eq!(r["used_value"], "0.00");
    assert_eq!(r["unused_value"], "1000.00");
    let lines = r["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["batch_id"], a["id"]);
    assert_eq!(lines[0]["medicine_id"], dock.medicine["id"]);
    assert_eq!(lines[0]["batch_number"], a["batch_number"]);
    assert_eq!(lines[0]["quantity"], 4);
    assert_eq!(lines[0]["unit_cost"], "100.00");
    assert_eq!(lines[0]["value"], "400.00");
    assert_eq!(lines[1]["value"], "600.00");
    assert_eq!(lines[1]["is_controlled"], false);
    // The stock left, on the ledger, and tills hear of both batches.
    assert_eq!(dock.remaining(&a).await, 6);
    assert_eq!(dock.remaining(&b).await, 0);
    let moved = format!(
        "SELECT coalesce(sum(qty), 0)::bigint FROM stock_movements
         WHERE kind = 'RETURN_TO_SUPPLIER' AND reference_type = 'supplier_return'
           AND reference_id = '{}'",
        s(&r["id"])
    );
    assert_eq!(dock.scalar(&moved).await, -10);
    for batch in [&a, &b] {
        let last = format!(
            "SELECT (payload->>'qty_remaining')::bigint FROM change_log
             WHERE entity = 'batch' AND entity_id = '{}' ORDER BY rev DESC LIMIT 1",
            s(&batch["id"])
        );
        assert_eq!(dock.scalar(&last).await, dock.remaining(batch).await);
    }
    // The stock's value fell by what went back.
    assert_eq!(dock.stock_value().await, "600.00");
    // Read back, by anyone who reads them; the next note follows on.
    let path = format!("{RETURNS}/{}", s(&r["id"]));
    for token in [&dock.auditor, &dock.keeper, &dock.manager] {
        let (status, read) = dock.app.get(&path, token).await;
        assert_eq!(status, StatusCode::OK, "{read}");
        assert_eq!(read, r);
    }
    let (status, problem) = dock.app.get(&path, &dock.pharmacist).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (status, missing) = dock
        .app
        .get(&format!("{RETURNS}/{}", Uuid::now_v7()), &dock.admin)
        .await;
    assert_problem(status, &missing, StatusCode::NOT_FOUND);
    let (status, second) = dock
        .send_back(&dock.manager, dock.body("expired", &[(&a, json!(1))]))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    assert_eq!(second["debit_note_number"], "KLA-DN-00000002");
    let (status, list) = dock.app.get(RETURNS, &dock.auditor).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 2);
    assert_eq!(list["page_size"], 20);
    assert_eq!(list["items"][0]["id"], second["id"]);
    assert_eq!(list["items"][1], r);
    let other = dock.app.supplier("Other Supplier").await;
    let (_, none) = dock
        .app
        .get(&format!("{RETURNS}?supplier_id={other}"), &dock.admin)
        .await;
    assert_eq!(none["total"], 0);
    let (_, mine) = dock
        .app
        .get(
            &format!("{RETURNS}?supplier_id={}&page_size=1&page=2", dock.supplier),
            &dock.admin,
        )
        .await;
    assert_eq!(mine["total"], 2);
    assert_eq!(mine["items"][0]["id"], r["id"]);
    dock.app.assert_invariants().await;
}

#[tokio::test]
async fn a_batch_received_at_a_four_place_cost_values_to_the_cent() {
    let dock = Dock::open().await;
    let (status, trio) = dock
        .app
        .post(
            &format!("/medicines/{}/packs", s(&dock.medicine["id"])),
            &dock.admin,
            json!({"name": "trio", "units": 3}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{trio}");
    // 7 trios at 10.00: 21 units at 3.3333 a unit, 70.00 in all.
    let (status, b) = dock
        .app
        .post(
            "/purchases",
            &dock.admin,
            json!({"supplier_id": dock.supplier, "medicine_id": dock.medicine["id"],
                   "branch_id": dock.branch, "pack_id": trio["id"], "batch_number": "TR-1",
                   "expiry_date": "2030-01-31", "quantity": 7, "unit_cost": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["unit_cost"], "3.3333");
    let (status, one) = dock
        .send_back(&dock.keeper, dock.body("wrong_item", &[(&b, json!(2))]))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{one}");
    assert_eq!(one["lines"][0]["unit_cost"], "3.3333");
    assert_eq!(one["lines"][0]["value"], "6.67");
    assert_eq!(one["total_value"], "6.67");
    let (status, rest) = dock
        .send_back(&dock.keeper, dock.body("wrong_item", &[(&b, json!(19))]))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rest}");
    // 19 × 3.3333 is 63.3327; its share of 70.00 is 63.33.
    assert_eq!(rest["total_value"], "63.33");
    dock.app.assert_invariants().await;
}

#[tokio::test]
async fn every_line_is_checked_and_a_refused_return_changes_nothing() {
    let dock = Dock::open().await;
    let good = dock.batch(5).await;
    let small = dock.batch(2).await;
    let other_supplier = dock.app.supplier("Someone Else").await;
    let foreign = dock
        .batch_of(&dock.medicine, other_supplier, dock.branch, 5, "2030-01-31")
        .await;
    let elsewhere = dock.app.branch("MBR").await;
    let remote = dock
        .batch_of(&dock.medicine, dock.supplier, elsewhere, 5, "2030-01-31")
        .await;
    let line = |b: &Value, q: Value| json!({"batch_id": b["id"], "quantity": q});
    let with = |supplier: Value, reason: Value, lines: Vec<Value>| json!({"supplier_id": supplier, "reason": reason, "lines": lines});
    let sup = json!(dock.supplier);
    let ok_line = line(&good, json!(1));
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"reason": "expired", "lines": [ok_line]}),
            "supplier_id",
        ),
        (
            with(
                json!(Uuid::now_v7()),
                json!("expired"),
                vec![ok_line.clone()],
            ),
            "supplier_id",
        ),
        (
            with(sup.clone(), json!("lost"), vec![ok_line.clone()]),
            "reason",
        ),
        (
            with(sup.clone(), json!(" "), vec![ok_line.clone()]),
            "reason",
        ),
        (with(sup.clone(), json!("expired"), vec![]), "lines"),
        (
            with(sup.clone(), json!("expired"), vec![line(&good, json!(0))]),
            "lines[0].quantity",
        ),
        (
            with(sup.clone(), json!("expired"), vec![line(&good, json!(-2))]),
            "lines[0].quantity",
        ),
        (
            with(sup.clone(), json!("expired"), vec![line(&good, json!(1.5))]),
            "lines[0].quantity",
        ),
        (
            with(
                sup.clone(),
                json!("expired"),
                vec![ok_line.clone(), line(&small, json!(3))],
            ),
            "lines[1].quantity",
        ),
        (
            with(
                sup.clone(),
                json!("expired"),
                vec![
                    ok_line.clone(),
                    json!({"batch_id": Uuid::now_v7(), "quantity": 1}),
                ],
            ),
            "lines[1].batch_id",
        ),
        (
            with(
                sup.clone(),
                json!("expired"),
                vec![ok_line.clone(), line(&foreign, json!(1))],
            ),
            "lines[1].batch_id",
        ),
        (
            with(sup.clone(), json!("expired"), vec![line(&remote, json!(1))]),
            "lines[0].batch_id",
        ),
        (
            with(
                sup.clone(),
                json!("expired"),
                vec![ok_line.clone(), line(&good, json!(2))],
            ),
            "lines[1].batch_id",
        ),
        (
            with(
                sup.clone(),
                json!("expired"),
                vec![json!({"batch_id": good["id"], "quantity": 1, "pack_id": Uuid::now_v7()})],
            ),
            "lines[0].pack_id",
        ),
        (
            json!({"supplier_id": sup, "reason": "expired", "lines": [ok_line],
                   "notes": "x".repeat(2001)}),
            "notes",
        ),
    ];
    let before = dock.footprint().await;
    for (body, field) in cases {
        let (status, problem) = dock.send_back(&dock.keeper, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
        assert_eq!(dock.footprint().await, before, "{body} changed something");
    }
    // Malformed ids and quantities as strings are refused too.
    for body in [
        json!({"supplier_id": sup, "reason": "expired",
               "lines": [{"batch_id": "not-a-uuid", "quantity": 1}]}),
        json!({"supplier_id": sup, "reason": "expired",
               "lines": [{"batch_id": good["id"], "quantity": "1"}]}),
        json!({"supplier_id": "nope", "reason": "expired", "lines": [ok_line]}),
    ] {
        let (status, problem) = dock.send_back(&dock.keeper, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(dock.footprint().await, before, "{body} changed something");
    }
    // The refusals used no number.
    let (status, r) = dock
        .send_back(&dock.keeper, dock.body("expired", &[(&small, json!(2))]))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(r["debit_note_number"], "KLA-DN-00000001");
    dock.app.assert_invariants().await;
}

#[tokio::test]
async fn a_recalled_quarantined_or_expired_batch_goes_back_whatever_its_status() {
    let dock = Dock::open().await;
    let recalled = dock.batch(5).await;
    let quarantined = dock.batch(5).await;
    let expired = dock
        .batch_of(&dock.medicine, dock.supplier, dock.branch, 5, "2020-01-31")
        .await;
    for (batch, status) in [(&recalled, "recalled"), (&quarantined, "quarantined")] {
        let (code, b) = dock
            .app
            .post(
                &format!("/supplier-finance/batches/{}/quarantine", s(&batch["id"])),
                &dock.admin,
                json!({"status": status}),
            )
            .await;
        assert_eq!(code, StatusCode::OK, "{b}");
    }
    let (status, r) = dock
        .send_back(
            &dock.keeper,
            dock.body(
                "recalled",
                &[
                    (&recalled, json!(5)),
                    (&quarantined, json!(2)),
                    (&expired, json!(5)),
                ],
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(r["total_value"], "1200.00");
    assert_eq!(dock.remaining(&recalled).await, 0);
    assert_eq!(dock.remaining(&quarantined).await, 3);
    assert_eq!(dock.remaining(&expired).await, 0);
    dock.app.assert_invariants().await;
}

#[tokio::test]
async fn debit_note_numbers_are_gapless_under_twenty_concurrent_returns() {
    let dock = Dock::open().await;
    let batch = dock.batch(20).await;
    let other = dock.app.second_process();
    // 20 returns of one unit and 5 refused ones (too many units), sent at
    // once through two server processes.
    let good = dock.body("expired", &[(&batch, json!(1))]);
    let bad = dock.body("expired", &[(&batch, json!(21))]);
    let bases = [dock.app.base.clone(), other.base.clone()];
    let sends = (0..25).map(|i| {
        let body = if i % 5 == 4 {
            bad.clone()
        } else {
            good.clone()
        };
        let req = dock
            .app
            .http
            .post(format!("{}{RETURNS}", bases[i % 2]))
            .bearer_auth(&dock.keeper)
            .json(&body);
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            (status, res.json::<Value>().await.unwrap())
        }
    });
    let answers = join_all(sends).await;
    let mut numbers: Vec<String> = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .map(|(_, r)| s(&r["debit_note_number"]).to_owned())
        .collect();
    assert_eq!(numbers.len(), 20, "{answers:?}");
    for (status, r) in answers.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_problem(*status, r, StatusCode::BAD_REQUEST);
        assert_eq!(r["field"], "lines[0].quantity");
    }
    numbers.sort();
    let expected: Vec<String> = (1..=20).map(|n| format!("KLA-DN-{n:08}")).collect();
    assert_eq!(numbers, expected);
    assert_eq!(dock.remaining(&batch).await, 0);
    assert_eq!(
        dock.scalar("SELECT last_seq FROM debit_note_counters")
            .await,
        20
    );
    dock.app.assert_invariants().await;
}

#[tokio::test]
async fn a_debit_note_settles_its_suppliers_invoices_for_at_most_its_unused_value() {
    let dock = Dock::open().await;
    let batch = dock.batch(10).await;
    let (_, note) = dock
        .send_back(&dock.keeper, dock.body("expired", &[(&batch, json!(10))]))
        .await;
    let number = s(&note["debit_note_number"]).to_owned();
    assert_eq!(note["total_value"], "1000.00");
    let invoice = dock.invoice(dock.supplier, dock.branch, "1500.00").await;
    // Named in any case; the payment carries the number as issued.
    let (status, paid) = dock
        .pay(
            &invoice,
            json!({"amount": "600.00", "method": "Debit_Note",
                   "reference": number.to_lowercase()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{paid}");
    assert_eq!(paid["payment"]["method"], "debit_note");
    assert_eq!(paid["payment"]["reference"], number.as_str());
    assert_eq!(paid["invoice"]["paid_amount"], "600.00");
    assert_eq!(paid["invoice"]["status"], "partial");
    let (_, read) = dock
        .app
        .get(&format!("{RETURNS}/{}", s(&note["id"])), &dock.auditor)
        .await;
    assert_eq!(read["used_value"], "600.00");
    assert_eq!(read["unused_value"], "400.00");
    let other_supplier = dock.app.supplier("Someone Else").await;
    let theirs = dock.invoice(other_supplier, dock.branch, "1000.00").await;
    let elsewhere = dock.app.branch("MBR").await;
    let remote = dock.invoice(dock.supplier, elsewhere, "1000.00").await;
    let small = dock.invoice(dock.supplier, dock.branch, "50.00").await;
    let refused: Vec<(&Value, Value, &str)> = vec![
        // More than the note has left.
        (
            &invoice,
            json!({"amount": "400.01", "method": "debit_note", "reference": number}),
            "amount",
        ),
        // No note named, or none of that number.
        (
            &invoice,
            json!({"amount": 1, "method": "debit_note"}),
            "reference",
        ),
        (
            &invoice,
            json!({"amount": 1, "method": "debit_note", "reference": "KLA-DN-00000099"}),
            "reference",
        ),
        // Another supplier's invoice, another branch's.
        (
            &theirs,
            json!({"amount": 1, "method": "debit_note", "reference": number}),
            "reference",
        ),
        (
            &remote,
            json!({"amount": 1, "method": "debit_note", "reference": number}),
            "reference",
        ),
        // More than the invoice owes.
        (
            &small,
            json!({"amount": "60.00", "method": "debit_note", "reference": number}),
            "amount",
        ),
    ];
    let before = dock.footprint().await;
    // An admin, who sees every branch's invoices.
    for (target, body, field) in refused {
        let (status, problem) = dock.pay_as(&dock.admin, target, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
        assert_eq!(dock.footprint().await, before, "{body} changed something");
    }
    // The rest of the note pays the rest, then the note is used up.
    let (status, paid) = dock
        .pay(
            &invoice,
            json!({"amount": 400, "method": "debit_note", "reference": number}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{paid}");
    assert_eq!(paid["invoice"]["paid_amount"], "1000.00");
    let (status, problem) = dock
        .pay(
            &small,
            json!({"amount": 1, "method": "debit_note", "reference": number}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "amount");
    let (_, read) = dock
        .app
        .get(&format!("{RETURNS}/{}", s(&note["id"])), &dock.admin)
        .await;
    assert_eq!(read["used_value"], "1000.00");
    assert_eq!(read["unused_value"], "0.00");
    assert_eq!(
        dock.text("SELECT sum(amount)::text FROM debit_note_settlements")
            .await,
        "1000.00"
    );
    dock.app.assert_invariants().await;
}

#[tokio::test]
async fn concurrent_debit_note_payments_never_use_more_than_the_note() {
    let dock = Dock::open().await;
    let batch = dock.batch(10).await;
    let (_, note) = dock
        .send_back(&dock.keeper, dock.body("expired", &[(&batch, json!(10))]))
        .await;
    let number = s(&note["debit_note_number"]).to_owned();
    let mut invoices = Vec::new();
    for _ in 0..3 {
        invoices.push(dock.invoice(dock.supplier, dock.branch, "1000.00").await);
    }
    let other = dock.app.second_process();
    let bases = [dock.app.base.clone(), other.base.clone()];
    // 20 payments of 100 against a note of 1000, over three invoices and
    // two server processes: exactly ten go through.
    let sends = (0..20).map(|i| {
        let path = format!(
            "/supplier-finance/invoices/{}/payments",
            s(&invoices[i % 3]["id"])
        );
        let req = dock
            .app
            .http
            .post(format!("{}{path}", bases[i % 2]))
            .bearer_auth(&dock.manager)
            .json(&json!({"amount": 100, "method": "debit_note", "reference": number}));
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            (status, res.json::<Value>().await.unwrap())
        }
    });
    let answers = join_all(sends).await;
    let made = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(made, 10, "{answers:?}");
    for (status, problem) in answers.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_problem(*status, problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "amount");
    }
    let used = format!(
        "SELECT used_value::text FROM supplier_returns WHERE id = '{}'",
        s(&note["id"])
    );
    assert_eq!(dock.text(&used).await, "1000.00");
    assert_eq!(
        dock.text("SELECT sum(paid_amount)::text FROM supplier_invoices")
            .await,
        "1000.00"
    );
    assert_eq!(
        dock.text("SELECT sum(amount)::text FROM debit_note_settlements")
            .await,
        "1000.00"
    );
    dock.app.assert_invariants().await;
}

#[tokio::test]
async fn a_controlled_medicine_returned_is_a_row_of_the_register_and_its_csv() {
    let dock = Dock::open().await;
    let morphine = dock
        .app
        .medicine(
            &dock.admin,
            json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                   "requires_prescription": true, "control_schedule": "Class A"}),
        )
        .await;
    let controlled = dock
        .batch_of(&morphine, dock.supplier, dock.branch, 8, "2030-06-30")
        .await;
    let plain = dock.batch(5).await;
    let (status, r) = dock
        .send_back(
            &dock.manager,
            dock.body("recalled", &[(&plain, json!(1)), (&controlled, json!(3))]),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(r["lines"][0]["is_controlled"], false);
    assert_eq!(r["lines"][1]["is_controlled"], true);
    // Anyone of the branch reads the register, like the other books.
    let (status, book) = dock
        .app
        .get("/compliance/supplier-returns", &dock.pharmacist)
        .await;
    assert_eq!(status, StatusCode::OK, "{book}");
    assert_eq!(book["total"], 1);
    assert_eq!(book["page_size"], 50);
    assert!(s(&book["retention_note"]).contains("controlled"));
    let row = &book["items"][0];
    assert_eq!(row["supplier_return_id"], r["id"]);
    assert_eq!(row["debit_note_number"], r["debit_note_number"]);
    assert_eq!(row["branch_id"], dock.branch.to_string());
    assert_eq!(row["supplier_id"], dock.supplier.to_string());
    assert_eq!(row["supplier_name"], "Quality Chemicals");
    assert_eq!(row["medicine_id"], morphine["id"]);
    assert_eq!(row["medicine_name"], "Morphine 10mg");
    assert_eq!(row["control_schedule"], "Class A");
    assert_eq!(row["batch_id"], controlled["id"]);
    assert_eq!(row["batch_number"], controlled["batch_number"]);
    assert_eq!(row["expiry_date"], "2030-06-30");
    assert_eq!(row["quantity"], 3);
    assert_eq!(row["reason"], "recalled");
    assert!(s(&row["returned_by_name"]).starts_with("Test"));
    assert!(s(&row["returned_at"]).ends_with('Z'));
    let res = dock
        .app
        .http
        .get(format!(
            "{}/compliance/supplier-returns?format=csv",
            dock.app.base
        ))
        .bearer_auth(&dock.auditor)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let csv = res.text().await.unwrap();
    let mut csv_lines = csv.lines();
    assert_eq!(
        csv_lines.next().unwrap(),
        "id,supplier_return_id,debit_note_number,branch_id,returned_at,supplier_id,\
         supplier_name,medicine_id,medicine_name,control_schedule,batch_id,batch_number,\
         expiry_date,quantity,reason,returned_by_name"
    );
    let line = csv_lines.next().unwrap();
    assert!(
        line.contains("KLA-DN-00000001") && line.contains("Morphine 10mg"),
        "{line}"
    );
    assert!(csv_lines.next().is_none());
    let (status, problem) = dock
        .app
        .get("/compliance/supplier-returns?format=xml", &dock.admin)
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "format");
    // Another branch's staff see none of it.
    let elsewhere = dock.app.branch("MBR").await;
    let (_, their_manager) = dock.app.signed_in(elsewhere, Role::BranchManager).await;
    let (status, theirs) = dock
        .app
        .get("/compliance/supplier-returns", &their_manager)
        .await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    assert_eq!(theirs["total"], 0);
    let (status, problem) = dock
        .app
        .get(
            &format!("/compliance/supplier-returns?branch_id={}", dock.branch),
            &their_manager,
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn another_branch_neither_returns_nor_reads_a_branchs_stock() {
    let dock = Dock::open().await;
    let batch = dock.batch(5).await;
    let (_, mine) = dock
        .send_back(&dock.keeper, dock.body("expired", &[(&batch, json!(1))]))
        .await;
    let elsewhere = dock.app.branch("MBR").await;
    let (_, keeper) = dock.app.signed_in(elsewhere, Role::InventoryManager).await;
    let (_, auditor) = dock.app.signed_in(elsewhere, Role::Auditor).await;
    let before = dock.footprint().await;
    // Their own branch: our batch is none of theirs.
    let (status, problem) = dock
        .send_back(&keeper, dock.body("expired", &[(&batch, json!(1))]))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "lines[0].batch_id");
    // Our branch named: refused outright.
    let mut body = dock.body("expired", &[(&batch, json!(1))]);
    body["branch_id"] = json!(dock.branch);
    let (status, problem) = dock.send_back(&keeper, body).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    assert_eq!(dock.footprint().await, before);
    let (status, problem) = dock
        .app
        .get(&format!("{RETURNS}/{}", s(&mine["id"])), &auditor)
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    let (status, list) = dock.app.get(RETURNS, &auditor).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["total"], 0);
    let (status, problem) = dock
        .app
        .get(&format!("{RETURNS}?branch_id={}", dock.branch), &auditor)
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    // An admin sees every branch, or the one named.
    let (_, all) = dock.app.get(RETURNS, &dock.admin).await;
    assert_eq!(all["total"], 1);
    let (_, none) = dock
        .app
        .get(&format!("{RETURNS}?branch_id={elsewhere}"), &dock.admin)
        .await;
    assert_eq!(none["total"], 0);
}

#[tokio::test]
async fn only_the_stock_keepers_return_and_auditors_only_read() {
    let dock = Dock::open().await;
    let batch = dock.batch(5).await;
    let (_, cashier) = dock.app.signed_in(dock.branch, Role::Cashier).await;
    let before = dock.footprint().await;
    for token in [&dock.pharmacist, &cashier, &dock.auditor] {
        let (status, problem) = dock
            .send_back(token, dock.body("expired", &[(&batch, json!(1))]))
            .await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
        let (status, problem) = dock.app.get(RETURNS, &cashier).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    assert_eq!(dock.footprint().await, before);
    for token in [&dock.admin, &dock.manager, &dock.keeper] {
        let (status, r) = dock
            .send_back(token, dock.body("expired", &[(&batch, json!(1))]))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{r}");
    }
}

#[tokio::test]
async fn the_invariant_checks_see_a_debit_note_out_of_step_with_its_ledger() {
    let dock = Dock::open().await;
    let batch = dock.batch(4).await;
    let (_, note) = dock
        .send_back(&dock.keeper, dock.body("expired", &[(&batch, json!(4))]))
        .await;
    let invoice = dock.invoice(dock.supplier, dock.branch, "400.00").await;
    let (status, paid) = dock
        .pay(
            &invoice,
            json!({"amount": 100, "method": "debit_note", "reference": note["debit_note_number"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{paid}");
    dock.app.assert_invariants().await;
    let client = dock.app.pool.get().await.unwrap();
    for (tamper, expected) in [
        (
            "UPDATE supplier_returns SET used_value = 0",
            "its settlements to 100.00",
        ),
        (
            "UPDATE debit_note_counters SET last_seq = 2",
            "debit note counter at 2",
        ),
        (
            "UPDATE supplier_returns SET seq = 2",
            "debit note seq has a gap",
        ),
        ("DELETE FROM debit_note_settlements", "has no settlement"),
    ] {
        let tx_sql = format!("BEGIN; {tamper}; ");
        client.batch_execute(&tx_sql).await.unwrap();
        let found = domain::stock::invariant_violations(&client).await.unwrap();
        client.batch_execute("ROLLBACK").await.unwrap();
        assert!(
            found.iter().any(|v| v.contains(expected)),
            "{tamper}: {found:#?}"
        );
    }
    dock.app.assert_invariants().await;
}
