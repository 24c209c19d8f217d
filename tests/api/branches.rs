use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_problem, Role, TestApp};

#[tokio::test]
async fn admin_creates_updates_and_soft_deletes_branches() {
    let app = TestApp::spawn().await;
    let hq = app.branch("HQ").await;
    let (_, admin) = app.signed_in(hq, Role::Admin).await;
    let (status, b) = app
        .post(
            "/branches",
            &admin,
            json!({"code": "ebb", "name": "Entebbe", "city": "Entebbe"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["code"], "EBB");
    assert_eq!(b["is_active"], 1);
    assert_eq!(b["currency_code"], "UGX");
    let id = b["id"].as_str().unwrap().to_owned();
    let (status, _) = app
        .post("/branches", &admin, json!({"code": "EBB", "name": "Again"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("/branches/{id}"),
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "No fields to update");
    let (status, b) = app
        .call(
            Method::PUT,
            &format!("/branches/{id}"),
            Some(&admin),
            Some(json!({"name": "Entebbe Airport"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(b["name"], "Entebbe Airport");
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/branches/{id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = app.get(&format!("/branches/{id}"), &admin).await;
    assert_problem(status, &body, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn non_admins_see_only_their_branch() {
    let app = TestApp::spawn().await;
    let a = app.branch("BA").await;
    let b = app.branch("BB").await;
    let (_, manager) = app.signed_in(a, Role::BranchManager).await;
    let (_, list) = app.get("/branches", &manager).await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["id"], a.to_string());
    let (status, _) = app.get(&format!("/branches/{b}"), &manager).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, list) = app.get("/branches", &admin).await;
    assert_eq!(list["total"], 2);
}
