//! The medicine catalogue (organisation-wide) and its categories. Two read
//! shapes: the spec's single-read shape (prices as decimal strings, flags as
//! booleans, live stock) and the snapshot shape (numbers, 0/1 flags) that
//! sync payloads carry.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Order, Query, SelectStatement};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use uuid::Uuid;

use actors::changes::{self, Change, Op};
use actors::input::{self, max, Flag};
use actors::{db, wire, Error, Result};

use crate::store::users::escape_like;
use crate::store::{audit, synced};
use actors::paging::Page;

/// A catalogue row.
#[derive(Debug, Clone)]
pub struct Medicine {
    pub id: Uuid,
    pub name: String,
    pub generic_name: String,
    pub barcode: String,
    pub category: Option<String>,
    pub form: String,
    pub strength: String,
    pub unit: String,
    pub selling_price: Decimal,
    pub max_public_price: Decimal,
    pub low_stock_threshold: i32,
    pub requires_prescription: bool,
    pub is_controlled: bool,
    pub control_schedule: String,
    pub vat_category: String,
    pub requires_cold_chain: bool,
    pub regulator_registration_no: String,
    pub image_key: String,
    pub image_url: String,
    pub is_active: bool,
    pub is_deleted: bool,
    pub rev: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Live stock in the scope it was read for.
    pub stock_quantity: i64,
}

pub const COLUMNS: [&str; 24] = [
    "id",
    "name",
    "generic_name",
    "barcode",
    "category",
    "form",
    "strength",
    "unit",
    "selling_price",
    "max_public_price",
    "low_stock_threshold",
    "requires_prescription",
    "is_controlled",
    "control_schedule",
    "vat_category",
    "requires_cold_chain",
    "regulator_registration_no",
    "image_key",
    "image_url",
    "is_active",
    "is_deleted",
    "rev",
    "created_at",
    "updated_at",
];

impl Medicine {
    pub fn from_row(r: &Row) -> Self {
        Medicine {
            id: r.get("id"),
            name: r.get("name"),
            generic_name: r.get("generic_name"),
            barcode: r.get("barcode"),
            category: r.get("category"),
            form: r.get("form"),
            strength: r.get("strength"),
            unit: r.get("unit"),
            selling_price: r.get("selling_price"),
            max_public_price: r.get("max_public_price"),
            low_stock_threshold: r.get("low_stock_threshold"),
            requires_prescription: r.get("requires_prescription"),
            is_controlled: r.get("is_controlled"),
            control_schedule: r.get("control_schedule"),
            vat_category: r.get("vat_category"),
            requires_cold_chain: r.get("requires_cold_chain"),
            regulator_registration_no: r.get("regulator_registration_no"),
            image_key: r.get("image_key"),
            image_url: r.get("image_url"),
            is_active: r.get("is_active"),
            is_deleted: r.get("is_deleted"),
            rev: r.get("rev"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
            stock_quantity: r.try_get("stock_quantity").unwrap_or_default(),
        }
    }

    pub fn view(&self) -> MedicineView {
        MedicineView {
            id: self.id,
            name: self.name.clone(),
            generic_name: self.generic_name.clone(),
            barcode: self.barcode.clone(),
            category: self.category.clone().unwrap_or_default(),
            form: self.form.clone(),
            strength: self.strength.clone(),
            unit: self.unit.clone(),
            selling_price: self.selling_price,
            max_public_price: self.max_public_price,
            stock_quantity: self.stock_quantity,
            low_stock_threshold: self.low_stock_threshold,
            requires_prescription: self.requires_prescription,
            is_controlled: self.is_controlled,
            control_schedule: self.control_schedule.clone(),
            vat_category: self.vat_category.clone(),
            requires_cold_chain: self.requires_cold_chain,
            regulator_registration_no: self.regulator_registration_no.clone(),
            image_key: self.image_key.clone(),
            image_url: self.image_url.clone(),
            is_active: self.is_active,
            rev: self.rev,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// The snapshot shape as a JSON object (sync payloads, conflicts).
    pub fn snapshot_json(&self) -> Result<serde_json::Value> {
        serde_json::to_value(self.snapshot()).map_err(Error::internal)
    }

    pub fn snapshot(&self) -> MedicineSnapshot {
        MedicineSnapshot {
            id: self.id,
            name: self.name.clone(),
            generic_name: self.generic_name.clone(),
            barcode: self.barcode.clone(),
            category: self.category.clone().unwrap_or_default(),
            form: self.form.clone(),
            strength: self.strength.clone(),
            unit: self.unit.clone(),
            selling_price: self.selling_price,
            stock_quantity: self.stock_quantity,
            low_stock_threshold: self.low_stock_threshold,
            requires_prescription: self.requires_prescription,
            is_controlled: self.is_controlled,
            control_schedule: self.control_schedule.clone(),
            vat_category: self.vat_category.clone(),
            requires_cold_chain: self.requires_cold_chain,
            regulator_registration_no: self.regulator_registration_no.clone(),
            max_public_price: self.max_public_price,
            image_key: self.image_key.clone(),
            image_url: self.image_url.clone(),
            is_active: self.is_active,
            is_deleted: self.is_deleted,
            rev: self.rev,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// The spec's single-read Medicine: prices as decimal strings, flags as
/// booleans, `stock_quantity` live. `max_public_price` "0.00" means no
/// ceiling is filed.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MedicineView {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub name: String,
    pub generic_name: String,
    pub barcode: String,
    /// Category slug ("" when none).
    pub category: String,
    pub form: String,
    pub strength: String,
    pub unit: String,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1500.00")]
    pub selling_price: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "2000.00")]
    pub max_public_price: Decimal,
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
    pub requires_prescription: bool,
    pub is_controlled: bool,
    pub control_schedule: String,
    /// `standard`, `zero` or `exempt`.
    pub vat_category: String,
    pub requires_cold_chain: bool,
    pub regulator_registration_no: String,
    pub image_key: String,
    pub image_url: String,
    pub is_active: bool,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

/// The snapshot Medicine: numbers and 0/1 flags.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MedicineSnapshot {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub name: String,
    pub generic_name: String,
    pub barcode: String,
    pub category: String,
    pub form: String,
    pub strength: String,
    pub unit: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub selling_price: Decimal,
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub requires_prescription: bool,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_controlled: bool,
    pub control_schedule: String,
    pub vat_category: String,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub requires_cold_chain: bool,
    pub regulator_registration_no: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub max_public_price: Decimal,
    pub image_key: String,
    pub image_url: String,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_active: bool,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_deleted: bool,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

/// Live stock of each medicine: at one branch, or across the chain.
fn stock_expr(branch_id: Option<Uuid>) -> Expr {
    match branch_id {
        Some(b) => Expr::cust_with_values(
            "(SELECT coalesce(sum(b.qty_remaining), 0)::bigint FROM batches b \
             WHERE b.medicine_id = medicines.id AND NOT b.is_deleted AND b.branch_id = $1)",
            [b],
        ),
        None => Expr::cust(
            "(SELECT coalesce(sum(b.qty_remaining), 0)::bigint FROM batches b \
             WHERE b.medicine_id = medicines.id AND NOT b.is_deleted)",
        ),
    }
}

fn select(branch_id: Option<Uuid>) -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .expr_as(stock_expr(branch_id), "stock_quantity")
        .from("medicines")
        .to_owned()
}

/// A live, active medicine with its stock in `branch_id`'s scope.
pub async fn get<C: GenericClient + Sync>(
    c: &C,
    id: Uuid,
    branch_id: Option<Uuid>,
) -> Result<Option<Medicine>> {
    let q = select(branch_id)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Medicine::from_row(&r)))
}

#[derive(Debug, Default)]
pub struct ListFilter {
    pub search: Option<String>,
    pub category: Option<String>,
    pub branch_id: Option<Uuid>,
}

/// Active medicines by name, paged; with the total.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<Medicine>, i64)> {
    let mut base = Query::select()
        .from("medicines")
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned();
    if let Some(s) = f.search.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        let pattern = format!("%{}%", escape_like(s));
        base.cond_where(
            Cond::any()
                .add(Expr::col("name").ilike(pattern.clone()))
                .add(Expr::col("generic_name").ilike(pattern))
                .add(Expr::col("barcode").eq(s)),
        );
    }
    if let Some(cat) = &f.category {
        base.and_where(Expr::col("category").eq(slug(cat)));
    }
    let total_q = base.clone().expr(Expr::col("id").count()).to_owned();
    let total: i64 = db::fetch_one(c, &total_q).await?.get(0);
    let q = base
        .columns(COLUMNS)
        .expr_as(stock_expr(f.branch_id), "stock_quantity")
        .order_by("name", Order::Asc)
        .order_by("id", Order::Asc)
        .offset(page.offset())
        .limit(page.limit())
        .to_owned();
    let items = db::fetch_all(c, &q)
        .await?
        .iter()
        .map(Medicine::from_row)
        .collect();
    Ok((items, total))
}

/// A category slug from free text: lowercase letters, digits and dashes.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for ch in text.trim().to_lowercase().chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').chars().take(63).collect()
}

/// Makes sure the category exists (added on first use, with a sync change).
pub async fn ensure_category<C: GenericClient + Sync>(tx: &C, text: &str) -> Result<String> {
    let slug = slug(text);
    if slug.is_empty() {
        return Err(Error::validation(
            "category",
            "`category` must contain letters or digits.",
        ));
    }
    let exists = Query::select()
        .column("slug")
        .from("categories")
        .and_where(Expr::col("slug").eq(slug.clone()))
        .to_owned();
    if db::fetch_opt(tx, &exists).await?.is_some() {
        return Ok(slug);
    }
    let rev = changes::allocate(tx).await?;
    let name = text.trim().chars().take(100).collect::<String>();
    let (s, n) = (slug.clone(), name);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO categories (slug, name, rev) VALUES ({s}, {n}, {rev})
           ON CONFLICT (slug) DO NOTHING RETURNING slug, name, created_at"#
    );
    if let Some(row) = db::raw_opt(tx, &q.sql, q.values).await? {
        let created: DateTime<Utc> = row.get("created_at");
        let payload = serde_json::json!({
            "slug": row.get::<_, String>("slug"),
            "name": row.get::<_, String>("name"),
            "created_at": wire::format_ts(&created),
            "rev": rev,
        });
        let change = Change {
            entity: "category",
            entity_id: slug.clone(),
            op: Op::Create,
            branch_id: None,
            payload,
        };
        changes::append(tx, rev, change).await?;
    }
    Ok(slug)
}

pub const VAT_CATEGORIES: [&str; 3] = ["standard", "zero", "exempt"];

/// Body of a create (`name` and `selling_price` required) or an update
/// (only the fields to change). Money as a number or a decimal string,
/// flags as booleans or 0/1.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct MedicineWrite {
    pub name: Option<String>,
    pub generic_name: Option<String>,
    pub barcode: Option<String>,
    /// A category slug or name; unknown ones are added.
    pub category: Option<String>,
    pub form: Option<String>,
    pub strength: Option<String>,
    pub unit: Option<String>,
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub selling_price: Option<Decimal>,
    /// 0 or null: no ceiling.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub max_public_price: Option<Decimal>,
    /// Defaults to the settings' `default_low_stock_threshold`.
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub low_stock_threshold: Option<Decimal>,
    #[schema(value_type = Option<bool>)]
    pub requires_prescription: Option<Flag>,
    #[schema(value_type = Option<bool>)]
    pub is_controlled: Option<Flag>,
    pub control_schedule: Option<String>,
    /// `standard` (default), `zero` or `exempt`.
    pub vat_category: Option<String>,
    #[schema(value_type = Option<bool>)]
    pub requires_cold_chain: Option<Flag>,
    pub regulator_registration_no: Option<String>,
    pub image_key: Option<String>,
    pub image_url: Option<String>,
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Flag>,
}

/// Creates a medicine (`name` and `selling_price` required); `id` when the
/// client chose it. Its stock starts at 0.
pub async fn create<C: GenericClient + Sync>(
    tx: &C,
    body: MedicineWrite,
    id: Option<Uuid>,
) -> Result<Medicine> {
    let name = body
        .name
        .as_deref()
        .ok_or_else(|| Error::validation("name", "The field `name` is required."))?;
    input::required_text("name", name, max::NAME)?;
    let price = body.selling_price.ok_or_else(|| {
        Error::validation("selling_price", "The field `selling_price` is required.")
    })?;
    check_ceiling(price, body.max_public_price.unwrap_or_default())?;
    let threshold_given = body.low_stock_threshold.is_some();
    let mut fields = fields(tx, body).await?;
    if !threshold_given {
        fields.set("low_stock_threshold", default_threshold(tx).await?);
    }
    if let Some(id) = id {
        fields.set("id", id);
    }
    let mut medicine = insert(tx, fields).await?;
    medicine.stock_quantity = 0;
    Ok(medicine)
}

/// Applies the fields present in `body` to a live medicine. A price change
/// goes to the audit log.
pub async fn edit<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    body: MedicineWrite,
    actor: Uuid,
) -> Result<Medicine> {
    let current = current(tx, id)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    check_ceiling(
        body.selling_price.unwrap_or(current.selling_price),
        body.max_public_price.unwrap_or(current.max_public_price),
    )?;
    let fields = fields(tx, body).await?;
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let medicine = update(tx, id, fields, Op::Update)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    audit_price_change(tx, &current, &medicine, actor).await?;
    Ok(medicine)
}

/// Soft-deletes (and deactivates) a live medicine.
pub async fn remove<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Medicine> {
    let mut fields = Fields::default();
    fields.set("is_deleted", true);
    fields.set("is_active", false);
    update(tx, id, fields, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))
}

async fn audit_price_change<C: GenericClient + Sync>(
    tx: &C,
    before: &Medicine,
    after: &Medicine,
    actor: Uuid,
) -> Result<()> {
    if before.selling_price == after.selling_price
        && before.max_public_price == after.max_public_price
    {
        return Ok(());
    }
    let prices = |m: &Medicine| {
        serde_json::json!({
            "selling_price": wire::two_places(m.selling_price),
            "max_public_price": wire::two_places(m.max_public_price),
        })
    };
    // The catalogue is organisation-wide: every auditor reads it.
    audit::write_for(
        tx,
        None,
        audit::Entry {
            actor_id: Some(actor),
            action: "price_change",
            entity_type: "medicine",
            entity_id: after.id.to_string(),
            before: Some(prices(before)),
            after: Some(prices(after)),
        },
    )
    .await
}

/// A selling price above a filed ceiling is refused.
fn check_ceiling(price: Decimal, ceiling: Decimal) -> Result<()> {
    if ceiling > Decimal::ZERO && price > ceiling {
        return Err(Error::validation(
            "selling_price",
            format!("The selling price {price} is above the maximum public price {ceiling}."),
        ));
    }
    Ok(())
}

/// Validates the fields present in `body` into column values.
async fn fields<C: GenericClient + Sync>(tx: &C, body: MedicineWrite) -> Result<Fields> {
    let mut f = Fields::default();
    if let Some(v) = &body.name {
        f.set("name", input::required_text("name", v, max::NAME)?);
    }
    for (col, v) in texts(&body) {
        if let Some(v) = v {
            f.set(col, input::text(col, v, text_limit(col))?);
        }
    }
    if let Some(v) = body.category {
        input::text("category", &v, max::LABEL)?;
        let slug = if v.trim().is_empty() {
            None
        } else {
            Some(ensure_category(tx, &v).await?)
        };
        f.set("category", slug);
    }
    if let Some(v) = body.selling_price {
        f.set("selling_price", input::amount("selling_price", v)?);
    }
    if let Some(v) = body.max_public_price {
        f.set("max_public_price", input::amount("max_public_price", v)?);
    }
    if let Some(v) = body.low_stock_threshold {
        f.set(
            "low_stock_threshold",
            input::whole("low_stock_threshold", v, 0)?,
        );
    }
    let flags = [
        ("requires_prescription", body.requires_prescription),
        ("is_controlled", body.is_controlled),
        ("requires_cold_chain", body.requires_cold_chain),
        ("is_active", body.is_active),
    ];
    for (col, v) in flags {
        if let Some(Flag(b)) = v {
            f.set(col, b);
        }
    }
    if let Some(v) = body.vat_category {
        let v = v.trim().to_lowercase();
        if !VAT_CATEGORIES.contains(&v.as_str()) {
            return Err(Error::validation(
                "vat_category",
                "`vat_category` must be standard, zero or exempt.",
            ));
        }
        f.set("vat_category", v);
    }
    Ok(f)
}

/// The free-text columns of a medicine and the values a write gives them.
fn texts(body: &MedicineWrite) -> [(&'static str, Option<&String>); 9] {
    [
        ("generic_name", body.generic_name.as_ref()),
        ("barcode", body.barcode.as_ref()),
        ("form", body.form.as_ref()),
        ("strength", body.strength.as_ref()),
        ("unit", body.unit.as_ref()),
        ("control_schedule", body.control_schedule.as_ref()),
        (
            "regulator_registration_no",
            body.regulator_registration_no.as_ref(),
        ),
        ("image_key", body.image_key.as_ref()),
        ("image_url", body.image_url.as_ref()),
    ]
}

/// The longest value each free-text column takes (the CHECKs of 0014).
fn text_limit(col: &str) -> usize {
    match col {
        "generic_name" => max::NAME,
        "control_schedule" => max::CODE,
        "image_key" | "image_url" => max::URL,
        _ => max::LABEL,
    }
}

/// Checks a write's values without writing anything (names, texts and
/// their lengths, amounts, thresholds, the VAT category): what a pushed
/// update must pass before it may be kept as a conflict.
pub fn check(body: &MedicineWrite) -> Result<()> {
    if let Some(v) = &body.name {
        input::required_text("name", v, max::NAME)?;
    }
    for (col, v) in texts(body) {
        if let Some(v) = v {
            input::text(col, v, text_limit(col))?;
        }
    }
    if let Some(v) = &body.category {
        input::text("category", v, max::LABEL)?;
    }
    for (col, v) in [
        ("selling_price", body.selling_price),
        ("max_public_price", body.max_public_price),
    ] {
        if let Some(v) = v {
            input::amount(col, v)?;
        }
    }
    if let Some(v) = body.low_stock_threshold {
        input::whole("low_stock_threshold", v, 0)?;
    }
    if let Some(v) = &body.vat_category {
        if !VAT_CATEGORIES.contains(&v.trim().to_lowercase().as_str()) {
            return Err(Error::validation(
                "vat_category",
                "`vat_category` must be standard, zero or exempt.",
            ));
        }
    }
    Ok(())
}

/// Column values of a medicine write, already validated.
#[derive(Debug, Default)]
pub struct Fields(pub Vec<(&'static str, sea_query::Value)>);

impl Fields {
    pub fn set(&mut self, col: &'static str, v: impl Into<sea_query::Value>) {
        self.0.push((col, v.into()));
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

pub async fn insert<C: GenericClient + Sync>(tx: &C, fields: Fields) -> Result<Medicine> {
    let (row, rev) = synced::insert(tx, "medicines", &COLUMNS, fields.0)
        .await
        .map_err(duplicate_barcode)?;
    let medicine = Medicine::from_row(&row);
    emit(tx, rev, &medicine, Op::Create).await?;
    Ok(medicine)
}

/// Updates a live medicine (`delete` soft-deletes it); `None` when there is none.
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    fields: Fields,
    op: Op,
) -> Result<Option<Medicine>> {
    let updated = synced::update(tx, "medicines", &COLUMNS, id, fields.0)
        .await
        .map_err(duplicate_barcode)?;
    let Some((row, rev)) = updated else {
        return Ok(None);
    };
    let mut medicine = Medicine::from_row(&row);
    medicine.stock_quantity = actors::stock::on_hand(tx, id, None).await?;
    emit(tx, rev, &medicine, op).await?;
    Ok(Some(medicine))
}

fn duplicate_barcode(e: Error) -> Error {
    match e {
        Error::Conflict(_) => Error::conflict("A medicine with this barcode already exists."),
        other => other,
    }
}

/// Medicine changes are organisation-wide; their `stock_quantity` is the
/// chain-wide stock at the time of the write (tills follow branch stock
/// through batch changes).
async fn emit<C: GenericClient + Sync>(tx: &C, rev: i64, m: &Medicine, op: Op) -> Result<()> {
    let change = Change {
        entity: "medicine",
        entity_id: m.id.to_string(),
        op,
        branch_id: None,
        payload: m.snapshot_json()?,
    };
    changes::append(tx, rev, change).await
}

/// The current row of a live medicine (active or not), for updates.
pub async fn current<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Medicine>> {
    let q = select(None)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Medicine::from_row(&r)))
}

/// The settings' default low-stock threshold for new medicines.
pub async fn default_threshold<C: GenericClient + Sync>(c: &C) -> Result<i32> {
    let q = Query::select()
        .column("default_low_stock_threshold")
        .from("settings")
        .limit(1)
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)).unwrap_or(10))
}
