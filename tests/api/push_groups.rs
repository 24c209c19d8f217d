//! Several tills of one branch pushing at once: their runs of sales share
//! the branch's commits, and every till gets exactly its own answers.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{Role, TestApp};

const TILLS: usize = 6;
const SALES: usize = 12;

struct Branch {
    app: TestApp,
    branch: Uuid,
    cashier: String,
    devices: Vec<String>,
    medicine: Value,
}

impl Branch {
    async fn open(tills: usize) -> Branch {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        let mut devices = Vec::new();
        for i in 0..tills {
            let (status, d) = app
                .post(
                    "/devices",
                    &admin,
                    json!({"name": format!("Till {i}"), "branch_id": branch}),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "device: {d}");
            devices.push(d["id"].as_str().unwrap().to_owned());
        }
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Paracetamol 500mg", "selling_price": 500}),
            )
            .await;
        app.receive(&admin, &medicine["id"], branch, 1000, "2030-12-31")
            .await;
        Branch {
            app,
            branch,
            cashier,
            devices,
            medicine,
        }
    }

    fn sale(&self, cmid: &str, qty: i64) -> Value {
        json!({
            "client_mutation_id": cmid, "entity": "sale", "op": "create",
            "payload": {"items": [{"medicine_id": self.medicine["id"], "quantity": qty}],
                        "payment_method": "cash"},
        })
    }

    /// The push's status and its body exactly as served.
    async fn push_raw(&self, device: &str, changes: &[Value]) -> (StatusCode, String) {
        let res = self
            .app
            .http
            .post(format!("{}/sync/push", self.app.base))
            .bearer_auth(&self.cashier)
            .json(&json!({"device_id": device, "changes": changes}))
            .send()
            .await
            .expect("push");
        let status = res.status();
        (status, res.text().await.expect("body"))
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    /// A transaction of another client holding the branch's invoice
    /// counter: the branch actor's next group waits on it.
    async fn hold_counter(&self) -> deadpool_postgres::Object {
        let holder = self.app.pool.get().await.unwrap();
        holder.batch_execute("BEGIN").await.unwrap();
        holder
            .execute(
                "SELECT 1 FROM invoice_counters WHERE branch_id = $1 FOR UPDATE",
                &[&self.branch],
            )
            .await
            .unwrap();
        holder
    }
}

fn cmids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["client_mutation_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn tills_of_one_branch_pushing_at_once_share_a_commit_and_each_get_their_own_answers() {
    let b = Branch::open(TILLS).await;
    // The branch's counter exists once it has sold.
    let (status, warm) = b.push_raw(&b.devices[0], &[b.sale("warm", 1)]).await;
    assert_eq!(status, StatusCode::OK, "{warm}");
    // Every till's batch: its own sales, one of them refused (more than
    // the stock) in the middle of its run.
    let batches: Vec<Vec<Value>> = (0..TILLS)
        .map(|d| {
            (0..SALES)
                .map(|i| {
                    let qty = if i == d { 100_000 } else { 1 };
                    b.sale(&format!("d{d}-{i}"), qty)
                })
                .collect()
        })
        .collect();
    // The branch's first group waits on the held counter while every other
    // till's run queues behind it.
    let holder = b.hold_counter().await;
    let pushes = join_all(
        b.devices
            .iter()
            .zip(&batches)
            .map(|(device, batch)| b.push_raw(device, batch)),
    );
    let release = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        holder.batch_execute("COMMIT").await.unwrap();
    };
    let (answers, ()) = tokio::join!(pushes, release);

    let mut icvs = Vec::new();
    for (d, (status, text)) in answers.iter().enumerate() {
        assert_eq!(*status, StatusCode::OK, "till {d}: {text}");
        let body: Value = serde_json::from_str(text).unwrap();
        let mine: Vec<String> = (0..SALES)
            .filter(|i| *i != d)
            .map(|i| format!("d{d}-{i}"))
            .collect();
        assert_eq!(cmids(&body["accepted"]), mine, "till {d}'s accepted");
        assert_eq!(
            cmids(&body["rejected"]),
            [format!("d{d}-{d}")],
            "till {d}'s refused"
        );
        let own: Vec<i64> = body["accepted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["icv"].as_i64().unwrap())
            .collect();
        // In the till's own order.
        assert!(own.windows(2).all(|w| w[0] < w[1]), "till {d}: {own:?}");
        icvs.extend(own);
    }
    icvs.sort();
    let sold = TILLS * (SALES - 1);
    assert_eq!(icvs, (2..=sold as i64 + 1).collect::<Vec<_>>());
    // The held group and one more: the queued tills' runs shared a commit
    // (one commit per till before).
    let commits = b
        .scalar(
            "SELECT count(DISTINCT created_at) FROM push_mutations \
             WHERE client_mutation_id <> 'warm'",
        )
        .await;
    assert!(commits <= 2, "{commits} commits for {TILLS} tills' runs");

    // Every till's replay, all at once: byte for byte its first answer,
    // and nothing more made.
    let replays = join_all(
        b.devices
            .iter()
            .zip(&batches)
            .map(|(device, batch)| b.push_raw(device, batch)),
    )
    .await;
    for (d, (first, again)) in answers.iter().zip(&replays).enumerate() {
        assert_eq!(first, again, "till {d}'s replay");
    }
    assert_eq!(
        b.scalar("SELECT count(*) FROM sales").await,
        sold as i64 + 1
    );
    b.app.assert_invariants().await;
}

#[tokio::test]
async fn a_replayed_batch_is_answered_while_its_branch_is_busy() {
    let b = Branch::open(2).await;
    let batch: Vec<Value> = (0..3).map(|i| b.sale(&format!("r-{i}"), 1)).collect();
    let (status, first) = b.push_raw(&b.devices[0], &batch).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    // The other till's sale holds the branch: its group waits on the
    // counter.
    let holder = b.hold_counter().await;
    let other = [b.sale("o-1", 1)];
    let busy = b.push_raw(&b.devices[1], &other);
    let replay = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let again = tokio::time::timeout(Duration::from_secs(3), b.push_raw(&b.devices[0], &batch))
            .await
            .expect("a replay does not wait for its branch");
        holder.batch_execute("COMMIT").await.unwrap();
        again
    };
    let ((status, other_answer), again) = tokio::join!(busy, replay);
    assert_eq!(again, (StatusCode::OK, first));
    assert_eq!(status, StatusCode::OK, "{other_answer}");
    let seen: HashSet<String> =
        cmids(&serde_json::from_str::<Value>(&other_answer).unwrap()["accepted"])
            .into_iter()
            .collect();
    assert_eq!(seen, HashSet::from(["o-1".to_owned()]));
    b.app.assert_invariants().await;
}
