use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

fn id(v: &Value) -> Uuid {
    Uuid::parse_str(v["id"].as_str().unwrap()).unwrap()
}

async fn remaining(app: &TestApp, batch: Uuid) -> i32 {
    app.pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT qty_remaining FROM batches WHERE id = $1", &[&batch])
        .await
        .unwrap()
        .get(0)
}

async fn on_hand(app: &TestApp, medicine: &Value, branch: Uuid) -> i64 {
    let m = id(medicine);
    app.pool
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT coalesce(sum(qty_remaining), 0)::bigint FROM batches
             WHERE medicine_id = $1 AND branch_id = $2",
            &[&m, &branch],
        )
        .await
        .unwrap()
        .get(0)
}

/// Two branches, a medicine with two batches at A (the later-expiring one
/// received first), and the people who move stock.
struct Setup {
    app: TestApp,
    a: Uuid,
    b: Uuid,
    admin: String,
    manager_a: String,
    manager_b: String,
    medicine: Value,
    late: Value,
    early: Value,
}

async fn setup() -> Setup {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, manager_a) = app.signed_in(a, Role::BranchManager).await;
    let (_, manager_b) = app.signed_in(b, Role::InventoryManager).await;
    let medicine = app
        .medicine(&admin, json!({"name": "Artemether", "selling_price": 5000}))
        .await;
    let late = app
        .receive(&admin, &medicine["id"], a, 5, "2031-06-30")
        .await;
    let early = app
        .receive(&admin, &medicine["id"], a, 10, "2030-01-31")
        .await;
    Setup {
        app,
        a,
        b,
        admin,
        manager_a,
        manager_b,
        medicine,
        late,
        early,
    }
}

impl Setup {
    async fn send(&self, token: &str, qty: i64) -> (StatusCode, Value) {
        self.app
            .post(
                "/transfers",
                token,
                json!({"medicine_id": self.medicine["id"], "from_branch_id": self.a,
                       "to_branch_id": self.b, "qty": qty, "notes": "weekend cover"}),
            )
            .await
    }
}

fn assert_transfer_shape(t: &Value) {
    for field in [
        "id",
        "medicine_id",
        "from_branch_id",
        "to_branch_id",
        "status",
        "notes",
        "created_at",
        "medicine_name",
        "from_branch",
        "to_branch",
        "created_by_name",
    ] {
        assert!(t[field].is_string(), "{field} is a string: {t}");
    }
    assert!(t["qty"].is_i64(), "qty is an integer: {t}");
    assert!(t.get("received_at").is_some() && t.get("cancelled_at").is_some());
}

#[tokio::test]
async fn create_moves_stock_out_fefo_and_receive_puts_it_in_at_the_destination() {
    let s = setup().await;
    let app = &s.app;
    let (status, t) = s.send(&s.manager_a, 12).await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    assert_transfer_shape(&t);
    assert_eq!(t["status"], "in_transit");
    assert_eq!(t["qty"], 12);
    assert_eq!(t["medicine_name"], "Artemether");
    assert_eq!(t["from_branch"], "Branch A");
    assert_eq!(t["to_branch"], "Branch B");
    assert_eq!(t["from_branch_id"], s.a.to_string());
    assert_eq!(t["to_branch_id"], s.b.to_string());
    assert_eq!(t["created_by_name"], "Test branch_manager");
    assert_eq!(t["notes"], "weekend cover");
    assert!(t["received_at"].is_null() && t["cancelled_at"].is_null());
    // First expiry first out: all 10 of the early batch, then 2 of the late one.
    assert_eq!(remaining(app, id(&s.early)).await, 0);
    assert_eq!(remaining(app, id(&s.late)).await, 3);
    assert_eq!(on_hand(app, &s.medicine, s.b).await, 0, "in transit");

    let client = app.pool.get().await.unwrap();
    let tid = id(&t);
    let lines: Vec<(Uuid, i32)> = client
        .query(
            "SELECT source_batch_id, qty FROM transfer_lines WHERE transfer_id = $1 ORDER BY qty",
            &[&tid],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(lines, [(id(&s.late), 2), (id(&s.early), 10)]);
    let out: i64 = client
        .query_one(
            "SELECT sum(qty)::bigint FROM stock_movements WHERE kind = 'TRANSFER_OUT' AND reference_id = $1",
            &[&tid],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(out, -12);

    // The source branch cannot receive its own outgoing transfer.
    let path = format!("/transfers/{tid}/receive");
    let (status, problem) = app.post(&path, &s.manager_a, json!({})).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);

    let (status, r) = app.post(&path, &s.manager_b, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_transfer_shape(&r);
    assert_eq!(r["status"], "received");
    assert!(r["received_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(on_hand(app, &s.medicine, s.b).await, 12);
    assert_eq!(on_hand(app, &s.medicine, s.a).await, 3);
    // Each line became a batch at B with the source's number, expiry and cost.
    let copies = client
        .query(
            "SELECT d.qty_remaining, d.origin, d.batch_number = s.batch_number,
                    d.expiry_date = s.expiry_date, d.unit_cost = s.unit_cost,
                    d.supplier_id IS NOT DISTINCT FROM s.supplier_id
             FROM transfer_lines l
             JOIN batches s ON s.id = l.source_batch_id
             JOIN batches d ON d.id = l.dest_batch_id
             WHERE l.transfer_id = $1 AND d.branch_id = $2 ORDER BY d.qty_remaining",
            &[&tid, &s.b],
        )
        .await
        .unwrap();
    assert_eq!(copies.len(), 2);
    for (row, qty) in copies.iter().zip([2, 10]) {
        assert_eq!(row.get::<_, i32>(0), qty);
        assert_eq!(row.get::<_, String>(1), "transfer");
        for col in 2..6 {
            assert!(row.get::<_, bool>(col), "column {col} copied");
        }
    }

    // Received is final.
    let (status, problem) = app.post(&path, &s.manager_b, json!({})).await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    let (status, problem) = app
        .post(&format!("/transfers/{tid}/cancel"), &s.admin, json!({}))
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    app.assert_invariants().await;
}

#[tokio::test]
async fn cancel_returns_the_stock_to_the_source_batches() {
    let s = setup().await;
    let app = &s.app;
    let (_, t) = s.send(&s.manager_a, 12).await;
    let tid = id(&t);
    // Either end may cancel; here the destination.
    let (status, c) = app
        .post(&format!("/transfers/{tid}/cancel"), &s.manager_b, json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{c}");
    assert_transfer_shape(&c);
    assert_eq!(c["status"], "cancelled");
    assert!(c["cancelled_at"].is_string());
    assert!(c["received_at"].is_null());
    assert_eq!(remaining(app, id(&s.early)).await, 10);
    assert_eq!(remaining(app, id(&s.late)).await, 5);
    assert_eq!(on_hand(app, &s.medicine, s.b).await, 0);
    let client = app.pool.get().await.unwrap();
    let back: i64 = client
        .query_one(
            "SELECT sum(qty)::bigint FROM stock_movements WHERE kind = 'TRANSFER_CANCEL' AND reference_id = $1",
            &[&tid],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(back, 12);

    let (status, problem) = app
        .post(
            &format!("/transfers/{tid}/receive"),
            &s.manager_b,
            json!({}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    let (status, problem) = app
        .post(&format!("/transfers/{tid}/cancel"), &s.manager_a, json!({}))
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    assert_eq!(on_hand(app, &s.medicine, s.b).await, 0);
    app.assert_invariants().await;
}

#[tokio::test]
async fn concurrent_receive_and_cancel_move_the_stock_once() {
    let s = setup().await;
    let app = &s.app;
    let (_, t) = s.send(&s.admin, 15).await;
    let tid = id(&t);
    let receive_path = format!("/transfers/{tid}/receive");
    let cancel_path = format!("/transfers/{tid}/cancel");
    let (r, c) = tokio::join!(
        app.post(&receive_path, &s.manager_b, json!({})),
        app.post(&cancel_path, &s.manager_a, json!({})),
    );
    let statuses = [r.0, c.0];
    assert!(
        statuses.contains(&StatusCode::OK) && statuses.contains(&StatusCode::CONFLICT),
        "one wins, one is refused: {statuses:?} {} {}",
        r.1,
        c.1
    );
    let total = on_hand(app, &s.medicine, s.a).await + on_hand(app, &s.medicine, s.b).await;
    assert_eq!(total, 15, "stock neither lost nor doubled");
    app.assert_invariants().await;
}

#[tokio::test]
async fn not_enough_sellable_stock_is_a_400_and_nothing_changes() {
    let s = setup().await;
    let app = &s.app;
    let (status, problem) = s.send(&s.manager_a, 16).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "qty");
    // Quarantined stock is not sellable, so not transferable either.
    app.pool
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE batches SET regulator_status = 'quarantined' WHERE id = $1",
            &[&id(&s.early)],
        )
        .await
        .unwrap();
    let (status, problem) = s.send(&s.manager_a, 6).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(remaining(app, id(&s.early)).await, 10);
    assert_eq!(remaining(app, id(&s.late)).await, 5);
    let client = app.pool.get().await.unwrap();
    for table in ["transfers", "transfer_lines"] {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
    let (status, t) = s.send(&s.manager_a, 5).await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    assert_eq!(remaining(app, id(&s.late)).await, 0);
    assert_eq!(remaining(app, id(&s.early)).await, 10);
    app.assert_invariants().await;
}

#[tokio::test]
async fn invalid_transfers_are_refused() {
    let s = setup().await;
    let app = &s.app;
    let c = app.branch("C").await;
    let m = &s.medicine["id"];
    let cases = [
        (
            json!({"medicine_id": m, "from_branch_id": s.a, "to_branch_id": s.a, "qty": 1}),
            "to_branch_id",
        ),
        (
            json!({"medicine_id": m, "from_branch_id": s.a, "to_branch_id": s.b, "qty": 0}),
            "qty",
        ),
        (
            json!({"medicine_id": m, "from_branch_id": s.a, "to_branch_id": s.b, "qty": 1.5}),
            "qty",
        ),
        (
            json!({"medicine_id": Uuid::now_v7(), "from_branch_id": s.a, "to_branch_id": s.b, "qty": 1}),
            "medicine_id",
        ),
        (
            json!({"medicine_id": m, "from_branch_id": s.a, "to_branch_id": Uuid::now_v7(), "qty": 1}),
            "to_branch_id",
        ),
        (
            json!({"medicine_id": m, "from_branch_id": s.a, "qty": 1}),
            "to_branch_id",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = app.post("/transfers", &s.admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
    }
    // A non-admin sends only from its own branch.
    let (status, problem) = app
        .post(
            "/transfers",
            &s.manager_b,
            json!({"medicine_id": m, "from_branch_id": s.a, "to_branch_id": c, "qty": 1}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    for role in [Role::Cashier, Role::Pharmacist, Role::Auditor] {
        let (_, token) = app.signed_in(s.a, role).await;
        let (status, problem) = s.send(&token, 1).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    assert_eq!(on_hand(app, &s.medicine, s.a).await, 15);
}

#[tokio::test]
async fn strangers_see_404_and_unknown_ids_are_404() {
    let s = setup().await;
    let app = &s.app;
    let c = app.branch("C").await;
    let (_, stranger) = app.signed_in(c, Role::BranchManager).await;
    let (_, t) = s.send(&s.manager_a, 1).await;
    let tid = id(&t);
    for path in [
        format!("/transfers/{tid}/receive"),
        format!("/transfers/{tid}/cancel"),
    ] {
        let (status, problem) = app.post(&path, &stranger, json!({})).await;
        assert_problem(status, &problem, StatusCode::NOT_FOUND);
    }
    let (status, problem) = app.get(&format!("/transfers/{tid}"), &stranger).await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    let (status, read) = app.get(&format!("/transfers/{tid}"), &s.manager_b).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["id"], t["id"]);
    let (status, problem) = app
        .post(
            &format!("/transfers/{}/receive", Uuid::now_v7()),
            &s.admin,
            json!({}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    let (status, problem) = app
        .post("/transfers/not-an-id/cancel", &s.admin, json!({}))
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    app.assert_invariants().await;
}

#[tokio::test]
async fn the_list_filters_by_branch_and_day_newest_first() {
    let s = setup().await;
    let app = &s.app;
    let c = app.branch("C").await;
    let (_, first) = s.send(&s.manager_a, 1).await;
    let (_, second) = s.send(&s.manager_a, 2).await;
    // A transfer between B and C only.
    let other = app
        .medicine(&s.admin, json!({"name": "Quinine", "selling_price": 700}))
        .await;
    app.receive(&s.admin, &other["id"], s.b, 4, "2031-01-31")
        .await;
    let (status, bc) = app
        .post(
            "/transfers",
            &s.admin,
            json!({"medicine_id": other["id"], "from_branch_id": s.b, "to_branch_id": c, "qty": 4}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{bc}");

    let (status, all) = app.get("/transfers", &s.admin).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 3);
    let ids: Vec<&Value> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(
        ids,
        [&bc["id"], &second["id"], &first["id"]],
        "newest first"
    );
    assert_transfer_shape(&all["items"][0]);

    // Source or destination matches.
    let (_, of_b) = app
        .get(&format!("/transfers?branch_id={}", s.b), &s.admin)
        .await;
    assert_eq!(of_b["total"], 3);
    let (_, of_c) = app
        .get(&format!("/transfers?branch_id={c}"), &s.admin)
        .await;
    assert_eq!(of_c["total"], 1);
    assert_eq!(of_c["items"][0]["id"], bc["id"]);

    // A non-admin sees its own branch only, and may not name another.
    let (status, mine) = app.get("/transfers", &s.manager_a).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mine["total"], 2);
    let (status, problem) = app
        .get(&format!("/transfers?branch_id={c}"), &s.manager_a)
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, auditor) = app.signed_in(c, Role::Auditor).await;
    let (status, seen) = app.get("/transfers", &auditor).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(seen["total"], 1);

    // Day bounds in the organisation's calendar.
    let today: chrono::NaiveDate = app
        .pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT org_today()", &[])
        .await
        .unwrap()
        .get(0);
    let yesterday = today.pred_opt().unwrap();
    let (status, day) = app
        .get(
            &format!("/transfers?from_date={today}&to_date={today}"),
            &s.admin,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{day}");
    assert_eq!(day["total"], 3);
    let (_, before) = app
        .get(&format!("/transfers?to_date={yesterday}"), &s.admin)
        .await;
    assert_eq!(before["total"], 0);
    let (_, after) = app
        .get(
            &format!("/transfers?from_date={}", today.succ_opt().unwrap()),
            &s.admin,
        )
        .await;
    assert_eq!(after["total"], 0);

    for query in [
        "from_date=2024-13-01",
        "to_date=yesterday",
        "from_date=2024-1-5",
        "from_date=2024-02-02&to_date=2024-02-01",
    ] {
        let (status, problem) = app.get(&format!("/transfers?{query}"), &s.admin).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    }

    let (_, cashier) = app.signed_in(s.a, Role::Cashier).await;
    let (status, problem) = app.get("/transfers", &cashier).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, pharmacist) = app.signed_in(s.a, Role::Pharmacist).await;
    let (status, problem) = app.get("/transfers", &pharmacist).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    app.assert_invariants().await;
}
