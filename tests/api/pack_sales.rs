//! Selling by the pack and by scan: whole packs first expiry first, pack
//! prices, packs against a prescription, returns counting packs, a scanned
//! batch sold as named, serials dispensed once (two processes too), and
//! pushed sales doing the same.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// GS1's example GTIN-14 (a box of 100).
const BOX_GTIN: &str = "09501101530003";
/// A valid GTIN-13 (a strip of 10).
const STRIP_GTIN: &str = "4006381333931";

/// A branch, its staff, a medicine sold by the tablet, the strip (10,
/// priced from the tablet) and the box (100, its own price), and two
/// batches: `OLD` (15 tablets, expiring first) and `NEW` (200).
struct Counter {
    app: TestApp,
    branch: Uuid,
    admin: String,
    cashier: String,
    medicine: Value,
    strip: Value,
    boxed: Value,
    old: Value,
    new: Value,
}

impl Counter {
    async fn open() -> Counter {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Paracetamol 500mg", "selling_price": 100, "unit": "tablet"}),
            )
            .await;
        let packs = format!("/medicines/{}/packs", medicine["id"].as_str().unwrap());
        let (status, strip) = app
            .post(
                &packs,
                &admin,
                json!({"name": "strip", "units": 10, "gtin": STRIP_GTIN}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{strip}");
        let (status, boxed) = app
            .post(
                &packs,
                &admin,
                json!({"name": "box", "units": 100, "gtin": BOX_GTIN, "selling_price": "9000.00"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{boxed}");
        let mut c = Counter {
            app,
            branch,
            admin,
            cashier,
            medicine,
            strip,
            boxed,
            old: Value::Null,
            new: Value::Null,
        };
        c.old = c.receive("OLD", 15, "2027-06-30").await;
        c.new = c.receive("NEW", 200, "2029-06-30").await;
        c
    }

    async fn receive(&self, number: &str, qty: i64, expiry: &str) -> Value {
        let supplier = self.app.supplier("Test Supplier").await;
        let (status, b) = self
            .app
            .post(
                "/purchases",
                &self.admin,
                json!({"supplier_id": supplier, "medicine_id": self.medicine["id"],
                       "branch_id": self.branch, "batch_number": number,
                       "expiry_date": expiry, "quantity": qty, "unit_cost": "40.00"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{b}");
        b
    }

    async fn sell(&self, items: Value) -> (StatusCode, Value) {
        self.app
            .post(
                "/sales",
                &self.cashier,
                json!({"items": items, "payment_method": "cash"}),
            )
            .await
    }

    async fn left(&self, batch: &Value) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        let id: Uuid = batch["id"].as_str().unwrap().parse().unwrap();
        let n: i32 = client
            .query_one("SELECT qty_remaining FROM batches WHERE id = $1", &[&id])
            .await
            .unwrap()
            .get(0);
        i64::from(n)
    }

    fn line(&self, pack: &Value, quantity: i64) -> Value {
        json!({"medicine_id": self.medicine["id"], "pack_id": pack["id"], "quantity": quantity})
    }

    fn code(&self, gtin: &str, batch: &str, serial: &str) -> String {
        format!("]d201{gtin}17290630\u{1d}10{batch}\u{1d}21{serial}")
    }
}

fn line_of<'a>(sale: &'a Value, batch: &Value) -> Vec<&'a Value> {
    sale["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["batch_id"] == batch["id"])
        .collect()
}

#[tokio::test]
async fn a_box_a_strip_and_three_tablets_sell_from_one_stock() {
    let c = Counter::open().await;
    let (status, sale) = c
        .sell(json!([
            c.line(&c.boxed, 1),
            c.line(&c.strip, 1),
            {"medicine_id": c.medicine["id"], "quantity": 3},
        ]))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let items = sale["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    // The box passes over OLD (15 tablets, less than a box) for NEW.
    assert_eq!(items[0]["batch_id"], c.new["id"]);
    assert_eq!(items[0]["pack_id"], c.boxed["id"]);
    assert_eq!(items[0]["pack_units"], 100);
    assert_eq!(items[0]["quantity"], 1);
    assert_eq!(items[0]["base_quantity"], 100);
    assert_eq!(items[0]["unit_price"], "9000.00");
    assert_eq!(items[0]["line_total"], "9000.00");
    // The strip comes whole out of OLD, priced 10 × 100.
    assert_eq!(items[1]["batch_id"], c.old["id"]);
    assert_eq!(items[1]["pack_units"], 10);
    assert_eq!(items[1]["base_quantity"], 10);
    assert_eq!(items[1]["unit_price"], "1000.00");
    // Three loose tablets from what OLD has left.
    assert_eq!(items[2]["batch_id"], c.old["id"]);
    assert!(items[2]["pack_id"].is_null());
    assert_eq!(items[2]["pack_units"], 1);
    assert_eq!(items[2]["base_quantity"], 3);
    assert_eq!(sale["total"], "10300.00");
    assert_eq!(c.left(&c.old).await, 2);
    assert_eq!(c.left(&c.new).await, 100);

    // Read back the same.
    let (status, read) = c
        .app
        .get(
            &format!("/sales/{}", sale["id"].as_str().unwrap()),
            &c.cashier,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["items"], sale["items"]);
    c.app.assert_invariants().await;

    // A second box fits NEW whole; a third does not exist anywhere whole
    // (OLD's 2 tablets and nothing else), though the units are there.
    let (status, problem) = c.sell(json!([c.line(&c.boxed, 2)])).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["code"], "insufficient_stock");
    assert_eq!(problem["field"], "items[0].quantity");
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .contains("1 whole packs"));
    assert_eq!(c.left(&c.new).await, 100);
    // Loose units still sell out of both batches.
    let (status, sale) = c
        .sell(json!([{"medicine_id": c.medicine["id"], "quantity": 5}]))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(line_of(&sale, &c.old)[0]["quantity"], 2);
    assert_eq!(line_of(&sale, &c.new)[0]["quantity"], 3);
    c.app.assert_invariants().await;
}

#[tokio::test]
async fn a_pack_line_needs_an_active_sellable_pack_of_its_medicine() {
    let c = Counter::open().await;
    let other = c
        .app
        .medicine(&c.admin, json!({"name": "Ibuprofen", "selling_price": 50}))
        .await;
    let packs = format!("/medicines/{}/packs", other["id"].as_str().unwrap());
    let (_, foreign) = c
        .app
        .post(&packs, &c.admin, json!({"name": "strip", "units": 10}))
        .await;
    let own = format!("/medicines/{}/packs", c.medicine["id"].as_str().unwrap());
    let (_, shelf_only) = c
        .app
        .post(
            &own,
            &c.admin,
            json!({"name": "tub", "units": 5, "is_sellable": false}),
        )
        .await;
    let (status, gone) = c
        .app
        .post(&own, &c.admin, json!({"name": "pouch", "units": 4}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = c
        .app
        .call(
            reqwest::Method::DELETE,
            &format!("{own}/{}", gone["id"].as_str().unwrap()),
            Some(&c.admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for pack in [&foreign, &shelf_only, &gone, &json!({"id": Uuid::now_v7()})] {
        let (status, problem) = c
            .sell(json!([{"medicine_id": c.medicine["id"], "quantity": 1},
                         c.line(pack, 1)]))
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["code"], "validation_failed");
        assert_eq!(problem["field"], "items[1].pack_id", "{problem}");
    }
    assert_eq!(c.left(&c.old).await, 15);
    // A price below the pack's price is an override (cashiers may not).
    let mut cheap = c.line(&c.boxed, 1);
    cheap["unit_price"] = json!("8000.00");
    let (status, problem) = c.sell(json!([cheap])).await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_return_counts_the_packs_of_the_line_it_returns() {
    let c = Counter::open().await;
    let (status, sale) = c.sell(json!([c.line(&c.strip, 2)])).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    // Two strips, whole, from OLD (15 → one strip) and NEW.
    assert_eq!(sale["items"].as_array().unwrap().len(), 2);
    let line = &line_of(&sale, &c.new)[0];
    assert_eq!(line["quantity"], 1);
    let path = format!("/sales/{}/returns", sale["id"].as_str().unwrap());
    let ret = |qty: i64| {
        json!({"items": [{"sale_item_id": line["id"], "quantity": qty}],
               "reason": "unopened", "restock": true})
    };
    let (status, problem) = c.app.post(&path, &c.admin, ret(2)).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["code"], "return_exceeds_sold");
    assert!(problem["detail"].as_str().unwrap().contains("at most 1"));
    let before = c.left(&c.new).await;
    let (status, note) = c.app.post(&path, &c.admin, ret(1)).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["items"][0]["quantity"], 1);
    assert_eq!(note["items"][0]["pack_units"], 10);
    assert_eq!(note["items"][0]["base_quantity"], 10);
    assert_eq!(note["total"], "1000.00");
    assert_eq!(c.left(&c.new).await, before + 10);
    let (status, problem) = c.app.post(&path, &c.admin, ret(1)).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    c.app.assert_invariants().await;
}

#[tokio::test]
async fn a_scanned_pack_sells_its_own_batch_and_its_serial_once() {
    let c = Counter::open().await;
    // The code names NEW: it is sold although OLD expires first.
    let code = c.code(BOX_GTIN, "NEW", "SN0001");
    let (status, sale) = c.sell(json!([{"scan": code, "quantity": 1}])).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let item = &sale["items"][0];
    assert_eq!(item["batch_id"], c.new["id"]);
    assert_eq!(item["pack_id"], c.boxed["id"]);
    assert_eq!(item["medicine_id"], c.medicine["id"]);
    assert_eq!(item["serial"], "SN0001");
    assert_eq!(item["base_quantity"], 100);
    // The strip's GTIN-13, without batch or serial: FEFO, whole strips.
    let (status, strips) = c.sell(json!([{"scan": STRIP_GTIN, "quantity": 1}])).await;
    assert_eq!(status, StatusCode::CREATED, "{strips}");
    assert_eq!(strips["items"][0]["batch_id"], c.old["id"]);
    assert!(strips["items"][0]["serial"].is_null());

    // The serial again, anywhere: 409 naming the sale that took it.
    let (status, problem) = c.sell(json!([{"scan": code, "quantity": 1}])).await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    assert_eq!(problem["code"], "serial_already_dispensed");
    assert_eq!(problem["field"], "items[0].scan");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains(sale["invoice_number"].as_str().unwrap()),
        "{detail}"
    );
    let other_branch = c.app.branch("MBR").await;
    let (_, admin_b) = c.app.signed_in(other_branch, Role::Admin).await;
    let (status, problem) = c
        .app
        .post(
            "/sales",
            &admin_b,
            json!({"items": [{"scan": code, "quantity": 1}], "payment_method": "cash"}),
        )
        .await;
    // Branch MBR holds no batch NEW: FEFO there, and no stock at all.
    assert!(status.is_client_error(), "{problem}");
    assert_eq!(c.left(&c.new).await, 100);

    // A return that restocks the box frees its serial.
    let path = format!("/sales/{}/returns", sale["id"].as_str().unwrap());
    let (status, note) = c
        .app
        .post(
            &path,
            &c.admin,
            json!({"items": [{"sale_item_id": item["id"], "quantity": 1}],
                   "reason": "sealed", "restock": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    let (status, again) = c.sell(json!([{"scan": code, "quantity": 1}])).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    c.app.assert_invariants().await;
}

#[tokio::test]
async fn a_scanned_line_is_refused_for_what_its_code_says() {
    let c = Counter::open().await;
    // A serial names one pack.
    let code = c.code(BOX_GTIN, "NEW", "SN7");
    let (status, problem) = c.sell(json!([{"scan": code, "quantity": 2}])).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[0].quantity");
    // A field given beside the scan must agree with it.
    let (status, problem) = c
        .sell(json!([{"scan": code, "quantity": 1, "pack_id": c.strip["id"]}]))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[0].pack_id");
    let (status, problem) = c
        .sell(json!([{"scan": code, "quantity": 1, "medicine_id": Uuid::now_v7()}]))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[0].medicine_id");
    // Unreadable and unknown codes.
    let (status, problem) = c
        .sell(json!([{"scan": "(01)09501101530004", "quantity": 1}]))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["code"], "invalid_barcode");
    assert_eq!(problem["field"], "items[0].scan");
    let (status, problem) = c
        .sell(json!([{"scan": "(01)04012345000016", "quantity": 1}]))
        .await;
    assert_eq!(problem["code"], "unknown_gtin", "{status} {problem}");
    assert_eq!(problem["field"], "items[0].scan");
    // A line needs a medicine or a scan.
    let (status, problem) = c.sell(json!([{"quantity": 1}])).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[0].medicine_id");

    // A quarantined or recalled batch named by the code never sells.
    for (status_name, why) in [("quarantined", "quarantined"), ("recalled", "recalled")] {
        let (status, body) = c
            .app
            .post(
                &format!(
                    "/supplier-finance/batches/{}/quarantine",
                    c.new["id"].as_str().unwrap()
                ),
                &c.admin,
                json!({"status": status_name}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, problem) = c.sell(json!([{"scan": code, "quantity": 1}])).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["code"], "batch_not_sellable");
        assert_eq!(problem["field"], "items[0].scan");
        assert!(problem["detail"].as_str().unwrap().contains(why));
    }
    assert_eq!(c.left(&c.new).await, 200);
    let client = c.app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM dispensed_serials", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn twenty_concurrent_sales_of_one_serial_in_two_processes_make_one() {
    let c = Counter::open().await;
    let other = c.app.second_process();
    let body = json!({"items": [{"scan": c.code(BOX_GTIN, "NEW", "SN-RACE"), "quantity": 1}],
                      "payment_method": "cash"});
    let answers = c
        .app
        .post_through_both(&other, 20, "/sales", &c.cashier, &body)
        .await;
    let made = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(made, 1, "{answers:?}");
    for (status, body) in &answers {
        if *status != StatusCode::CREATED {
            assert_eq!(*status, StatusCode::CONFLICT, "{body}");
            assert_eq!(body["code"], "serial_already_dispensed");
        }
    }
    assert_eq!(c.left(&c.new).await, 100);
    c.app.assert_invariants().await;
}

#[tokio::test]
async fn a_prescription_counts_the_base_units_a_pack_gives_out() {
    let c = Counter::open().await;
    let rx_only = c
        .app
        .medicine(
            &c.admin,
            json!({"name": "Amoxicillin 250mg", "selling_price": 200, "unit": "capsule",
                   "requires_prescription": true}),
        )
        .await;
    let packs = format!("/medicines/{}/packs", rx_only["id"].as_str().unwrap());
    let (_, strip) = c
        .app
        .post(&packs, &c.admin, json!({"name": "strip", "units": 10}))
        .await;
    c.app
        .receive(&c.admin, &rx_only["id"], c.branch, 50, "2030-01-31")
        .await;
    let (_, pharmacist) = c.app.signed_in(c.branch, Role::Pharmacist).await;
    let (status, rx) = c
        .app
        .post(
            "/prescriptions",
            &pharmacist,
            json!({"patient_name": "Amina", "patient_id_number": "CM900",
                   "prescriber_name": "Dr Okello", "prescriber_license": "UMDPC-77",
                   "items": [{"medicine_id": rx_only["id"], "quantity": 15}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rx}");
    let sale = |packs: i64| {
        json!({"items": [{"medicine_id": rx_only["id"], "pack_id": strip["id"], "quantity": packs}],
               "payment_method": "cash", "prescription_id": rx["id"]})
    };
    let (status, problem) = c.app.post("/sales", &pharmacist, sale(2)).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["code"], "prescription_exceeded");
    let (status, made) = c.app.post("/sales", &pharmacist, sale(1)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (_, read) = c
        .app
        .get(
            &format!("/prescriptions/{}", rx["id"].as_str().unwrap()),
            &pharmacist,
        )
        .await;
    assert_eq!(read["items"][0]["dispensed_quantity"], 10, "{read}");
}

#[tokio::test]
async fn a_pushed_sale_sells_packs_and_scans_by_the_same_rules() {
    let c = Counter::open().await;
    let (status, device) = c
        .app
        .post(
            "/devices",
            &c.admin,
            json!({"name": "Till", "branch_id": c.branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{device}");
    let change = |cmid: &str, items: Value| {
        json!({"client_mutation_id": cmid, "entity": "sale", "op": "create",
               "payload": {"items": items, "payment_method": "cash"}})
    };
    let code = c.code(BOX_GTIN, "NEW", "SN-TILL");
    let (status, body) = c
        .app
        .post(
            "/sync/push",
            &c.cashier,
            json!({"device_id": device["id"], "changes": [
                change("p-1", json!([c.line(&c.strip, 1),
                                     {"medicine_id": c.medicine["id"], "quantity": 3}])),
                change("p-2", json!([{"scan": code, "quantity": 1}])),
                change("p-3", json!([{"scan": code, "quantity": 1}])),
                change("p-4", json!([c.line(&c.boxed, 3)])),
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let accepted: Vec<&str> = body["accepted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["client_mutation_id"].as_str().unwrap())
        .collect();
    assert_eq!(accepted, ["p-1", "p-2"], "{body}");
    let rejected = body["rejected"].as_array().unwrap();
    assert_eq!(rejected[0]["client_mutation_id"], "p-3");
    assert_eq!(rejected[0]["code"], "serial_already_dispensed");
    assert_eq!(rejected[1]["client_mutation_id"], "p-4");
    assert_eq!(rejected[1]["code"], "insufficient_stock");
    // p-1: a strip (OLD) and 3 tablets (OLD); p-2: a box of NEW.
    assert_eq!(c.left(&c.old).await, 2);
    assert_eq!(c.left(&c.new).await, 100);
    c.app.assert_invariants().await;
}
