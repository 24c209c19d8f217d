use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// Writes an entry directly, at `created_at`.
async fn entry(app: &TestApp, entity_type: &str, entity_id: &str, created_at: &str) {
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO audit_log (id, action, entity_type, entity_id, after, created_at)
             VALUES ($1, 'test', $2, $3, '{\"n\": 1}', $4::text::timestamptz)",
            &[&Uuid::now_v7(), &entity_type, &entity_id, &created_at],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn admins_and_auditors_read_the_log_others_are_refused() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    for role in [Role::Admin, Role::Auditor] {
        let (_, token) = app.signed_in(branch, role).await;
        let (status, page) = app.get("/audit-log", &token).await;
        assert_eq!(status, StatusCode::OK, "{role}: {page}");
        assert_eq!(page["page_size"], 20);
    }
    for role in [
        Role::BranchManager,
        Role::InventoryManager,
        Role::Pharmacist,
        Role::Cashier,
    ] {
        let (_, token) = app.signed_in(branch, role).await;
        let (status, body) = app.get("/audit-log", &token).await;
        assert_problem(status, &body, StatusCode::FORBIDDEN);
    }
    let (status, _) = app.call(Method::GET, "/audit-log", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_settings_change_reads_back_with_actor_before_and_after() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (admin_user, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, auditor) = app.signed_in(branch, Role::Auditor).await;
    let (status, _) = app
        .call(
            Method::PUT,
            "/settings",
            Some(&admin),
            Some(json!({"default_copies": 2})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, page) = app.get("/audit-log?entity_type=settings", &auditor).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 1);
    let row = &page["items"][0];
    assert_eq!(row["actor_id"], admin_user.id.to_string());
    assert_eq!(row["actor_name"], admin_user.full_name);
    assert_eq!(row["action"], "settings.update");
    assert_eq!(row["entity_type"], "settings");
    assert_eq!(row["entity_id"], app.org_id.to_string());
    assert_eq!(row["before"]["default_copies"], 1);
    assert_eq!(row["after"]["default_copies"], 2);
    assert!(row["id"].is_string());
    assert!(row["created_at"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn user_creation_role_change_and_deactivation_are_audited() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, user) = app
        .post(
            "/users",
            &admin,
            json!({"email": "nakato@test.pharmacy", "password": "long-enough-1",
                   "full_name": "Nakato", "role": "cashier", "branch_id": branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{user}");
    let id = user["id"].as_str().unwrap().to_owned();
    let path = format!("/users/{id}");
    let (status, _) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"role": "pharmacist"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"password": "another-long-2"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.call(Method::DELETE, &path, Some(&admin), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, page) = app
        .get(
            &format!("/audit-log?entity_type=user&entity_id={id}"),
            &admin,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let items = page["items"].as_array().unwrap();
    let actions: Vec<&str> = items
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "user.deactivate",
            "user.update",
            "user.role_change",
            "user.create"
        ],
        "newest first"
    );
    let role_change = &items[2];
    assert_eq!(role_change["before"]["role"], "cashier");
    assert_eq!(role_change["after"]["role"], "pharmacist");
    assert_eq!(items[0]["before"]["is_active"], 1);
    assert_eq!(items[0]["after"]["is_active"], 0);
    assert_eq!(items[3]["before"], Value::Null);
    for row in items {
        let text = row.to_string();
        assert!(!text.contains("password"), "no password material: {text}");
        assert!(!text.contains("argon2"), "no password hash: {text}");
    }
}

#[tokio::test]
async fn the_log_filters_by_entity_and_day_and_pages_newest_first() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, auditor) = app.signed_in(branch, Role::Auditor).await;
    for i in 0..25 {
        entry(&app, "widget", &format!("w{i}"), "2026-03-10T09:00:00Z").await;
    }
    entry(&app, "gadget", "g1", "2026-03-09T20:59:00Z").await; // 23:59 in Kampala
    entry(&app, "gadget", "g2", "2026-03-09T21:00:00Z").await; // 00:00 on the 10th
    entry(&app, "gadget", "g3", "2026-03-12T08:00:00Z").await;
    let (_, page) = app.get("/audit-log?entity_type=widget", &auditor).await;
    assert_eq!(page["total"], 25);
    assert_eq!(page["items"].as_array().unwrap().len(), 20);
    let (_, page2) = app
        .get("/audit-log?entity_type=widget&page=2", &auditor)
        .await;
    assert_eq!(page2["items"].as_array().unwrap().len(), 5);
    let (_, all) = app.get("/audit-log?page_size=3", &auditor).await;
    assert_eq!(all["items"][0]["entity_id"], "g3", "newest first");
    assert_eq!(all["items"][0]["actor_id"], Value::Null);
    assert_eq!(all["items"][0]["actor_name"], Value::Null);
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["entity_id"].as_str().unwrap().to_owned())
            .collect()
    };
    // Days are the organisation's (Africa/Kampala, UTC+3).
    let (_, day) = app
        .get(
            "/audit-log?entity_type=gadget&from_date=2026-03-10&to_date=2026-03-10",
            &auditor,
        )
        .await;
    assert_eq!(ids(&day), ["g2"]);
    let (_, from) = app
        .get(
            "/audit-log?entity_type=gadget&from_date=2026-03-10",
            &auditor,
        )
        .await;
    assert_eq!(ids(&from), ["g3", "g2"]);
    let (_, to) = app
        .get("/audit-log?entity_type=gadget&to_date=2026-03-09", &auditor)
        .await;
    assert_eq!(ids(&to), ["g1"]);
    let (_, one) = app.get("/audit-log?entity_id=w7", &auditor).await;
    assert_eq!(ids(&one), ["w7"]);
    for (query, field) in [
        ("from_date=2026-13-01", "from_date"),
        ("to_date=10/03/2026", "to_date"),
        ("from_date=2026-03-11&to_date=2026-03-10", "from_date"),
        ("page=0", "page"),
        ("actor_id=someone", "actor_id"),
    ] {
        let (status, problem) = app.get(&format!("/audit-log?{query}"), &auditor).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{query}");
    }
}
