//! Controls on what a prescription authorises and on prices: a sale against a
//! prescription sells only what it lists and no more than is left, the
//! prescription records what was given out and closes itself when filled,
//! a controlled medicine always needs a prescription, the register names
//! the prescription's patient, and a price below the selling price needs a
//! manager or pharmacist and is audited.

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A branch with every selling role signed in, a till, and in stock: a
/// controlled medicine, a prescription-only one, a controlled one whose
/// prescription flag is off, and an over-the-counter one.
struct Counter {
    app: TestApp,
    branch: Uuid,
    admin: String,
    manager: String,
    pharmacist: String,
    pharmacist_id: Uuid,
    cashier: String,
    device: String,
    controlled: Value,
    rx_only: Value,
    unflagged: Value,
    otc: Value,
}

impl Counter {
    async fn open() -> Counter {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
        let (pharmacist_user, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        let controlled = app
            .medicine(
                &admin,
                json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                       "requires_prescription": true, "control_schedule": "Class A"}),
            )
            .await;
        let rx_only = app
            .medicine(
                &admin,
                json!({"name": "Amoxicillin 500mg", "selling_price": 1500,
                       "requires_prescription": true}),
            )
            .await;
        let unflagged = app
            .medicine(
                &admin,
                json!({"name": "Pethidine 50mg", "selling_price": 3000, "is_controlled": true,
                       "requires_prescription": false, "control_schedule": "Class A"}),
            )
            .await;
        assert_eq!(unflagged["requires_prescription"], false, "{unflagged}");
        let otc = app
            .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
            .await;
        for m in [&controlled, &rx_only, &unflagged, &otc] {
            app.receive(&admin, &m["id"], branch, 500, "2030-12-31")
                .await;
        }
        let (status, device) = app
            .post(
                "/devices",
                &admin,
                json!({"name": "Till", "branch_id": branch}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{device}");
        Counter {
            app,
            branch,
            admin,
            manager,
            pharmacist,
            pharmacist_id: pharmacist_user.id,
            cashier,
            device: device["id"].as_str().unwrap().to_owned(),
            controlled,
            rx_only,
            unflagged,
            otc,
        }
    }

    /// A prescription of `(medicine, quantity)` lines for patient CM900.
    async fn rx(&self, lines: &[(&Value, i64)]) -> Value {
        let items: Vec<Value> = lines
            .iter()
            .map(|(m, q)| json!({"medicine_id": m["id"], "quantity": q}))
            .collect();
        let (status, rx) = self
            .app
            .post(
                "/prescriptions",
                &self.pharmacist,
                json!({"patient_name": "Amina", "patient_id_number": "CM900",
                       "prescriber_name": "Dr Okello", "prescriber_license": "UMDPC-77",
                       "items": items}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{rx}");
        rx
    }

    fn sale(lines: &[(&Value, i64)], rx: Option<&Value>) -> Value {
        let items: Vec<Value> = lines
            .iter()
            .map(|(m, q)| json!({"medicine_id": m["id"], "quantity": q}))
            .collect();
        let mut body = json!({"items": items, "payment_method": "cash"});
        if let Some(rx) = rx {
            body["prescription_id"] = rx["id"].clone();
        }
        body
    }

    async fn sell(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.app.post("/sales", token, body).await
    }

    async fn read_rx(&self, rx: &Value) -> Value {
        let (status, read) = self
            .app
            .get(
                &format!("/prescriptions/{}", rx["id"].as_str().unwrap()),
                &self.pharmacist,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{read}");
        read
    }

    /// `dispensed_quantity` of each line, in order.
    async fn dispensed(&self, rx: &Value) -> Vec<i64> {
        self.read_rx(rx).await["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["dispensed_quantity"].as_i64().unwrap())
            .collect()
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    async fn push(&self, token: &str, changes: Vec<Value>) -> Value {
        let (status, body) = self
            .app
            .post(
                "/sync/push",
                token,
                json!({"device_id": self.device, "changes": changes}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

fn pushed_sale(cmid: &str, payload: Value) -> Value {
    json!({"client_mutation_id": cmid, "entity": "sale", "op": "create", "payload": payload})
}

fn detail(problem: &Value) -> &str {
    problem["detail"].as_str().unwrap()
}

#[tokio::test]
async fn one_prescription_no_longer_authorises_unlimited_controlled_drugs() {
    let c = Counter::open().await;
    // The finding: a prescription for 1 unit of another medicine, and 100
    // units of a controlled one sold against it three times.
    let rx = c.rx(&[(&c.rx_only, 1)]).await;
    for _ in 0..3 {
        let (status, problem) = c
            .sell(
                &c.cashier,
                Counter::sale(&[(&c.controlled, 100)], Some(&rx)),
            )
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "items[0].medicine_id");
        assert!(detail(&problem).contains("Morphine 10mg"), "{problem}");
        assert!(detail(&problem).contains(" 0 "), "{problem}");
    }
    assert_eq!(
        c.scalar("SELECT count(*) FROM controlled_dispenses").await,
        0
    );
    assert_eq!(c.scalar("SELECT count(*) FROM sales").await, 0);
    assert_eq!(c.read_rx(&rx).await["status"], "PENDING");
    assert_eq!(c.dispensed(&rx).await, [0]);
}

#[tokio::test]
async fn a_sale_sells_at_most_what_the_prescription_has_left_per_line() {
    let c = Counter::open().await;
    let rx = c.rx(&[(&c.controlled, 3), (&c.otc, 2)]).await;
    // More than prescribed: 400 naming the line, the medicine and what is left.
    let (status, problem) = c
        .sell(
            &c.cashier,
            Counter::sale(&[(&c.otc, 1), (&c.controlled, 4)], Some(&rx)),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[1].quantity");
    assert!(
        detail(&problem).contains("allows 3 more of Morphine 10mg"),
        "{problem}"
    );
    // A medicine not on it, even over the counter, is not sold against it.
    let (status, problem) = c
        .sell(
            &c.cashier,
            Counter::sale(&[(&c.controlled, 1), (&c.rx_only, 1)], Some(&rx)),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[1].medicine_id");
    assert!(detail(&problem).contains("Amoxicillin 500mg"), "{problem}");
    assert_eq!(c.dispensed(&rx).await, [0, 0]);

    let (status, first) = c
        .sell(&c.cashier, Counter::sale(&[(&c.controlled, 2)], Some(&rx)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(c.dispensed(&rx).await, [2, 0]);
    assert_eq!(c.read_rx(&rx).await["status"], "PENDING");
    // What earlier sales gave out counts, and so do earlier lines of the
    // same sale.
    let (status, problem) = c
        .sell(
            &c.cashier,
            Counter::sale(&[(&c.controlled, 1), (&c.controlled, 1)], Some(&rx)),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[1].quantity");
    assert!(
        detail(&problem).contains("allows 0 more of Morphine 10mg"),
        "{problem}"
    );
    let (status, problem) = c
        .sell(&c.cashier, Counter::sale(&[(&c.controlled, 2)], Some(&rx)))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert!(
        detail(&problem).contains("allows 1 more of Morphine 10mg"),
        "{problem}"
    );
    assert_eq!(c.dispensed(&rx).await, [2, 0]);
    assert_eq!(
        c.scalar("SELECT coalesce(sum(quantity), 0) FROM controlled_dispenses")
            .await,
        2
    );
    c.app.assert_invariants().await;
}

#[tokio::test]
async fn prescription_only_and_controlled_medicines_must_be_on_the_named_prescription() {
    let c = Counter::open().await;
    let rx = c.rx(&[(&c.otc, 5)]).await;
    for m in [&c.rx_only, &c.controlled, &c.unflagged] {
        // Without a prescription: 400 on `prescription_id`.
        let (status, problem) = c.sell(&c.cashier, Counter::sale(&[(m, 1)], None)).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "prescription_id", "{m}");
        // With one that does not list it: 400 on the line.
        let (status, problem) = c
            .sell(&c.cashier, Counter::sale(&[(&c.otc, 1), (m, 1)], Some(&rx)))
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "items[1].medicine_id", "{m}");
    }
    assert_eq!(c.scalar("SELECT count(*) FROM sales").await, 0);
    assert_eq!(c.dispensed(&rx).await, [0]);
}

#[tokio::test]
async fn the_prescription_becomes_dispensed_by_itself_when_every_line_is_filled() {
    let c = Counter::open().await;
    let rx = c.rx(&[(&c.controlled, 2), (&c.otc, 1)]).await;
    let (status, first) = c
        .sell(&c.cashier, Counter::sale(&[(&c.controlled, 2)], Some(&rx)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let read = c.read_rx(&rx).await;
    assert_eq!(read["status"], "PENDING");
    assert!(read["sale_id"].is_null() && read["dispensed_at"].is_null());

    let (status, last) = c
        .sell(&c.pharmacist, Counter::sale(&[(&c.otc, 1)], Some(&rx)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{last}");
    let done = c.read_rx(&rx).await;
    assert_eq!(done["status"], "DISPENSED", "{done}");
    assert_eq!(done["sale_id"], last["id"]);
    assert_eq!(done["dispensed_by"], c.pharmacist_id.to_string());
    assert_eq!(done["dispensed_at"], last["created_at"]);
    assert_eq!(c.dispensed(&rx).await, [2, 1]);
    // Each sale against it is on record with what it gave out.
    let client = c.app.pool.get().await.unwrap();
    let rx_id: Uuid = rx["id"].as_str().unwrap().parse().unwrap();
    let given: i64 = client
        .query_one(
            "SELECT coalesce(sum(i.quantity), 0)::bigint FROM sale_items i
             JOIN sales s ON s.id = i.sale_id WHERE s.prescription_id = $1",
            &[&rx_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(given, 3);
    // The book shows it dispensed by that sale.
    let (_, book) = c
        .app
        .get("/compliance/prescription-book", &c.pharmacist)
        .await;
    assert_eq!(book["items"][0]["status"], "DISPENSED", "{book}");
    assert_eq!(book["items"][0]["sale_id"], last["id"]);
    // A dispensed prescription covers no further sale.
    let (status, problem) = c
        .sell(&c.cashier, Counter::sale(&[(&c.otc, 1)], Some(&rx)))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "prescription_id");
}

#[tokio::test]
async fn the_dispense_route_still_closes_a_prescription_filled_elsewhere() {
    let c = Counter::open().await;
    // Partly filled here; the rest was filled elsewhere.
    let rx = c.rx(&[(&c.controlled, 2), (&c.otc, 1)]).await;
    let (status, sale) = c
        .sell(&c.cashier, Counter::sale(&[(&c.controlled, 1)], Some(&rx)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let (status, done) = c
        .app
        .post(
            &format!("/prescriptions/{}/dispense", rx["id"].as_str().unwrap()),
            &c.pharmacist,
            json!({"sale_id": sale["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "DISPENSED");
    assert_eq!(done["sale_id"], sale["id"]);
    assert_eq!(c.dispensed(&rx).await, [1, 0]);
    // Not filled here at all: a sale of the branch that named no prescription.
    let other = c.rx(&[(&c.rx_only, 1)]).await;
    let (status, plain) = c
        .sell(&c.cashier, Counter::sale(&[(&c.otc, 1)], None))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{plain}");
    let (status, done) = c
        .app
        .post(
            &format!("/prescriptions/{}/dispense", other["id"].as_str().unwrap()),
            &c.pharmacist,
            json!({"sale_id": plain["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "DISPENSED");
}

#[tokio::test]
async fn a_partly_dispensed_prescription_can_be_neither_cancelled_nor_deleted() {
    let c = Counter::open().await;
    let rx = c.rx(&[(&c.controlled, 5)]).await;
    let (status, sale) = c
        .sell(&c.cashier, Counter::sale(&[(&c.controlled, 1)], Some(&rx)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let path = format!("/prescriptions/{}", rx["id"].as_str().unwrap());
    let (status, problem) = c
        .app
        .post(&format!("{path}/cancel"), &c.pharmacist, json!({}))
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    assert!(detail(&problem).contains("dispensed"), "{problem}");
    let (status, problem) = c
        .app
        .call(Method::DELETE, &path, Some(&c.admin), None)
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    let read = c.read_rx(&rx).await;
    assert_eq!(read["status"], "PENDING");
    // It stays in the prescription book.
    let (_, book) = c
        .app
        .get("/compliance/prescription-book", &c.pharmacist)
        .await;
    assert_eq!(book["total"], 1, "{book}");
    // The database refuses it too, whoever writes.
    let client = c.app.pool.get().await.unwrap();
    let rx_id: Uuid = rx["id"].as_str().unwrap().parse().unwrap();
    for sql in [
        "UPDATE prescriptions SET status = 'CANCELLED' WHERE id = $1",
        "UPDATE prescriptions SET is_deleted = true WHERE id = $1",
        "UPDATE prescription_items SET dispensed_quantity = 6 WHERE prescription_id = $1",
    ] {
        assert!(client.execute(sql, &[&rx_id]).await.is_err(), "{sql}");
    }
    // Still untouched: it can be cancelled or deleted.
    let fresh = c.rx(&[(&c.controlled, 1)]).await;
    let (status, _) = c
        .app
        .post(
            &format!("/prescriptions/{}/cancel", fresh["id"].as_str().unwrap()),
            &c.pharmacist,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn concurrent_sales_against_one_prescription_never_dispense_more_than_prescribed() {
    let c = Counter::open().await;
    let other = c.app.second_process();
    let bases = [c.app.base.clone(), other.base.clone()];
    let tokens = [c.cashier.clone(), c.pharmacist.clone(), c.manager.clone()];
    for round in 0..3 {
        let rx = c.rx(&[(&c.controlled, 3)]).await;
        // Ten sales of one unit at once, over two server processes.
        let tries = (0..10).map(|i| {
            let url = format!("{}/sales", bases[i % 2]);
            let token = tokens[i % tokens.len()].clone();
            let body = Counter::sale(&[(&c.controlled, 1)], Some(&rx));
            let http = c.app.http.clone();
            async move {
                let res = http
                    .post(url)
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                res.status()
            }
        });
        let statuses = join_all(tries).await;
        let made = statuses
            .iter()
            .filter(|s| **s == StatusCode::CREATED)
            .count();
        assert_eq!(made, 3, "round {round}: {statuses:?}");
        assert!(
            statuses
                .iter()
                .all(|s| *s == StatusCode::CREATED || *s == StatusCode::BAD_REQUEST),
            "round {round}: {statuses:?}"
        );
        assert_eq!(c.dispensed(&rx).await, [3]);
        assert_eq!(c.read_rx(&rx).await["status"], "DISPENSED");
    }
    assert_eq!(
        c.scalar("SELECT coalesce(sum(quantity), 0) FROM controlled_dispenses")
            .await,
        9
    );
    assert_eq!(
        c.scalar("SELECT count(*) FROM sales WHERE prescription_id IS NOT NULL")
            .await,
        9
    );

    // A sale racing a cancel: one of them wins, never both.
    for _ in 0..5 {
        let rx = c.rx(&[(&c.controlled, 2)]).await;
        let path = format!("/prescriptions/{}/cancel", rx["id"].as_str().unwrap());
        let cancel = c.app.post(&path, &c.admin, json!({}));
        let sell = c.sell(&c.cashier, Counter::sale(&[(&c.controlled, 1)], Some(&rx)));
        let ((cancelled, _), (sold, _)) = tokio::join!(cancel, sell);
        let read = c.read_rx(&rx).await;
        match (cancelled, sold) {
            (StatusCode::OK, StatusCode::BAD_REQUEST) => {
                assert_eq!(read["status"], "CANCELLED");
                assert_eq!(c.dispensed(&rx).await, [0]);
            }
            (StatusCode::CONFLICT, StatusCode::CREATED) => {
                assert_eq!(read["status"], "PENDING");
                assert_eq!(c.dispensed(&rx).await, [1]);
            }
            other => panic!("cancel and sale: {other:?}"),
        }
    }
    c.app.assert_invariants().await;
}

#[tokio::test]
async fn a_controlled_medicine_needs_a_prescription_whatever_its_flag_through_rest_and_push() {
    let c = Counter::open().await;
    let (status, problem) = c
        .sell(&c.cashier, Counter::sale(&[(&c.unflagged, 2)], None))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "prescription_id");
    assert!(detail(&problem).contains("controlled"), "{problem}");

    let rx = c.rx(&[(&c.unflagged, 2)]).await;
    let answer = c
        .push(
            &c.cashier,
            vec![
                pushed_sale("no-rx", Counter::sale(&[(&c.unflagged, 2)], None)),
                pushed_sale("with-rx", Counter::sale(&[(&c.unflagged, 2)], Some(&rx))),
                pushed_sale("again", Counter::sale(&[(&c.unflagged, 1)], Some(&rx))),
            ],
        )
        .await;
    let rejected = answer["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 2, "{answer}");
    assert_eq!(rejected[0]["client_mutation_id"], "no-rx");
    assert_eq!(rejected[0]["code"], "prescription_required");
    assert_eq!(rejected[0]["field"], "prescription_id");
    // Filled by the first: the prescription is dispensed.
    assert_eq!(rejected[1]["client_mutation_id"], "again");
    assert_eq!(rejected[1]["field"], "prescription_id");
    assert_eq!(answer["accepted"][0]["client_mutation_id"], "with-rx");
    assert_eq!(c.read_rx(&rx).await["status"], "DISPENSED");

    // The register row names the prescription's patient and doctor.
    let (_, book) = c
        .app
        .get("/compliance/classified-drugs-book", &c.pharmacist)
        .await;
    assert_eq!(book["total"], 1, "{book}");
    let row = &book["items"][0];
    assert_eq!(row["medicine_name"], "Pethidine 50mg");
    assert_eq!(row["quantity"], 2);
    assert_eq!(row["patient_national_id"], "CM900");
    assert_eq!(row["doctor_license"], "UMDPC-77");
    assert_eq!(row["sale_id"], answer["accepted"][0]["id"]);
}

#[tokio::test]
async fn the_register_takes_the_patient_from_the_prescription_not_the_customer() {
    let c = Counter::open().await;
    let (status, customer) = c
        .app
        .post(
            "/customers",
            &c.admin,
            json!({"name": "Buyer", "national_id": "CM-BUYER-1", "is_credit_allowed": true,
                   "credit_limit": 1_000_000}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{customer}");
    let rx = c.rx(&[(&c.controlled, 4)]).await;
    for (method, qty) in [("card", 1), ("credit", 2)] {
        let mut body = Counter::sale(&[(&c.controlled, qty)], Some(&rx));
        body["customer_id"] = customer["id"].clone();
        body["payment_method"] = json!(method);
        let (status, sale) = c.sell(&c.manager, body).await;
        assert_eq!(status, StatusCode::CREATED, "{sale}");
    }
    let client = c.app.pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT patient_national_id, doctor_license FROM controlled_dispenses",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r.get::<_, String>(0), "CM900");
        assert_eq!(r.get::<_, String>(1), "UMDPC-77");
    }
}

#[tokio::test]
async fn a_price_below_the_selling_price_needs_a_manager_or_pharmacist_and_is_audited() {
    let c = Counter::open().await;
    let priced = |price: Value| {
        json!({"items": [{"medicine_id": c.otc["id"], "quantity": 2, "unit_price": price}],
               "payment_method": "cash"})
    };
    // A cashier: 403 at 0.00 or one shilling under, nothing written.
    for price in [json!("0.00"), json!(0), json!(499.99)] {
        let (status, problem) = c.sell(&c.cashier, priced(price)).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    assert_eq!(c.scalar("SELECT count(*) FROM sales").await, 0);
    // At or above the selling price a cashier sells as before, unaudited.
    for price in [json!(500), json!("650.00")] {
        let (status, sale) = c.sell(&c.cashier, priced(price)).await;
        assert_eq!(status, StatusCode::CREATED, "{sale}");
    }
    // Through push: a `forbidden` rejection.
    let answer = c
        .push(&c.cashier, vec![pushed_sale("free", priced(json!("0.00")))])
        .await;
    assert_eq!(answer["rejected"][0]["code"], "forbidden", "{answer}");
    assert_eq!(answer["accepted"].as_array().unwrap().len(), 0);
    assert_eq!(c.scalar("SELECT count(*) FROM sales").await, 2);
    let (_, log) = c.app.get("/audit-log?entity_type=sale", &c.admin).await;
    assert_eq!(log["total"], 0, "{log}");

    // An admin, a branch manager and a pharmacist may, and each override
    // is in the audit log with both prices.
    let mut sold = Vec::new();
    for (token, price) in [
        (&c.admin, json!("0.00")),
        (&c.manager, json!(400)),
        (&c.pharmacist, json!("250.50")),
    ] {
        let (status, sale) = c.sell(token, priced(price)).await;
        assert_eq!(status, StatusCode::CREATED, "{sale}");
        sold.push(sale);
    }
    let answer = c
        .push(&c.admin, vec![pushed_sale("cheap", priced(json!(100)))])
        .await;
    assert_eq!(answer["accepted"].as_array().unwrap().len(), 1, "{answer}");

    let (status, log) = c.app.get("/audit-log?entity_type=sale", &c.admin).await;
    assert_eq!(status, StatusCode::OK, "{log}");
    assert_eq!(log["total"], 4, "{log}");
    for sale in &sold {
        let entry = log["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["entity_id"] == sale["id"])
            .unwrap_or_else(|| panic!("no entry for {sale}"));
        assert_eq!(entry["action"], "price_override");
        assert_eq!(entry["actor_id"], sale["created_by"]);
        assert_eq!(entry["before"]["unit_price"], "500.00", "{entry}");
        assert_eq!(
            entry["after"]["unit_price"], sale["items"][0]["unit_price"],
            "{entry}"
        );
        assert_eq!(entry["after"]["medicine_id"], c.otc["id"]);
        assert_eq!(entry["after"]["quantity"], 2);
    }
    let prices: Vec<&str> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["after"]["unit_price"].as_str().unwrap())
        .collect();
    for p in ["0.00", "400.00", "250.50", "100.00"] {
        assert!(prices.contains(&p), "{prices:?}");
    }
    // The entries belong to the selling branch: its auditor reads them,
    // another branch's auditor does not.
    let (_, own_auditor) = c.app.signed_in(c.branch, Role::Auditor).await;
    let (_, log) = c.app.get("/audit-log?entity_type=sale", &own_auditor).await;
    assert_eq!(log["total"], 4, "{log}");
    let other = c.app.branch("OTH").await;
    let (_, other_auditor) = c.app.signed_in(other, Role::Auditor).await;
    let (_, log) = c
        .app
        .get("/audit-log?entity_type=sale", &other_auditor)
        .await;
    assert_eq!(log["total"], 0, "{log}");
}
