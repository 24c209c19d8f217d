//! Returns and credit notes: what a return refunds and restocks, who may
//! issue one at once and whose waits for an approval, the per-branch
//! credit note counter and chain, replays, the books, the cash session and
//! the reports that count returns, under concurrency across two server
//! processes too.

use std::collections::HashSet;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_all_mismatched, assert_one_effect, assert_problem, Role, TestApp};

/// A branch with every role that may take things back signed in.
struct Shop {
    app: TestApp,
    branch: Uuid,
    admin: String,
    manager: String,
    pharmacist: String,
    cashier: String,
    cashier_id: Uuid,
    manager_id: Uuid,
    pharmacist_id: Uuid,
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

impl Shop {
    async fn open() -> Shop {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (manager_user, manager) = app.signed_in(branch, Role::BranchManager).await;
        let (pharmacist_user, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let (cashier_user, cashier) = app.signed_in(branch, Role::Cashier).await;
        Shop {
            app,
            branch,
            admin,
            manager,
            pharmacist,
            cashier,
            cashier_id: cashier_user.id,
            manager_id: manager_user.id,
            pharmacist_id: pharmacist_user.id,
        }
    }

    /// A medicine with `qty` units in one batch expiring in 2030.
    async fn stocked(&self, body: Value, qty: i64) -> Value {
        let m = self.app.medicine(&self.admin, body).await;
        self.app
            .receive(&self.admin, &m["id"], self.branch, qty, "2030-12-31")
            .await;
        m
    }

    async fn sell(&self, token: &str, body: Value) -> Value {
        let (status, sale) = self.app.post("/sales", token, body).await;
        assert_eq!(status, StatusCode::CREATED, "{sale}");
        sale
    }

    async fn give_back(&self, token: &str, sale: &Value, body: Value) -> (StatusCode, Value) {
        self.app
            .post(&format!("/sales/{}/returns", s(&sale["id"])), token, body)
            .await
    }

    async fn stock_of(&self, m: &Value) -> i64 {
        let (_, read) = self
            .app
            .get(&format!("/medicines/{}", s(&m["id"])), &self.cashier)
            .await;
        read["stock_quantity"].as_i64().unwrap()
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    async fn text(&self, sql: &str) -> String {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    async fn tax_on(&self) {
        let client = self.app.pool.get().await.unwrap();
        client
            .execute(
                "INSERT INTO settings (org_id, tax_enabled, tax_rate) VALUES ($1, true, 0.18)",
                &[&self.app.org_id],
            )
            .await
            .unwrap();
    }

    /// A customer allowed `limit` of credit.
    async fn credit_customer(&self, limit: i64) -> Uuid {
        let id = Uuid::now_v7();
        let client = self.app.pool.get().await.unwrap();
        client
            .execute(
                "INSERT INTO customers (id, name, is_credit_allowed, credit_limit)
                 VALUES ($1, 'Akello', true, $2::bigint::numeric)",
                &[&id, &limit],
            )
            .await
            .unwrap();
        id
    }

    async fn balance(&self, customer: Uuid) -> String {
        let client = self.app.pool.get().await.unwrap();
        client
            .query_one(
                "SELECT current_balance::text FROM customers WHERE id = $1",
                &[&customer],
            )
            .await
            .unwrap()
            .get(0)
    }
}

fn sale_of(m: &Value, qty: i64) -> Value {
    json!({"items": [{"medicine_id": m["id"], "quantity": qty}], "payment_method": "cash"})
}

/// A return of `qty` units of the sale's line `i`.
fn back(sale: &Value, i: usize, qty: Value) -> Value {
    json!({"items": [{"sale_item_id": sale["items"][i]["id"], "quantity": qty}],
           "reason": "Wrong strength dispensed"})
}

#[tokio::test]
async fn a_pharmacists_return_is_issued_at_once_and_restocks_the_very_batch() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Paracetamol", "selling_price": 500}), 20)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 3)).await;
    assert_eq!(shop.stock_of(&m).await, 17);
    let (status, note) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(2)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["status"], "issued");
    assert_eq!(note["credit_note_number"], "KLA-CN-00000001");
    assert_eq!(note["cn_seq"], 1);
    assert_eq!(note["sale_id"], sale["id"]);
    assert_eq!(note["branch_id"], shop.branch.to_string());
    assert_eq!(note["original_invoice_number"], sale["invoice_number"]);
    assert_eq!(
        note["refund_method"], "cash",
        "the sale's method by default"
    );
    assert_eq!(note["reason"], "Wrong strength dispensed");
    assert_eq!(note["created_by"], shop.pharmacist_id.to_string());
    assert_eq!(note["issued_by"], shop.pharmacist_id.to_string());
    assert!(note["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(note["approval_id"].is_null());
    assert_eq!(note["total"], "1000.00");
    assert_eq!(note["vat"], "0.00");
    assert_eq!(note["subtotal"], "1000.00");
    let item = &note["items"][0];
    assert_eq!(item["sale_item_id"], sale["items"][0]["id"]);
    assert_eq!(item["medicine_id"], m["id"]);
    assert_eq!(item["batch_id"], sale["items"][0]["batch_id"]);
    assert_eq!(item["quantity"], 2);
    assert_eq!(item["unit_price"], "500.00");
    assert_eq!(item["vat_rate"], 0);
    assert_eq!(item["vat_amount"], "0.00");
    assert_eq!(item["line_total"], "1000.00");
    assert_eq!(item["restocked"], true);
    // The units are back on the batch they were sold from, as a RETURN.
    assert_eq!(shop.stock_of(&m).await, 19);
    let batch = s(&sale["items"][0]["batch_id"]);
    assert_eq!(
        shop.scalar(&format!(
            "SELECT sum(qty)::bigint FROM stock_movements WHERE kind = 'RETURN' AND batch_id = '{batch}'"
        ))
        .await,
        2
    );
    // Read back by id and with the sale.
    let (status, read) = shop
        .app
        .get(&format!("/returns/{}", s(&note["id"])), &shop.cashier)
        .await;
    assert_eq!(status, StatusCode::OK);
    // As the answer, plus what the tax authority made of it so far.
    let mut read = read;
    assert!(read["fiscal"]["status"].is_string(), "{read}");
    read.as_object_mut().unwrap().remove("fiscal");
    assert_eq!(read, note);
    let (status, of_sale) = shop
        .app
        .get(&format!("/sales/{}/returns", s(&sale["id"])), &shop.cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{of_sale}");
    assert_eq!(of_sale["total"], 1);
    assert_eq!(of_sale["items"][0]["id"], note["id"]);
    // The next credit note of the branch takes the next number.
    let (status, second) = shop
        .give_back(&shop.manager, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    assert_eq!(second["cn_seq"], 2);
    assert_eq!(second["credit_note_number"], "KLA-CN-00000002");
    assert_eq!(second["previous_hash"], note["credit_note_hash"]);
    assert_eq!(note["previous_hash"], "0".repeat(64));
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn the_units_returned_on_a_line_never_exceed_the_units_sold() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Ibuprofen", "selling_price": 300}), 20)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 3)).await;
    let (status, _) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(2)))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, problem) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(2)))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[0].quantity");
    assert_eq!(problem["code"], "return_exceeds_sold");
    assert!(s(&problem["detail"]).contains("at most 1"), "{problem}");
    assert_eq!(shop.scalar("SELECT count(*) FROM sale_returns").await, 1);
    assert_eq!(shop.stock_of(&m).await, 19);
    let (status, _) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, problem) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert!(s(&problem["detail"]).contains("at most 0"), "{problem}");
    // The database holds the rule too, whoever writes.
    let client = shop.app.pool.get().await.unwrap();
    let err = client
        .execute(
            "UPDATE sale_items SET returned_quantity = quantity + 1",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION)
    );
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn refunds_split_vat_as_the_sale_line_did_and_parts_add_up_to_the_line() {
    let shop = Shop::open().await;
    shop.tax_on().await;
    let m = shop
        .stocked(json!({"name": "Cough syrup", "selling_price": 10}), 20)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 3)).await;
    assert_eq!(sale["items"][0]["vat_amount"], "4.58");
    let mut totals = Vec::new();
    let mut vats = Vec::new();
    for _ in 0..3 {
        let (status, note) = shop
            .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{note}");
        assert_eq!(note["items"][0]["vat_rate"], 18);
        let total: f64 = s(&note["total"]).parse().unwrap();
        let vat: f64 = s(&note["vat"]).parse().unwrap();
        let subtotal: f64 = s(&note["subtotal"]).parse().unwrap();
        assert!((subtotal - (total - vat)).abs() < 1e-9, "{note}");
        totals.push(note["total"].clone());
        vats.push(note["vat"].clone());
    }
    assert_eq!(vats, [json!("1.53"), json!("1.52"), json!("1.53")]);
    assert_eq!(totals, [json!("10.00"), json!("10.00"), json!("10.00")]);
    // The three credit notes refund exactly the line's VAT and total.
    assert_eq!(
        shop.text("SELECT sum(vat)::text FROM sale_returns").await,
        "4.58"
    );
    assert_eq!(
        shop.text("SELECT sum(total)::text FROM sale_returns").await,
        "30.00"
    );
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn bad_returns_are_refused_naming_the_field_and_change_nothing() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Cetirizine", "selling_price": 200}), 20)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 2)).await;
    let other = shop.sell(&shop.cashier, sale_of(&m, 2)).await;
    let line = &sale["items"][0]["id"];
    let item = |q: Value| json!({"items": [{"sale_item_id": line, "quantity": q}], "reason": "r"});
    let cases = [
        (item(json!(0)), "items[0].quantity"),
        (item(json!(-1)), "items[0].quantity"),
        (item(json!(1.5)), "items[0].quantity"),
        (item(json!("x")), "items[0].quantity"),
        (
            json!({"items": [{"sale_item_id": Uuid::now_v7(), "quantity": 1}], "reason": "r"}),
            "items[0].sale_item_id",
        ),
        (
            json!({"items": [{"sale_item_id": other["items"][0]["id"], "quantity": 1}], "reason": "r"}),
            "items[0].sale_item_id",
        ),
        (
            json!({"items": [{"quantity": 1}], "reason": "r"}),
            "items[0].sale_item_id",
        ),
        (
            json!({"items": [{"sale_item_id": line, "quantity": 1},
                             {"sale_item_id": line, "quantity": 1}], "reason": "r"}),
            "items[1].sale_item_id",
        ),
        (json!({"items": [], "reason": "r"}), "items"),
        (
            json!({"items": [{"sale_item_id": line, "quantity": 1}]}),
            "reason",
        ),
        (
            json!({"items": [{"sale_item_id": line, "quantity": 1}], "reason": "   "}),
            "reason",
        ),
        (
            json!({"items": [{"sale_item_id": line, "quantity": 1}], "reason": "r",
                   "refund_method": "cheque"}),
            "refund_method",
        ),
        (
            json!({"items": [{"sale_item_id": line, "quantity": 1}], "reason": "r",
                   "client_mutation_id": "c".repeat(201)}),
            "client_mutation_id",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = shop.give_back(&shop.pharmacist, &sale, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    // An unknown or malformed sale is 404.
    for id in [Uuid::now_v7().to_string(), "not-a-sale".to_owned()] {
        let (status, problem) = shop
            .app
            .post(
                &format!("/sales/{id}/returns"),
                &shop.pharmacist,
                item(json!(1)),
            )
            .await;
        assert_problem(status, &problem, StatusCode::NOT_FOUND);
    }
    // A credit refund needs the sale's customer.
    let (status, problem) = shop
        .give_back(
            &shop.pharmacist,
            &sale,
            json!({"items": [{"sale_item_id": line, "quantity": 1}], "reason": "r",
                   "refund_method": "credit"}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "refund_method");
    assert_eq!(shop.scalar("SELECT count(*) FROM sale_returns").await, 0);
    assert_eq!(shop.scalar("SELECT count(*) FROM approvals").await, 0);
    assert_eq!(
        shop.scalar("SELECT coalesce(sum(returned_quantity), 0)::bigint FROM sale_items")
            .await,
        0
    );
    assert_eq!(shop.stock_of(&m).await, 16);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn a_credit_refund_lowers_the_balance_with_a_refund_row_never_below_zero() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Insulin", "selling_price": 4000}), 10)
        .await;
    let customer = shop.credit_customer(20000).await;
    let sale = shop
        .sell(
            &shop.cashier,
            json!({"items": [{"medicine_id": m["id"], "quantity": 2}],
                   "payment_method": "credit", "customer_id": customer}),
        )
        .await;
    assert_eq!(shop.balance(customer).await, "8000.00");
    let (status, note) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["refund_method"], "credit");
    assert_eq!(note["customer_id"], customer.to_string());
    assert_eq!(shop.balance(customer).await, "4000.00");
    let client = shop.app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT amount::text, balance_after::text, reference_id, created_by FROM customer_ledger
             WHERE customer_id = $1 AND transaction_type = 'REFUND'",
            &[&customer],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "4000.00");
    assert_eq!(row.get::<_, String>(1), "4000.00");
    assert_eq!(row.get::<_, Uuid>(2).to_string(), s(&note["id"]));
    assert_eq!(row.get::<_, Uuid>(3), shop.pharmacist_id);
    // The customer pays 3000 off: a credit refund of 4000 would go below zero.
    let (status, _) = shop
        .app
        .post(
            &format!("/customers/{customer}/payments"),
            &shop.cashier,
            json!({"amount": 3000}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, problem) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "refund_method");
    assert_eq!(problem["code"], "amount_exceeds_balance");
    let detail = s(&problem["detail"]);
    assert!(
        detail.contains("4000.00") && detail.contains("1000.00"),
        "{detail}"
    );
    assert_eq!(shop.balance(customer).await, "1000.00");
    assert_eq!(shop.scalar("SELECT count(*) FROM sale_returns").await, 1);
    assert_eq!(shop.stock_of(&m).await, 9);
    // Refunded another way, it goes through.
    let mut cash = back(&sale, 0, json!(1));
    cash["refund_method"] = json!("cash");
    let (status, note) = shop.give_back(&shop.pharmacist, &sale, cash).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(shop.balance(customer).await, "1000.00");
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn opened_goods_are_not_restocked() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Eye drops", "selling_price": 800}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 2)).await;
    let mut body = back(&sale, 0, json!(2));
    body["restock"] = json!(false);
    let (status, note) = shop.give_back(&shop.manager, &sale, body).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["restock"], false);
    assert_eq!(note["items"][0]["restocked"], false);
    assert_eq!(note["total"], "1600.00");
    assert_eq!(shop.stock_of(&m).await, 8);
    assert_eq!(
        shop.scalar("SELECT count(*) FROM stock_movements WHERE kind = 'RETURN'")
            .await,
        0
    );
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn a_cashiers_return_waits_for_a_managers_approval() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Amoxyl syrup", "selling_price": 1000}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 3)).await;
    let (status, pending) = shop
        .give_back(&shop.cashier, &sale, back(&sale, 0, json!(2)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{pending}");
    assert_eq!(pending["status"], "pending_approval");
    assert!(pending["credit_note_number"].is_null());
    assert!(pending["cn_seq"].is_null());
    assert_eq!(pending["total"], "2000.00");
    // Nothing moved yet, but the two units are held.
    assert_eq!(shop.stock_of(&m).await, 7);
    let (status, problem) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(2)))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["code"], "return_exceeds_sold");
    // The approval: kind refund, about the return, by the cashier.
    let approval_id = s(&pending["approval_id"]).to_owned();
    let (_, approvals) = shop.app.get("/approvals", &shop.manager).await;
    let approval = approvals["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == approval_id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(approval["kind"], "refund");
    assert_eq!(approval["reference_id"], pending["id"]);
    assert_eq!(approval["requested_by"], shop.cashier_id.to_string());
    assert_eq!(approval["status"], "pending");
    // A cashier (the requester) cannot decide it.
    let approve = format!("/approvals/{approval_id}/approve");
    let (status, _) = shop.app.post(&approve, &shop.cashier, json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A manager of another branch does not see it.
    let elsewhere = shop.app.branch("EBB").await;
    let (_, stranger) = shop.app.signed_in(elsewhere, Role::BranchManager).await;
    let (status, _) = shop.app.post(&approve, &stranger, json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(shop.stock_of(&m).await, 7);
    // The branch manager approves: the credit note is issued.
    let (status, decided) = shop.app.post(&approve, &shop.manager, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["status"], "approved");
    let (_, issued) = shop
        .app
        .get(&format!("/returns/{}", s(&pending["id"])), &shop.cashier)
        .await;
    assert_eq!(issued["status"], "issued", "{issued}");
    assert_eq!(issued["credit_note_number"], "KLA-CN-00000001");
    assert_eq!(issued["created_by"], shop.cashier_id.to_string());
    assert_eq!(issued["issued_by"], shop.manager_id.to_string());
    assert!(issued["decided_at"].is_string());
    assert_eq!(shop.stock_of(&m).await, 9);
    let (status, _) = shop.app.post(&approve, &shop.manager, json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "decided once");

    // A rejected return ends with nothing changed and frees its units.
    let (status, second) = shop
        .give_back(&shop.cashier, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{second}");
    let reject = format!("/approvals/{}/reject", s(&second["approval_id"]));
    let (status, decided) = shop.app.post(&reject, &shop.admin, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["status"], "rejected");
    let (_, ended) = shop
        .app
        .get(&format!("/returns/{}", s(&second["id"])), &shop.cashier)
        .await;
    assert_eq!(ended["status"], "rejected");
    assert!(ended["credit_note_number"].is_null());
    assert_eq!(shop.stock_of(&m).await, 9);
    assert_eq!(
        shop.scalar("SELECT last_cn_seq FROM credit_note_counters")
            .await,
        1
    );
    let (status, third) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{third}");
    assert_eq!(third["cn_seq"], 2);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn an_approval_the_balance_no_longer_covers_stays_pending_and_changes_nothing() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Metformin", "selling_price": 1000}), 10)
        .await;
    let customer = shop.credit_customer(10000).await;
    let sale = shop
        .sell(
            &shop.cashier,
            json!({"items": [{"medicine_id": m["id"], "quantity": 2}],
                   "payment_method": "credit", "customer_id": customer}),
        )
        .await;
    let (status, pending) = shop
        .give_back(&shop.cashier, &sale, back(&sale, 0, json!(2)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{pending}");
    // Meanwhile the customer pays most of the balance off.
    let (status, _) = shop
        .app
        .post(
            &format!("/customers/{customer}/payments"),
            &shop.cashier,
            json!({"amount": 1500}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let approve = format!("/approvals/{}/approve", s(&pending["approval_id"]));
    let (status, problem) = shop.app.post(&approve, &shop.manager, json!({})).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "refund_method");
    let (_, still) = shop
        .app
        .get(&format!("/returns/{}", s(&pending["id"])), &shop.cashier)
        .await;
    assert_eq!(still["status"], "pending_approval");
    assert_eq!(shop.balance(customer).await, "500.00");
    assert_eq!(shop.stock_of(&m).await, 8);
    let (_, approvals) = shop
        .app
        .get("/approvals?status=pending", &shop.manager)
        .await;
    assert_eq!(approvals["total"], 1);
    // It can still be rejected.
    let reject = format!("/approvals/{}/reject", s(&pending["approval_id"]));
    let (status, _) = shop.app.post(&reject, &shop.manager, json!({})).await;
    assert_eq!(status, StatusCode::OK);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn returns_obey_roles_and_branches() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Loratadine", "selling_price": 100}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 5)).await;
    for role in [Role::Auditor, Role::InventoryManager] {
        let (_, token) = shop.app.signed_in(shop.branch, role).await;
        let (status, problem) = shop
            .give_back(&token, &sale, back(&sale, 0, json!(1)))
            .await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    // Another branch's staff do not see the sale or its returns.
    let other = shop.app.branch("EBB").await;
    let (_, foreign) = shop.app.signed_in(other, Role::BranchManager).await;
    let (status, problem) = shop
        .give_back(&foreign, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    // An admin of another branch may take it back; it lands on the sale's branch.
    let (_, far_admin) = shop.app.signed_in(other, Role::Admin).await;
    let (status, note) = shop
        .give_back(&far_admin, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["branch_id"], shop.branch.to_string());
    assert_eq!(note["credit_note_number"], "KLA-CN-00000001");
    for path in [
        format!("/returns/{}", s(&note["id"])),
        format!("/sales/{}/returns", s(&sale["id"])),
        format!("/compliance/fiscal-preview/credit-notes/{}", s(&note["id"])),
    ] {
        let (status, problem) = shop.app.get(&path, &foreign).await;
        assert_problem(status, &problem, StatusCode::NOT_FOUND);
    }
    let (status, list) = shop.app.get("/returns", &foreign).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["total"], 0);
    let (status, _) = shop
        .app
        .get(&format!("/returns?branch_id={}", shop.branch), &foreign)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, list) = shop.app.get("/returns", &shop.cashier).await;
    assert_eq!(list["total"], 1);
    let (_, all) = shop.app.get("/returns", &far_admin).await;
    assert_eq!(all["total"], 1);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn a_retried_mutation_id_answers_the_first_return() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Omeprazole", "selling_price": 700}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 4)).await;
    let mut body = back(&sale, 0, json!(1));
    body["client_mutation_id"] = json!("ret-1");
    let (status, first) = shop.give_back(&shop.pharmacist, &sale, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED);
    let res = shop
        .app
        .http
        .post(format!(
            "{}/sales/{}/returns",
            shop.app.base,
            s(&sale["id"])
        ))
        .bearer_auth(&shop.pharmacist)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["Idempotent-Replay"], "true");
    let again: Value = res.json().await.unwrap();
    assert_eq!(again, first);
    assert_eq!(shop.scalar("SELECT count(*) FROM sale_returns").await, 1);
    assert_eq!(shop.stock_of(&m).await, 7);
    // The same id with another body is a conflict.
    let mut other = back(&sale, 0, json!(2));
    other["client_mutation_id"] = json!("ret-1");
    let (status, problem) = shop.give_back(&shop.pharmacist, &sale, other).await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    // A cashier's pending return replays too, without a second approval.
    let mut pending = back(&sale, 0, json!(1));
    pending["client_mutation_id"] = json!("ret-2");
    let (status, first) = shop.give_back(&shop.cashier, &sale, pending.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, again) = shop.give_back(&shop.cashier, &sale, pending).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, first);
    assert_eq!(shop.scalar("SELECT count(*) FROM approvals").await, 1);
    shop.app.assert_invariants().await;
}

/// Two server processes on one database, one return's mutation id sent
/// through both at once: one credit note, every answer it, and a different
/// return under the id refused by either.
#[tokio::test]
async fn one_mutation_id_sent_at_once_through_two_processes_returns_once() {
    let shop = Shop::open().await;
    let other = shop.app.second_process();
    let m = shop
        .stocked(json!({"name": "Cetirizine", "selling_price": 300}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 4)).await;
    let path = format!("/sales/{}/returns", s(&sale["id"]));
    let mut body = back(&sale, 0, json!(1));
    body["client_mutation_id"] = json!("ret-race-1");
    let answers = shop
        .app
        .post_through_both(&other, 12, &path, &shop.pharmacist, &body)
        .await;
    assert_one_effect(&answers);
    assert_eq!(shop.scalar("SELECT count(*) FROM sale_returns").await, 1);
    assert_eq!(shop.stock_of(&m).await, 7);
    body["items"][0]["quantity"] = json!(2);
    let refused = shop
        .app
        .post_through_both(&other, 6, &path, &shop.pharmacist, &body)
        .await;
    assert_all_mismatched(&refused, "return");
    assert_eq!(shop.scalar("SELECT count(*) FROM sale_returns").await, 1);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn twenty_concurrent_returns_of_one_line_over_two_processes_never_exceed_the_sold() {
    let shop = Shop::open().await;
    let other = shop.app.second_process();
    let m = shop
        .stocked(json!({"name": "Salbutamol", "selling_price": 900}), 50)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 5)).await;
    let bases = [shop.app.base.clone(), other.base.clone()];
    let tokens = [
        shop.pharmacist.clone(),
        shop.manager.clone(),
        shop.admin.clone(),
    ];
    let tries = (0..20).map(|i| {
        let url = format!("{}/sales/{}/returns", bases[i % 2], s(&sale["id"]));
        let token = tokens[i % tokens.len()].clone();
        let body = back(&sale, 0, json!(1));
        let http = shop.app.http.clone();
        async move {
            let res = http
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = res.status();
            (status, res.json::<Value>().await.unwrap())
        }
    });
    let answers = join_all(tries).await;
    let made: Vec<&Value> = answers
        .iter()
        .filter(|(st, _)| *st == StatusCode::CREATED)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(made.len(), 5, "{answers:?}");
    for (status, body) in &answers {
        if *status != StatusCode::CREATED {
            assert_eq!(*status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(body["code"], "return_exceeds_sold", "{body}");
        }
    }
    let seqs: HashSet<i64> = made.iter().map(|n| n["cn_seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=5).collect());
    assert_eq!(
        shop.scalar("SELECT returned_quantity::bigint FROM sale_items")
            .await,
        5
    );
    assert_eq!(
        shop.text("SELECT sum(total)::text FROM sale_returns").await,
        "4500.00"
    );
    assert_eq!(shop.stock_of(&m).await, 50);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn cn_seq_stays_gapless_under_concurrent_returns_from_several_tills() {
    let shop = Shop::open().await;
    let other = shop.app.second_process();
    let m = shop
        .stocked(json!({"name": "Zinc", "selling_price": 150}), 200)
        .await;
    // Ten sales, each returned in three parts at once, with a fourth
    // return of each refused among them (a credit refund of a sale without
    // a customer).
    let mut sales = Vec::new();
    for _ in 0..10 {
        sales.push(shop.sell(&shop.cashier, sale_of(&m, 3)).await);
    }
    let bases = [shop.app.base.clone(), other.base.clone()];
    let tokens = [shop.pharmacist.clone(), shop.manager.clone()];
    let mut tries = Vec::new();
    for (n, sale) in sales.iter().enumerate() {
        for k in 0..4 {
            let i = n * 4 + k;
            let url = format!("{}/sales/{}/returns", bases[i % 2], s(&sale["id"]));
            let token = tokens[i % 2].clone();
            let mut body = back(sale, 0, json!(1));
            if k == 3 {
                body["refund_method"] = json!("credit");
            }
            let http = shop.app.http.clone();
            tries.push(async move {
                let res = http
                    .post(url)
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let status = res.status();
                (status, res.json::<Value>().await.unwrap())
            });
        }
    }
    let answers = join_all(tries).await;
    let made: Vec<&Value> = answers
        .iter()
        .filter(|(st, _)| *st == StatusCode::CREATED)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(made.len(), 30, "{answers:?}");
    let mut seqs: Vec<i64> = made.iter().map(|n| n["cn_seq"].as_i64().unwrap()).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=30).collect::<Vec<_>>());
    let numbers: HashSet<&str> = made.iter().map(|n| s(&n["credit_note_number"])).collect();
    assert_eq!(numbers.len(), 30);
    // Each sale's three credit notes refund exactly what it cost.
    assert_eq!(
        shop.scalar(
            "SELECT count(*) FROM (SELECT r.sale_id FROM sale_returns r JOIN sales s ON s.id = r.sale_id
             GROUP BY r.sale_id, s.total HAVING sum(r.total) <> s.total) x"
        )
        .await,
        0
    );
    // The chain holds in commit order.
    let (status, check) = shop.app.get("/sales/verify-chain", &shop.manager).await;
    assert_eq!(status, StatusCode::OK, "{check}");
    assert_eq!(check["status"], "ok", "{check}");
    assert_eq!(check["credit_notes"]["status"], "ok");
    assert_eq!(check["credit_notes"]["checked"], 30);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn the_chain_check_finds_an_edited_credit_note() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Folic acid", "selling_price": 50}), 20)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 4)).await;
    let mut notes = Vec::new();
    for _ in 0..3 {
        let (status, note) = shop
            .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
            .await;
        assert_eq!(status, StatusCode::CREATED);
        notes.push(note);
    }
    let (_, check) = shop.app.get("/sales/verify-chain", &shop.admin).await;
    assert_eq!(check["status"], "ok", "{check}");
    assert_eq!(check["credit_notes"]["checked"], 3);
    let client = shop.app.pool.get().await.unwrap();
    let id: Uuid = s(&notes[1]["id"]).parse().unwrap();
    client
        .execute(
            "UPDATE sale_returns SET total = total + 1 WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let (_, check) = shop.app.get("/sales/verify-chain", &shop.admin).await;
    assert_eq!(check["status"], "broken", "{check}");
    assert_eq!(
        check["first_broken"],
        Value::Null,
        "the invoices still hold"
    );
    assert_eq!(check["credit_notes"]["first_broken"]["cn_seq"], 2);
    assert_eq!(
        check["credit_notes"]["first_broken"]["credit_note_number"],
        "KLA-CN-00000002"
    );
}

#[tokio::test]
async fn refunds_count_in_the_open_cash_session_and_expected_cash_falls() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Vitamin C", "selling_price": 1000}), 10)
        .await;
    let (status, session) = shop
        .app
        .post(
            "/sessions/open",
            &shop.cashier,
            json!({"opening_float": 5000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{session}");
    let sale = shop.sell(&shop.cashier, sale_of(&m, 3)).await;
    let (_, note) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(note["cash_session_id"], session["id"]);
    let mut card = back(&sale, 0, json!(1));
    card["refund_method"] = json!("card");
    let (status, _) = shop.give_back(&shop.pharmacist, &sale, card).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, current) = shop.app.get("/sessions/current", &shop.cashier).await;
    assert_eq!(current["total_refunds"], "2000.00", "{current}");
    assert_eq!(current["refund_count"], 2);
    let breakdown: Value = serde_json::from_str(s(&current["refund_breakdown"])).unwrap();
    assert_eq!(breakdown, json!({"cash": "1000.00", "card": "1000.00"}));
    assert_eq!(current["total_revenue"], "3000.00");
    let (status, closed) = shop
        .app
        .post(
            &format!("/sessions/{}/close", s(&session["id"])),
            &shop.cashier,
            json!({"counted_cash": 7000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    // 5000 float + 3000 cash taken - 1000 cash refunded.
    assert_eq!(closed["expected_cash"], "7000.00");
    assert_eq!(closed["variance"], "0.00");
}

#[tokio::test]
async fn reports_and_the_dashboard_are_net_of_credit_notes() {
    let shop = Shop::open().await;
    shop.tax_on().await;
    let m = shop
        .stocked(json!({"name": "Antacid", "selling_price": 1180}), 20)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 3)).await;
    assert_eq!(sale["total"], "3540.00");
    let mut card = back(&sale, 0, json!(1));
    card["refund_method"] = json!("card");
    let (status, _) = shop.give_back(&shop.pharmacist, &sale, card).await;
    assert_eq!(status, StatusCode::CREATED);
    let approx = |v: &Value, x: f64| {
        let got = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
        assert!((got - x).abs() < 0.001, "{got} != {x}");
    };
    let (_, report) = shop.app.get("/reports/sales", &shop.admin).await;
    let t = &report["totals"];
    assert_eq!(t["count"], 1);
    approx(&t["revenue"], 2360.0);
    approx(&t["vat"], 360.0);
    approx(&t["subtotal"], 2000.0);
    approx(&t["average"], 2360.0);
    assert_eq!(t["returns_count"], 1);
    approx(&t["returns_total"], 1180.0);
    let today = report["by_day"].as_array().unwrap().last().unwrap().clone();
    approx(&today["total"], 2360.0);
    approx(&today["returns_total"], 1180.0);
    let methods = report["by_payment"].as_array().unwrap();
    let cash = methods
        .iter()
        .find(|p| p["payment_method"] == "cash")
        .unwrap();
    approx(&cash["total"], 3540.0);
    let card = methods
        .iter()
        .find(|p| p["payment_method"] == "card")
        .unwrap();
    approx(&card["total"], -1180.0);
    assert_eq!(card["count"], 0);
    let top = &report["top_selling"][0];
    assert_eq!(top["quantity"], 2);
    approx(&top["revenue"], 2360.0);
    approx(&top["cost"], 200.0);

    let (_, summary) = shop.app.get("/dashboard/summary", &shop.manager).await;
    approx(&summary["today_revenue"], 2360.0);
    approx(&summary["today_vat"], 360.0);
    assert_eq!(summary["today_sales_count"], 1);
    assert_eq!(summary["returns_count"], 1);
    approx(&summary["returns_total"], 1180.0);
    approx(&summary["sparkline_30d"][29], 2360.0);

    let (_, comparison) = shop
        .app
        .get("/dashboard/branch-comparison", &shop.admin)
        .await;
    approx(&comparison["total_revenue"], 2360.0);
    assert_eq!(comparison["returns_count"], 1);
    approx(&comparison["items"][0]["revenue"], 2360.0);
    approx(&comparison["items"][0]["returns_total"], 1180.0);

    let (_, vat) = shop.app.get("/reports/vat", &shop.admin).await;
    approx(&vat["totals"]["taxable_18"], 2000.0);
    approx(&vat["totals"]["vat_collected"], 360.0);
    approx(&vat["totals"]["grand_total"], 2360.0);
    approx(&vat["by_month"][0]["vat_collected"], 360.0);

    let (_, people) = shop
        .app
        .get("/reports/sales/by-pharmacist", &shop.admin)
        .await;
    let rows = people["items"].as_array().unwrap();
    let seller = rows
        .iter()
        .find(|r| r["user_id"] == shop.cashier_id.to_string())
        .unwrap();
    approx(&seller["revenue"], 3540.0);
    let returner = rows
        .iter()
        .find(|r| r["user_id"] == shop.pharmacist_id.to_string())
        .unwrap();
    assert_eq!(returner["count"], 0);
    assert_eq!(returner["returns_count"], 1);
    approx(&returner["revenue"], -1180.0);
    approx(&returner["vat"], -180.0);
}

#[tokio::test]
async fn a_returned_controlled_medicine_writes_a_negative_register_row() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(
            json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                   "requires_prescription": true, "control_schedule": "Class A"}),
            20,
        )
        .await;
    let (status, rx) = shop
        .app
        .post(
            "/prescriptions",
            &shop.pharmacist,
            json!({"patient_name": "Amina", "patient_id_number": "CM900",
                   "prescriber_name": "Dr Okello", "prescriber_license": "UMDPC-77",
                   "items": [{"medicine_id": m["id"], "quantity": 3}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rx}");
    let mut body = sale_of(&m, 3);
    body["prescription_id"] = rx["id"].clone();
    let sale = shop.sell(&shop.pharmacist, body).await;
    let (status, note) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(2)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    let (_, book) = shop
        .app
        .get("/compliance/classified-drugs-book", &shop.pharmacist)
        .await;
    let rows = book["items"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{book}");
    let returned = rows.iter().find(|r| r["quantity"] == -2).unwrap();
    assert_eq!(returned["credit_note_number"], note["credit_note_number"]);
    assert_eq!(returned["invoice_number"], sale["invoice_number"]);
    assert_eq!(returned["patient_national_id"], "CM900");
    assert_eq!(returned["doctor_license"], "UMDPC-77");
    let sold = rows.iter().find(|r| r["quantity"] == 3).unwrap();
    assert!(sold["credit_note_number"].is_null());
    assert_eq!(
        shop.scalar("SELECT sum(quantity)::bigint FROM controlled_dispenses")
            .await,
        1
    );
    // The CSV export carries the negative quantity as a number.
    let res = shop
        .app
        .http
        .get(format!(
            "{}/compliance/classified-drugs-book?format=csv",
            shop.app.base
        ))
        .bearer_auth(&shop.pharmacist)
        .send()
        .await
        .unwrap();
    let csv = res.text().await.unwrap();
    assert!(
        csv.lines().next().unwrap().ends_with(",credit_note_number"),
        "{csv}"
    );
    assert!(csv.contains(",-2,"), "{csv}");
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn credit_notes_have_a_fiscal_preview_a_print_job_and_a_change_feed_entry() {
    let shop = Shop::open().await;
    shop.tax_on().await;
    let m = shop
        .stocked(json!({"name": "Cough syrup", "selling_price": 1180}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 2)).await;
    let (_, note) = shop
        .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
        .await;
    let (status, preview) = shop
        .app
        .get(
            &format!("/compliance/fiscal-preview/credit-notes/{}", s(&note["id"])),
            &shop.cashier,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["document_type"], "credit_note");
    assert_eq!(preview["original_invoice_number"], sale["invoice_number"]);
    assert_eq!(preview["original_icv"], sale["icv"]);
    assert_eq!(
        preview["seller"]["invoice_number"],
        note["credit_note_number"]
    );
    assert_eq!(preview["seller"]["icv"], 1);
    assert_eq!(preview["totals"]["total"], 1180.0);
    assert_eq!(preview["totals"]["vat"], 180.0);
    assert_eq!(preview["totals"]["vat_breakdown"][0]["rate"], 18);
    assert_eq!(
        preview["totals"]["vat_breakdown"][0]["taxable_amount"],
        1000.0
    );
    assert_eq!(preview["items"][0]["quantity"], 1);
    assert_eq!(preview["fiscalization"]["mode"], "preview");
    // A pending return is no credit note yet.
    let (_, pending) = shop
        .give_back(&shop.cashier, &sale, back(&sale, 0, json!(1)))
        .await;
    let (status, _) = shop
        .app
        .get(
            &format!(
                "/compliance/fiscal-preview/credit-notes/{}",
                s(&pending["id"])
            ),
            &shop.cashier,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A print job of type credit_note names the credit note.
    let (status, job) = shop
        .app
        .post(
            "/printing/print-jobs",
            &shop.cashier,
            json!({"reference_id": note["id"], "document_type": "credit_note"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let (_, jobs) = shop
        .app
        .get(
            &format!("/printing/print-jobs?reference_id={}", s(&note["id"])),
            &shop.cashier,
        )
        .await;
    assert_eq!(jobs["total"], 1);
    assert_eq!(jobs["items"][0]["document_type"], "credit_note");
    // The till's feed carries the credit note (and its batch and stock).
    let (status, feed) = shop.app.get("/sync/changes?since=0", &shop.cashier).await;
    assert_eq!(status, StatusCode::OK);
    let changes = feed["changes"].as_array().unwrap();
    let entry = changes
        .iter()
        .find(|c| c["entity"] == "credit_note")
        .unwrap_or_else(|| panic!("{feed}"));
    assert_eq!(entry["entity_id"], note["id"]);
    assert_eq!(entry["op"], "create");
    assert_eq!(entry["branch_id"], shop.branch.to_string());
    assert_eq!(
        entry["payload"]["credit_note_number"],
        note["credit_note_number"]
    );
    assert_eq!(
        changes
            .iter()
            .filter(|c| c["entity"] == "credit_note")
            .count(),
        1,
        "a pending return is not in the feed"
    );
}

#[tokio::test]
async fn the_returns_list_pages_and_filters() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "ORS", "selling_price": 300}), 30)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 25)).await;
    for _ in 0..22 {
        let (status, _) = shop
            .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, _) = shop
        .give_back(&shop.cashier, &sale, back(&sale, 0, json!(1)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, page) = shop.app.get("/returns", &shop.manager).await;
    assert_eq!(page["total"], 23);
    assert_eq!(page["page_size"], 20);
    assert_eq!(page["items"].as_array().unwrap().len(), 20);
    assert_eq!(
        page["items"][0]["status"], "pending_approval",
        "newest first"
    );
    let (_, page2) = shop.app.get("/returns?page=2", &shop.manager).await;
    assert_eq!(page2["items"].as_array().unwrap().len(), 3);
    let (_, pending) = shop
        .app
        .get("/returns?status=pending_approval", &shop.manager)
        .await;
    assert_eq!(pending["total"], 1);
    let (_, none) = shop
        .app
        .get(
            "/returns?from_date=2000-01-01&to_date=2000-01-31",
            &shop.manager,
        )
        .await;
    assert_eq!(none["total"], 0);
    for (query, field) in [
        ("status=done", "status"),
        ("from_date=2026-13-01", "from_date"),
        ("from_date=2026-03-02&to_date=2026-03-01", "from_date"),
    ] {
        let (status, problem) = shop
            .app
            .get(&format!("/returns?{query}"), &shop.manager)
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{query}");
    }
}

#[tokio::test]
async fn the_invariant_checks_catch_returns_that_do_not_add_up() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Calamine", "selling_price": 400}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 4)).await;
    for _ in 0..2 {
        let (status, _) = shop
            .give_back(&shop.pharmacist, &sale, back(&sale, 0, json!(1)))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    shop.app.assert_invariants().await;
    let client = shop.app.pool.get().await.unwrap();
    let broken = |sql: &'static str, expect: &'static str| {
        let client = &client;
        async move {
            client.batch_execute("BEGIN").await.unwrap();
            client.batch_execute(sql).await.unwrap();
            let found = domain::stock::invariant_violations(client).await.unwrap();
            client.batch_execute("ROLLBACK").await.unwrap();
            assert!(found.iter().any(|v| v.contains(expect)), "{sql}: {found:?}");
        }
    };
    // Units held on a line that its returns do not account for.
    broken("UPDATE sale_items SET returned_quantity = 3", "returned").await;
    // A credit note refunding more than its line cost.
    broken(
        "UPDATE sale_return_items SET line_total = line_total + 1000",
        "returned",
    )
    .await;
    // A gap in the credit note numbers, and a counter out of step.
    broken(
        "UPDATE sale_returns SET cn_seq = cn_seq + 5 WHERE cn_seq = 2",
        "cn_seq has a gap",
    )
    .await;
    broken(
        "UPDATE credit_note_counters SET last_cn_seq = 7",
        "credit note counter",
    )
    .await;
    // Stock that does not match its RETURN movements.
    broken(
        "DELETE FROM stock_movements WHERE kind = 'RETURN'",
        "movements sum",
    )
    .await;
}

#[tokio::test]
async fn a_pushed_return_keeps_the_rules_and_one_effect_per_device_mutation() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Nystatin", "selling_price": 600}), 10)
        .await;
    let sale = shop.sell(&shop.cashier, sale_of(&m, 4)).await;
    let (status, device) = shop
        .app
        .post(
            "/devices",
            &shop.admin,
            json!({"name": "Till 1", "branch_id": shop.branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{device}");
    let device: Uuid = s(&device["id"]).parse().unwrap();
    let mut payload = back(&sale, 0, json!(1));
    payload["sale_id"] = sale["id"].clone();
    let push = |cmid: &'static str, payload: Value, role: Role, user: Uuid| {
        let app = &shop.app;
        let branch = shop.branch;
        async move {
            let mut client = app.pool.get().await.unwrap();
            let tx = client.transaction().await.unwrap();
            let made =
                domain::returns::push_create(&tx, device, branch, user, role, cmid, &payload).await;
            if made.is_ok() {
                tx.commit().await.unwrap();
            }
            made
        }
    };
    // A cashier's pushed return waits for an approval, as over REST.
    let note = push("m-1", payload.clone(), Role::Cashier, shop.cashier_id)
        .await
        .unwrap();
    assert_eq!(note.status, "pending_approval");
    assert_eq!(note.device_id, Some(device));
    assert_eq!(note.client_mutation_id.as_deref(), Some("m-1"));
    // A pharmacist's is issued at once.
    let issued = push("m-2", payload.clone(), Role::Pharmacist, shop.pharmacist_id)
        .await
        .unwrap();
    assert_eq!(issued.status, "issued");
    assert_eq!(
        issued.credit_note_number.as_deref(),
        Some("KLA-CN-00000001")
    );
    // The same device and mutation id cannot take effect twice.
    let again = push("m-2", payload.clone(), Role::Pharmacist, shop.pharmacist_id).await;
    assert!(
        matches!(again, Err(domain::Error::Conflict(_))),
        "{again:?}"
    );
    // The same rules: nothing left to return, a payload without a sale.
    let mut three = back(&sale, 0, json!(3));
    three["sale_id"] = sale["id"].clone();
    let over = push("m-3", three, Role::Pharmacist, shop.pharmacist_id).await;
    assert!(
        matches!(&over, Err(domain::Error::Validation { field: Some(f), .. }) if f == "items[0].quantity"),
        "{over:?}"
    );
    let mut no_sale = payload.clone();
    no_sale.as_object_mut().unwrap().remove("sale_id");
    let bad = push("m-4", no_sale, Role::Pharmacist, shop.pharmacist_id).await;
    assert!(
        matches!(bad, Err(domain::Error::Validation { .. })),
        "{bad:?}"
    );
    let refused = push("m-5", payload, Role::Auditor, shop.pharmacist_id).await;
    assert!(
        matches!(refused, Err(domain::Error::Forbidden(_))),
        "{refused:?}"
    );
    assert_eq!(shop.scalar("SELECT count(*) FROM sale_returns").await, 2);
    shop.app.assert_invariants().await;
}
