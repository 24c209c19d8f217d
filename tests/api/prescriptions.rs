use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A branch `KLA` with an admin and a pharmacist signed in, a
/// prescription-only medicine in stock and an over-the-counter one.
struct Desk {
    app: TestApp,
    branch: Uuid,
    admin: String,
    pharmacist: String,
    pharmacist_id: Uuid,
    rx_only: Value,
    otc: Value,
}

impl Desk {
    async fn open() -> Desk {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (user, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let rx_only = app
            .medicine(
                &admin,
                json!({"name": "Amoxicillin 500mg", "selling_price": 1500,
                       "requires_prescription": true}),
            )
            .await;
        app.receive(&admin, &rx_only["id"], branch, 50, "2030-12-31")
            .await;
        let otc = app
            .medicine(
                &admin,
                json!({"name": "Paracetamol", "selling_price": "500.50", "vat_category": "zero"}),
            )
            .await;
        Desk {
            app,
            branch,
            admin,
            pharmacist,
            pharmacist_id: user.id,
            rx_only,
            otc,
        }
    }

    fn body(&self, patient: &str) -> Value {
        json!({
            "patient_name": patient, "patient_id_number": "CM900", "prescriber_name": "Dr Okello",
            "prescriber_license": "UMDPC-77", "notes": "Take with food",
            "items": [
                {"medicine_id": self.rx_only["id"], "quantity": 2, "dosage_instructions": "1 x 3 daily"},
                {"medicine_id": self.otc["id"], "quantity": 1},
            ],
        })
    }

    /// A prescription written by the pharmacist; panics unless 201.
    async fn rx(&self, patient: &str) -> Value {
        let (status, p) = self
            .app
            .post("/prescriptions", &self.pharmacist, self.body(patient))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{p}");
        p
    }

    /// A cash sale of the prescription-only medicine against `rx`.
    async fn sale_for(&self, rx: &Value) -> Value {
        let (status, sale) = self
            .app
            .post(
                "/sales",
                &self.pharmacist,
                json!({"items": [{"medicine_id": self.rx_only["id"], "quantity": 2}],
                       "payment_method": "cash", "prescription_id": rx["id"]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{sale}");
        sale
    }

    async fn act(&self, token: &str, rx: &Value, action: &str, body: Value) -> (StatusCode, Value) {
        let path = format!("/prescriptions/{}/{action}", rx["id"].as_str().unwrap());
        self.app.post(&path, token, body).await
    }
}

/// `base` with the value at a JSON pointer replaced, or removed when `Null`.
fn edit(base: &Value, pointer: &str, value: Value) -> Value {
    let mut b = base.clone();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = b.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    if value.is_null() {
        target.remove(key);
    } else {
        target.insert(key.to_owned(), value);
    }
    b
}

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap()
}

#[tokio::test]
async fn create_answers_201_pending_with_a_branch_rx_number_and_joined_lines() {
    let desk = Desk::open().await;
    let p = desk.rx("Jane Nakato").await;
    assert_eq!(p["status"], "PENDING");
    assert_eq!(p["rx_number"], "RX-KLA-000001");
    assert_eq!(p["branch_id"], desk.branch.to_string());
    assert_eq!(p["patient_name"], "Jane Nakato");
    assert_eq!(p["patient_id_number"], "CM900");
    assert_eq!(p["prescriber_name"], "Dr Okello");
    assert_eq!(p["prescriber_license"], "UMDPC-77");
    assert_eq!(p["notes"], "Take with food");
    assert_eq!(p["created_by"], desk.pharmacist_id.to_string());
    for field in [
        "sale_id",
        "dispensed_by",
        "dispensed_by_name",
        "dispensed_at",
    ] {
        assert!(p[field].is_null(), "{field}: {p}");
    }
    assert!(p["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(p["updated_at"].is_string());
    let items = p["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    let first = &items[0];
    assert!(first["id"].is_string());
    assert_eq!(first["prescription_id"], p["id"]);
    assert_eq!(first["medicine_id"], desk.rx_only["id"]);
    assert_eq!(first["quantity"], 2);
    assert!(first["quantity"].is_i64());
    assert_eq!(first["dosage_instructions"], "1 x 3 daily");
    assert_eq!(first["medicine_name"], "Amoxicillin 500mg");
    assert_eq!(first["selling_price"], "1500.00");
    assert_eq!(first["vat_category"], "standard");
    assert_eq!(first["requires_prescription"], 1);
    let second = &items[1];
    assert_eq!(second["selling_price"], "500.50");
    assert_eq!(second["vat_category"], "zero");
    assert_eq!(second["requires_prescription"], 0);
    assert_eq!(second["dosage_instructions"], "");

    // Numbers run per branch; an admin may write for another branch.
    assert_eq!(desk.rx("John").await["rx_number"], "RX-KLA-000002");
    let ebb = desk.app.branch("EBB").await;
    let mut body = desk.body("Other branch");
    body["branch_id"] = json!(ebb);
    let (status, p) = desk.app.post("/prescriptions", &desk.admin, body).await;
    assert_eq!(status, StatusCode::CREATED, "{p}");
    assert_eq!(p["branch_id"], ebb.to_string());
    assert_eq!(p["rx_number"], "RX-EBB-000001");

    let (status, read) = desk
        .app
        .get(&format!("/prescriptions/{}", id(&p)), &desk.admin)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read, p);
}

#[tokio::test]
async fn every_create_validation_is_a_400_naming_the_field() {
    let desk = Desk::open().await;
    let good = desk.body("Jane");
    let with = |pointer: &str, value: Value| edit(&good, pointer, value);
    let unknown = Uuid::now_v7().to_string();
    let cases = [
        (with("/patient_name", Value::Null), "patient_name"),
        (with("/patient_name", json!("   ")), "patient_name"),
        (
            with("/patient_name", json!("x".repeat(201))),
            "patient_name",
        ),
        (with("/items", Value::Null), "items"),
        (with("/items", json!([])), "items"),
        (with("/items/0/quantity", json!(0)), "items[0].quantity"),
        (with("/items/0/quantity", json!(-2)), "items[0].quantity"),
        (with("/items/1/quantity", json!(1.5)), "items[1].quantity"),
        (with("/items/0/quantity", Value::Null), "items[0].quantity"),
        (
            with("/items/1/medicine_id", json!(unknown)),
            "items[1].medicine_id",
        ),
        (
            with("/items/0/medicine_id", json!("not-an-id")),
            "items[0].medicine_id",
        ),
        (
            with("/items/0/medicine_id", Value::Null),
            "items[0].medicine_id",
        ),
        (with("/notes", json!(5)), "notes"),
    ];
    for (body, field) in cases {
        let (status, problem) = desk
            .app
            .post("/prescriptions", &desk.pharmacist, body.clone())
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "body {body}: {problem}");
    }
    // A deleted medicine is unknown too.
    let (status, _) = desk
        .app
        .call(
            Method::DELETE,
            &format!("/medicines/{}", id(&desk.otc)),
            Some(&desk.admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, problem) = desk
        .app
        .post("/prescriptions", &desk.pharmacist, good)
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[1].medicine_id");
    // Nothing half-written: no number was used up.
    let (_, list) = desk.app.get("/prescriptions", &desk.pharmacist).await;
    assert_eq!(list["total"], 0);
}

#[tokio::test]
async fn role_gates_and_branch_scope_of_writes() {
    let desk = Desk::open().await;
    let p = desk.rx("Jane").await;
    for role in [Role::Cashier, Role::InventoryManager, Role::Auditor] {
        let (_, token) = desk.app.signed_in(desk.branch, role).await;
        let (status, problem) = desk
            .app
            .post("/prescriptions", &token, desk.body("X"))
            .await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
        for action in ["cancel", "dispense"] {
            let (status, problem) = desk.act(&token, &p, action, json!({})).await;
            assert_problem(status, &problem, StatusCode::FORBIDDEN);
        }
        let (status, _) = desk
            .app
            .call(
                Method::DELETE,
                &format!("/prescriptions/{}", id(&p)),
                Some(&token),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        // Reading is open to anyone signed in.
        let (status, list) = desk.app.get("/prescriptions", &token).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["total"], 1);
    }
    let (_, manager) = desk.app.signed_in(desk.branch, Role::BranchManager).await;
    let (status, _) = desk
        .app
        .post("/prescriptions", &manager, desk.body("Y"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // A non-admin cannot write for another branch.
    let ebb = desk.app.branch("EBB").await;
    let mut body = desk.body("Z");
    body["branch_id"] = json!(ebb);
    let (status, problem) = desk
        .app
        .post("/prescriptions", &desk.pharmacist, body)
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (status, _) = desk
        .app
        .call(Method::GET, "/prescriptions", None, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn list_puts_pending_first_then_newest_filters_by_status_and_pages() {
    let desk = Desk::open().await;
    let mut made = Vec::new();
    for n in 1..=5 {
        made.push(desk.rx(&format!("Patient {n}")).await);
    }
    // Cancel the oldest and the fourth; dispense the second.
    for p in [&made[0], &made[3]] {
        let (status, _) = desk.act(&desk.pharmacist, p, "cancel", json!({})).await;
        assert_eq!(status, StatusCode::OK);
    }
    let sale = desk.sale_for(&made[1]).await;
    let (status, _) = desk
        .act(
            &desk.pharmacist,
            &made[1],
            "dispense",
            json!({"sale_id": sale["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["patient_name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, list) = desk.app.get("/prescriptions", &desk.pharmacist).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["total"], 5);
    assert_eq!(list["page"], 1);
    assert_eq!(list["page_size"], 20);
    assert_eq!(
        names(&list),
        [
            "Patient 5",
            "Patient 3",
            "Patient 4",
            "Patient 2",
            "Patient 1"
        ]
    );
    // Lines come with every prescription of the list, typed as on a single read.
    let line = &list["items"][0]["items"][0];
    assert!(line["quantity"].is_i64());
    assert!(line["selling_price"].is_string());
    assert!(line["requires_prescription"].is_i64());
    assert!(line["medicine_name"].is_string());
    assert!(line["vat_category"].is_string());

    for (status_q, expected) in [
        ("PENDING", vec!["Patient 5", "Patient 3"]),
        ("CANCELLED", vec!["Patient 4", "Patient 1"]),
        ("DISPENSED", vec!["Patient 2"]),
        ("pending", vec!["Patient 5", "Patient 3"]),
    ] {
        let (status, list) = desk
            .app
            .get(
                &format!("/prescriptions?status={status_q}"),
                &desk.pharmacist,
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(names(&list), expected, "status={status_q}");
        assert_eq!(list["total"], expected.len());
    }
    let dispensed = &desk
        .app
        .get("/prescriptions?status=DISPENSED", &desk.pharmacist)
        .await
        .1["items"][0];
    assert_eq!(dispensed["sale_id"], sale["id"]);

    let (status, problem) = desk
        .app
        .get("/prescriptions?status=FILLED", &desk.pharmacist)
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "status");

    let (_, page1) = desk
        .app
        .get("/prescriptions?page_size=2", &desk.pharmacist)
        .await;
    assert_eq!(names(&page1), ["Patient 5", "Patient 3"]);
    assert_eq!(page1["total"], 5);
    assert_eq!(page1["page_size"], 2);
    let (_, page3) = desk
        .app
        .get("/prescriptions?page_size=2&page=3", &desk.pharmacist)
        .await;
    assert_eq!(names(&page3), ["Patient 1"]);
    assert_eq!(page3["page"], 3);
    for bad in ["page=0", "page_size=0", "page=x"] {
        let (status, problem) = desk
            .app
            .get(&format!("/prescriptions?{bad}"), &desk.pharmacist)
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    }
}

#[tokio::test]
async fn dispensing_links_a_real_sale_of_the_branch() {
    let desk = Desk::open().await;
    let p = desk.rx("Jane").await;
    let sale = desk.sale_for(&p).await;

    let ebb = desk.app.branch("EBB").await;
    let elsewhere = desk
        .app
        .medicine(&desk.admin, json!({"name": "Soap", "selling_price": 100}))
        .await;
    desk.app
        .receive(&desk.admin, &elsewhere["id"], ebb, 5, "2030-12-31")
        .await;
    let (status, foreign_sale) = desk
        .app
        .post(
            "/sales",
            &desk.admin,
            json!({"items": [{"medicine_id": elsewhere["id"], "quantity": 1}],
                   "payment_method": "cash", "branch_id": ebb}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{foreign_sale}");
    let other_rx = desk.rx("Someone else").await;
    for body in [
        json!({}),
        json!({"sale_id": Uuid::now_v7()}),
        json!({"sale_id": "nope"}),
        json!({"sale_id": foreign_sale["id"]}),
    ] {
        let (status, problem) = desk
            .act(&desk.pharmacist, &p, "dispense", body.clone())
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "sale_id", "{body}");
    }
    // The sale was made against `p`, not `other_rx`.
    let (status, problem) = desk
        .act(
            &desk.pharmacist,
            &other_rx,
            "dispense",
            json!({"sale_id": sale["id"]}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "sale_id");

    let (status, done) = desk
        .act(
            &desk.pharmacist,
            &p,
            "dispense",
            json!({"sale_id": sale["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "DISPENSED");
    assert_eq!(done["sale_id"], sale["id"]);
    assert_eq!(done["dispensed_by"], desk.pharmacist_id.to_string());
    assert_eq!(done["dispensed_by_name"], "Test pharmacist");
    assert!(done["dispensed_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(done["items"].as_array().unwrap().len(), 2);
    let (_, read) = desk
        .app
        .get(&format!("/prescriptions/{}", id(&p)), &desk.pharmacist)
        .await;
    assert_eq!(read, done);

    // A dispensed prescription no longer covers a sale.
    let (status, problem) = desk
        .app
        .post(
            "/sales",
            &desk.pharmacist,
            json!({"items": [{"medicine_id": desk.rx_only["id"], "quantity": 1}],
                   "payment_method": "cash", "prescription_id": p["id"]}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "prescription_id");
}

#[tokio::test]
async fn moves_other_than_pending_to_dispensed_or_cancelled_are_409() {
    let desk = Desk::open().await;
    let cancelled = desk.rx("A").await;
    let (status, c) = desk
        .act(&desk.pharmacist, &cancelled, "cancel", json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(c["status"], "CANCELLED");
    assert!(c["sale_id"].is_null() && c["dispensed_at"].is_null());

    let dispensed = desk.rx("B").await;
    let sale = desk.sale_for(&dispensed).await;
    let (status, _) = desk
        .act(
            &desk.pharmacist,
            &dispensed,
            "dispense",
            json!({"sale_id": sale["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    for (p, action) in [
        (&cancelled, "cancel"),
        (&cancelled, "dispense"),
        (&dispensed, "cancel"),
        (&dispensed, "dispense"),
    ] {
        let (status, problem) = desk
            .act(&desk.pharmacist, p, action, json!({"sale_id": sale["id"]}))
            .await;
        assert_problem(status, &problem, StatusCode::CONFLICT);
    }
    // A dispensed prescription stays in the book: it cannot be deleted.
    let (status, problem) = desk
        .app
        .call(
            Method::DELETE,
            &format!("/prescriptions/{}", id(&dispensed)),
            Some(&desk.pharmacist),
            None,
        )
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    // Unknown ids are 404, not 409.
    let (status, problem) = desk
        .app
        .post(
            &format!("/prescriptions/{}/cancel", Uuid::now_v7()),
            &desk.pharmacist,
            json!({}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn two_concurrent_dispenses_give_one_200_and_one_409() {
    let desk = Desk::open().await;
    for _ in 0..3 {
        let p = desk.rx("Race").await;
        let sale = desk.sale_for(&p).await;
        let tries = (0..4).map(|_| {
            desk.act(
                &desk.pharmacist,
                &p,
                "dispense",
                json!({"sale_id": sale["id"]}),
            )
        });
        let mut statuses: Vec<StatusCode> =
            join_all(tries).await.into_iter().map(|r| r.0).collect();
        statuses.sort();
        assert_eq!(
            statuses,
            [
                StatusCode::OK,
                StatusCode::CONFLICT,
                StatusCode::CONFLICT,
                StatusCode::CONFLICT
            ]
        );
        // Dispense against cancel: exactly one wins too.
        let q = desk.rx("Race 2").await;
        let sale = desk.sale_for(&q).await;
        let (a, b) = tokio::join!(
            desk.act(
                &desk.pharmacist,
                &q,
                "dispense",
                json!({"sale_id": sale["id"]})
            ),
            desk.act(&desk.admin, &q, "cancel", json!({})),
        );
        let mut pair = [a.0, b.0];
        pair.sort();
        assert_eq!(pair, [StatusCode::OK, StatusCode::CONFLICT]);
    }
}

#[tokio::test]
async fn soft_delete_hides_the_prescription() {
    let desk = Desk::open().await;
    let kept = desk.rx("Kept").await;
    let gone = desk.rx("Gone").await;
    let path = format!("/prescriptions/{}", id(&gone));
    let (status, body) = desk
        .app
        .call(Method::DELETE, &path, Some(&desk.pharmacist), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(body.is_null());
    let (status, problem) = desk.app.get(&path, &desk.pharmacist).await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    let (_, list) = desk.app.get("/prescriptions", &desk.pharmacist).await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["id"], kept["id"]);
    let (status, _) = desk
        .app
        .call(Method::DELETE, &path, Some(&desk.pharmacist), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = desk.act(&desk.pharmacist, &gone, "cancel", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A deleted prescription no longer covers a sale.
    let (status, problem) = desk
        .app
        .post(
            "/sales",
            &desk.pharmacist,
            json!({"items": [{"medicine_id": desk.rx_only["id"], "quantity": 1}],
                   "payment_method": "cash", "prescription_id": gone["id"]}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    // A cancelled one may be deleted too.
    let (status, _) = desk.act(&desk.pharmacist, &kept, "cancel", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = desk
        .app
        .call(
            Method::DELETE,
            &format!("/prescriptions/{}", id(&kept)),
            Some(&desk.pharmacist),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn another_branch_cannot_read_or_move_the_prescriptions() {
    let desk = Desk::open().await;
    let p = desk.rx("Jane").await;
    let sale = desk.sale_for(&p).await;
    let ebb = desk.app.branch("EBB").await;
    let (_, outsider) = desk.app.signed_in(ebb, Role::Pharmacist).await;
    let path = format!("/prescriptions/{}", id(&p));
    let (status, problem) = desk.app.get(&path, &outsider).await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    for (action, body) in [
        ("dispense", json!({"sale_id": sale["id"]})),
        ("cancel", json!({})),
    ] {
        let (status, problem) = desk.act(&outsider, &p, action, body).await;
        assert_problem(status, &problem, StatusCode::NOT_FOUND);
    }
    let (status, _) = desk
        .app
        .call(Method::DELETE, &path, Some(&outsider), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list) = desk.app.get("/prescriptions", &outsider).await;
    assert_eq!(list["total"], 0);
    let (status, problem) = desk
        .app
        .get(
            &format!("/prescriptions?branch_id={}", desk.branch),
            &outsider,
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    // Untouched, and still readable at home and by an admin of any branch.
    let (_, read) = desk.app.get(&path, &desk.pharmacist).await;
    assert_eq!(read["status"], "PENDING");
    let (_, far_admin) = desk.app.signed_in(ebb, Role::Admin).await;
    let (status, _) = desk.app.get(&path, &far_admin).await;
    assert_eq!(status, StatusCode::OK);
    let (_, list) = desk
        .app
        .get(
            &format!("/prescriptions?branch_id={}", desk.branch),
            &far_admin,
        )
        .await;
    assert_eq!(list["total"], 1);
}
