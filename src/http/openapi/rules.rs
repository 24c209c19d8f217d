//! Rules of request fields the handlers enforce that the derived schemas do
//! not state: closed value lists, non-blank names, text lengths, list sizes,
//! whole-unit quantities, amounts above zero, and flags that take 0/1.
//!
//! Each rule is built from the constant or list its check uses (utoipa's
//! attributes take only literals, so the rules are applied here, to the
//! generated schemas), and none is stricter than its handler: the fuzz run
//! sends what the document allows. Enumerations are written as
//! case-insensitive patterns where the handler trims and folds case. The
//! `declared_limits` API test sends every documented bound at the limit and
//! past it, so a rule and its check cannot drift apart unnoticed.

use domain::buying::orders;
use domain::buying::received;
use domain::buying::returns as supplier_returns;
use domain::input::{any_case, any_case_or_blank, exactly, max, trimmed};
use domain::stock::{count as stockcount, quarantine, receiving, transfers};
use domain::suppliers::invoices;
use domain::sync::conflicts::Strategy;
use domain::sync::push::MAX_NAME_CHARS;
use domain::users::passwords::{MAX_PASSWORD_BYTES, MIN_PASSWORD_LEN};
use domain::{
    approvals, branches, coupons, gs1, input, medicines, prescriptions, printing, returns, sales,
    settings, will_call, write_offs,
};
use serde_json::{json, Value};
use utoipa::openapi::OpenApi;
use utoipa::Modify;

/// What a non-blank text field's pattern says: at least one non-space.
const NON_BLANK: &str = "\\S";

/// The longest text each field takes, in characters, by schema: the limit
/// its handler passes to `input::text` (or a check of its own).
const LENGTHS: &[(&str, &[(&str, usize)])] = &[
    (
        "ApprovalCreate",
        &[
            ("kind", max::LABEL),
            ("reference_id", approvals::MAX_REFERENCE_ID),
            ("reason", max::NOTES),
        ],
    ),
    ("BranchCreate", BRANCH),
    ("BranchUpdate", BRANCH),
    (
        "CouponCreate",
        &[
            ("code", max::COUPON_CODE),
            ("type", max::CODE),
            ("description", coupons::manage::MAX_DESCRIPTION),
            ("image_url", max::URL),
        ],
    ),
    (
        "CustomerWrite",
        &[
            ("name", max::NAME),
            ("phone", max::CODE),
            ("national_id", max::CODE),
            ("notes", max::NOTES),
            ("image_url", max::URL),
        ],
    ),
    (
        "PaymentRequest",
        &[
            ("notes", max::NOTES),
            ("client_mutation_id", max::MUTATION_ID),
        ],
    ),
    ("DeviceCreate", &[("name", max::NAME)]),
    (
        "WillCallCreate",
        &[
            ("patient_name", will_call::MAX_PATIENT_NAME),
            ("patient_phone", will_call::MAX_PHONE),
        ],
    ),
    (
        "MedicineWrite",
        &[
            ("name", max::NAME),
            ("generic_name", max::NAME),
            ("barcode", max::LABEL),
            ("category", max::LABEL),
            ("form", max::LABEL),
            ("strength", max::LABEL),
            ("unit", max::LABEL),
            ("control_schedule", max::CODE),
            ("regulator_registration_no", max::LABEL),
            ("image_key", max::URL),
            ("image_url", max::URL),
        ],
    ),
    (
        "PrescriptionCreate",
        &[
            ("patient_name", max::NAME),
            ("patient_id_number", prescriptions::request::MAX_ID_NUMBER),
            ("prescriber_name", max::NAME),
            ("prescriber_license", prescriptions::request::MAX_ID_NUMBER),
            ("notes", max::NOTES),
        ],
    ),
    (
        "PrescriptionItemWrite",
        &[("dosage_instructions", prescriptions::request::MAX_DOSAGE)],
    ),
    ("PrinterWrite", &[("name", printing::writes::MAX_NAME)]),
    (
        "TemplateWrite",
        &[
            ("name", printing::writes::MAX_NAME),
            ("header_text", max::NOTES),
            ("footer_text", max::NOTES),
        ],
    ),
    ("PurchaseOrderRequest", &[("notes", orders::MAX_NOTES)]),
    (
        "PurchaseRequest",
        &[
            ("batch_number", receiving::request::MAX_BATCH_NUMBER),
            ("notes", max::NOTES),
            ("scan", gs1::MAX_CODE_CHARS),
        ],
    ),
    (
        "GoodsReceivedRequest",
        &[("delivery_reference", received::request::MAX_REFERENCE)],
    ),
    (
        "ReceivedLineRequest",
        &[
            ("batch_number", receiving::request::MAX_BATCH_NUMBER),
            ("rejection_reason", received::request::MAX_REASON),
        ],
    ),
    (
        "InvoiceRequest",
        &[("invoice_no", max::LABEL), ("notes", invoices::MAX_NOTES)],
    ),
    (
        "SupplierPaymentRequest",
        &[("reference", invoices::MAX_PAYMENT_REFERENCE)],
    ),
    (
        "SaleRequest",
        &[
            ("coupon_code", max::COUPON_CODE),
            ("client_mutation_id", max::MUTATION_ID),
        ],
    ),
    ("SaleLineRequest", &[("scan", sales::MAX_SCAN)]),
    (
        "ReturnRequest",
        &[
            ("reason", max::NOTES),
            ("client_mutation_id", max::MUTATION_ID),
        ],
    ),
    (
        "WriteOffRequest",
        &[("notes", max::NOTES), ("witness_name", max::NAME)],
    ),
    ("SupplierReturnRequest", &[("notes", max::NOTES)]),
    ("CountRequestItem", &[("notes", stockcount::MAX_LINE_NOTES)]),
    ("TransferCreate", &[("notes", transfers::MAX_NOTES)]),
    (
        "SettingsWrite",
        &[
            ("name", max::NAME),
            ("legal_name", max::NAME),
            ("phone", max::CODE),
            ("email", max::EMAIL),
            ("address", max::ADDRESS),
            ("tin", max::CODE),
            ("vat_number", max::CODE),
            ("nda_license_no", max::CODE),
            ("premise_no", max::CODE),
            ("receipt_header", max::NOTES),
            ("receipt_footer", max::NOTES),
            ("return_policy", max::NOTES),
            ("server_url", settings::write::MAX_SERVER_URL),
        ],
    ),
    (
        "SupplierWrite",
        &[
            ("name", max::NAME),
            ("supplier_type", max::CODE),
            ("tax_number", max::CODE),
            ("contact_person", max::NAME),
            ("phone", max::CODE),
            ("email", max::EMAIL),
            ("address", max::ADDRESS),
            ("image_url", max::URL),
        ],
    ),
    ("UserCreate", USER),
    ("UserUpdate", USER),
    (
        "PushChange",
        &[
            ("client_mutation_id", max::MUTATION_ID),
            ("entity", MAX_NAME_CHARS),
            ("op", MAX_NAME_CHARS),
        ],
    ),
    ("PasswordChange", &[("new_password", MAX_PASSWORD_BYTES)]),
];

/// A branch's texts, on create and on update.
const BRANCH: &[(&str, usize)] = &[
    ("code", branches::MAX_CODE),
    ("name", max::NAME),
    ("city", max::LABEL),
    ("vat_number", max::CODE),
    ("address", max::ADDRESS),
    ("image_url", max::URL),
];

/// A user's texts, on create and on update. A password's bound is in bytes
/// (what the hash reads): as many characters of ASCII, so the document's
/// character count is never the stricter of the two.
const USER: &[(&str, usize)] = &[
    ("email", max::EMAIL),
    ("full_name", max::NAME),
    ("phone", max::CODE),
    ("password", MAX_PASSWORD_BYTES),
];

/// The schema-level rules, as `(schema, property, keywords to add)`.
fn rules() -> Vec<(&'static str, &'static str, Value)> {
    let quantity = json!({"type": "integer", "minimum": 1, "maximum": input::MAX_QUANTITY});
    let lines = |max_items: usize| json!({"minItems": 1, "maxItems": max_items});
    let mut rules: Vec<(&str, &str, Value)> = vec![
        (
            "SaleRequest",
            "payment_method",
            json!({"pattern": any_case(&sales::PAYMENT_METHODS)}),
        ),
        ("SaleRequest", "items", lines(sales::MAX_LINES)),
        (
            "GoodsReceivedRequest",
            "lines",
            lines(received::request::MAX_LINES),
        ),
        (
            "GoodsReceivedRequest",
            "charges",
            json!({"maxItems": received::request::MAX_CHARGES}),
        ),
        (
            "ReceiptChargeRequest",
            "kind",
            json!({"pattern": any_case(&received::request::CHARGE_KINDS)}),
        ),
        ("SaleLineRequest", "quantity", quantity.clone()),
        ("CountRequest", "items", lines(stockcount::MAX_ITEMS)),
        (
            "PrescriptionCreate",
            "items",
            lines(prescriptions::request::MAX_ITEMS),
        ),
        (
            "PrescriptionCreate",
            "patient_name",
            json!({"pattern": NON_BLANK}),
        ),
        ("PrescriptionItemWrite", "quantity", quantity.clone()),
        ("PurchaseOrderRequest", "lines", lines(orders::MAX_LINES)),
        ("PurchaseOrderLineRequest", "quantity", quantity.clone()),
        ("TransferCreate", "qty", quantity),
        (
            "PurchaseRequest",
            "batch_number",
            json!({"pattern": NON_BLANK}),
        ),
        ("ReturnRequest", "items", lines(returns::MAX_LINES)),
        (
            "ReturnRequest",
            "refund_method",
            json!({"pattern": any_case(&sales::PAYMENT_METHODS)}),
        ),
        ("WriteOffRequest", "items", lines(write_offs::MAX_LINES)),
        (
            "WriteOffRequest",
            "reason",
            json!({"pattern": any_case(&write_offs::REASONS)}),
        ),
        (
            "SupplierReturnRequest",
            "lines",
            lines(supplier_returns::MAX_LINES),
        ),
        (
            "SupplierReturnRequest",
            "reason",
            json!({"pattern": any_case(&supplier_returns::REASONS)}),
        ),
        ("ApprovalCreate", "kind", json!({"pattern": NON_BLANK})),
        (
            "WillCallCreate",
            "patient_name",
            json!({"pattern": NON_BLANK}),
        ),
        ("DeviceCreate", "name", json!({"pattern": NON_BLANK})),
        ("ContactRequest", "name", json!({"pattern": NON_BLANK})),
        ("ContactRequest", "message", json!({"pattern": NON_BLANK})),
        ("CouponCreate", "code", json!({"pattern": NON_BLANK})),
        (
            "CouponCreate",
            "discount_type",
            json!({"pattern": any_case(&coupons::manage::DISCOUNT_TYPES)}),
        ),
        (
            "CouponCreate",
            "discount_value",
            json!({"exclusiveMinimum": 0}),
        ),
        ("CustomerWrite", "name", json!({"pattern": NON_BLANK})),
        ("MedicineWrite", "name", json!({"pattern": NON_BLANK})),
        (
            "MedicineWrite",
            "vat_category",
            json!({"pattern": any_case(&medicines::VAT_CATEGORIES)}),
        ),
        ("SupplierWrite", "name", json!({"pattern": NON_BLANK})),
        ("PrinterWrite", "name", json!({"pattern": NON_BLANK})),
        (
            "PrinterWrite",
            "kind",
            json!({"pattern": trimmed(printing::writes::PRINTER_KINDS)}),
        ),
        (
            "PrinterWrite",
            "connection",
            json!({"pattern": trimmed(printing::writes::PRINTER_CONNECTIONS)}),
        ),
        ("TemplateWrite", "name", json!({"pattern": NON_BLANK})),
        (
            "TemplateWrite",
            "paper",
            json!({"pattern": trimmed(printing::writes::PAPERS)}),
        ),
        (
            "SettingsWrite",
            "server_mode",
            json!({"pattern": trimmed(&settings::write::SERVER_MODES)}),
        ),
        (
            "QuarantineRequest",
            "status",
            json!({"pattern": exactly(&quarantine::REGULATOR_STATUSES)}),
        ),
        (
            "ResolveRequest",
            "strategy",
            json!({"pattern": exactly(&Strategy::ALL.map(Strategy::as_str))}),
        ),
        (
            "SupplierPaymentRequest",
            "method",
            json!({"pattern": any_case_or_blank(&invoices::METHODS)}),
        ),
        // A client mutation id may be absent, never blank.
        (
            "PaymentRequest",
            "client_mutation_id",
            json!({"minLength": 1}),
        ),
        ("PushChange", "client_mutation_id", json!({"minLength": 1})),
        (
            "PasswordChange",
            "new_password",
            json!({"minLength": MIN_PASSWORD_LEN}),
        ),
        (
            "UserCreate",
            "password",
            json!({"minLength": MIN_PASSWORD_LEN}),
        ),
        (
            "UserUpdate",
            "password",
            json!({"minLength": MIN_PASSWORD_LEN}),
        ),
        ("PaymentRequest", "amount", json!({"exclusiveMinimum": 0})),
        (
            "InvoiceRequest",
            "total_amount",
            json!({"exclusiveMinimum": 0}),
        ),
        (
            "SupplierPaymentRequest",
            "amount",
            json!({"exclusiveMinimum": 0}),
        ),
        ("RateWrite", "rate", json!({"exclusiveMinimum": 0})),
    ];
    rules.extend(LENGTHS.iter().flat_map(|(schema, fields)| {
        fields
            .iter()
            .map(|(field, n)| (*schema, *field, json!({"maxLength": n})))
    }));
    // Flags (`domain::input::Flag`) take a boolean or the snapshot's 0/1.
    let flag = json!({"anyOf": [{"type": "boolean"}, {"type": "integer", "enum": [0, 1]}]});
    let flags: &[(&str, &[&str])] = &[
        ("CustomerWrite", &["is_credit_allowed"]),
        (
            "MedicineWrite",
            &[
                "requires_prescription",
                "is_controlled",
                "requires_cold_chain",
                "is_active",
            ],
        ),
        ("SupplierWrite", &["is_active"]),
        ("PrinterWrite", &["is_default", "auto_print", "kick_drawer"]),
        (
            "TemplateWrite",
            &["show_logo", "show_vat", "show_batch", "is_default"],
        ),
        ("PickupRequest", &["signature_captured"]),
        (
            "SettingsWrite",
            &[
                "show_vat_breakdown",
                "show_pharmacist_on_receipt",
                "auto_print_receipt",
                "tax_enabled",
            ],
        ),
    ];
    rules.extend(
        flags
            .iter()
            .flat_map(|(schema, fields)| fields.iter().map(|f| (*schema, *f, flag.clone()))),
    );
    rules
}

pub(super) struct RequestRules;

impl Modify for RequestRules {
    fn modify(&self, openapi: &mut OpenApi) {
        // A rule that finds no property is a typo or a renamed field; the
        // unit test below names it.
        let _missed = apply(openapi);
    }
}

/// Applies every rule; answers the `schema.property` pairs that name nothing.
fn apply(openapi: &mut OpenApi) -> Vec<String> {
    let mut missed = Vec::new();
    let Some(components) = openapi.components.as_mut() else {
        return vec!["the document has no components".to_owned()];
    };
    for (schema, property, patch) in rules() {
        let Some(entry) = components.schemas.get_mut(schema) else {
            missed.push(format!("{schema}.{property}"));
            continue;
        };
        let Ok(mut value) = serde_json::to_value(&*entry) else {
            missed.push(format!("{schema}.{property}"));
            continue;
        };
        let Some(target) = value
            .get_mut("properties")
            .and_then(|p| p.get_mut(property))
            .and_then(Value::as_object_mut)
        else {
            missed.push(format!("{schema}.{property}"));
            continue;
        };
        if patch.get("anyOf").is_some() {
            // A union replaces the derived type; `null` stays allowed
            // where it was.
            let nullable = target
                .get("type")
                .and_then(Value::as_array)
                .is_some_and(|t| t.iter().any(|t| t == "null"));
            target.remove("type");
            target.remove("format");
            let mut any = patch["anyOf"].clone();
            if let (true, Some(items)) = (nullable, any.as_array_mut()) {
                items.push(json!({"type": "null"}));
            }
            target.insert("anyOf".to_owned(), any);
        } else {
            if let Some(fields) = patch.as_object() {
                for (k, v) in fields {
                    target.insert(k.clone(), v.clone());
                }
            }
            // An integer rule replaces a `number` type, keeping `null` where allowed.
            if patch.get("type").is_some() {
                target.remove("format");
            }
        }
        match serde_json::from_value(value) {
            Ok(patched) => *entry = patched,
            Err(_) => missed.push(format!("{schema}.{property} (not a schema once patched)")),
        }
    }
    missed
}

#[cfg(test)]
mod tests {
    use super::apply;

    /// Every rule lands on a property of the generated document: a renamed
    /// field or schema would otherwise leave its rule silently unapplied.
    #[test]
    fn every_rule_names_a_property_of_the_document() {
        let mut doc = super::super::annotated();
        let missed = apply(&mut doc);
        assert!(missed.is_empty(), "rules that name nothing: {missed:?}");
    }
}
