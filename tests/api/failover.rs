//! What a request sees while the database fails over, without a cluster:
//! the failover's symptoms played on the test database. Every pooled
//! connection ended by the server (the leader killed, a node restarting) is
//! dropped and replaced on the next request; a write that reaches a
//! read-only node (a connection made while the node led) answers 503 with
//! Retry-After, never 500; `/readyz` refuses while the database reached
//! takes no writes; a till retrying its sale with its mutation id across
//! all this gets one sale. The real failover (Patroni, etcd, HAProxy) is
//! `scripts/ha-check.sh`.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{admin_client, assert_problem, Role, TestApp};

struct Till {
    app: TestApp,
    branch: Uuid,
    admin: String,
    cashier: String,
}

impl Till {
    async fn open() -> Till {
        let app = TestApp::spawn().await;
        let branch = app.branch("HA1").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        Till {
            app,
            branch,
            admin,
            cashier,
        }
    }

    async fn stocked(&self, qty: i64) -> Value {
        let m = self
            .app
            .medicine(
                &self.admin,
                json!({"name": "Failover Paracetamol", "selling_price": 250}),
            )
            .await;
        self.app
            .receive(&self.admin, &m["id"], self.branch, qty, "2030-12-31")
            .await;
        m
    }

    /// Ends every session on the app's database, as a dying or restarting
    /// node does (57P01 to each backend, then the socket closes), and waits
    /// until those backends are gone and the app has had a moment to see
    /// its sockets close.
    async fn end_sessions(&self) {
        let admin = admin_client().await;
        let ended: Vec<i32> = admin
            .query(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&self.app.db_name()],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(!ended.is_empty(), "the app had sessions to end");
        admin
            .execute(
                "SELECT pg_terminate_backend(p) FROM unnest($1::int4[]) AS p",
                &[&ended],
            )
            .await
            .unwrap();
        for _ in 0..100 {
            let left: i64 = admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                    &[&ended],
                )
                .await
                .unwrap()
                .get(0);
            if left == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    /// Makes every new session on the app's database read-only, as on a
    /// node that has become a replica, and ends the current ones.
    async fn read_only(&self, on: bool) {
        let sql = if on {
            format!(
                "ALTER DATABASE {} SET default_transaction_read_only = on",
                self.app.db_name()
            )
        } else {
            format!(
                "ALTER DATABASE {} RESET default_transaction_read_only",
                self.app.db_name()
            )
        };
        admin_client().await.batch_execute(&sql).await.unwrap();
        self.end_sessions().await;
    }

    async fn readyz(&self) -> (StatusCode, Option<String>, Value) {
        let res = self
            .app
            .http
            .get(format!("{}/readyz", self.app.root))
            .send()
            .await
            .unwrap();
        let status = res.status();
        let retry = res
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (status, retry, res.json().await.unwrap_or(Value::Null))
    }

    /// POST with the Retry-After header of the answer.
    async fn post(&self, path: &str, body: &Value) -> (StatusCode, Option<String>, Value) {
        let res = self
            .app
            .http
            .post(format!("{}{path}", self.app.base))
            .bearer_auth(&self.cashier)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = res.status();
        let retry = res
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (status, retry, res.json().await.unwrap_or(Value::Null))
    }

    async fn count(&self, sql: &str) -> i64 {
        let c = self.app.pool.get().await.unwrap();
        c.query_one(sql, &[]).await.unwrap().get(0)
    }
}

fn sale(m: &Value, id: &str) -> Value {
    json!({
        "items": [{"medicine_id": m["id"], "quantity": 1}],
        "payment_method": "cash",
        "client_mutation_id": id
    })
}

/// An answer a till may get during a failover: success, or 503 that says
/// when to come back. Never 500.
fn success_or_retry_later(status: StatusCode, retry: Option<&str>, body: &Value) -> bool {
    if status.is_success() {
        return true;
    }
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "a failover answers success or 503, not {status}: {body}"
    );
    assert_eq!(body["code"], "database_unavailable", "{body}");
    let secs: u64 = retry
        .expect("a 503 carries Retry-After")
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=10).contains(&secs), "Retry-After {secs}");
    false
}

#[tokio::test]
async fn connections_the_server_ended_are_replaced_on_the_next_request() {
    let till = Till::open().await;
    let m = till.stocked(100).await;
    // Fill the pool with connections, then end them all.
    for i in 0..4 {
        let (status, _, body) = till.post("/sales", &sale(&m, &format!("warm-{i}"))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    till.end_sessions().await;
    // Each request finds its pooled connection closed and takes a new one:
    // no request of the next few fails at all.
    for i in 0..6 {
        let (status, retry, body) = till.post("/sales", &sale(&m, &format!("after-{i}"))).await;
        assert!(
            success_or_retry_later(status, retry.as_deref(), &body),
            "after the sessions ended, sale {i} was refused: {status} {body}"
        );
    }
    // A request on a connection the server ends while it runs (a failover
    // in the middle of it) answers 503 with Retry-After, never 500.
    let ending = async {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        till.end_sessions().await;
    };
    let bodies: Vec<Value> = (0..6).map(|i| sale(&m, &format!("caught-{i}"))).collect();
    let answers = futures_util::future::join(
        futures_util::future::join_all(bodies.iter().map(|b| till.post("/sales", b))),
        ending,
    )
    .await
    .0;
    for (status, retry, body) in answers {
        success_or_retry_later(status, retry.as_deref(), &body);
    }
    let (status, _, _) = till.readyz().await;
    assert_eq!(status, StatusCode::OK);
    till.app.assert_invariants().await;
}

#[tokio::test]
async fn a_write_that_reaches_a_read_only_node_answers_503_with_retry_after() {
    let till = Till::open().await;
    let m = till.stocked(100).await;
    let (status, retry, body) = till.readyz().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(retry.is_none());

    till.read_only(true).await;
    let (status, retry, body) = till.post("/sales", &sale(&m, "ro-1")).await;
    assert_problem(status, &body, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!success_or_retry_later(status, retry.as_deref(), &body));
    // The load balancer's probe says the same, so the process leaves the
    // rotation while its database takes no writes.
    let (status, retry, body) = till.readyz().await;
    assert_problem(status, &body, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["code"], "database_unavailable");
    assert!(retry.is_some(), "/readyz's 503 carries Retry-After");
    // Reads still work.
    let (status, _) = till
        .app
        .get(
            &format!("/medicines/{}", m["id"].as_str().unwrap()),
            &till.cashier,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    till.read_only(false).await;
    let (status, _, body) = till.readyz().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = till.post("/sales", &sale(&m, "ro-1")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(till.count("SELECT count(*) FROM sales").await, 1);
    till.app.assert_invariants().await;
}

#[tokio::test]
async fn a_sale_retried_across_lost_connections_has_one_effect() {
    let till = Till::open().await;
    let m = till.stocked(100).await;
    let body = sale(&m, "till-ha-0001");
    let (status, _, first) = till.post("/sales", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    // The till never saw that answer (the failover cut it off): it sends
    // the sale again, into a refusal, and again once the database is back.
    till.read_only(true).await;
    let (status, retry, refused) = till.post("/sales", &body).await;
    if success_or_retry_later(status, retry.as_deref(), &refused) {
        // A replay needs no write: the first answer, read back.
        assert_eq!(refused, first);
    }
    till.read_only(false).await;
    let (status, _, again) = till.post("/sales", &body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, first);
    till.end_sessions().await;
    let (status, retry, again) = till.post("/sales", &body).await;
    if success_or_retry_later(status, retry.as_deref(), &again) {
        assert_eq!(again, first);
    }
    assert_eq!(till.count("SELECT count(*) FROM sales").await, 1);
    till.app.assert_invariants().await;
}
