//! `POST /purchases` by pack and by scan: packs become base units at a
//! cost per base unit to 4 places, while the purchases report and the
//! valuations at cost stay exact to the cent on what was paid; a scanned
//! code fills the medicine, pack, batch and expiry, and a field sent with
//! it must agree. A refused receipt writes nothing.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// GS1's example GTIN-14, given to the box.
const BOX_GTIN: &str = "09501101530003";
/// A valid GTIN-13, given to the medicine's base unit.
const UNIT_GTIN: &str = "4006381333931";

struct Dock {
    app: TestApp,
    branch: Uuid,
    admin: String,
    clerk: String,
    supplier: Uuid,
    medicine: Value,
    /// 10 capsules, with `BOX_GTIN`.
    boxed: Value,
    /// 3 capsules.
    trio: Value,
}

impl Dock {
    async fn open() -> Dock {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, clerk) = app.signed_in(branch, Role::Pharmacist).await;
        let supplier = app.supplier("Quality Chemicals").await;
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Amoxicillin 500mg", "selling_price": 3, "unit": "capsule",
                       "gtin": UNIT_GTIN}),
            )
            .await;
        let mut dock = Dock {
            app,
            branch,
            admin,
            clerk,
            supplier,
            medicine,
            boxed: Value::Null,
            trio: Value::Null,
        };
        dock.boxed = dock
            .pack(
                &dock.medicine,
                json!({"name": "box", "units": 10, "gtin": BOX_GTIN}),
            )
            .await;
        dock.trio = dock
            .pack(&dock.medicine, json!({"name": "trio", "units": 3}))
            .await;
        dock
    }

    async fn pack(&self, medicine: &Value, body: Value) -> Value {
        let path = format!("/medicines/{}/packs", medicine["id"].as_str().unwrap());
        let (status, pack) = self.app.post(&path, &self.admin, body).await;
        assert_eq!(status, StatusCode::CREATED, "{pack}");
        pack
    }

    /// A purchase body of the dock's supplier and branch, plus `fields`.
    fn body(&self, fields: Value) -> Value {
        let mut body = json!({"supplier_id": self.supplier, "branch_id": self.branch});
        for (k, v) in fields.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    }

    async fn receive(&self, fields: Value) -> (StatusCode, Value) {
        self.app
            .post("/purchases", &self.clerk, self.body(fields))
            .await
    }

    async fn count(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    /// Nothing was received: no batch, no movement, no batch change.
    async fn assert_nothing_written(&self) {
        assert_eq!(self.count("SELECT count(*) FROM batches").await, 0);
        assert_eq!(self.count("SELECT count(*) FROM stock_movements").await, 0);
        let batch_changes = "SELECT count(*) FROM change_log WHERE entity = 'batch'";
        assert_eq!(self.count(batch_changes).await, 0);
    }
}

#[tokio::test]
async fn packs_are_received_as_base_units_at_a_cost_per_unit_to_four_places() {
    let d = Dock::open().await;
    let m = &d.medicine["id"];
    // 5 boxes of 10 at 12.35 a box: 50 capsules at 1.2350.
    let (status, b) = d
        .receive(
            json!({"medicine_id": m, "pack_id": d.boxed["id"], "batch_number": "BX-1",
                        "expiry_date": "2028-06-30", "quantity": 5, "unit_cost": "12.35"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["qty_received"], 50);
    assert_eq!(b["qty_remaining"], 50);
    assert_eq!(b["unit_cost"], "1.2350");
    assert_eq!(b["pack_id"], d.boxed["id"]);
    assert_eq!(b["pack_units"], 10);
    assert_eq!(b["base_quantity"], 50);
    assert_eq!(b["received_total"], "61.75");
    assert_eq!(b["medicine_name"], "Amoxicillin 500mg");
    // 7 trios at 10.00: 21 capsules at 3.3333, which × 21 is 69.9993.
    let (status, t) = d
        .receive(
            json!({"medicine_id": m, "pack_id": d.trio["id"], "batch_number": "TR-1",
                        "expiry_date": "2020-01-31", "quantity": 7, "unit_cost": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    assert_eq!(t["qty_received"], 21);
    assert_eq!(t["unit_cost"], "3.3333");
    assert_eq!(t["received_total"], "70.00");
    // Loose units answer as they always did.
    let (status, l) = d
        .receive(
            json!({"medicine_id": m, "batch_number": "LS-1", "expiry_date": "2030-01-31",
                        "quantity": 4, "unit_cost": 1.5}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{l}");
    assert_eq!(l["unit_cost"], "1.50");
    assert!(l["pack_id"].is_null());
    assert_eq!(l["pack_units"], 1);
    assert_eq!(l["base_quantity"], 4);
    assert_eq!(l["received_total"], "6.00");

    // The stock and the ledger count base units.
    let (_, read) = d
        .app
        .get(&format!("/medicines/{}", m.as_str().unwrap()), &d.clerk)
        .await;
    assert_eq!(read["stock_quantity"], 75);
    let box_in = format!(
        "SELECT qty::bigint FROM stock_movements WHERE batch_id = '{}' AND kind = 'IN'",
        b["id"].as_str().unwrap()
    );
    assert_eq!(d.count(&box_in).await, 50);
    // The purchases report spends what was paid, to the cent.
    let (status, report) = d.app.get("/reports/purchases", &d.admin).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["totals"]["units"], 75);
    assert_eq!(report["totals"]["spend"], 137.75, "{report}");
    assert_eq!(report["by_supplier"][0]["spend"], 137.75);
    assert_eq!(report["by_medicine"][0]["spend"], 137.75);
    assert_eq!(report["by_medicine"][0]["units"], 75);
    // The expired trios are worth what they cost, listed and in the report.
    let (_, expired) = d.app.get("/stock/expired", &d.admin).await;
    assert_eq!(expired["items"][0]["unit_cost"], "3.3333", "{expired}");
    assert_eq!(expired["items"][0]["value"], "70.00");
    let (_, inventory) = d.app.get("/reports/inventory", &d.admin).await;
    assert_eq!(inventory["expired_value"], 70.0, "{inventory}");
    // A till sees the cost per base unit; a sale records it to 4 places.
    let (_, snapshot) = d.app.get("/sync/snapshot", &d.clerk).await;
    let costs: Vec<f64> = snapshot["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["unit_cost"].as_f64().unwrap())
        .collect();
    assert!(costs.contains(&1.235) && costs.contains(&1.5), "{costs:?}");
    let (status, sale) = d
        .app
        .post(
            "/sales",
            &d.clerk,
            json!({"items": [{"medicine_id": m, "quantity": 2}], "payment_method": "cash"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["items"][0]["batch_id"], b["id"]);
    assert_eq!(sale["items"][0]["cost_at_sale"], "1.2350");
    let path = format!("/sales/{}", sale["id"].as_str().unwrap());
    let (_, again) = d.app.get(&path, &d.clerk).await;
    assert_eq!(again["items"][0]["cost_at_sale"], "1.2350");
    // Writing the expired trios off values them at what they cost.
    let (status, w) = d
        .app
        .post(
            "/stock/write-offs",
            &d.admin,
            json!({"reason": "expired", "items": [{"batch_id": t["id"], "quantity": 21}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    assert_eq!(w["total_value"], "70.00");
    assert_eq!(w["items"][0]["unit_cost"], "3.3333");
    d.app.assert_invariants().await;
}

#[tokio::test]
async fn a_pack_must_be_an_active_pack_of_the_medicine() {
    let d = Dock::open().await;
    let other = d
        .app
        .medicine(&d.admin, json!({"name": "Paracetamol", "selling_price": 1}))
        .await;
    let others = d.pack(&other, json!({"name": "box", "units": 20})).await;
    let idle = d
        .pack(&d.medicine, json!({"name": "carton", "units": 100}))
        .await;
    let gone = d
        .pack(&d.medicine, json!({"name": "crate", "units": 1000}))
        .await;
    let packs = format!("/medicines/{}/packs", d.medicine["id"].as_str().unwrap());
    let (status, _) = d
        .app
        .call(
            Method::PUT,
            &format!("{packs}/{}", idle["id"].as_str().unwrap()),
            Some(&d.admin),
            Some(json!({"is_active": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = d
        .app
        .call(
            Method::DELETE,
            &format!("{packs}/{}", gone["id"].as_str().unwrap()),
            Some(&d.admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let good = json!({"medicine_id": d.medicine["id"], "batch_number": "BX-1",
                      "expiry_date": "2028-06-30", "quantity": 5, "unit_cost": "12.35"});
    for pack in [
        json!(Uuid::now_v7()),
        others["id"].clone(),
        idle["id"].clone(),
        gone["id"].clone(),
        json!("box"),
    ] {
        let mut body = good.clone();
        body["pack_id"] = pack.clone();
        let (status, problem) = d.receive(body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "pack_id", "{pack}: {problem}");
        assert_eq!(problem["code"], "validation_failed");
    }
    // More base units than one receipt takes, or a total beyond any amount.
    let trio = d.trio["id"].clone();
    for (quantity, cost, field) in [
        (json!(400_000), json!(1), "quantity"),
        (json!(300_000), json!("9999999.99"), "unit_cost"),
        (json!(5), json!("1.234"), "unit_cost"),
    ] {
        let mut body = good.clone();
        body["pack_id"] = trio.clone();
        body["quantity"] = quantity;
        body["unit_cost"] = cost;
        let (status, problem) = d.receive(body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{problem}");
    }
    d.assert_nothing_written().await;
}

#[tokio::test]
async fn a_scan_fills_medicine_pack_batch_and_expiry() {
    let d = Dock::open().await;
    let human = format!("(01){BOX_GTIN}(17)271231(10)AB-123(21)SN0001");
    let raw = format!("]d201{BOX_GTIN}1727123110AB-123\u{1d}21SN0001");
    for code in [&human, &raw] {
        let (status, b) = d
            .receive(json!({"scan": code, "quantity": 2, "unit_cost": "12.35"}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{b}");
        assert_eq!(b["medicine_id"], d.medicine["id"]);
        assert_eq!(b["pack_id"], d.boxed["id"]);
        assert_eq!(b["pack_units"], 10);
        assert_eq!(b["batch_number"], "AB-123");
        assert_eq!(b["expiry_date"], "2027-12-31");
        assert_eq!(b["qty_received"], 20);
        assert_eq!(b["unit_cost"], "1.2350");
        assert_eq!(b["received_total"], "24.70");
    }
    // Fields sent with the code that agree with it are fine; day 00 is the
    // month's last day, and a production date fills the manufacturing date.
    let (status, b) = d
        .receive(
            json!({"scan": format!("(01){BOX_GTIN}(11)260115(17)280200(10)AB-124"),
                        "medicine_id": d.medicine["id"], "pack_id": d.boxed["id"],
                        "batch_number": "AB-124", "expiry_date": "2028-02-29",
                        "quantity": 1, "unit_cost": 12}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["expiry_date"], "2028-02-29");
    assert_eq!(b["manufacturing_date"], "2026-01-15");
    // A bare GTIN of the base unit names the medicine and no pack; the
    // batch and expiry come from the fields.
    let (status, b) = d
        .receive(json!({"scan": UNIT_GTIN, "batch_number": "LS-9",
                        "expiry_date": "2029-03-31", "quantity": 30, "unit_cost": "1.10"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert!(b["pack_id"].is_null());
    assert_eq!(b["qty_received"], 30);
    assert_eq!(b["unit_cost"], "1.10");
    // The scanned box is on the shelf: `GET /scan` finds its batch.
    let query = serde_urlencoded::to_string([("code", human.as_str())]).unwrap();
    let (_, read) = d.app.get(&format!("/scan?{query}"), &d.clerk).await;
    assert_eq!(read["batch"]["qty_remaining"], 20, "{read}");
    let (_, medicine) = d
        .app
        .get(
            &format!("/medicines/{}", d.medicine["id"].as_str().unwrap()),
            &d.clerk,
        )
        .await;
    assert_eq!(medicine["stock_quantity"], 20 + 20 + 10 + 30);
    d.app.assert_invariants().await;
}

#[tokio::test]
async fn a_scan_refused_names_the_field_and_writes_nothing() {
    let d = Dock::open().await;
    let other = d
        .app
        .medicine(&d.admin, json!({"name": "Paracetamol", "selling_price": 1}))
        .await;
    let code = format!("(01){BOX_GTIN}(17)271231(10)AB-123");
    let base = json!({"scan": code, "quantity": 2, "unit_cost": "12.35"});
    // A field sent that disagrees with the code: 400 naming it.
    for (field, value) in [
        ("medicine_id", other["id"].clone()),
        ("pack_id", d.trio["id"].clone()),
        ("batch_number", json!("AB-999")),
        ("expiry_date", json!("2027-11-30")),
        ("manufacturing_date", json!("2028-01-01")),
    ] {
        let mut body = base.clone();
        body[field] = value;
        let (status, problem) = d.receive(body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["code"], "validation_failed", "{problem}");
        assert_eq!(problem["field"], field, "{problem}");
    }
    // The base unit's GTIN is no pack.
    let (status, problem) = d
        .receive(
            json!({"scan": UNIT_GTIN, "pack_id": d.boxed["id"], "batch_number": "B",
                        "expiry_date": "2029-03-31", "quantity": 1, "unit_cost": 1}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "pack_id", "{problem}");
    // A code without batch or expiry needs them sent.
    for (fields, missing) in [
        (json!({}), "batch_number"),
        (json!({"batch_number": "B-1"}), "expiry_date"),
    ] {
        let mut body = json!({"scan": BOX_GTIN, "quantity": 1, "unit_cost": 1});
        for (k, v) in fields.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, problem) = d.receive(body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], missing, "{problem}");
    }
    // An unknown GTIN is 404 `unknown_gtin`; a malformed code 400 `invalid_barcode`.
    let (status, problem) = d
        .receive(
            json!({"scan": "(01)04012345000009(17)271231(10)X", "quantity": 1,
                        "unit_cost": 1}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    assert_eq!(problem["code"], "unknown_gtin", "{problem}");
    assert_eq!(problem["field"], "scan");
    for bad in [
        "(01)09501101530004(17)271231(10)AB-123",
        "(01)09501101530003(17)270230(10)AB-123",
        "4006381333932",
    ] {
        let (status, problem) = d
            .receive(json!({"scan": bad, "quantity": 1, "unit_cost": 1}))
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["code"], "invalid_barcode", "{bad}: {problem}");
        assert_eq!(problem["field"], "scan");
    }
    let (status, problem) = d
        .receive(json!({"scan": "  ", "quantity": 1, "unit_cost": 1}))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "scan");
    // Without a scan the spec's fields stay required.
    for missing in ["medicine_id", "batch_number", "expiry_date"] {
        let mut body = json!({"medicine_id": d.medicine["id"], "batch_number": "B",
                              "expiry_date": "2029-03-31", "quantity": 1, "unit_cost": 1});
        body.as_object_mut().unwrap().remove(missing);
        let (status, problem) = d.receive(body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], missing, "{problem}");
    }
    d.assert_nothing_written().await;
}

#[tokio::test]
async fn the_document_describes_receiving_by_pack_and_by_scan() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    let doc: Value = res.json().await.unwrap();
    let schemas = &doc["components"]["schemas"];
    let request = &schemas["PurchaseRequest"];
    let required: Vec<&str> = request["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // What a scan may fill is optional in the document, and says when it is needed.
    for field in ["supplier_id", "branch_id", "quantity", "unit_cost"] {
        assert!(required.contains(&field), "{field}: {request}");
    }
    for field in [
        "medicine_id",
        "batch_number",
        "expiry_date",
        "pack_id",
        "scan",
    ] {
        assert!(!required.contains(&field), "{field}: {request}");
    }
    let described = |f: &str| {
        request["properties"][f]["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    for field in ["medicine_id", "batch_number", "expiry_date"] {
        assert!(described(field).contains("`scan`"), "{field}: {request}");
    }
    assert_eq!(request["properties"]["scan"]["maxLength"], 512);
    let answer = &schemas["ReceivedBatch"]["properties"];
    for field in ["pack_id", "pack_units", "base_quantity", "received_total"] {
        assert!(answer.get(field).is_some(), "{field}");
    }
    let responses = &doc["paths"]["/api/v1/purchases"]["post"]["responses"];
    assert!(responses.get("404").is_some(), "{responses}");
}
