//! A customer's credit terms changed in the console within the API's
//! rules, and the fiscal queue's oldest unfinished age on the dashboard.

use reqwest::StatusCode;
use serde_json::json;

use crate::common::{Role, TestApp};
use crate::console::{text_of, Console};

#[tokio::test]
async fn credit_terms_change_within_the_rules_and_the_api_reads_them() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (s, c) = app
        .post(
            "/customers",
            &admin,
            json!({"name": "Sarah", "phone": "0700000001"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let id = c["id"].as_str().unwrap().to_owned();
    let path = format!("/console/customers/{id}/credit");

    // A cashier may not raise the limit: said beside the field.
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, html, _) = cashier
        .post(
            &path,
            &[("credit_limit", "1000"), ("is_credit_allowed", "on")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{html}");
    assert!(text_of(&html, "credit_limit-error")
        .unwrap()
        .contains("branch manager"));
    let (status, html, _) = cashier.post(&path, &[("credit_limit", "lots")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text_of(&html, "credit_limit-error").is_some());
    // A manager may.
    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let (status, html, _) = manager
        .post(
            &path,
            &[("credit_limit", "1000"), ("is_credit_allowed", "on")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, c) = app.get(&format!("/customers/{id}"), &admin).await;
    assert_eq!(c["credit_limit"], "1000.00", "{c}");
    assert_eq!(c["is_credit_allowed"], true);
    // Lowering is the safe direction: the cashier may.
    let (status, html, _) = cashier
        .post(
            &path,
            &[("credit_limit", "500"), ("is_credit_allowed", "on")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, c) = app.get(&format!("/customers/{id}"), &admin).await;
    assert_eq!(c["credit_limit"], "500.00");
    // An auditor writes no customer.
    let (_, auditor) = Console::of(&app, a, Role::Auditor).await;
    let (status, _, _) = auditor.post(&path, &[("credit_limit", "0")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_dashboard_shows_the_fiscal_queues_oldest_age_to_those_who_follow_it() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let (status, html, _) = manager.get("/console/dashboard").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        text_of(&html, "fiscal-oldest").as_deref(),
        Some("nothing unfinished")
    );
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (_, html, _) = cashier.get("/console/dashboard").await;
    assert!(text_of(&html, "fiscal-oldest").is_none());
}
