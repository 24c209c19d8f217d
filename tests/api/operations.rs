use reqwest::StatusCode;
use serde_json::Value;

use crate::common::{Role, TestApp};

#[tokio::test]
async fn health_readiness_and_metrics() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/healthz", app.root))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .http
        .get(format!("{}/readyz", app.root))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let branch = app.branch("B1").await;
    let (_, token) = app.signed_in(branch, Role::Cashier).await;
    app.post("/sessions/open", &token, serde_json::json!({}))
        .await;
    let text = app
        .http
        .get(format!("{}/metrics", app.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for metric in [
        "http_requests_total",
        "http_request_duration_seconds",
        "db_pool_connections",
        "actor_mailbox_depth",
        "actor_handle_seconds",
    ] {
        assert!(text.contains(metric), "missing {metric}");
    }
}

#[tokio::test]
async fn request_id_is_echoed_or_made() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/healthz", app.root))
        .header("x-request-id", "till-7-abc")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "till-7-abc");
    let res = app
        .http
        .get(format!("{}/healthz", app.root))
        .send()
        .await
        .unwrap();
    assert!(!res.headers()["x-request-id"].is_empty());
}

#[tokio::test]
async fn openapi_document_lists_the_routes_and_docs_page_serves() {
    let app = TestApp::spawn().await;
    let doc: Value = app
        .http
        .get(format!("{}/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    for path in [
        "/api/v1/auth/login",
        "/api/v1/auth/refresh",
        "/api/v1/auth/me",
        "/api/v1/branches",
        "/api/v1/users/{id}",
        "/api/v1/sessions/open",
    ] {
        assert!(doc["paths"].get(path).is_some(), "missing {path}");
    }
    let res = app
        .http
        .get(format!("{}/docs", app.root))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

/// The docs page works behind a firewall: it names no URL outside this
/// server, and every asset it names is served here.
#[tokio::test]
async fn the_docs_page_loads_nothing_from_the_internet() {
    let app = TestApp::spawn().await;
    let page = app
        .http
        .get(format!("{}/docs", app.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("//cdn"));
    let assets: Vec<&str> = page
        .split(['"', '\''])
        .filter(|s| s.starts_with('/') && (s.ends_with(".js") || s.ends_with(".css")))
        .collect();
    assert_eq!(assets.len(), 2, "{assets:?}");
    for asset in assets
        .iter()
        .chain(["/api/v1/openapi.json", "/docs/LICENSE"].iter())
    {
        let res = app
            .http
            .get(format!("{}{asset}", app.root))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{asset}");
        assert!(!res.bytes().await.unwrap().is_empty(), "{asset}");
    }
}

#[test]
fn production_refuses_the_default_jwt_secret() {
    use pharmacy::config::{AppEnv, Config, ConfigError};
    let mut config = Config::defaults();
    assert!(
        config.validate().is_ok(),
        "development accepts the default secret"
    );
    config.env = AppEnv::Production;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::DefaultSecretInProduction)
    ));
    config.auth.jwt_secret = "a-real-secret-from-the-environment".to_owned();
    // Production names its fiscal mode too (docs/fiscal.md).
    assert!(matches!(
        config.validate(),
        Err(ConfigError::FiscalModeUnset)
    ));
    config.fiscal.mode = Some(pharmacy::config::FiscalMode::Off);
    assert!(config.validate().is_ok());
}
