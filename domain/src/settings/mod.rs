//! The organisation settings record: one row per organisation, read as the
//! spec's defaults while none exists. `NULL` in a column means "not given".

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Iden, LockType, OnConflict, Query};
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::patch::Patch;
use crate::{db, wire, Result};

pub mod write;

/// `name` when none is given: the service's own name.
pub const SERVICE_NAME: &str = "Pharmacy Operations Service";

/// The settings columns a write sets.
#[derive(Iden, Clone, Copy, PartialEq, Eq)]
pub enum SettingsColumn {
    Name,
    LegalName,
    Phone,
    Email,
    Address,
    Tin,
    VatNumber,
    NdaLicenseNo,
    PremiseNo,
    ReceiptHeader,
    ReceiptFooter,
    ReturnPolicy,
    ShowVatBreakdown,
    ShowPharmacistOnReceipt,
    AutoPrintReceipt,
    TaxEnabled,
    RateStalenessDays,
    ServerMode,
    ServerUrl,
    DefaultLowStockThreshold,
    ExpiryWarningDays,
    DefaultCopies,
    TaxRate,
    MinShelfLifeDays,
    InvoicePriceTolerancePercent,
    BaseCurrency,
    TimeZone,
    UpdatedAt,
    UpdatedBy,
}

/// Column values of a write, already validated.
pub type Fields = Patch<SettingsColumn>;

const COLUMNS: [&str; 30] = [
    "name",
    "legal_name",
    "phone",
    "email",
    "address",
    "tin",
    "vat_number",
    "nda_license_no",
    "premise_no",
    "receipt_header",
    "receipt_footer",
    "return_policy",
    "show_vat_breakdown",
    "show_pharmacist_on_receipt",
    "auto_print_receipt",
    "base_currency",
    "rate_staleness_days",
    "server_mode",
    "server_url",
    "default_low_stock_threshold",
    "expiry_warning_days",
    "default_copies",
    "tax_enabled",
    "tax_rate",
    "time_zone",
    "min_shelf_life_days",
    "invoice_price_tolerance_percent",
    "updated_at",
    "updated_by",
    "org_id",
];

/// The settings record as `GET` and `PUT /settings` answer it; `null` is
/// "not given".
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Settings {
    pub name: String,
    pub legal_name: Option<String>,
    pub phone: Option<String>,
    pub email: Option<String>,
    pub address: Option<String>,
    pub tin: Option<String>,
    pub vat_number: Option<String>,
    pub nda_license_no: Option<String>,
    pub premise_no: Option<String>,
    pub receipt_header: Option<String>,
    pub receipt_footer: Option<String>,
    pub return_policy: Option<String>,
    pub show_vat_breakdown: Option<bool>,
    pub show_pharmacist_on_receipt: Option<bool>,
    pub auto_print_receipt: bool,
    pub base_currency: String,
    pub rate_staleness_days: i32,
    /// `hosted` or `custom`.
    pub server_mode: String,
    pub server_url: String,
    pub default_low_stock_threshold: i32,
    /// Comma-separated day counts, ascending (`30,60,90`).
    pub expiry_warning_days: String,
    pub default_copies: i32,
    pub tax_enabled: bool,
    /// A fraction: 0.18 is 18 percent.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64, minimum = 0, maximum = 1)]
    pub tax_rate: Decimal,
    /// IANA zone that decides "today" for expiry and reports.
    pub time_zone: String,
    /// Goods received closer to expiry than this are refused unless a
    /// manager or pharmacist accepts them short-dated.
    pub min_shelf_life_days: i32,
    /// How far (percent) a supplier invoice line's price may differ from
    /// the receipt's before the invoice is put on hold.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64, minimum = 0, maximum = 100)]
    pub invoice_price_tolerance_percent: Decimal,
    /// `null` while the defaults apply.
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub updated_at: Option<DateTime<Utc>>,
    #[schema(value_type = Option<String>)]
    pub updated_by: Option<Uuid>,
}

impl Settings {
    /// Exactly the spec's defaults (and the time zone's).
    pub fn defaults() -> Self {
        Settings {
            name: SERVICE_NAME.to_owned(),
            legal_name: None,
            phone: None,
            email: None,
            address: None,
            tin: None,
            vat_number: None,
            nda_license_no: None,
            premise_no: None,
            receipt_header: None,
            receipt_footer: None,
            return_policy: None,
            show_vat_breakdown: None,
            show_pharmacist_on_receipt: None,
            auto_print_receipt: true,
            base_currency: "UGX".to_owned(),
            rate_staleness_days: 7,
            server_mode: "hosted".to_owned(),
            server_url: String::new(),
            default_low_stock_threshold: 10,
            expiry_warning_days: "30,60,90".to_owned(),
            default_copies: 1,
            tax_enabled: false,
            tax_rate: Decimal::new(18, 2),
            time_zone: "Africa/Kampala".to_owned(),
            min_shelf_life_days: 90,
            invoice_price_tolerance_percent: Decimal::from(2),
            updated_at: None,
            updated_by: None,
        }
    }

    fn from_row(r: &Row) -> Self {
        Settings {
            name: r
                .get::<_, Option<String>>("name")
                .unwrap_or_else(|| SERVICE_NAME.to_owned()),
            legal_name: r.get("legal_name"),
            phone: r.get("phone"),
            email: r.get("email"),
            address: r.get("address"),
            tin: r.get("tin"),
            vat_number: r.get("vat_number"),
            nda_license_no: r.get("nda_license_no"),
            premise_no: r.get("premise_no"),
            receipt_header: r.get("receipt_header"),
            receipt_footer: r.get("receipt_footer"),
            return_policy: r.get("return_policy"),
            show_vat_breakdown: r.get("show_vat_breakdown"),
            show_pharmacist_on_receipt: r.get("show_pharmacist_on_receipt"),
            auto_print_receipt: r.get("auto_print_receipt"),
            base_currency: r.get("base_currency"),
            rate_staleness_days: r.get("rate_staleness_days"),
            server_mode: r.get("server_mode"),
            server_url: r.get("server_url"),
            default_low_stock_threshold: r.get("default_low_stock_threshold"),
            expiry_warning_days: r.get("expiry_warning_days"),
            default_copies: r.get("default_copies"),
            tax_enabled: r.get("tax_enabled"),
            tax_rate: r.get::<_, Decimal>("tax_rate").normalize(),
            time_zone: r.get("time_zone"),
            min_shelf_life_days: r.get("min_shelf_life_days"),
            invoice_price_tolerance_percent: r
                .get::<_, Decimal>("invoice_price_tolerance_percent")
                .normalize(),
            updated_at: r.get("updated_at"),
            updated_by: r.get("updated_by"),
        }
    }
}

/// The organisation's settings, or the defaults when it has no record.
pub async fn read<C: GenericClient + Sync>(c: &C, org_id: Uuid) -> Result<Settings> {
    let q = Query::select()
        .columns(COLUMNS)
        .from(Table::Settings)
        .and_where(Expr::col("org_id").eq(org_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q)
        .await?
        .map_or_else(Settings::defaults, |r| Settings::from_row(&r)))
}

/// Creates the record if missing (with the column defaults, which are the
/// spec's) and locks it for the rest of the transaction, so concurrent
/// updates take turns and each audit entry's "before" is exact. Answers the
/// record as it read before: the defaults when it was just created.
pub async fn lock<C: GenericClient + Sync>(tx: &C, org_id: Uuid) -> Result<Settings> {
    let insert = Query::insert()
        .into_table(Table::Settings)
        .columns(["org_id"])
        .values_panic([org_id.into()])
        .on_conflict(OnConflict::column("org_id").do_nothing().to_owned())
        .to_owned();
    let created = db::execute(tx, &insert).await? == 1;
    let q = Query::select()
        .columns(COLUMNS)
        .from(Table::Settings)
        .and_where(Expr::col("org_id").eq(org_id))
        .lock(LockType::Update)
        .to_owned();
    let row = db::fetch_one(tx, &q).await?;
    Ok(if created {
        Settings::defaults()
    } else {
        Settings::from_row(&row)
    })
}

/// Writes `fields` to the (locked) record; returns it as read.
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    org_id: Uuid,
    mut fields: Fields,
    user_id: Uuid,
) -> Result<Settings> {
    fields.set(SettingsColumn::UpdatedAt, Utc::now());
    fields.set(SettingsColumn::UpdatedBy, user_id);
    let q = Query::update()
        .table(Table::Settings)
        .values(
            fields
                .into_pairs()
                .into_iter()
                .map(|(c, v)| (c, Expr::val(v))),
        )
        .and_where(Expr::col("org_id").eq(org_id))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(Settings::from_row(&db::fetch_one(tx, &q).await?))
}

/// Copies a print job or printer gets when none is sent.
pub async fn default_copies<C: GenericClient + Sync>(c: &C) -> Result<i32> {
    let q = Query::select()
        .column("default_copies")
        .from(Table::Settings)
        .limit(1)
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map_or(1, |r| r.get(0)))
}

/// Whether PostgreSQL knows `zone` as an IANA time zone name (the database
/// turns instants into days with it, so it must be one it can use).
pub async fn time_zone_known<C: GenericClient + Sync>(c: &C, zone: &str) -> Result<bool> {
    let q = Query::select()
        .expr(Expr::cust("1"))
        .from(Table::PgTimezoneNames)
        .and_where(Expr::col("name").eq(zone))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.is_some())
}
