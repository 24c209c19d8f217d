//! The routes the limits test knows how to call: for each, a valid body
//! (with the records it needs made first) and what a refused request must
//! leave as it was.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::world::{text, World};
use crate::common::{Role, PASSWORD};

/// What one request changes in the valid body.
#[derive(Debug, Clone)]
pub enum Change {
    /// The field (a string) takes this value.
    Text(String),
    /// The list holds this many elements.
    Items(usize),
}

/// One request of a case, ready to send.
pub struct Prepared {
    pub path: String,
    pub token: String,
    pub body: Value,
    /// SQL answering one text that a refused request leaves unchanged: a
    /// count of the rows a create adds, or the digest of the row an update
    /// or an action changes.
    pub witness: String,
}

#[derive(Debug, Clone, Copy)]
pub enum Route {
    Approval,
    BranchCreate,
    BranchUpdate,
    Coupon,
    CustomerCreate,
    CustomerUpdate,
    CustomerPayment,
    Device,
    WillCall,
    MedicineCreate,
    MedicineUpdate,
    Prescription,
    PrinterCreate,
    PrinterUpdate,
    TemplateCreate,
    TemplateUpdate,
    Purchase,
    GoodsReceived,
    GoodsReceivedUpdate,
    PurchaseOrderCreate,
    PurchaseOrderUpdate,
    Sale,
    Return,
    Settings,
    WriteOff,
    SupplierReturn,
    StockCount,
    Quarantine,
    Invoice,
    SupplierPayment,
    SupplierCreate,
    SupplierUpdate,
    Resolve,
    Push,
    Transfer,
    UserCreate,
    UserUpdate,
    PasswordChange,
}

/// Every route the test drives, by method and path as the document names
/// them (without `/api/v1`).
pub const ROUTES: &[(&str, &str, Route)] = &[
    ("POST", "/approvals", Route::Approval),
    ("POST", "/branches", Route::BranchCreate),
    ("PUT", "/branches/{id}", Route::BranchUpdate),
    ("POST", "/coupons", Route::Coupon),
    ("POST", "/customers", Route::CustomerCreate),
    ("PUT", "/customers/{id}", Route::CustomerUpdate),
    ("POST", "/customers/{id}/payments", Route::CustomerPayment),
    ("POST", "/devices", Route::Device),
    ("POST", "/dispensing/will-call", Route::WillCall),
    ("POST", "/medicines", Route::MedicineCreate),
    ("PUT", "/medicines/{id}", Route::MedicineUpdate),
    ("POST", "/prescriptions", Route::Prescription),
    ("POST", "/printing/printers", Route::PrinterCreate),
    ("PUT", "/printing/printers/{id}", Route::PrinterUpdate),
    ("POST", "/printing/receipt-templates", Route::TemplateCreate),
    (
        "PUT",
        "/printing/receipt-templates/{id}",
        Route::TemplateUpdate,
    ),
    ("POST", "/purchases", Route::Purchase),
    ("POST", "/goods-received", Route::GoodsReceived),
    ("PUT", "/goods-received/{id}", Route::GoodsReceivedUpdate),
    ("POST", "/purchase-orders", Route::PurchaseOrderCreate),
    ("PUT", "/purchase-orders/{id}", Route::PurchaseOrderUpdate),
    ("POST", "/sales", Route::Sale),
    ("POST", "/sales/{id}/returns", Route::Return),
    ("PUT", "/settings", Route::Settings),
    ("POST", "/stock/write-offs", Route::WriteOff),
    ("POST", "/supplier-returns", Route::SupplierReturn),
    ("POST", "/stockcount/submit", Route::StockCount),
    (
        "POST",
        "/supplier-finance/batches/{id}/quarantine",
        Route::Quarantine,
    ),
    ("POST", "/supplier-finance/invoices", Route::Invoice),
    (
        "POST",
        "/supplier-finance/invoices/{id}/payments",
        Route::SupplierPayment,
    ),
    ("POST", "/suppliers", Route::SupplierCreate),
    ("PUT", "/suppliers/{id}", Route::SupplierUpdate),
    ("POST", "/sync/conflicts/{id}/resolve", Route::Resolve),
    ("POST", "/sync/push", Route::Push),
    ("POST", "/transfers", Route::Transfer),
    ("POST", "/users", Route::UserCreate),
    ("PUT", "/users/{id}", Route::UserUpdate),
    ("POST", "/auth/password", Route::PasswordChange),
];

/// Routes whose body documents a bound the test does not drive, with why.
/// Empty: every documented bound of a write is sent. A route added here
/// must say why it cannot be driven simply.
pub const EXCEPTIONS: &[(&str, &str, &str)] = &[];

fn count(table: &str) -> String {
    format!("SELECT count(*)::text FROM {table}")
}

fn digest(table: &str, id: &str) -> String {
    format!("SELECT coalesce(string_agg(md5(t::text), ','), '') FROM {table} t WHERE id = '{id}'")
}

/// A delivery of the shared medicine: `n` lines or charges where `field`
/// is that list at its bound, one otherwise.
fn delivery(w: &World, field: &str, change: &Change, past: bool) -> Value {
    let n = |list: &str| {
        (field == list)
            .then(|| wanted(change, past))
            .flatten()
            .unwrap_or(1)
    };
    let lines: Vec<Value> = (0..n("lines"))
        .map(|i| {
            json!({"medicine_id": w.medicine, "batch_number": format!("G-{i}"),
                   "expiry_date": "2030-12-31", "quantity_received": 1,
                   "quantity_rejected": 1, "rejection_reason": "torn", "unit_cost": 1})
        })
        .collect();
    let charges: Vec<Value> = (0..n("charges"))
        .map(|_| json!({"kind": "freight", "amount": 1}))
        .collect();
    json!({"supplier_id": w.supplier, "delivery_reference": w.tag(),
           "lines": lines, "charges": charges})
}

/// `n` distinct elements for a list at its bound, unless `past` (a list
/// past its bound is refused before its elements are read, so copies of
/// the first do).
fn wanted(change: &Change, past: bool) -> Option<usize> {
    match change {
        Change::Items(n) if !past => Some(*n),
        _ => None,
    }
}

impl Route {
    /// A valid request of this route for `field` to be changed by
    /// `change`, with the records it needs made first. Lists that must
    /// hold distinct elements are built here; other changes are the
    /// caller's.
    pub async fn prepare(self, w: &World, field: &str, change: &Change, past: bool) -> Prepared {
        let admin = w.admin.clone();
        let ok = |path: String, body: Value, witness: String| Prepared {
            path,
            token: admin.clone(),
            body,
            witness,
        };
        let line = json!({"medicine_id": w.medicine, "quantity": 1});
        match self {
            Route::Approval => ok(
                "/approvals".into(),
                json!({"kind": "price_override", "reference_id": w.tag(), "reason": "limits"}),
                count("approvals"),
            ),
            Route::BranchCreate => ok(
                "/branches".into(),
                json!({"code": w.tag(), "name": w.tag()}),
                count("branches"),
            ),
            Route::BranchUpdate => {
                let id = w.app.branch(&w.tag().to_uppercase()).await.to_string();
                ok(
                    format!("/branches/{id}"),
                    json!({}),
                    digest("branches", &id),
                )
            }
            Route::Coupon => ok(
                "/coupons".into(),
                json!({"code": w.tag(), "discount_type": "fixed", "discount_value": 1}),
                count("coupons"),
            ),
            Route::CustomerCreate => ok(
                "/customers".into(),
                json!({"name": w.tag()}),
                count("customers"),
            ),
            Route::CustomerUpdate => {
                let id = w.id("/customers", json!({"name": w.tag()})).await;
                ok(
                    format!("/customers/{id}"),
                    json!({}),
                    digest("customers", &id),
                )
            }
            Route::CustomerPayment => ok(
                format!("/customers/{}/payments", w.debtor),
                json!({"amount": 1}),
                count("customer_ledger"),
            ),
            Route::Device => ok(
                "/devices".into(),
                json!({"name": w.tag()}),
                count("devices"),
            ),
            Route::WillCall => ok(
                "/dispensing/will-call".into(),
                json!({"patient_name": w.tag()}),
                count("will_call_pickups"),
            ),
            Route::MedicineCreate => ok(
                "/medicines".into(),
                json!({"name": w.tag(), "selling_price": 1}),
                count("medicines"),
            ),
            Route::MedicineUpdate => {
                let id = w
                    .id("/medicines", json!({"name": w.tag(), "selling_price": 1}))
                    .await;
                ok(
                    format!("/medicines/{id}"),
                    json!({}),
                    digest("medicines", &id),
                )
            }
            Route::Prescription => ok(
                "/prescriptions".into(),
                json!({"patient_name": w.tag(), "items": [line]}),
                count("prescriptions"),
            ),
            Route::PrinterCreate => ok(
                "/printing/printers".into(),
                json!({"name": w.tag()}),
                count("printers"),
            ),
            Route::PrinterUpdate => {
                let id = w.id("/printing/printers", json!({"name": w.tag()})).await;
                ok(
                    format!("/printing/printers/{id}"),
                    json!({}),
                    digest("printers", &id),
                )
            }
            Route::TemplateCreate => ok(
                "/printing/receipt-templates".into(),
                json!({"name": w.tag()}),
                count("receipt_templates"),
            ),
            Route::TemplateUpdate => {
                let id = w
                    .id("/printing/receipt-templates", json!({"name": w.tag()}))
                    .await;
                ok(
                    format!("/printing/receipt-templates/{id}"),
                    json!({}),
                    digest("receipt_templates", &id),
                )
            }
            Route::Purchase => ok(
                "/purchases".into(),
                json!({"supplier_id": w.supplier, "medicine_id": w.medicine,
                       "branch_id": w.branch, "batch_number": w.tag(),
                       "expiry_date": "2030-12-31", "quantity": 1, "unit_cost": 1}),
                count("batches"),
            ),
            Route::GoodsReceived => ok(
                "/goods-received".into(),
                delivery(w, field, change, past),
                count("goods_received_notes"),
            ),
            Route::GoodsReceivedUpdate => {
                let body = delivery(w, "", change, true);
                let id = w.id("/goods-received", body).await;
                ok(
                    format!("/goods-received/{id}"),
                    delivery(w, field, change, past),
                    digest("goods_received_notes", &id),
                )
            }
            Route::PurchaseOrderCreate | Route::PurchaseOrderUpdate => {
                // Lines at their bound name distinct medicines: an order
                // takes each medicine once per pack.
                let lines: Vec<Value> = match wanted(change, past) {
                    Some(n) => w.medicines(n).await,
                    None => vec![w.medicine.clone()],
                }
                .into_iter()
                .map(|m| json!({"medicine_id": m, "quantity": 1, "unit_cost": "1.50"}))
                .collect();
                let body = json!({"supplier_id": w.supplier, "lines": lines});
                if matches!(self, Route::PurchaseOrderCreate) {
                    ok("/purchase-orders".into(), body, count("purchase_orders"))
                } else {
                    let id = w.id("/purchase-orders", body.clone()).await;
                    ok(
                        format!("/purchase-orders/{id}"),
                        body,
                        digest("purchase_orders", &id),
                    )
                }
            }
            Route::Sale => {
                // A coupon code at its bound is accepted only if it names a
                // coupon: make one with that code.
                if let (Change::Text(code), "coupon_code", false) = (change, field, past) {
                    w.made(
                        "/coupons",
                        json!({"code": code, "discount_type": "fixed", "discount_value": 1}),
                    )
                    .await;
                }
                ok(
                    "/sales".into(),
                    json!({"items": [line], "payment_method": "cash",
                           "customer_id": w.debtor, "client_mutation_id": w.tag()}),
                    count("sales"),
                )
            }
            Route::Return => {
                // A sale on credit is refunded to the account, any other
                // paid out: the sale is paid the way the refund goes.
                let credit = matches!(change, Change::Text(m) if m.eq_ignore_ascii_case("credit"));
                let method = if credit { "credit" } else { "cash" };
                let lines = wanted(change, past).unwrap_or(1);
                let sale = w.sell(method, lines, 1).await;
                let items: Vec<Value> = sale["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| json!({"sale_item_id": i["id"], "quantity": 1}))
                    .collect();
                ok(
                    format!("/sales/{}/returns", text(&sale["id"])),
                    json!({"items": items, "reason": "Damaged in the bag"}),
                    count("sale_returns"),
                )
            }
            Route::Settings => ok(
                "/settings".into(),
                json!({}),
                "SELECT coalesce(string_agg(md5(s::text), ','), '') FROM settings s".into(),
            ),
            Route::WriteOff => {
                let items: Vec<Value> = match wanted(change, past) {
                    Some(n) => w.batches(n).await,
                    None => vec![w.batch.clone()],
                }
                .into_iter()
                .map(|b| json!({"batch_id": b, "quantity": 1}))
                .collect();
                ok(
                    "/stock/write-offs".into(),
                    json!({"reason": "damaged", "items": items}),
                    count("write_offs"),
                )
            }
            Route::SupplierReturn => {
                // Batches of their own, from the world's supplier.
                let batches = w.batches(wanted(change, past).unwrap_or(1)).await;
                let client = w.app.pool.get().await.unwrap();
                let ids: Vec<Uuid> = batches.iter().map(|b| b.parse().unwrap()).collect();
                client
                    .execute(
                        "UPDATE batches SET supplier_id = $1 WHERE id = ANY($2)",
                        &[&w.supplier, &ids],
                    )
                    .await
                    .unwrap();
                let lines: Vec<Value> = batches
                    .into_iter()
                    .map(|b| json!({"batch_id": b, "quantity": 1}))
                    .collect();
                ok(
                    "/supplier-returns".into(),
                    json!({"supplier_id": w.supplier, "reason": "expired", "lines": lines}),
                    count("supplier_returns"),
                )
            }
            Route::StockCount => {
                // Medicines of their own, without stock: counting 0 of
                // each adjusts nothing the other requests rely on.
                let items: Vec<Value> = w
                    .medicines(wanted(change, past).unwrap_or(1))
                    .await
                    .into_iter()
                    .map(|m| json!({"medicine_id": m, "counted_quantity": 0}))
                    .collect();
                ok(
                    "/stockcount/submit".into(),
                    json!({"items": items}),
                    count("stock_counts"),
                )
            }
            Route::Quarantine => {
                let id = w.batch().await;
                ok(
                    format!("/supplier-finance/batches/{id}/quarantine"),
                    json!({"status": "quarantined"}),
                    digest("batches", &id),
                )
            }
            // A matched invoice: one unit of the world's receipt (bought at
            // 100.00) and a freight charge.
            Route::Invoice => ok(
                "/supplier-finance/invoices".into(),
                json!({"supplier_id": w.receipt_supplier, "total_amount": "101.00",
                       "lines": [{"goods_received_line_id": w.receipt_line, "quantity": 1,
                                  "unit_cost": "100.00"}],
                       "charges": [{"kind": "freight", "amount": 1}]}),
                count("supplier_invoices"),
            ),
            Route::SupplierPayment => {
                let id = w
                    .id(
                        "/supplier-finance/invoices",
                        json!({"supplier_id": w.supplier, "total_amount": 100}),
                    )
                    .await;
                // A debit-note payment names a note of the invoice's
                // supplier and branch, with value left.
                let debit_note =
                    matches!(change, Change::Text(m) if m.eq_ignore_ascii_case("debit_note"));
                let body = match debit_note {
                    false => json!({"amount": 1}),
                    true => {
                        let batch = w.batch().await;
                        let note = w
                            .made(
                                "/supplier-returns",
                                json!({"supplier_id": w.supplier, "reason": "expired",
                                       "lines": [{"batch_id": batch, "quantity": 1}]}),
                            )
                            .await;
                        json!({"amount": 1, "reference": note["debit_note_number"]})
                    }
                };
                ok(
                    format!("/supplier-finance/invoices/{id}/payments"),
                    body,
                    count("supplier_payments"),
                )
            }
            Route::SupplierCreate => ok(
                "/suppliers".into(),
                json!({"name": w.tag()}),
                count("suppliers"),
            ),
            Route::SupplierUpdate => {
                let id = w.app.supplier(&w.tag()).await.to_string();
                ok(
                    format!("/suppliers/{id}"),
                    json!({}),
                    digest("suppliers", &id),
                )
            }
            Route::Resolve => {
                let id = w.conflict().await;
                ok(
                    format!("/sync/conflicts/{id}/resolve"),
                    json!({"strategy": "server"}),
                    digest("sync_conflicts", &id),
                )
            }
            Route::Push => {
                let change = json!({"client_mutation_id": w.tag(), "entity": "customer",
                    "op": "create", "payload": {"id": Uuid::now_v7(), "name": w.tag()}});
                Prepared {
                    path: "/sync/push".into(),
                    token: w.cashier.clone(),
                    body: json!({"device_id": w.device, "changes": [change]}),
                    witness: count("push_mutations"),
                }
            }
            Route::Transfer => ok(
                "/transfers".into(),
                json!({"medicine_id": w.medicine, "from_branch_id": w.branch,
                       "to_branch_id": w.other_branch, "qty": 1}),
                count("transfers"),
            ),
            Route::UserCreate => ok(
                "/users".into(),
                json!({"email": format!("{}@test.org", w.tag()), "password": PASSWORD,
                       "full_name": w.tag(), "role": "cashier", "branch_id": w.branch}),
                count("users"),
            ),
            Route::UserUpdate => {
                let id = w.app.user(w.branch, Role::Cashier).await.id.to_string();
                ok(format!("/users/{id}"), json!({}), digest("users", &id))
            }
            Route::PasswordChange => {
                // A user of its own: a change ends every token of the user.
                let (user, token) = w.app.signed_in(w.branch, Role::Cashier).await;
                Prepared {
                    path: "/auth/password".into(),
                    token,
                    body: json!({"current_password": PASSWORD,
                                 "new_password": format!("{}-horse-43", w.tag())}),
                    witness: digest("users", &user.id.to_string()),
                }
            }
        }
    }
}

/// The method of a table entry.
pub fn method(name: &str) -> Method {
    match name {
        "PUT" => Method::PUT,
        _ => Method::POST,
    }
}
