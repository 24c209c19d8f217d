//! The content of each fiscal document in EFRIS's field names, built from
//! what the writer already holds (no read of its own, so the sale path's
//! round trips stay as they were). The seller's identity (TIN, legal name,
//! device number) is not frozen here: the worker adds it from the
//! configuration when it sends the document.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use uuid::Uuid;

use super::outbox::NewDocument;
use super::Kind;
use crate::returns::CreditNote;
use crate::sales::Sale;

/// The commodity category every medicine is registered under (UNSPSC
/// segment 51, drugs and pharmaceutical products).
pub const GOODS_CATEGORY: &str = "51000000";
/// The unit of measure code goods are registered and sold in.
pub const MEASURE_UNIT: &str = "101";

fn money(d: Decimal) -> String {
    format!("{:.2}", crate::wire::two_places(d))
}

fn issued(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// EFRIS's tax category and rate of a whole-percent VAT rate.
fn tax_category(rate: i32) -> (&'static str, String) {
    match rate {
        0 => ("02", "0".to_owned()),
        r => (
            "01",
            format!("{}", Decimal::new(i64::from(r), 2).normalize()),
        ),
    }
}

/// EFRIS's payment mode of a payment method.
fn payment_mode(method: &str) -> &'static str {
    match method {
        "credit" => "101",
        "card" => "106",
        "mobile_money" => "105",
        _ => "102",
    }
}

/// A line as EFRIS counts it: name, code, quantity, price, total, rate, tax.
struct Line<'a> {
    name: &'a str,
    code: Uuid,
    quantity: i32,
    unit_price: Decimal,
    total: Decimal,
    vat_rate: i32,
    vat: Decimal,
}

/// `goodsDetails`, `taxDetails` (one band per rate) and `summary`. `sign`
/// is -1 for a credit note, whose amounts EFRIS takes as negative.
fn lines_and_totals(
    lines: &[Line<'_>],
    sign: Decimal,
    subtotal: Decimal,
    vat: Decimal,
    total: Decimal,
) -> (Value, Value, Value) {
    let goods: Vec<Value> = lines
        .iter()
        .enumerate()
        .map(|(n, l)| {
            let (_, rate) = tax_category(l.vat_rate);
            json!({
                "item": l.name,
                "itemCode": l.code.to_string(),
                "qty": (Decimal::from(l.quantity) * sign).to_string(),
                "unitOfMeasure": MEASURE_UNIT,
                "unitPrice": money(l.unit_price),
                "total": money(l.total * sign),
                "taxRate": rate,
                "tax": money(l.vat * sign),
                "orderNumber": n.to_string(),
                "discountFlag": "2",
                "deemedFlag": "2",
                "exciseFlag": "2",
                "goodsCategoryId": GOODS_CATEGORY,
            })
        })
        .collect();
    let mut bands: BTreeMap<i32, (Decimal, Decimal)> = BTreeMap::new();
    for l in lines {
        let band = bands.entry(l.vat_rate).or_default();
        band.0 += l.total - l.vat;
        band.1 += l.vat;
    }
    let taxes: Vec<Value> = bands
        .into_iter()
        .map(|(r, (net, tax))| {
            let (category, rate) = tax_category(r);
            json!({
                "taxCategoryCode": category,
                "netAmount": money(net * sign),
                "taxRate": rate,
                "taxAmount": money(tax * sign),
                "grossAmount": money((net + tax) * sign),
            })
        })
        .collect();
    let summary = json!({
        "netAmount": money(subtotal * sign),
        "taxAmount": money(vat * sign),
        "grossAmount": money(total * sign),
        "itemCount": lines.len().to_string(),
        "modeCode": "1",
    });
    (Value::Array(goods), Value::Array(taxes), summary)
}

/// The invoice (`T109`) of a sale. It waits for its goods' registration.
pub fn invoice(s: &Sale) -> NewDocument {
    let lines: Vec<Line<'_>> = s
        .items
        .iter()
        .map(|i| Line {
            name: &i.medicine_name,
            code: i.medicine_id,
            quantity: i.quantity,
            unit_price: i.unit_price,
            total: i.line_total,
            vat_rate: i.vat_rate,
            vat: i.vat_amount,
        })
        .collect();
    let (goods, taxes, summary) =
        lines_and_totals(&lines, Decimal::ONE, s.subtotal, s.vat, s.total);
    let payload = json!({
        "sellerDetails": {
            "referenceNo": s.invoice_number,
            "branchId": s.branch_id.to_string(),
            "isCheckReferenceNo": "1",
        },
        "basicInformation": {
            "issuedDate": issued(s.created_at),
            "operator": s.created_by_name,
            "currency": "UGX",
            "invoiceType": "1",
            "invoiceKind": "1",
            "dataSource": "103",
            "invoiceIndustryCode": "101",
            "isBatch": "0",
        },
        "buyerDetails": {
            "buyerType": "1",
            "buyerReferenceNo": s.customer_id.map(|c| c.to_string()).unwrap_or_default(),
        },
        "goodsDetails": goods,
        "taxDetails": taxes,
        "summary": summary,
        "payWay": [{
            "paymentMode": payment_mode(&s.payment_method),
            "paymentAmount": money(s.total),
            "orderNumber": "a",
        }],
        "extend": {"icv": s.icv.to_string()},
    });
    NewDocument {
        kind: Kind::T109,
        source_id: s.id,
        branch_id: Some(s.branch_id),
        seller_reference: s.invoice_number.clone(),
        depends_on: s.items.iter().map(|i| i.medicine_id).collect(),
        payload,
    }
}

/// The credit note application (`T110`) of an issued return. It waits for
/// its invoice's FDN, which the worker fills in as `oriInvoiceNo` when it
/// sends it (`oriInvoiceId` names the sale until then).
pub fn credit_note(n: &CreditNote) -> NewDocument {
    let lines: Vec<Line<'_>> = n
        .items
        .iter()
        .map(|i| Line {
            name: &i.medicine_name,
            code: i.medicine_id,
            quantity: i.quantity,
            unit_price: i.unit_price,
            total: i.line_total,
            vat_rate: i.vat_rate,
            vat: i.vat_amount,
        })
        .collect();
    let sign = Decimal::NEGATIVE_ONE;
    let (goods, taxes, summary) = lines_and_totals(&lines, sign, n.subtotal, n.vat, n.total);
    let number = n.credit_note_number.clone().unwrap_or_default();
    let payload = json!({
        "oriInvoiceId": n.sale_id.to_string(),
        "oriInvoiceNo": "",
        "oriSellerReferenceNo": n.original_invoice_number,
        "reasonCode": "102",
        "reason": n.reason,
        "applicationTime": issued(n.issued_at.unwrap_or(n.created_at)),
        "invoiceApplyCategoryCode": "101",
        "currency": "UGX",
        "source": "103",
        "sellersReferenceNo": number,
        "goodsDetails": goods,
        "taxDetails": taxes,
        "summary": summary,
        "buyerDetails": {"buyerType": "1"},
        "payWay": [{
            "paymentMode": payment_mode(&n.refund_method),
            "paymentAmount": money(-n.total),
            "orderNumber": "a",
        }],
        "extend": {"cnSeq": n.cn_seq.unwrap_or_default().to_string()},
    });
    NewDocument {
        kind: Kind::T110,
        source_id: n.id,
        branch_id: Some(n.branch_id),
        seller_reference: number,
        depends_on: vec![n.sale_id],
        payload,
    }
}

/// Why stock went down, in EFRIS's `adjustType` codes.
pub fn adjust_type(reason: &str) -> &'static str {
    match reason {
        "expired" => "101",
        "damaged" => "102",
        "lost" | "recalled" | "returned" => "104",
        _ => "104",
    }
}

/// One line of a stock document: the medicine, base units and unit cost.
#[derive(Debug, Clone)]
pub struct StockLine {
    pub medicine_id: Uuid,
    pub quantity: i32,
    pub unit_cost: Decimal,
}

/// A stock increase (`T131`, operation 101): a receipt from a supplier.
/// It waits for its goods' registration.
pub fn stock_increase(
    source_id: Uuid,
    branch_id: Uuid,
    supplier_name: &str,
    at: DateTime<Utc>,
    lines: &[StockLine],
) -> NewDocument {
    stock(source_id, branch_id, at, lines, |head| {
        head.insert("operationType".into(), json!("101"));
        head.insert("supplierName".into(), json!(supplier_name));
        head.insert("stockInType".into(), json!("102"));
    })
}

/// A stock decrease (`T131`, operation 102): a write-off or a supplier
/// return, with EFRIS's reason (`adjust_type`).
pub fn stock_decrease(
    source_id: Uuid,
    branch_id: Uuid,
    reason: &str,
    remarks: &str,
    at: DateTime<Utc>,
    lines: &[StockLine],
) -> NewDocument {
    let mut doc = stock(source_id, branch_id, at, lines, |head| {
        head.insert("operationType".into(), json!("102"));
        head.insert("adjustType".into(), json!(adjust_type(reason)));
        head.insert("remarks".into(), json!(remarks));
    });
    // A decrease takes registered goods out: nothing to wait for once the
    // goods were registered to be received, and goods never registered
    // are registered first like any other.
    doc.depends_on = lines.iter().map(|l| l.medicine_id).collect();
    doc
}

fn stock(
    source_id: Uuid,
    branch_id: Uuid,
    at: DateTime<Utc>,
    lines: &[StockLine],
    head: impl FnOnce(&mut serde_json::Map<String, Value>),
) -> NewDocument {
    let mut stock_in = serde_json::Map::new();
    stock_in.insert(
        "stockInDate".into(),
        json!(at.format("%Y-%m-%d").to_string()),
    );
    stock_in.insert("branchId".into(), json!(branch_id.to_string()));
    head(&mut stock_in);
    let items: Vec<Value> = lines
        .iter()
        .map(|l| {
            json!({
                "goodsCode": l.medicine_id.to_string(),
                "measureUnit": MEASURE_UNIT,
                "quantity": l.quantity.to_string(),
                "unitPrice": money(l.unit_cost),
            })
        })
        .collect();
    NewDocument {
        kind: Kind::T131,
        source_id,
        branch_id: Some(branch_id),
        seller_reference: source_id.to_string(),
        depends_on: lines.iter().map(|l| l.medicine_id).collect(),
        payload: json!({"goodsStockIn": stock_in, "goodsStockInItem": items}),
    }
}
