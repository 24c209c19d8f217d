//! Purchase orders: drafting (by hand and from the reorder suggestions),
//! numbering per branch, the moves between states and their refusals,
//! who may do what, and what a refused request leaves as it was.
//!
//! Here the shop every test starts from, drafting and the list; the moves
//! in `moves`, the draft from the reorder list in `reorder`.

mod moves;
mod reorder;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{Role, TestApp};

/// A branch with its admin, a buyer (inventory manager), two managers, a
/// supplier and two medicines.
pub struct Shop {
    pub app: TestApp,
    pub branch: Uuid,
    pub admin: String,
    pub buyer: String,
    pub manager: String,
    pub manager_id: Uuid,
    pub second_manager: String,
    pub supplier: Uuid,
    pub medicines: Vec<String>,
}

pub async fn shop() -> Shop {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, buyer) = app.signed_in(branch, Role::InventoryManager).await;
    let (manager_user, manager) = app.signed_in(branch, Role::BranchManager).await;
    let (_, second_manager) = app.signed_in(branch, Role::BranchManager).await;
    let supplier = app.supplier("Quality Chemicals").await;
    let mut medicines = Vec::new();
    for name in ["Amoxicillin 500mg", "Paracetamol 500mg"] {
        let m = app
            .medicine(&admin, json!({"name": name, "selling_price": 1000}))
            .await;
        medicines.push(m["id"].as_str().unwrap().to_owned());
    }
    Shop {
        app,
        branch,
        admin,
        buyer,
        manager,
        manager_id: manager_user.id,
        second_manager,
        supplier,
        medicines,
    }
}

impl Shop {
    pub fn order(&self) -> Value {
        json!({"supplier_id": self.supplier, "expected_date": "2026-12-15", "notes": "Monthly",
               "lines": [{"medicine_id": self.medicines[0], "quantity": 100, "unit_cost": "450.00"},
                         {"medicine_id": self.medicines[1], "quantity": 3, "unit_cost": 12.5}]})
    }

    pub async fn create(&self, token: &str, body: Value) -> Value {
        let (status, order) = self.app.post("/purchase-orders", token, body).await;
        assert_eq!(status, StatusCode::CREATED, "{order}");
        order
    }

    pub async fn step(&self, token: &str, order: &Value, step: &str) -> (StatusCode, Value) {
        let path = format!("/purchase-orders/{}/{step}", text(&order["id"]));
        self.app.call(Method::POST, &path, Some(token), None).await
    }

    pub async fn step_ok(&self, token: &str, order: &Value, step: &str) -> Value {
        let (status, body) = self.step(token, order, step).await;
        assert_eq!(status, StatusCode::OK, "{step}: {body}");
        body
    }

    pub async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    /// What a refused request must leave as it was.
    pub async fn written(&self) -> (i64, i64, i64) {
        (
            self.scalar("SELECT count(*) FROM purchase_orders").await,
            self.scalar("SELECT count(*) FROM purchase_order_lines")
                .await,
            self.scalar("SELECT coalesce(sum(last_seq), 0)::bigint FROM purchase_order_counters")
                .await,
        )
    }

    /// Goods received against the order's first line: a goods received
    /// note drafted and posted.
    pub async fn receive_first_line(&self, order: &Value, received: i32) {
        let line = &order["lines"][0];
        let note = json!({"supplier_id": order["supplier_id"], "purchase_order_id": order["id"],
                          "delivery_reference": format!("DN-{}", Uuid::now_v7().simple()),
                          "lines": [{"purchase_order_line_id": line["id"],
                                     "medicine_id": line["medicine_id"],
                                     "batch_number": "AMX-1", "expiry_date": "2035-01-01",
                                     "quantity_received": received, "unit_cost": line["unit_cost"]}]});
        let (status, note) = self.app.post("/goods-received", &self.buyer, note).await;
        assert_eq!(status, StatusCode::CREATED, "{note}");
        let path = format!("/goods-received/{}/post", text(&note["id"]));
        let (status, posted) = self.app.post(&path, &self.buyer, json!({})).await;
        assert_eq!(status, StatusCode::OK, "{posted}");
    }
}

pub fn text(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}

pub fn refused(status: StatusCode, body: &Value, want: StatusCode, field: Option<&str>) {
    assert_eq!(status, want, "{body}");
    if let Some(f) = field {
        assert_eq!(body["code"], "validation_failed", "{body}");
        assert_eq!(body["field"], f, "{body}");
    }
}

#[tokio::test]
async fn a_draft_is_numbered_per_branch_and_totals_its_lines() {
    let s = shop().await;
    let order = s.create(&s.buyer, s.order()).await;
    assert_eq!(order["status"], "draft");
    assert_eq!(order["po_number"], "KLA-PO-000001");
    assert_eq!(order["branch_id"], s.branch.to_string());
    assert_eq!(order["supplier_id"], s.supplier.to_string());
    assert_eq!(order["expected_date"], "2026-12-15");
    assert_eq!(order["notes"], "Monthly");
    assert_eq!(order["total"], "45037.50");
    assert!(order["created_by"].is_string() && order["created_at"].is_string());
    assert!(order["updated_at"].is_string());
    let line = &order["lines"][0];
    assert_eq!(line["medicine_id"], s.medicines[0].as_str());
    assert_eq!(line["pack_id"], Value::Null);
    assert_eq!(line["pack_units"], 1);
    assert_eq!(line["quantity_ordered"], 100);
    assert_eq!(line["quantity_received"], 0);
    assert_eq!(line["quantity_rejected"], 0);
    assert_eq!(line["quantity_invoiced"], 0);
    assert_eq!(line["outstanding"], 100);
    assert_eq!(line["unit_cost"], "450.00");
    assert_eq!(line["line_total"], "45000.00");
    assert_eq!(order["lines"][1]["line_total"], "37.50");

    // The next order of the branch takes the next number; another branch
    // counts on its own.
    let second = s.create(&s.manager, s.order()).await;
    assert_eq!(second["po_number"], "KLA-PO-000002");
    let other = s.app.branch("EBB").await;
    let mut body = s.order();
    body["branch_id"] = json!(other);
    let elsewhere = s.create(&s.admin, body).await;
    assert_eq!(elsewhere["po_number"], "EBB-PO-000001");
    assert_eq!(elsewhere["branch_id"], other.to_string());

    // Read back as created.
    let (status, read) = s
        .app
        .get(
            &format!("/purchase-orders/{}", text(&order["id"])),
            &s.buyer,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read, order);
}

#[tokio::test]
async fn a_line_by_pack_counts_base_units_and_costs_per_pack() {
    let s = shop().await;
    let path = format!("/medicines/{}/packs", s.medicines[0]);
    let (status, pack) = s
        .app
        .post(&path, &s.admin, json!({"name": "box", "units": 10}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{pack}");
    let order = s
        .create(
            &s.buyer,
            json!({"supplier_id": s.supplier,
                   "lines": [{"medicine_id": s.medicines[0], "pack_id": pack["id"],
                              "quantity": 5, "unit_cost": "120.00"}]}),
        )
        .await;
    let line = &order["lines"][0];
    assert_eq!(line["pack_id"], pack["id"]);
    assert_eq!(line["pack_units"], 10);
    assert_eq!(line["packs_ordered"], 5);
    assert_eq!(line["quantity_ordered"], 50);
    assert_eq!(line["outstanding"], 50);
    assert_eq!(line["unit_cost"], "120.00");
    assert_eq!(line["line_total"], "600.00");
    assert_eq!(order["total"], "600.00");
    // A pack of another medicine is no pack of this one.
    let (status, body) = s
        .app
        .post(
            "/purchase-orders",
            &s.buyer,
            json!({"supplier_id": s.supplier,
                   "lines": [{"medicine_id": s.medicines[1], "pack_id": pack["id"],
                              "quantity": 1, "unit_cost": 1}]}),
        )
        .await;
    refused(
        status,
        &body,
        StatusCode::BAD_REQUEST,
        Some("lines[0].pack_id"),
    );
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    let s = shop().await;
    s.create(&s.buyer, s.order()).await;
    let before = s.written().await;
    let unknown = Uuid::now_v7();
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let mut with = |change: &dyn Fn(&mut Value), field: &'static str| {
        let mut body = s.order();
        change(&mut body);
        cases.push((body, field));
    };
    with(&|b| b["supplier_id"] = json!(unknown), "supplier_id");
    with(
        &|b| b["lines"][1]["medicine_id"] = json!(unknown),
        "lines[1].medicine_id",
    );
    with(
        &|b| b["lines"][0]["pack_id"] = json!(unknown),
        "lines[0].pack_id",
    );
    with(
        &|b| b["lines"][0]["quantity"] = json!(0),
        "lines[0].quantity",
    );
    with(
        &|b| b["lines"][1]["quantity"] = json!(-3),
        "lines[1].quantity",
    );
    with(
        &|b| b["lines"][0]["quantity"] = json!(1.5),
        "lines[0].quantity",
    );
    with(
        &|b| b["lines"][0]["unit_cost"] = json!("-1.00"),
        "lines[0].unit_cost",
    );
    with(
        &|b| b["lines"][0]["unit_cost"] = json!("1.23456"),
        "lines[0].unit_cost",
    );
    with(
        &|b| b["expected_date"] = json!("2026-13-40"),
        "expected_date",
    );
    with(
        &|b| b["expected_date"] = json!("next week"),
        "expected_date",
    );
    with(&|b| b["lines"] = json!([]), "lines");
    with(
        &|b| {
            let line = b["lines"][0].clone();
            b["lines"] = Value::Array(vec![line; 201]);
        },
        "lines",
    );
    with(
        &|b| b["lines"][1]["medicine_id"] = b["lines"][0]["medicine_id"].clone(),
        "lines[1].medicine_id",
    );
    with(&|b| b["notes"] = json!("x".repeat(2001)), "notes");
    for (body, field) in cases {
        let (status, answer) = s.app.post("/purchase-orders", &s.buyer, body).await;
        refused(status, &answer, StatusCode::BAD_REQUEST, Some(field));
    }
    assert_eq!(s.written().await, before);
    // A unit cost as a number or a decimal string, 4 places at most.
    let mut body = s.order();
    body["lines"][0]["unit_cost"] = json!("0.1250");
    body["lines"][1]["unit_cost"] = json!(0);
    let order = s.create(&s.buyer, body).await;
    assert_eq!(order["lines"][0]["unit_cost"], "0.1250");
    assert_eq!(order["lines"][0]["line_total"], "12.50");
    assert_eq!(order["lines"][1]["line_total"], "0.00");
}

#[tokio::test]
async fn the_list_filters_and_pages_newest_first() {
    let s = shop().await;
    let other_supplier = s.app.supplier("Abacus").await;
    let mut made = Vec::new();
    for i in 0..23 {
        let mut body = s.order();
        if i % 2 == 1 {
            body["supplier_id"] = json!(other_supplier);
        }
        made.push(s.create(&s.buyer, body).await);
    }
    s.step_ok(&s.buyer, &made[0], "submit").await;
    let other = s.app.branch("EBB").await;
    let mut body = s.order();
    body["branch_id"] = json!(other);
    s.create(&s.admin, body).await;

    let (status, first) = s.app.get("/purchase-orders", &s.buyer).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["total"], 23);
    assert_eq!(first["page"], 1);
    assert_eq!(first["page_size"], 20);
    let items = first["items"].as_array().unwrap();
    assert_eq!(items.len(), 20);
    assert_eq!(items[0]["id"], made[22]["id"]);
    assert_eq!(items[0]["lines"].as_array().unwrap().len(), 2);
    let (_, second) = s.app.get("/purchase-orders?page=2", &s.buyer).await;
    assert_eq!(second["items"].as_array().unwrap().len(), 3);
    assert_eq!(second["items"][2]["id"], made[0]["id"]);

    let (_, submitted) = s
        .app
        .get("/purchase-orders?status=SUBMITTED", &s.buyer)
        .await;
    assert_eq!(submitted["total"], 1);
    assert_eq!(submitted["items"][0]["id"], made[0]["id"]);
    let (_, theirs) = s
        .app
        .get(
            &format!("/purchase-orders?supplier_id={other_supplier}"),
            &s.buyer,
        )
        .await;
    assert_eq!(theirs["total"], 11);
    // An admin sees every branch, or the one named.
    let (_, all) = s.app.get("/purchase-orders", &s.admin).await;
    assert_eq!(all["total"], 24);
    let (_, one) = s
        .app
        .get(&format!("/purchase-orders?branch_id={other}"), &s.admin)
        .await;
    assert_eq!(one["total"], 1);
    let (status, body) = s.app.get("/purchase-orders?status=lost", &s.buyer).await;
    refused(status, &body, StatusCode::BAD_REQUEST, Some("status"));
}

#[tokio::test]
async fn concurrent_drafts_of_a_branch_take_consecutive_numbers() {
    let s = shop().await;
    let calls = (0..10).map(|_| s.app.post("/purchase-orders", &s.buyer, s.order()));
    let mut numbers: Vec<String> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|(status, body)| {
            assert_eq!(status, StatusCode::CREATED, "{body}");
            text(&body["po_number"])
        })
        .collect();
    numbers.sort();
    let expected: Vec<String> = (1..=10).map(|n| format!("KLA-PO-{n:06}")).collect();
    assert_eq!(numbers, expected);
}
