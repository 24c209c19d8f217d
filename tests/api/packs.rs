//! Packs of a medicine and GTINs: who writes them, the unit and name rules,
//! one holder per GTIN, and `GET /scan` reading what a scanner sends.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// GS1's example GTIN-14 and its GTIN-13.
const BOX_GTIN: &str = "09501101530003";
const BOX_GTIN_13: &str = "9501101530003";
/// Another valid GTIN-13.
const STRIP_GTIN: &str = "4006381333931";

struct Shelf {
    app: TestApp,
    branch: Uuid,
    admin: String,
    keeper: String,
    medicine: Value,
}

impl Shelf {
    async fn open() -> Shelf {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, keeper) = app.signed_in(branch, Role::InventoryManager).await;
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Amoxicillin 500mg", "selling_price": 300, "unit": "capsule",
                       "barcode": "AMX-500"}),
            )
            .await;
        Shelf {
            app,
            branch,
            admin,
            keeper,
            medicine,
        }
    }

    fn packs(&self) -> String {
        format!("/medicines/{}/packs", self.medicine["id"].as_str().unwrap())
    }

    async fn add(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.app.post(&self.packs(), token, body).await
    }

    async fn scan(&self, token: &str, code: &str) -> (StatusCode, Value) {
        let query = serde_urlencoded::to_string([("code", code)]).unwrap();
        self.app.get(&format!("/scan?{query}"), token).await
    }
}

#[tokio::test]
async fn packs_are_written_by_admins_and_inventory_managers_with_their_rules() {
    let s = Shelf::open().await;
    for role in [Role::Cashier, Role::BranchManager, Role::Pharmacist] {
        let (_, token) = s.app.signed_in(s.branch, role).await;
        let (status, problem) = s.add(&token, json!({"name": "strip", "units": 10})).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    let (status, strip) = s
        .add(
            &s.keeper,
            json!({"name": "strip", "units": 10, "gtin": STRIP_GTIN}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{strip}");
    assert_eq!(strip["units"], 10);
    assert_eq!(strip["gtin"], format!("0{STRIP_GTIN}"));
    assert!(strip["selling_price"].is_null());
    assert_eq!(strip["is_sellable"], true);
    assert_eq!(strip["is_active"], true);
    assert_eq!(strip["medicine_id"], s.medicine["id"]);
    let (status, boxed) = s
        .add(
            &s.admin,
            json!({"name": "box", "units": 100, "selling_price": "27500.00"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{boxed}");
    assert_eq!(boxed["selling_price"], "27500.00");

    // Two active packs never share a unit count or a name.
    for clash in [
        json!({"name": "blister", "units": 10}),
        json!({"name": " STRIP ", "units": 12}),
    ] {
        let (status, problem) = s.add(&s.keeper, clash).await;
        assert_problem(status, &problem, StatusCode::CONFLICT);
    }
    // Bad values: 400 naming the field, nothing stored.
    for (body, field) in [
        (json!({"name": "single", "units": 1}), "units"),
        (json!({"name": "half", "units": 2.5}), "units"),
        (json!({"name": "", "units": 5}), "name"),
        (json!({"name": "x\u{1b}p", "units": 5}), "name"),
        (json!({"units": 5}), "name"),
        (
            json!({"name": "pot", "units": 5, "gtin": "4006381333932"}),
            "gtin",
        ),
        (
            json!({"name": "pot", "units": 5, "selling_price": -1}),
            "selling_price",
        ),
    ] {
        let (status, problem) = s.add(&s.keeper, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}");
    }
    let (status, list) = s.app.get(&s.packs(), &s.keeper).await;
    assert_eq!(status, StatusCode::OK);
    let units: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["units"].as_i64().unwrap())
        .collect();
    assert_eq!(units, [10, 100]);

    // An edit, then a soft delete: the unit count is free again.
    let strip_path = format!("{}/{}", s.packs(), strip["id"].as_str().unwrap());
    let (status, edited) = s
        .app
        .call(
            Method::PUT,
            &strip_path,
            Some(&s.keeper),
            Some(json!({"selling_price": "3200", "is_sellable": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["selling_price"], "3200.00");
    assert_eq!(edited["is_sellable"], false);
    let (status, _) = s
        .app
        .call(Method::DELETE, &strip_path, Some(&s.keeper), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, again) = s
        .add(
            &s.keeper,
            json!({"name": "strip", "units": 10, "gtin": STRIP_GTIN}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    let (status, _) = s
        .app
        .call(Method::DELETE, &strip_path, Some(&s.keeper), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Every pack write joined the change feed.
    let client = s.app.pool.get().await.unwrap();
    let fed: i64 = client
        .query_one(
            "SELECT count(*) FROM change_log WHERE entity = 'medicine_pack'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(fed, 5);
}

#[tokio::test]
async fn a_gtin_names_one_product() {
    let s = Shelf::open().await;
    let (status, boxed) = s
        .add(
            &s.keeper,
            json!({"name": "box", "units": 100, "gtin": BOX_GTIN}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{boxed}");
    let other = s
        .app
        .medicine(
            &s.admin,
            json!({"name": "Paracetamol", "selling_price": 50}),
        )
        .await;
    let other_packs = format!("/medicines/{}/packs", other["id"].as_str().unwrap());
    // Its GTIN-13 is the same product.
    for gtin in [BOX_GTIN, BOX_GTIN_13] {
        let (status, problem) = s
            .app
            .post(
                &other_packs,
                &s.keeper,
                json!({"name": "box", "units": 20, "gtin": gtin}),
            )
            .await;
        assert_problem(status, &problem, StatusCode::CONFLICT);
        assert_eq!(problem["code"], "gtin_taken");
        assert_eq!(problem["field"], "gtin");
        assert!(
            problem["detail"].as_str().unwrap().contains("Amoxicillin"),
            "{problem}"
        );
    }
    // The database holds the rule whatever writes the row.
    let client = s.app.pool.get().await.unwrap();
    let clash = client
        .execute(
            "UPDATE medicines SET gtin = $1 WHERE id = $2",
            &[
                &BOX_GTIN,
                &Uuid::parse_str(other["id"].as_str().unwrap()).unwrap(),
            ],
        )
        .await;
    assert!(clash.is_err(), "two holders of one GTIN");
}

#[tokio::test]
async fn a_scan_reads_a_datamatrix_for_the_branch() {
    let s = Shelf::open().await;
    let (status, boxed) = s
        .add(
            &s.keeper,
            json!({"name": "box", "units": 100, "gtin": BOX_GTIN}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{boxed}");
    let supplier = s.app.supplier("Quality Chemicals").await;
    let (status, batch) = s
        .app
        .post(
            "/purchases",
            &s.admin,
            json!({"supplier_id": supplier, "medicine_id": s.medicine["id"],
                   "branch_id": s.branch, "batch_number": "AB-123",
                   "expiry_date": "2027-12-31", "quantity": 300, "unit_cost": "120"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{batch}");
    let (_, cashier) = s.app.signed_in(s.branch, Role::Cashier).await;
    let human = format!("(01){BOX_GTIN}(17)271231(10)AB-123(21)SN0001");
    let raw = format!("]d201{BOX_GTIN}1727123110AB-123\u{1d}21SN0001");
    for code in [human.as_str(), raw.as_str()] {
        let (status, read) = s.scan(&cashier, code).await;
        assert_eq!(status, StatusCode::OK, "{read}");
        assert_eq!(read["gtin"], BOX_GTIN);
        assert_eq!(read["medicine"]["id"], s.medicine["id"]);
        assert_eq!(read["pack"]["id"], boxed["id"]);
        assert_eq!(read["batch_number"], "AB-123");
        assert_eq!(read["expiry_date"], "2027-12-31");
        assert_eq!(read["serial"], "SN0001");
        assert_eq!(read["batch"]["id"], batch["id"]);
        assert_eq!(read["batch"]["qty_remaining"], 300);
        assert_eq!(read["warnings"], json!([]));
    }
    // The code's expiry differs from the batch on record; day 00 is the last day.
    let (_, read) = s
        .scan(&cashier, &format!("(01){BOX_GTIN}(17)271100(10)AB-123"))
        .await;
    assert_eq!(read["expiry_date"], "2027-11-30");
    assert_eq!(read["warnings"], json!(["expiry_mismatch"]));
    // A quarantined batch says so.
    let (status, quarantined) = s
        .app
        .post(
            &format!(
                "/supplier-finance/batches/{}/quarantine",
                batch["id"].as_str().unwrap()
            ),
            &s.admin,
            json!({"status": "quarantined"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{quarantined}");
    let (_, read) = s.scan(&cashier, &human).await;
    assert_eq!(read["warnings"], json!(["quarantined"]), "{read}");
    // A batch the branch does not hold, the base unit by in-house barcode.
    let (_, read) = s.scan(&cashier, &format!("(01){BOX_GTIN}(10)ZZ-9")).await;
    assert!(read["batch"].is_null());
    let (status, read) = s.scan(&cashier, "AMX-500").await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert!(read["gtin"].is_null());
    assert!(read["pack"].is_null());
    assert_eq!(read["medicine"]["id"], s.medicine["id"]);
}

#[tokio::test]
async fn unknown_and_malformed_codes_are_refused_and_change_nothing() {
    let s = Shelf::open().await;
    let (_, cashier) = s.app.signed_in(s.branch, Role::Cashier).await;
    let (status, problem) = s.scan(&cashier, STRIP_GTIN).await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    assert_eq!(problem["code"], "unknown_gtin");
    for (code, words) in [
        ("(01)09501101530004", "check digit"),
        ("]d20109501101530003891234", "Application Identifier"),
        ("(01)09501101530003(17)270230", "not a date"),
        ("(01)09501101530003(10)ABCDEFGHIJKLMNOPQRSTU", "at most 20"),
        ("4006381333932", "check digit"),
    ] {
        let (status, problem) = s.scan(&cashier, code).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["code"], "invalid_barcode", "{code}");
        assert_eq!(problem["field"], "code");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(words), "{code}: {detail}");
    }
    let (status, problem) = s.app.get("/scan", &cashier).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "code");
    // Another branch's stock is an admin's to ask for.
    let other = s.app.branch("GUL").await;
    let (status, problem) = s
        .app
        .get(&format!("/scan?code=AMX-500&branch_id={other}"), &cashier)
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (status, _) = s
        .app
        .get(&format!("/scan?code=AMX-500&branch_id={other}"), &s.admin)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_medicine_carries_its_base_units_gtin_and_its_active_packs() {
    let s = Shelf::open().await;
    let id = s.medicine["id"].as_str().unwrap().to_owned();
    let path = format!("/medicines/{id}");
    let (status, problem) = s
        .app
        .call(
            Method::PUT,
            &path,
            Some(&s.admin),
            Some(json!({"gtin": "4006381333932"})),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "gtin");
    let (status, edited) = s
        .app
        .call(
            Method::PUT,
            &path,
            Some(&s.admin),
            Some(json!({"gtin": STRIP_GTIN})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["gtin"], format!("0{STRIP_GTIN}"));
    // The base unit holds it: no pack and no other medicine may take it.
    let (status, problem) = s
        .add(
            &s.keeper,
            json!({"name": "strip", "units": 10, "gtin": STRIP_GTIN}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    assert_eq!(problem["code"], "gtin_taken");
    let (status, problem) = s
        .app
        .post(
            "/medicines",
            &s.admin,
            json!({"name": "Copy", "selling_price": 1, "gtin": format!("0{STRIP_GTIN}")}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    assert_eq!(problem["code"], "gtin_taken");
    // Scanning the base unit's GTIN names the medicine and no pack.
    let (_, cashier) = s.app.signed_in(s.branch, Role::Cashier).await;
    let (status, read) = s.scan(&cashier, STRIP_GTIN).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["medicine"]["id"], s.medicine["id"]);
    assert!(read["pack"].is_null());
    assert_eq!(read["warnings"], json!(["not_stocked"]));
    // The single read lists the active packs; the list does not carry them.
    let (_, boxed) = s.add(&s.keeper, json!({"name": "box", "units": 100})).await;
    let (_, strip) = s
        .add(&s.keeper, json!({"name": "strip", "units": 10}))
        .await;
    let strip_path = format!("{}/{}", s.packs(), strip["id"].as_str().unwrap());
    let (status, _) = s
        .app
        .call(
            Method::PUT,
            &strip_path,
            Some(&s.keeper),
            Some(json!({"is_active": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, read) = s.app.get(&path, &cashier).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    let packs = read["packs"].as_array().unwrap();
    assert_eq!(packs.len(), 1);
    assert_eq!(packs[0]["id"], boxed["id"]);
    let (_, list) = s.app.get("/medicines", &cashier).await;
    assert!(list["items"][0].get("packs").is_none(), "{list}");
    // Clearing the GTIN lets it go.
    let (status, _) = s
        .app
        .call(
            Method::PUT,
            &path,
            Some(&s.admin),
            Some(json!({"gtin": ""})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s.scan(&cashier, STRIP_GTIN).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn tills_get_packs_in_the_snapshot_and_the_feed() {
    let s = Shelf::open().await;
    let (_, cashier) = s.app.signed_in(s.branch, Role::Cashier).await;
    let (_, before) = s.app.get("/sync/changes", &cashier).await;
    let cursor = before["max_rev"].as_i64().unwrap();
    let (_, boxed) = s
        .add(
            &s.keeper,
            json!({"name": "box", "units": 100, "gtin": BOX_GTIN}),
        )
        .await;
    let (status, snapshot) = s.app.get("/sync/snapshot", &cashier).await;
    assert_eq!(status, StatusCode::OK, "{snapshot}");
    let packs = snapshot["medicine_packs"].as_array().unwrap();
    assert_eq!(packs.len(), 1);
    assert_eq!(packs[0]["id"], boxed["id"]);
    assert_eq!(packs[0]["units"], 100);
    // The medicine rows keep the spec's fields.
    assert!(snapshot["medicines"][0].get("gtin").is_none());
    let (status, page) = s
        .app
        .get(&format!("/sync/changes?since={cursor}"), &cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let change = &page["changes"][0];
    assert_eq!(change["entity"], "medicine_pack");
    assert_eq!(change["op"], "create");
    assert_eq!(change["entity_id"], boxed["id"]);
    assert_eq!(change["payload"]["gtin"], BOX_GTIN);
}
