use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_problem, Role, TestApp, PASSWORD};

#[tokio::test]
async fn admin_creates_a_user_who_can_sign_in() {
    let app = TestApp::spawn().await;
    let hq = app.branch("HQ").await;
    let (_, admin) = app.signed_in(hq, Role::Admin).await;
    let body = json!({"email": "New.Cashier@Test.Pharmacy", "password": "long-enough-1", "full_name": "New Cashier", "role": "cashier", "branch_id": hq});
    let (status, user) = app.post("/users", &admin, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{user}");
    assert_eq!(user["email"], "new.cashier@test.pharmacy");
    assert!(user.get("password_hash").is_none());
    assert_eq!(
        app.login("new.cashier@test.pharmacy", "long-enough-1")
            .await
            .0,
        StatusCode::OK
    );
    let (status, _) = app.post("/users", &admin, body).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, body) = app.post("/users", &admin, json!({"email": "x@y.z", "password": "short", "full_name": "X", "role": "cashier", "branch_id": hq})).await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "password");
}

#[tokio::test]
async fn branch_manager_manages_only_non_admins_of_its_branch() {
    let app = TestApp::spawn().await;
    let a = app.branch("BA").await;
    let b = app.branch("BB").await;
    let (_, manager) = app.signed_in(a, Role::BranchManager).await;
    let new = |role: &str, branch| json!({"email": format!("{role}.{branch}@t.ph"), "password": PASSWORD, "full_name": "N", "role": role, "branch_id": branch});
    assert_eq!(
        app.post("/users", &manager, new("cashier", a)).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        app.post("/users", &manager, new("admin", a)).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.post("/users", &manager, new("cashier", b)).await.0,
        StatusCode::FORBIDDEN
    );
    let other = app.user(b, Role::Cashier).await;
    let (status, _) = app
        .call(
            Method::PUT,
            &format!("/users/{}", other.id),
            Some(&manager),
            Some(json!({"full_name": "Hijack"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list) = app.get("/users", &manager).await;
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|u| u["branch_id"] == a.to_string()));
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let (status, body) = app.get("/users", &cashier).await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn user_writes_are_audited() {
    let app = TestApp::spawn().await;
    let hq = app.branch("HQ").await;
    let (_, admin) = app.signed_in(hq, Role::Admin).await;
    let target = app.user(hq, Role::Cashier).await;
    let (status, u) = app
        .call(
            Method::PUT,
            &format!("/users/{}", target.id),
            Some(&admin),
            Some(json!({"role": "pharmacist"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{u}");
    assert_eq!(u["role"], "pharmacist");
    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT action, before->>'role', after->>'role' FROM audit_log WHERE entity_id = $1",
            &[&target.id.to_string()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "user.role_change");
    assert_eq!(row.get::<_, String>(1), "cashier");
    assert_eq!(row.get::<_, String>(2), "pharmacist");
}
