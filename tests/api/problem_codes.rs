//! Machine-readable errors: every problem body has a stable `code` and a
//! `type` page of the service, and every code is documented.

use std::collections::BTreeMap;

use domain::error::Code;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::{Role, TestApp};

/// docs/errors.md's table: code → status column.
fn documented() -> BTreeMap<String, String> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/errors.md")).unwrap();
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((code.to_owned(), cells.get(2)?.to_string()))
        })
        .collect()
}

#[test]
fn every_code_is_documented_with_its_status_and_nothing_else_is() {
    let docs = documented();
    for code in Code::ALL {
        let status = match code.status() {
            0 => "push only".to_owned(),
            n => n.to_string(),
        };
        assert_eq!(
            docs.get(code.as_str()),
            Some(&status),
            "{} is not documented in docs/errors.md with status {status}",
            code.as_str()
        );
    }
    assert_eq!(
        docs.len(),
        Code::ALL.len(),
        "docs/errors.md lists unknown codes"
    );
    let mut names: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Code::ALL.len(), "codes are unique");
    assert!(names
        .iter()
        .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
}

#[tokio::test]
async fn problem_bodies_carry_their_code_and_a_type_page_of_the_service() {
    let app = TestApp::spawn().await;
    let branch = app.branch("PRB").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let cases = [
        (
            app.post("/customers", &cashier, json!({})).await,
            "validation_failed",
            400,
        ),
        (
            app.get("/customers", "not-a-token").await,
            "unauthenticated",
            401,
        ),
        (app.get("/sync/conflicts", &cashier).await, "forbidden", 403),
        (
            app.get(&format!("/customers/{}", uuid::Uuid::now_v7()), &cashier)
                .await,
            "not_found",
            404,
        ),
    ];
    for ((status, body), code, expected) in cases {
        assert_eq!(status.as_u16(), expected, "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["type"], format!("/problems/{code}"), "{body}");
        let page = app
            .http
            .get(format!("{}/problems/{code}", app.root))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let text = page.text().await.unwrap();
        assert!(text.contains(code) && text.contains(&expected.to_string()));
    }
    let malformed = app
        .http
        .post(format!("{}/customers", app.base))
        .bearer_auth(&cashier)
        .header("content-type", "application/json")
        .body("[1,")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = malformed.json().await.unwrap();
    assert_eq!(body["code"], "malformed_body");

    let unknown = app
        .http
        .get(format!("{}/problems/no_such_code", app.root))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let index = app
        .http
        .get(format!("{}/problems", app.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(Code::ALL.iter().all(|c| index.contains(c.as_str())));
}
