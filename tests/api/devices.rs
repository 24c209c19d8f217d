use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

async fn device(app: &TestApp, token: &str, name: &str, branch: Uuid) -> Value {
    let (status, d) = app
        .post(
            "/devices",
            token,
            json!({"name": name, "branch_id": branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{d}");
    d
}

fn is_ts(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 24 && s.ends_with('Z') && s.as_bytes()[19] == b'.')
}

async fn revoke(app: &TestApp, token: &str, id: &Value) -> (StatusCode, Value) {
    let path = format!("/devices/{}/revoke", id.as_str().unwrap());
    app.post(&path, token, json!({})).await
}

#[tokio::test]
async fn managers_register_devices_of_their_own_branch() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (manager, manager_a) = app.signed_in(a, Role::BranchManager).await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let d = device(&app, &manager_a, "  Till 1 ", a).await;
    assert!(d["id"].is_string());
    assert_eq!(d["branch_id"], a.to_string());
    assert_eq!(d["name"], "Till 1");
    assert_eq!(d["status"], "active");
    assert!(is_ts(&d["created_at"]), "{d}");
    assert_eq!(d["created_by"], manager.id.to_string());
    assert!(d["last_seen_at"].is_null() && d["revoked_at"].is_null());
    // Without branch_id: the caller's own branch.
    let (status, own) = app
        .post("/devices", &manager_a, json!({"name": "Till 2"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{own}");
    assert_eq!(own["branch_id"], a.to_string());
    // Another branch: 403 for a manager, fine for an admin.
    let (status, problem) = app
        .post("/devices", &manager_a, json!({"name": "X", "branch_id": b}))
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    assert_eq!(
        device(&app, &admin, "Till B", b).await["branch_id"],
        b.to_string()
    );
    for role in [
        Role::Cashier,
        Role::Pharmacist,
        Role::Auditor,
        Role::InventoryManager,
    ] {
        let (_, token) = app.signed_in(a, role).await;
        let (status, problem) = app
            .post("/devices", &token, json!({"name": "X", "branch_id": a}))
            .await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    let (status, _) = app
        .call(Method::POST, "/devices", None, Some(json!({"name": "X"})))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn bad_device_bodies_are_400_naming_the_field() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let gone = app.branch("GONE").await;
    app.pool
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE branches SET is_deleted = true WHERE id = $1",
            &[&gone],
        )
        .await
        .unwrap();
    for (body, field) in [
        (json!({"branch_id": a}), "name"),
        (json!({"name": "   ", "branch_id": a}), "name"),
        (json!({"name": "T", "branch_id": "not-a-uuid"}), "branch_id"),
        (
            json!({"name": "T", "branch_id": Uuid::now_v7()}),
            "branch_id",
        ),
        (json!({"name": "T", "branch_id": gone}), "branch_id"),
    ] {
        let (status, problem) = app.post("/devices", &admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
    }
}

#[tokio::test]
async fn revocation_is_audited_once_and_repeatable() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, manager_a) = app.signed_in(a, Role::BranchManager).await;
    let (_, manager_b) = app.signed_in(b, Role::BranchManager).await;
    let (_, cashier_a) = app.signed_in(a, Role::Cashier).await;
    let d = device(&app, &manager_a, "Till 1", a).await;

    let (status, problem) = revoke(&app, &manager_b, &d["id"]).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (status, problem) = revoke(&app, &cashier_a, &d["id"]).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);

    let (status, revoked) = revoke(&app, &manager_a, &d["id"]).await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert_eq!(revoked["status"], "revoked");
    assert!(is_ts(&revoked["revoked_at"]), "{revoked}");
    assert_eq!(revoked["id"], d["id"]);
    assert_eq!(revoked["created_at"], d["created_at"]);
    // Again: 200, unchanged.
    let (status, again) = revoke(&app, &manager_a, &d["id"]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, revoked);

    let client = app.pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT before, after FROM audit_log WHERE action = 'device.revoke' AND entity_id = $1",
            &[&d["id"].as_str().unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "one audit entry for one revocation");
    let (before, after): (Value, Value) = (rows[0].get(0), rows[0].get(1));
    assert_eq!(before["status"], "active");
    assert!(before["revoked_at"].is_null());
    assert_eq!(after["status"], "revoked");
    assert_eq!(after["revoked_at"], revoked["revoked_at"]);

    for path in [
        format!("/devices/{}/revoke", Uuid::now_v7()),
        "/devices/nope/revoke".to_owned(),
    ] {
        let (status, problem) = app.post(&path, &manager_a, json!({})).await;
        assert_problem(status, &problem, StatusCode::NOT_FOUND);
        assert_eq!(problem["detail"], "Device not found");
    }
}

#[tokio::test]
async fn the_register_lists_devices_newest_first_per_branch() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier_a) = app.signed_in(a, Role::Cashier).await;
    let (_, auditor_b) = app.signed_in(b, Role::Auditor).await;
    let (status, empty) = app.get("/compliance/devices", &cashier_a).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        empty,
        json!({"items": [], "total": 0, "page": 1, "page_size": 50})
    );
    let mut made = Vec::new();
    for (i, branch) in [a, b, a, b, a].into_iter().enumerate() {
        made.push(device(&app, &admin, &format!("Till {i}"), branch).await);
    }
    revoke(&app, &admin, &made[0]["id"]).await;

    let (status, all) = app.get("/compliance/devices", &admin).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 5);
    assert_eq!(all["page_size"], 50);
    let ids: Vec<&Value> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["id"])
        .collect();
    let newest_first: Vec<&Value> = made.iter().rev().map(|d| &d["id"]).collect();
    assert_eq!(ids, newest_first);
    let oldest = &all["items"][4];
    assert_eq!(oldest["status"], "revoked", "a revoked device stays listed");
    assert_eq!(oldest["branch_name"], "Branch A");
    for field in [
        "id",
        "branch_id",
        "name",
        "status",
        "created_at",
        "created_by",
        "last_seen_at",
        "revoked_at",
        "branch_name",
    ] {
        assert!(oldest.get(field).is_some(), "{field} missing: {oldest}");
    }

    let (_, mine) = app.get("/compliance/devices", &cashier_a).await;
    assert_eq!(mine["total"], 3);
    assert!(mine["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["branch_id"] == a.to_string() && d["branch_name"] == "Branch A"));
    let (_, theirs) = app.get("/compliance/devices", &auditor_b).await;
    assert_eq!(theirs["total"], 2);
    let (status, problem) = app
        .get(&format!("/compliance/devices?branch_id={b}"), &cashier_a)
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, only_b) = app
        .get(&format!("/compliance/devices?branch_id={b}"), &admin)
        .await;
    assert_eq!(only_b["total"], 2);

    // Paging walks the same order.
    let mut paged = Vec::new();
    for page in 1..=3 {
        let (status, p) = app
            .get(
                &format!("/compliance/devices?page={page}&page_size=2"),
                &admin,
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            (p["total"].as_i64(), p["page"].as_i64()),
            (Some(5), Some(page))
        );
        assert_eq!(p["page_size"], 2);
        paged.extend(p["items"].as_array().unwrap().clone());
    }
    assert_eq!(paged, *all["items"].as_array().unwrap());
    let (status, problem) = app.get("/compliance/devices?page=0", &admin).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "page");
}
