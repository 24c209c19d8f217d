use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

async fn request(app: &TestApp, token: &str, body: Value) -> Value {
    let (status, a) = app.post("/approvals", token, body).await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    a
}

async fn decide(app: &TestApp, token: &str, a: &Value, decision: &str) -> (StatusCode, Value) {
    let path = format!("/approvals/{}/{decision}", a["id"].as_str().unwrap());
    app.post(&path, token, json!({})).await
}

#[tokio::test]
async fn a_request_answers_201_pending_on_the_callers_branch() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (cashier, token) = app.signed_in(branch, Role::Cashier).await;
    let a = request(
        &app,
        &token,
        json!({"kind": " price_override ", "reference_id": "01900000-0000-7000-8000-000000000001",
               "reason": "Damaged pack"}),
    )
    .await;
    assert!(Uuid::parse_str(a["id"].as_str().unwrap()).is_ok());
    assert_eq!(a["branch_id"], branch.to_string());
    assert_eq!(a["kind"], "price_override");
    assert_eq!(a["reference_id"], "01900000-0000-7000-8000-000000000001");
    assert_eq!(a["requested_by"], cashier.id.to_string());
    assert!(a["approved_by"].is_null());
    assert_eq!(a["status"], "pending");
    assert_eq!(a["reason"], "Damaged pack");
    assert!(a["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(a["decided_at"].is_null());
    // Only `kind` is required.
    let bare = request(&app, &token, json!({"kind": "price_override"})).await;
    assert!(bare["reference_id"].is_null());
    assert_eq!(bare["reason"], "");

    for (body, field) in [
        (json!({}), "kind"),
        (json!({"kind": ""}), "kind"),
        (json!({"kind": "   "}), "kind"),
        (json!({"kind": 7}), "kind"),
        (json!({"kind": "x".repeat(101)}), "kind"),
        (json!({"kind": "price_override", "reason": ["a"]}), "reason"),
    ] {
        let (status, problem) = app.post("/approvals", &token, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}");
    }
    let other = app.branch("EBB").await;
    let (status, problem) = app
        .post(
            "/approvals",
            &token,
            json!({"kind": "price_override", "branch_id": other}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (status, _) = app
        .call(
            Method::POST,
            "/approvals",
            None,
            Some(json!({"kind": "price_override"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_manager_decides_once_never_on_their_own_request_and_it_is_audited() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (m1, manager1) = app.signed_in(branch, Role::BranchManager).await;
    let (m2, manager2) = app.signed_in(branch, Role::BranchManager).await;
    let own = request(&app, &manager1, json!({"kind": "price_override"})).await;
    for decision in ["approve", "reject"] {
        let (status, problem) = decide(&app, &manager1, &own, decision).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    let (status, approved) = decide(&app, &manager2, &own, "approve").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["status"], "approved");
    assert_eq!(approved["approved_by"], m2.id.to_string());
    assert_eq!(approved["requested_by"], m1.id.to_string());
    assert!(approved["decided_at"].as_str().unwrap().ends_with('Z'));
    for decision in ["approve", "reject"] {
        let (status, problem) = decide(&app, &manager2, &own, decision).await;
        assert_problem(status, &problem, StatusCode::CONFLICT);
    }

    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let asked = request(&app, &cashier, json!({"kind": "void"})).await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, rejected) = decide(&app, &admin, &asked, "reject").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(rejected["status"], "rejected");
    let (status, problem) = decide(&app, &manager1, &asked, "approve").await;
    assert_problem(status, &problem, StatusCode::CONFLICT);

    // Each decision wrote one audit entry with the before and after rows.
    let client = app.pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT action, entity_id, actor_id, before, after FROM audit_log
             WHERE entity_type = 'approval' ORDER BY created_at",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let (action, entity, actor): (String, String, Uuid) =
        (rows[0].get(0), rows[0].get(1), rows[0].get(2));
    assert_eq!(action, "approval.approve");
    assert_eq!(entity, own["id"].as_str().unwrap());
    assert_eq!(actor, m2.id);
    let (before, after): (Value, Value) = (rows[0].get(3), rows[0].get(4));
    assert_eq!(before["status"], "pending");
    assert!(before["approved_by"].is_null());
    assert_eq!(after["status"], "approved");
    assert_eq!(after["approved_by"], m2.id.to_string());
    assert_eq!(rows[1].get::<_, String>(0), "approval.reject");
}

#[tokio::test]
async fn only_admins_and_branch_managers_decide() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let a = request(&app, &cashier, json!({"kind": "price_override"})).await;
    for role in [
        Role::Cashier,
        Role::Pharmacist,
        Role::InventoryManager,
        Role::Auditor,
    ] {
        let (_, token) = app.signed_in(branch, role).await;
        for decision in ["approve", "reject"] {
            let (status, problem) = decide(&app, &token, &a, decision).await;
            assert_problem(status, &problem, StatusCode::FORBIDDEN);
        }
    }
    let (status, problem) = app
        .post(
            &format!("/approvals/{}/approve", Uuid::now_v7()),
            &cashier,
            json!({}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
    let (status, problem) = app
        .post(
            &format!("/approvals/{}/approve", Uuid::now_v7()),
            &manager,
            json!({}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn two_managers_deciding_at_once_give_one_decision() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    for _ in 0..3 {
        let a = request(&app, &cashier, json!({"kind": "price_override"})).await;
        let (x, y) = tokio::join!(
            decide(&app, &manager, &a, "approve"),
            decide(&app, &admin, &a, "reject"),
        );
        let mut pair = [x.0, y.0];
        pair.sort();
        assert_eq!(pair, [StatusCode::OK, StatusCode::CONFLICT]);
    }
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM audit_log WHERE entity_type = 'approval'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
}

#[tokio::test]
async fn list_is_newest_first_filtered_paged_and_branch_scoped() {
    let app = TestApp::spawn().await;
    let kla = app.branch("KLA").await;
    let ebb = app.branch("EBB").await;
    let (_, cashier) = app.signed_in(kla, Role::Cashier).await;
    let (_, manager) = app.signed_in(kla, Role::BranchManager).await;
    let (_, far) = app.signed_in(ebb, Role::Pharmacist).await;
    let (_, admin) = app.signed_in(kla, Role::Admin).await;
    let mut made = Vec::new();
    for n in 1..=4 {
        made.push(request(&app, &cashier, json!({"kind": format!("k{n}")})).await);
    }
    request(&app, &far, json!({"kind": "elsewhere"})).await;
    decide(&app, &manager, &made[0], "approve").await;
    decide(&app, &manager, &made[1], "reject").await;

    let kinds = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["kind"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, list) = app.get("/approvals", &cashier).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kinds(&list), ["k4", "k3", "k2", "k1"]);
    assert_eq!(list["total"], 4);
    assert_eq!(list["page"], 1);
    assert_eq!(list["page_size"], 20);
    for (q, expected) in [
        ("pending", vec!["k4", "k3"]),
        ("approved", vec!["k1"]),
        ("REJECTED", vec!["k2"]),
        ("", vec!["k4", "k3", "k2", "k1"]),
    ] {
        let (_, list) = app.get(&format!("/approvals?status={q}"), &cashier).await;
        assert_eq!(kinds(&list), expected, "{q}");
    }
    let (status, problem) = app.get("/approvals?status=maybe", &cashier).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "status");
    let (_, page) = app.get("/approvals?page=2&page_size=3", &cashier).await;
    assert_eq!(kinds(&page), ["k1"]);
    assert_eq!(page["total"], 4);

    // Admins see every branch, or the one they name.
    let (_, all) = app.get("/approvals", &admin).await;
    assert_eq!(all["total"], 5);
    assert_eq!(all["items"][0]["kind"], "elsewhere");
    let (_, one) = app
        .get(&format!("/approvals?branch_id={ebb}"), &admin)
        .await;
    assert_eq!(kinds(&one), ["elsewhere"]);
    let (status, problem) = app.get(&format!("/approvals?branch_id={kla}"), &far).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, theirs) = app.get("/approvals", &far).await;
    assert_eq!(kinds(&theirs), ["elsewhere"]);
}

#[tokio::test]
async fn another_branchs_manager_cannot_decide() {
    let app = TestApp::spawn().await;
    let kla = app.branch("KLA").await;
    let ebb = app.branch("EBB").await;
    let (_, cashier) = app.signed_in(kla, Role::Cashier).await;
    let (_, outsider) = app.signed_in(ebb, Role::BranchManager).await;
    let a = request(&app, &cashier, json!({"kind": "price_override"})).await;
    for decision in ["approve", "reject"] {
        let (status, problem) = decide(&app, &outsider, &a, decision).await;
        assert_problem(status, &problem, StatusCode::NOT_FOUND);
    }
    let (_, list) = app.get("/approvals?status=pending", &cashier).await;
    assert_eq!(list["total"], 1);
    // An admin of any branch may decide.
    let (_, admin) = app.signed_in(ebb, Role::Admin).await;
    let (status, _) = decide(&app, &admin, &a, "approve").await;
    assert_eq!(status, StatusCode::OK);
}
