//! Stock write-offs: all or nothing, never more than a batch holds (also
//! against a sale of the same last units), a witness for controlled
//! medicines, the destruction register, the expired-stock list and the
//! inventory report's losses.

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

struct Store {
    app: TestApp,
    branch: Uuid,
    admin: String,
    pharmacist: String,
    stock_keeper: String,
    stock_keeper_id: Uuid,
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

impl Store {
    async fn open() -> Store {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let (keeper, stock_keeper) = app.signed_in(branch, Role::InventoryManager).await;
        Store {
            app,
            branch,
            admin,
            pharmacist,
            stock_keeper,
            stock_keeper_id: keeper.id,
        }
    }

    async fn medicine(&self, body: Value) -> Value {
        self.app.medicine(&self.admin, body).await
    }

    /// A batch of `qty` units expiring on `expiry`, unit cost 100.
    async fn batch(&self, m: &Value, qty: i64, expiry: &str) -> Value {
        self.app
            .receive(&self.admin, &m["id"], self.branch, qty, expiry)
            .await
    }

    async fn write_off(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.app.post("/stock/write-offs", token, body).await
    }

    async fn remaining(&self, batch: &Value) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        let id: Uuid = s(&batch["id"]).parse().unwrap();
        client
            .query_one(
                "SELECT qty_remaining::bigint FROM batches WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap()
            .get(0)
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }
}

fn lines(items: &[(&Value, Value)]) -> Vec<Value> {
    items
        .iter()
        .map(|(b, q)| json!({"batch_id": b["id"], "quantity": q}))
        .collect()
}

#[tokio::test]
async fn a_write_off_takes_each_batch_down_with_a_write_off_movement() {
    let store = Store::open().await;
    let m = store
        .medicine(json!({"name": "Paracetamol", "selling_price": 500}))
        .await;
    let a = store.batch(&m, 10, "2030-01-31").await;
    let b = store.batch(&m, 6, "2031-01-31").await;
    let (status, w) = store
        .write_off(
            &store.stock_keeper,
            json!({"reason": "damaged", "items": lines(&[(&a, json!(4)), (&b, json!(6))]),
                   "notes": "Shelf collapsed"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["branch_id"], store.branch.to_string());
    assert_eq!(w["reason"], "damaged");
    assert_eq!(w["notes"], "Shelf collapsed");
    assert!(w["witness_name"].is_null());
    assert_eq!(w["created_by"], store.stock_keeper_id.to_string());
    assert!(w["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(w["total_value"], "1000.00");
    let items = w["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["batch_id"], a["id"]);
    assert_eq!(items[0]["medicine_id"], m["id"]);
    assert_eq!(items[0]["batch_number"], a["batch_number"]);
    assert_eq!(items[0]["quantity"], 4);
    assert_eq!(items[0]["unit_cost"], "100.00");
    assert_eq!(items[0]["value"], "400.00");
    assert_eq!(items[1]["value"], "600.00");
    assert_eq!(store.remaining(&a).await, 6);
    assert_eq!(store.remaining(&b).await, 0);
    assert_eq!(
        store
            .scalar("SELECT count(*) FROM stock_movements WHERE kind = 'WRITE_OFF' AND qty < 0")
            .await,
        2
    );
    let (status, read) = store
        .app
        .get(
            &format!("/stock/write-offs/{}", s(&w["id"])),
            &store.pharmacist,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read, w);
    let (status, list) = store.app.get("/stock/write-offs", &store.pharmacist).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 1);
    assert_eq!(list["page_size"], 20);
    assert_eq!(list["items"][0]["id"], w["id"]);
    let (_, none) = store
        .app
        .get(
            "/stock/write-offs?from_date=2000-01-01&to_date=2000-01-02",
            &store.pharmacist,
        )
        .await;
    assert_eq!(none["total"], 0);
    store.app.assert_invariants().await;
}

#[tokio::test]
async fn a_line_beyond_what_its_batch_holds_refuses_the_whole_write_off() {
    let store = Store::open().await;
    let m = store
        .medicine(json!({"name": "Amoxicillin", "selling_price": 900}))
        .await;
    let a = store.batch(&m, 10, "2030-01-31").await;
    let b = store.batch(&m, 3, "2031-01-31").await;
    let (status, problem) = store
        .write_off(
            &store.pharmacist,
            json!({"reason": "lost", "items": lines(&[(&a, json!(5)), (&b, json!(4))])}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[1].quantity");
    assert!(s(&problem["detail"]).contains("at most 3"), "{problem}");
    assert_eq!(store.remaining(&a).await, 10);
    assert_eq!(store.remaining(&b).await, 3);
    assert_eq!(store.scalar("SELECT count(*) FROM write_offs").await, 0);
    store.app.assert_invariants().await;
}

#[tokio::test]
async fn bad_write_offs_are_refused_naming_the_field_and_change_nothing() {
    let store = Store::open().await;
    let m = store
        .medicine(json!({"name": "Cetirizine", "selling_price": 200}))
        .await;
    let a = store.batch(&m, 10, "2030-01-31").await;
    let elsewhere = store.app.branch("EBB").await;
    let foreign = store
        .app
        .receive(&store.admin, &m["id"], elsewhere, 5, "2030-01-31")
        .await;
    let one =
        |q: Value| json!({"reason": "expired", "items": [{"batch_id": a["id"], "quantity": q}]});
    let cases = [
        (json!({"items": lines(&[(&a, json!(1))])}), "reason"),
        (
            json!({"reason": "stolen", "items": lines(&[(&a, json!(1))])}),
            "reason",
        ),
        (json!({"reason": "expired", "items": []}), "items"),
        (json!({"reason": "expired"}), "items"),
        (one(json!(0)), "items[0].quantity"),
        (one(json!(-2)), "items[0].quantity"),
        (one(json!(1.5)), "items[0].quantity"),
        (
            json!({"reason": "expired", "items": [{"batch_id": Uuid::now_v7(), "quantity": 1}]}),
            "items[0].batch_id",
        ),
        (
            json!({"reason": "expired", "items": lines(&[(&foreign, json!(1))])}),
            "items[0].batch_id",
        ),
        (
            json!({"reason": "expired", "items": lines(&[(&a, json!(1)), (&a, json!(2))])}),
            "items[1].batch_id",
        ),
        (
            json!({"reason": "expired", "items": lines(&[(&a, json!(1))]), "notes": "n".repeat(2001)}),
            "notes",
        ),
        (
            json!({"reason": "expired", "items": lines(&[(&a, json!(1))]),
                   "witness_name": "w".repeat(201)}),
            "witness_name",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = store.write_off(&store.pharmacist, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    assert_eq!(store.scalar("SELECT count(*) FROM write_offs").await, 0);
    assert_eq!(store.remaining(&a).await, 10);
    assert_eq!(store.remaining(&foreign).await, 5);
}

#[tokio::test]
async fn write_offs_obey_roles_and_branches() {
    let store = Store::open().await;
    let m = store
        .medicine(json!({"name": "Ibuprofen", "selling_price": 300}))
        .await;
    let a = store.batch(&m, 20, "2030-01-31").await;
    let body = json!({"reason": "damaged", "items": lines(&[(&a, json!(1))])});
    for role in [Role::Cashier, Role::Auditor] {
        let (_, token) = store.app.signed_in(store.branch, role).await;
        let (status, problem) = store.write_off(&token, body.clone()).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    for role in [
        Role::BranchManager,
        Role::InventoryManager,
        Role::Pharmacist,
    ] {
        let (_, token) = store.app.signed_in(store.branch, role).await;
        let (status, w) = store.write_off(&token, body.clone()).await;
        assert_eq!(status, StatusCode::CREATED, "{role}: {w}");
    }
    // A branch user may not name another branch; an admin may.
    let other = store.app.branch("EBB").await;
    let theirs = store
        .app
        .receive(&store.admin, &m["id"], other, 5, "2030-01-31")
        .await;
    let mut there = json!({"reason": "damaged", "items": lines(&[(&theirs, json!(1))])});
    there["branch_id"] = json!(other);
    let (status, problem) = store.write_off(&store.stock_keeper, there.clone()).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (status, w) = store.write_off(&store.admin, there).await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["branch_id"], other.to_string());
    // Lists and reads stay within the branch.
    let (_, mine) = store
        .app
        .get("/stock/write-offs", &store.stock_keeper)
        .await;
    assert_eq!(mine["total"], 3);
    let (status, _) = store
        .app
        .get(
            &format!("/stock/write-offs/{}", s(&w["id"])),
            &store.stock_keeper,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = store
        .app
        .get(
            &format!("/stock/write-offs?branch_id={other}"),
            &store.stock_keeper,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, all) = store.app.get("/stock/write-offs", &store.admin).await;
    assert_eq!(all["total"], 4);
    store.app.assert_invariants().await;
}

#[tokio::test]
async fn controlled_lines_need_a_witness_and_fill_the_destruction_register() {
    let store = Store::open().await;
    let morphine = store
        .medicine(
            json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                         "requires_prescription": true, "control_schedule": "Class A"}),
        )
        .await;
    let plain = store
        .medicine(json!({"name": "Zinc", "selling_price": 100}))
        .await;
    let c = store.batch(&morphine, 10, "2030-01-31").await;
    let p = store.batch(&plain, 10, "2030-01-31").await;
    let body = json!({"reason": "expired", "items": lines(&[(&p, json!(2)), (&c, json!(3))])});
    let (status, problem) = store.write_off(&store.pharmacist, body.clone()).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "witness_name");
    let mut blank = body.clone();
    blank["witness_name"] = json!("   ");
    let (status, problem) = store.write_off(&store.pharmacist, blank).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "witness_name");
    assert_eq!(store.remaining(&c).await, 10);
    assert_eq!(store.remaining(&p).await, 10);
    let mut witnessed = body;
    witnessed["witness_name"] = json!("Inspector Nakato");
    let (status, w) = store.write_off(&store.pharmacist, witnessed).await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["witness_name"], "Inspector Nakato");
    assert_eq!(w["items"][1]["is_controlled"], true);
    assert_eq!(w["items"][0]["is_controlled"], false);
    // The register: only the controlled line, with everything an inspector asks.
    let (status, book) = store
        .app
        .get("/compliance/destruction-register", &store.stock_keeper)
        .await;
    assert_eq!(status, StatusCode::OK, "{book}");
    assert_eq!(book["total"], 1);
    assert_eq!(book["page_size"], 50);
    assert!(s(&book["retention_note"]).contains("controlled"), "{book}");
    let row = &book["items"][0];
    assert_eq!(row["medicine_name"], "Morphine 10mg");
    assert_eq!(row["control_schedule"], "Class A");
    assert_eq!(row["batch_id"], c["id"]);
    assert_eq!(row["batch_number"], c["batch_number"]);
    assert_eq!(row["quantity"], 3);
    assert_eq!(row["reason"], "expired");
    assert_eq!(row["witness_name"], "Inspector Nakato");
    assert!(row["written_off_by_name"]
        .as_str()
        .unwrap()
        .starts_with("Test"));
    assert_eq!(row["write_off_id"], w["id"]);
    assert!(row["written_off_at"].is_string());
    // CSV, like the other books.
    let res = store
        .app
        .http
        .get(format!(
            "{}/compliance/destruction-register",
            store.app.base
        ))
        .header("Accept", "text/csv")
        .bearer_auth(&store.pharmacist)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let csv = res.text().await.unwrap();
    let mut csv_lines = csv.lines();
    assert_eq!(
        csv_lines.next().unwrap(),
        "id,write_off_id,branch_id,written_off_at,medicine_id,medicine_name,control_schedule,\
         batch_id,batch_number,quantity,reason,witness_name,witness_kind,witness_user_id,\
         written_off_by_name"
    );
    assert!(csv_lines.next().unwrap().contains("Inspector Nakato"));
    let (status, problem) = store
        .app
        .get("/compliance/destruction-register?format=xml", &store.admin)
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "format");
    // Other branches' registers stay out.
    let other = store.app.branch("EBB").await;
    let (_, stranger) = store.app.signed_in(other, Role::BranchManager).await;
    let (_, theirs) = store
        .app
        .get("/compliance/destruction-register", &stranger)
        .await;
    assert_eq!(theirs["total"], 0);
    // The database refuses a controlled line without a witness, whoever writes.
    let client = store.app.pool.get().await.unwrap();
    let err = client
        .execute(
            "UPDATE write_off_items SET witness_name = '' WHERE is_controlled",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION)
    );
    store.app.assert_invariants().await;
}

#[tokio::test]
async fn expired_stock_is_listed_at_cost_and_written_off_in_one_request() {
    let store = Store::open().await;
    let m = store
        .medicine(json!({"name": "Amoxyl syrup", "selling_price": 1500}))
        .await;
    let n = store
        .medicine(json!({"name": "Vitamin B", "selling_price": 700}))
        .await;
    let old = store.batch(&m, 4, "2020-01-31").await;
    let older = store.batch(&n, 2, "2019-06-30").await;
    let fresh = store.batch(&m, 9, "2031-01-31").await;
    let (status, list) = store.app.get("/stock/expired", &store.stock_keeper).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["branch_id"], store.branch.to_string());
    assert_eq!(list["total"], 2);
    assert_eq!(list["total_value"], "600.00");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items[0]["batch_id"], older["id"], "oldest expiry first");
    assert_eq!(items[1]["batch_id"], old["id"]);
    assert_eq!(items[1]["quantity"], 4);
    assert_eq!(items[1]["unit_cost"], "100.00");
    assert_eq!(items[1]["value"], "400.00");
    assert_eq!(items[1]["expiry_date"], "2020-01-31");
    assert!(items.iter().all(|b| b["batch_id"] != fresh["id"]));
    let (_, before) = store.app.get("/reports/inventory", &store.admin).await;
    assert_eq!(before["expired_value"], 600.0, "{before}");
    assert_eq!(before["written_off_value"], 0.0);
    // One request writes them all off, straight from the list.
    let all: Vec<Value> = items
        .iter()
        .map(|b| json!({"batch_id": b["batch_id"], "quantity": b["quantity"]}))
        .collect();
    let (status, w) = store
        .write_off(
            &store.stock_keeper,
            json!({"reason": "expired", "items": all}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["total_value"], list["total_value"]);
    let (_, after) = store.app.get("/stock/expired", &store.stock_keeper).await;
    assert_eq!(after["total"], 0);
    let (_, report) = store.app.get("/reports/inventory", &store.admin).await;
    assert_eq!(report["expired_value"], 0.0);
    assert_eq!(report["written_off_value"], 600.0);
    let (_, long_ago) = store
        .app
        .get(
            "/reports/inventory?from_date=2020-01-01&to_date=2020-12-31",
            &store.admin,
        )
        .await;
    assert_eq!(long_ago["written_off_value"], 0.0);
    // A branch user lists only its own branch.
    let other = store.app.branch("EBB").await;
    let (status, _) = store
        .app
        .get(
            &format!("/stock/expired?branch_id={other}"),
            &store.stock_keeper,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    store.app.assert_invariants().await;
}

#[tokio::test]
async fn a_write_off_racing_a_sale_of_the_last_units_never_takes_a_batch_below_zero() {
    let store = Store::open().await;
    let other = store.app.second_process();
    let (_, cashier) = store.app.signed_in(store.branch, Role::Cashier).await;
    let m = store
        .medicine(json!({"name": "Salbutamol", "selling_price": 900}))
        .await;
    for round in 0..6 {
        let batch = store.batch(&m, 5, "2030-01-31").await;
        let base = if round % 2 == 0 {
            store.app.base.clone()
        } else {
            other.base.clone()
        };
        let write_off = store
            .app
            .http
            .post(format!("{base}/stock/write-offs"))
            .bearer_auth(&store.stock_keeper)
            .json(
                &json!({"reason": "damaged", "items": [{"batch_id": batch["id"], "quantity": 5}]}),
            )
            .send();
        let sale = store
            .app
            .http
            .post(format!("{}/sales", store.app.base))
            .bearer_auth(&cashier)
            .json(&json!({"items": [{"medicine_id": m["id"], "quantity": 5}], "payment_method": "cash"}))
            .send();
        let (w, sold) = tokio::join!(write_off, sale);
        let (w, sold) = (w.unwrap().status(), sold.unwrap().status());
        match (w, sold) {
            (StatusCode::CREATED, StatusCode::BAD_REQUEST)
            | (StatusCode::BAD_REQUEST, StatusCode::CREATED) => {}
            other => panic!("round {round}: write-off and sale: {other:?}"),
        }
        assert_eq!(store.remaining(&batch).await, 0);
    }
    // Many write-offs of one unit at once: exactly what the batch holds.
    let batch = store.batch(&m, 7, "2030-01-31").await;
    let bases = [store.app.base.clone(), other.base.clone()];
    let tries = (0..20).map(|i| {
        let req = store
            .app
            .http
            .post(format!("{}/stock/write-offs", bases[i % 2]))
            .bearer_auth(&store.stock_keeper)
            .json(&json!({"reason": "lost", "items": [{"batch_id": batch["id"], "quantity": 1}]}));
        async move { req.send().await.unwrap().status() }
    });
    let statuses = join_all(tries).await;
    let made = statuses
        .iter()
        .filter(|st| **st == StatusCode::CREATED)
        .count();
    assert_eq!(made, 7, "{statuses:?}");
    assert!(statuses
        .iter()
        .all(|st| *st == StatusCode::CREATED || *st == StatusCode::BAD_REQUEST));
    assert_eq!(store.remaining(&batch).await, 0);
    store.app.assert_invariants().await;
}
