//! The served OpenAPI document is a contract: it passes a standard OpenAPI
//! 3.1 validator (`openapi-spec-validator`, pinned in scripts/pytools.txt and
//! installed on first use into the venv target/pytools by scripts/lib.sh),
//! every operation has a unique readable `operationId` and a summary, every
//! JSON body is a named schema, the common problem answers are documented,
//! and the money and date fields carry examples.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::TestApp;

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The validator from the pinned venv, made with the scripts' own helper.
fn validator() -> PathBuf {
    let root = root();
    let out = Command::new("bash")
        .arg("-c")
        .arg(". scripts/lib.sh && pytools_venv target/pytools scripts/pytools.txt")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "could not install the pinned Python tools of scripts/pytools.txt (needs python3 with venv): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    root.join("target/pytools/bin/openapi-spec-validator")
}

/// Runs the validator on `doc`; its exit status and output.
fn validate(validator: &PathBuf, doc: &Value, name: &str) -> (bool, String) {
    let file = root().join(format!("target/pytools/{name}-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    let out = Command::new(validator).arg(&file).output().unwrap();
    let _ = std::fs::remove_file(&file);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && text.contains(": OK"), text)
}

async fn served_document(app: &TestApp) -> Value {
    let res = app
        .http
        .get(format!("{}/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::OK);
    res.json().await.unwrap()
}

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                out.push((method.to_owned(), path.clone(), op.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_served_document_passes_the_openapi_3_1_validator() {
    let app = TestApp::spawn().await;
    let doc = served_document(&app).await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));

    let validator = tokio::task::spawn_blocking(validator).await.unwrap();
    let (ok, output) = validate(&validator, &doc, "openapi");
    assert!(ok, "the served document fails the validator:\n{output}");

    // The validator does reject what the old document did: two operations
    // sharing an id.
    let mut clash = doc.clone();
    let first = operations(&doc)[0].clone();
    let second = operations(&doc)[1].clone();
    clash["paths"][&second.1][&second.0]["operationId"] = first.2["operationId"].clone();
    let (ok, output) = validate(&validator, &clash, "openapi-clash");
    assert!(!ok, "the validator accepted a shared operationId: {output}");
    assert!(output.contains("is not unique"), "{output}");
}

#[tokio::test]
async fn every_operation_has_a_unique_readable_id_a_summary_and_named_bodies() {
    let app = TestApp::spawn().await;
    let doc = served_document(&app).await;
    let ops = operations(&doc);
    assert!(ops.len() > 100, "{} operations", ops.len());
    let mut seen = std::collections::BTreeMap::new();
    let mut problems = Vec::new();
    for (method, path, op) in &ops {
        let at = format!("{} {path}", method.to_uppercase());
        let id = op["operationId"].as_str().unwrap_or_default();
        if !(id.starts_with(|c: char| c.is_ascii_lowercase())
            && id.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            problems.push(format!("{at}: operationId {id:?} is not camelCase"));
        }
        if let Some(other) = seen.insert(id.to_owned(), at.clone()) {
            problems.push(format!("{at}: operationId {id:?} is also {other}'s"));
        }
        let summary = op["summary"].as_str().unwrap_or_default();
        if summary.trim().is_empty() || summary.contains('\n') {
            problems.push(format!("{at}: summary {summary:?}"));
        }
        // Every JSON request and answer body is a named schema.
        if let Some(body) = op.get("requestBody") {
            for (media, content) in body["content"].as_object().unwrap() {
                if media.ends_with("json") && content["schema"].get("$ref").is_none() {
                    problems.push(format!("{at}: request body {media} is not a named schema"));
                }
            }
        }
        for (status, response) in op["responses"].as_object().unwrap() {
            if response["description"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
            {
                problems.push(format!("{at}: {status} has no description"));
            }
            for (media, content) in response["content"].as_object().into_iter().flatten() {
                let named = content["schema"].get("$ref").is_some()
                    || content["schema"]["items"].get("$ref").is_some();
                if media.ends_with("json") && !named {
                    problems.push(format!("{at}: {status} {media} is not a named schema"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // A few ids as an integrator sees them.
    for (id, at) in [
        ("listCustomers", "GET /api/v1/customers"),
        ("createCustomer", "POST /api/v1/customers"),
        ("getCustomer", "GET /api/v1/customers/{id}"),
        (
            "recordCustomerPayment",
            "POST /api/v1/customers/{id}/payments",
        ),
        ("createSale", "POST /api/v1/sales"),
        ("getSalesReport", "GET /api/v1/reports/sales"),
        ("pushSyncChanges", "POST /api/v1/sync/push"),
        ("login", "POST /api/v1/auth/login"),
    ] {
        assert_eq!(seen.get(id).map(String::as_str), Some(at), "{id}");
    }
}

#[tokio::test]
async fn common_problem_answers_and_examples_are_documented() {
    let app = TestApp::spawn().await;
    let doc = served_document(&app).await;
    let problem = json!({"$ref": "#/components/schemas/Problem"});
    for (method, path, op) in operations(&doc) {
        let at = format!("{} {path}", method.to_uppercase());
        let responses = &op["responses"];
        let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
        let mut wanted = Vec::new();
        if path.starts_with("/api/") {
            wanted.extend(["429", "503"]);
        }
        if secured {
            wanted.extend(["401", "403"]);
        }
        if secured && method != "get" {
            wanted.push("409");
        }
        if path.contains('{') {
            wanted.push("404");
        }
        if op.get("requestBody").is_some() {
            wanted.push("400");
        }
        for status in wanted {
            let schema = &responses[status]["content"]["application/problem+json"]["schema"];
            assert_eq!(schema, &problem, "{at}: {status}");
            if status == "429" || status == "503" {
                assert!(
                    responses[status]["headers"].get("Retry-After").is_some(),
                    "{at}: {status} without Retry-After"
                );
            }
        }
    }

    let schemas = &doc["components"]["schemas"];
    let property = |schema: &str, name: &str| schemas[schema]["properties"][name].clone();
    // Money as decimal strings and as numbers, timestamps and dates.
    assert_eq!(property("Sale", "total")["examples"], json!(["1500.00"]));
    assert_eq!(
        property("SalesTotals", "revenue")["examples"],
        json!([1500.0])
    );
    assert_eq!(property("Sale", "created_at")["format"], "date-time");
    assert_eq!(
        property("Sale", "created_at")["examples"],
        json!(["2026-11-21T09:05:03.120Z"])
    );
    assert_eq!(
        property("SalesReport", "from_date")["examples"],
        json!(["2026-11-21"])
    );
    assert_eq!(property("SupplierInvoice", "due_date")["format"], "date");
    // A request field keeps what its handler accepts (`YYYY-MM-DD` too).
    assert!(property("CouponCreate", "valid_from")
        .get("format")
        .is_none());
    let window = doc["paths"]["/api/v1/reports/sales"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "from_date")
        .unwrap()
        .clone();
    assert_eq!(window["schema"]["examples"], json!(["2026-11-21"]));

    // An optional body is optional, not a JSON `null` (which is refused).
    let open = &doc["paths"]["/api/v1/sessions/open"]["post"]["requestBody"];
    assert_eq!(open["required"], json!(false));
    assert_eq!(
        open["content"]["application/json"]["schema"],
        json!({"$ref": "#/components/schemas/OpenRequest"})
    );
    // Health answers are described.
    assert_eq!(
        doc["paths"]["/healthz"]["get"]["responses"]["200"]["content"]["application/json"]
            ["schema"],
        json!({"$ref": "#/components/schemas/Health"})
    );
}

/// The document and the router agree: on every documented path, each
/// documented method reaches a handler (no 404 "no route", no 405) and every
/// other method is a 405 problem whose `Allow` lists exactly the documented
/// methods. A handler mounted on a documented path without being in the
/// document would answer instead of the 405.
#[tokio::test]
async fn every_documented_path_answers_exactly_its_documented_methods() {
    let app = TestApp::spawn().await;
    let doc = served_document(&app).await;
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() > 60, "{} paths", paths.len());
    let mut wrong = Vec::new();
    for (template, item) in paths {
        let documented: Vec<&str> = METHODS
            .iter()
            .copied()
            .filter(|m| item.get(*m).is_some())
            .collect();
        let concrete: String = template
            .split('/')
            .map(|s| {
                if s.starts_with('{') {
                    "00000000-0000-7000-8000-000000000000"
                } else {
                    s
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let url = format!("{}{concrete}", app.root);
        for method in METHODS {
            let res = app
                .http
                .request(method.to_uppercase().parse().unwrap(), &url)
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            let allow = res
                .headers()
                .get("allow")
                .map(|v| v.to_str().unwrap().to_owned());
            let body: Value = res.json().await.unwrap_or(Value::Null);
            let what = format!("{} {concrete}: {status} {body}", method.to_uppercase());
            if documented.contains(&method) {
                let no_route = body["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("No route matches"));
                if status == 405 || (status == 404 && no_route) {
                    wrong.push(format!("{what} (documented, not routed)"));
                }
            } else {
                let expected: Vec<String> = documented.iter().map(|m| m.to_uppercase()).collect();
                if status != 405 || allow.as_deref() != Some(expected.join(", ").as_str()) {
                    wrong.push(format!(
                        "{what} allow {allow:?} (expected 405, Allow {expected:?})"
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
