use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

const PATH: &str = "/dispensing/will-call";

async fn file(app: &TestApp, token: &str, body: Value) -> Value {
    let (status, w) = app.post(PATH, token, body).await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    w
}

async fn act(
    app: &TestApp,
    token: &str,
    w: &Value,
    action: &str,
    body: Value,
) -> (StatusCode, Value) {
    let path = format!("{PATH}/{}/{action}", w["id"].as_str().unwrap());
    app.post(&path, token, body).await
}

/// A prescription written at `branch` (by an admin) through the API.
async fn prescription(app: &TestApp, admin: &str, branch: Uuid) -> Value {
    let m = app
        .medicine(
            admin,
            json!({"name": format!("Med {}", Uuid::now_v7()), "selling_price": 100}),
        )
        .await;
    let (status, p) = app
        .post(
            "/prescriptions",
            admin,
            json!({"patient_name": "Jane", "branch_id": branch,
                   "items": [{"medicine_id": m["id"], "quantity": 1}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{p}");
    p
}

#[tokio::test]
async fn create_defaults_to_ready_unsigned_at_the_callers_branch() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (cashier, token) = app.signed_in(branch, Role::Cashier).await;
    let w = file(&app, &token, json!({"patient_name": "  Jane Nakato "})).await;
    assert!(Uuid::parse_str(w["id"].as_str().unwrap()).is_ok());
    assert_eq!(w["branch_id"], branch.to_string());
    assert_eq!(w["patient_name"], "Jane Nakato");
    assert_eq!(w["patient_phone"], "");
    assert_eq!(w["status"], "ready");
    assert_eq!(w["signature_captured"], 0);
    assert!(w["signature_captured"].is_i64());
    assert!(w["picked_up_at"].is_null());
    assert!(w["prescription_id"].is_null());
    assert!(w["sale_id"].is_null());
    assert_eq!(w["created_by"], cashier.id.to_string());
    assert!(w["created_at"].as_str().unwrap().ends_with('Z'));

    // With a prescription of the branch and a phone.
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let p = prescription(&app, &admin, branch).await;
    let w = file(
        &app,
        &token,
        json!({"patient_name": "Jane", "patient_phone": "+256700000001",
               "prescription_id": p["id"], "sale_id": null}),
    )
    .await;
    assert_eq!(w["prescription_id"], p["id"]);
    assert_eq!(w["patient_phone"], "+256700000001");
    let (status, _) = app
        .call(Method::POST, PATH, None, Some(json!({"patient_name": "X"})))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn create_validations_and_branch_rules() {
    let app = TestApp::spawn().await;
    let kla = app.branch("KLA").await;
    let ebb = app.branch("EBB").await;
    let (_, token) = app.signed_in(kla, Role::Pharmacist).await;
    let (_, admin) = app.signed_in(kla, Role::Admin).await;
    let foreign_rx = prescription(&app, &admin, ebb).await;
    let m = app
        .medicine(&admin, json!({"name": "Soap", "selling_price": 100}))
        .await;
    app.receive(&admin, &m["id"], ebb, 5, "2030-12-31").await;
    let (status, foreign_sale) = app
        .post(
            "/sales",
            &admin,
            json!({"items": [{"medicine_id": m["id"], "quantity": 1}], "payment_method": "cash",
                   "branch_id": ebb}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{foreign_sale}");
    let cases = [
        (json!({}), "patient_name"),
        (json!({"patient_name": ""}), "patient_name"),
        (json!({"patient_name": "   "}), "patient_name"),
        (json!({"patient_name": 5}), "patient_name"),
        (
            json!({"patient_name": "J", "patient_phone": "1".repeat(51)}),
            "patient_phone",
        ),
        (
            json!({"patient_name": "J", "prescription_id": Uuid::now_v7()}),
            "prescription_id",
        ),
        (
            json!({"patient_name": "J", "prescription_id": foreign_rx["id"]}),
            "prescription_id",
        ),
        (
            json!({"patient_name": "J", "prescription_id": "nope"}),
            "prescription_id",
        ),
        (
            json!({"patient_name": "J", "sale_id": Uuid::now_v7()}),
            "sale_id",
        ),
        (
            json!({"patient_name": "J", "sale_id": foreign_sale["id"]}),
            "sale_id",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = app.post(PATH, &token, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    // A non-admin cannot file at another branch; an admin can.
    let (status, problem) = app
        .post(PATH, &token, json!({"patient_name": "J", "branch_id": ebb}))
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let w = file(
        &app,
        &admin,
        json!({"patient_name": "J", "branch_id": ebb, "prescription_id": foreign_rx["id"],
               "sale_id": foreign_sale["id"]}),
    )
    .await;
    assert_eq!(w["branch_id"], ebb.to_string());
    assert_eq!(w["sale_id"], foreign_sale["id"]);
    let (status, problem) = app
        .post(
            PATH,
            &admin,
            json!({"patient_name": "J", "branch_id": Uuid::now_v7()}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "branch_id");
}

#[tokio::test]
async fn pickup_and_cancel_leave_ready_once_and_nothing_else_moves() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, token) = app.signed_in(branch, Role::Cashier).await;
    let signed = file(&app, &token, json!({"patient_name": "A"})).await;
    let (status, done) = act(
        &app,
        &token,
        &signed,
        "pickup",
        json!({"signature_captured": true}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "picked_up");
    assert_eq!(done["signature_captured"], 1);
    assert!(done["picked_up_at"].as_str().unwrap().ends_with('Z'));

    // 0/1 flags are accepted; a missing one means not signed.
    let by_int = file(&app, &token, json!({"patient_name": "B"})).await;
    let (_, done) = act(
        &app,
        &token,
        &by_int,
        "pickup",
        json!({"signature_captured": 1}),
    )
    .await;
    assert_eq!(done["signature_captured"], 1);
    let unsigned = file(&app, &token, json!({"patient_name": "C"})).await;
    let (status, done) = act(&app, &token, &unsigned, "pickup", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(done["signature_captured"], 0);
    let bad = file(&app, &token, json!({"patient_name": "D"})).await;
    let (status, problem) = act(
        &app,
        &token,
        &bad,
        "pickup",
        json!({"signature_captured": "yes"}),
    )
    .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "signature_captured");

    let (status, cancelled) = act(&app, &token, &bad, "cancel", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["status"], "cancelled");
    assert!(cancelled["picked_up_at"].is_null());

    for (w, action) in [
        (&signed, "pickup"),
        (&signed, "cancel"),
        (&bad, "cancel"),
        (&bad, "pickup"),
    ] {
        let (status, problem) = act(&app, &token, w, action, json!({})).await;
        assert_problem(status, &problem, StatusCode::CONFLICT);
    }
    let (status, problem) = app
        .post(
            &format!("{PATH}/{}/pickup", Uuid::now_v7()),
            &token,
            json!({}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);

    // Pickup against cancel at the same moment: exactly one wins.
    for _ in 0..3 {
        let w = file(&app, &token, json!({"patient_name": "Race"})).await;
        let (a, b) = tokio::join!(
            act(&app, &token, &w, "pickup", json!({})),
            act(&app, &token, &w, "cancel", json!({})),
        );
        let mut pair = [a.0, b.0];
        pair.sort();
        assert_eq!(pair, [StatusCode::OK, StatusCode::CONFLICT]);
    }
}

#[tokio::test]
async fn list_is_the_branchs_newest_first_filtered_and_paged() {
    let app = TestApp::spawn().await;
    let kla = app.branch("KLA").await;
    let ebb = app.branch("EBB").await;
    let (_, token) = app.signed_in(kla, Role::Cashier).await;
    let (_, far) = app.signed_in(ebb, Role::Cashier).await;
    let mut made = Vec::new();
    for n in 1..=4 {
        made.push(file(&app, &token, json!({"patient_name": format!("P{n}")})).await);
    }
    file(&app, &far, json!({"patient_name": "Elsewhere"})).await;
    act(&app, &token, &made[0], "pickup", json!({})).await;
    act(&app, &token, &made[1], "cancel", json!({})).await;

    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["patient_name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, list) = app.get(PATH, &token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(names(&list), ["P4", "P3", "P2", "P1"]);
    assert_eq!(list["total"], 4);
    assert_eq!(list["page"], 1);
    assert_eq!(list["page_size"], 20);
    for (q, expected) in [
        ("ready", vec!["P4", "P3"]),
        ("picked_up", vec!["P1"]),
        ("CANCELLED", vec!["P2"]),
    ] {
        let (_, list) = app.get(&format!("{PATH}?status={q}"), &token).await;
        assert_eq!(names(&list), expected, "{q}");
        assert_eq!(list["total"], expected.len());
    }
    let (status, problem) = app.get(&format!("{PATH}?status=waiting"), &token).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "status");
    let (_, page) = app.get(&format!("{PATH}?page=2&page_size=3"), &token).await;
    assert_eq!(names(&page), ["P1"]);
    assert_eq!(page["total"], 4);
}

#[tokio::test]
async fn another_branch_cannot_see_or_move_the_pickups() {
    let app = TestApp::spawn().await;
    let kla = app.branch("KLA").await;
    let ebb = app.branch("EBB").await;
    let (_, token) = app.signed_in(kla, Role::Pharmacist).await;
    let (_, outsider) = app.signed_in(ebb, Role::BranchManager).await;
    let w = file(&app, &token, json!({"patient_name": "Jane"})).await;
    for action in ["pickup", "cancel"] {
        let (status, problem) = act(&app, &outsider, &w, action, json!({})).await;
        assert_problem(status, &problem, StatusCode::NOT_FOUND);
    }
    let (_, list) = app.get(PATH, &outsider).await;
    assert_eq!(list["total"], 0);
    let (status, problem) = app.get(&format!("{PATH}?branch_id={kla}"), &outsider).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, list) = app.get(PATH, &token).await;
    assert_eq!(list["items"][0]["status"], "ready");
    // An admin of another branch may look and act.
    let (_, admin) = app.signed_in(ebb, Role::Admin).await;
    let (_, list) = app.get(&format!("{PATH}?branch_id={kla}"), &admin).await;
    assert_eq!(list["total"], 1);
    let (status, _) = act(&app, &admin, &w, "pickup", json!({"signature_captured": 0})).await;
    assert_eq!(status, StatusCode::OK);
}
