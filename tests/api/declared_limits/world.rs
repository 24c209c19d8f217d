//! What the requests of the limits test need before they can succeed: a
//! branch and a second one, an admin, a cashier on a till, a stocked
//! medicine with a barcode, a supplier, a customer allowed credit who owes
//! enough to pay and be refunded, and helpers that make one more record of
//! a kind for each request.

use std::sync::atomic::{AtomicUsize, Ordering};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{Role, TestApp};

pub struct World {
    pub app: TestApp,
    pub branch: Uuid,
    pub other_branch: Uuid,
    pub admin: String,
    pub cashier: String,
    pub device: String,
    /// A medicine with plenty of stock in one batch of `branch`.
    pub medicine: String,
    pub barcode: String,
    pub batch: String,
    pub supplier: Uuid,
    /// The receipt line of `batch` (its one-line goods received note) and
    /// that receipt's supplier: what an invoice's lines bill.
    pub receipt_line: Uuid,
    pub receipt_supplier: Uuid,
    /// A customer allowed credit, with a balance large enough to pay off
    /// and refund against for the whole run.
    pub debtor: String,
    tags: AtomicUsize,
}

/// Units received of the shared medicine: every sale, transfer and
/// write-off of the run takes a few.
const STOCK: i64 = 100_000;

impl World {
    pub async fn open() -> World {
        let app = TestApp::spawn().await;
        let branch = app.branch("LIM").await;
        let other_branch = app.branch("LIM2").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        let (status, d) = app
            .post(
                "/devices",
                &admin,
                json!({"name": "Till", "branch_id": branch}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "device: {d}");
        let barcode = format!("LIM-{}", Uuid::now_v7().simple());
        let m = app
            .medicine(
                &admin,
                json!({"name": "Paracetamol", "selling_price": 100, "barcode": barcode}),
            )
            .await;
        let received = app
            .receive(&admin, &m["id"], branch, STOCK, "2030-12-31")
            .await;
        let supplier = app.supplier("Limits Supplier").await;
        let debtor = Uuid::now_v7();
        let client = app.pool.get().await.unwrap();
        let batch_id: Uuid = text(&received["id"]).parse().unwrap();
        let receipt = client
            .query_one(
                "SELECT l.id, n.supplier_id FROM goods_received_lines l
                 JOIN goods_received_notes n ON n.id = l.note_id WHERE l.batch_id = $1",
                &[&batch_id],
            )
            .await
            .unwrap();
        client
            .execute(
                "INSERT INTO customers (id, name, is_credit_allowed, credit_limit)
                 VALUES ($1, 'Debtor', true, 1000000000)",
                &[&debtor],
            )
            .await
            .unwrap();
        let world = World {
            branch,
            other_branch,
            admin,
            cashier,
            device: text(&d["id"]),
            medicine: text(&m["id"]),
            barcode,
            batch: text(&received["id"]),
            supplier,
            receipt_line: receipt.get(0),
            receipt_supplier: receipt.get(1),
            debtor: debtor.to_string(),
            app,
            tags: AtomicUsize::new(0),
        };
        // 1,000 units on credit: payments and credit refunds take from it.
        world.sell("credit", 1, 1000).await;
        world
    }

    /// A short text no other request of the run has used, to start a
    /// value with: unique names, codes, emails and mutation ids.
    pub fn tag(&self) -> String {
        format!("t{}", self.tags.fetch_add(1, Ordering::Relaxed))
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        self.app.call(method, path, Some(token), Some(body)).await
    }

    /// `POST path` as the admin; panics unless 2xx. The answer.
    pub async fn made(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self
            .send(Method::POST, path, &self.admin, body.clone())
            .await;
        assert!(
            status.is_success(),
            "prerequisite POST {path} {body}: {status} {answer}"
        );
        answer
    }

    /// `POST path` as the admin: the new record's id.
    pub async fn id(&self, path: &str, body: Value) -> String {
        text(&self.made(path, body).await["id"])
    }

    /// The one text `sql` answers (a count, or a row's digest).
    pub async fn scalar(&self, sql: &str) -> String {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    /// A sale to the debtor, paid by `method`, of `lines` lines of `qty`
    /// units of the shared medicine.
    pub async fn sell(&self, method: &str, lines: usize, qty: i64) -> Value {
        let item = json!({"medicine_id": self.medicine, "quantity": qty});
        self.made(
            "/sales",
            json!({"items": vec![item; lines], "payment_method": method,
                   "customer_id": self.debtor}),
        )
        .await
    }

    /// A new batch of the shared medicine (one unit from the supplier).
    pub async fn batch(&self) -> String {
        self.id(
            "/purchases",
            json!({"supplier_id": self.supplier, "medicine_id": self.medicine,
                   "branch_id": self.branch, "batch_number": self.tag(),
                   "expiry_date": "2030-12-31", "quantity": 1, "unit_cost": 1}),
        )
        .await
    }

    /// `n` medicines made at once in the database, without stock: a stock
    /// count of `n` lines counts each once.
    pub async fn medicines(&self, n: usize) -> Vec<String> {
        let client = self.app.pool.get().await.unwrap();
        let prefix = self.tag();
        let n = i64::try_from(n).unwrap();
        let rows = client
            .query(
                "INSERT INTO medicines (id, name, selling_price)
                 SELECT gen_random_uuid(), $1 || '-' || i, 1 FROM generate_series(1, $2::bigint) i
                 RETURNING id",
                &[&prefix, &n],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|r| r.get::<_, Uuid>(0).to_string())
            .collect()
    }

    /// `n` batches of the shared medicine, one unit each, made at once in
    /// the database with their IN movements (so the stock ledger holds): a
    /// write-off of `n` lines takes each once.
    pub async fn batches(&self, n: usize) -> Vec<String> {
        let client = self.app.pool.get().await.unwrap();
        let medicine: Uuid = self.medicine.parse().unwrap();
        let prefix = self.tag();
        let n = i64::try_from(n).unwrap();
        let rows = client
            .query(
                "WITH made AS (
                     INSERT INTO batches (id, medicine_id, branch_id, batch_number, expiry_date,
                                          qty_received, qty_remaining, unit_cost)
                     SELECT gen_random_uuid(), $1, $2, $3 || '-' || i, '2030-12-31', 1, 1, 1
                     FROM generate_series(1, $4::bigint) i
                     RETURNING id, medicine_id, branch_id)
                 INSERT INTO stock_movements (id, batch_id, medicine_id, branch_id, kind, qty)
                 SELECT gen_random_uuid(), id, medicine_id, branch_id, 'IN', 1 FROM made
                 RETURNING batch_id",
                &[&medicine, &self.branch, &prefix, &n],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|r| r.get::<_, Uuid>(0).to_string())
            .collect()
    }

    /// A pending sync conflict: a customer changed on the server after a
    /// till read it, then the till's stale update of its name.
    pub async fn conflict(&self) -> String {
        let c = self.made("/customers", json!({"name": self.tag()})).await;
        let id = text(&c["id"]);
        let (status, answer) = self
            .send(
                Method::PUT,
                &format!("/customers/{id}"),
                &self.admin,
                json!({"notes": "changed at the counter"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let change = json!({"client_mutation_id": self.tag(), "entity": "customer",
            "op": "update", "payload": {"id": id, "base_rev": c["rev"], "name": self.tag()}});
        let (status, answer) = self
            .send(
                Method::POST,
                "/sync/push",
                &self.cashier,
                json!({"device_id": self.device, "changes": [change]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let rejected = &answer["rejected"][0];
        assert_eq!(rejected["code"], "conflict", "{answer}");
        text(&rejected["conflict_id"])
    }

    /// A value of `len` characters for `field` that its handler takes when
    /// `len` is within the bound: an address where an address is checked,
    /// a host where a URL is, the shared medicine's barcode (padded with
    /// the blanks the handler trims) where a scan is read. Past a bound
    /// (`past`), plain text: padding would be trimmed back under it.
    pub fn text(&self, field: &str, len: usize, past: bool) -> String {
        let fill = |prefix: String, len: usize| -> String {
            let mut s: String = prefix.chars().take(len).collect();
            while s.chars().count() < len {
                s.push('x');
            }
            s
        };
        let name = field.rsplit('.').next().unwrap_or(field);
        match name {
            "email" if len > 10 => {
                let domain = "@test.org";
                format!("{}{domain}", fill(self.tag(), len - domain.len()))
            }
            "server_url" if len > 20 => {
                let scheme = "https://";
                format!("{scheme}{}", fill(self.tag(), len - scheme.len()))
            }
            "scan" if !past && len >= self.barcode.len() => {
                format!("{:<len$}", self.barcode)
            }
            _ => fill(self.tag(), len),
        }
    }
}

/// A JSON string's text (panics on anything else).
pub fn text(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}
