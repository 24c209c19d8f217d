//! Packs of a medicine: a fixed number of base units bought or sold
//! together (a strip of 10 tablets, a box of 100), with an optional price
//! of its own and an optional GTIN.
//!
//! Stock always counts base units; a pack only says how many. Two active
//! packs of one medicine never share a unit count or a name (partial unique
//! indexes, 409), and a GTIN names one product of the organisation (the
//! `product_gtins` register kept by triggers, 409 `gtin_taken`). Packs are
//! catalogue rows like medicines: each write takes a change-log rev and
//! joins the change feed as `medicine_pack`.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use rust_decimal::Decimal;
use sea_query::{Alias, Expr, ExprTrait, Iden, JoinType, Order, Query};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{Code, Error, Result};
use crate::gs1::Gtin;
use crate::input::{self, Flag};
use crate::medicines::{self, Medicine, MedicineView};
use crate::patch::Patch;
use crate::sync::changes::{self, Change, Op};
use crate::sync::synced;
use crate::users::sessions::{self, Signer, TokenState};
use crate::{db, wire};

/// Most base units one pack may hold.
pub const MAX_UNITS: i64 = 1_000_000;
/// Longest pack name.
pub const MAX_NAME: usize = 100;

pub const COLUMNS: [&str; 11] = [
    "id",
    "medicine_id",
    "name",
    "units",
    "gtin",
    "selling_price",
    "is_sellable",
    "is_active",
    "rev",
    "created_at",
    "updated_at",
];

/// A pack as answered. Money as decimal strings.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Pack {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    /// `strip`, `box`, ...
    pub name: String,
    /// Base units in one pack (at least 2).
    pub units: i32,
    /// Its GTIN as 14 digits, if it has one.
    pub gtin: Option<String>,
    /// The pack's own price; when null a pack sells at `units` × the
    /// medicine's selling price.
    #[serde(serialize_with = "wire::money_str_opt")]
    #[schema(value_type = Option<String>)]
    pub selling_price: Option<Decimal>,
    pub is_sellable: bool,
    pub is_active: bool,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
    pub rev: i64,
}

impl Pack {
    pub fn from_row(r: &Row) -> Pack {
        Pack::from_columns(r, "")
    }

    /// A pack from columns named `<prefix><column>`.
    fn from_columns(r: &Row, prefix: &str) -> Pack {
        let col = |name: &str| format!("{prefix}{name}");
        Pack {
            id: r.get(col("id").as_str()),
            medicine_id: r.get(col("medicine_id").as_str()),
            name: r.get(col("name").as_str()),
            units: r.get(col("units").as_str()),
            gtin: r.get(col("gtin").as_str()),
            selling_price: r.get(col("selling_price").as_str()),
            is_sellable: r.get(col("is_sellable").as_str()),
            is_active: r.get(col("is_active").as_str()),
            rev: r.get(col("rev").as_str()),
            created_at: r.get(col("created_at").as_str()),
            updated_at: r.get(col("updated_at").as_str()),
        }
    }

    /// What one pack sells for: its own price, or `units` × the medicine's.
    pub fn price(&self, medicine_price: Decimal) -> Decimal {
        self.selling_price
            .unwrap_or_else(|| wire::two_places(medicine_price * Decimal::from(self.units)))
    }
}

/// A pack as a client writes it: every field on create (`name` and `units`
/// required), the fields sent on update.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct PackWrite {
    /// 1 to 100 characters.
    pub name: Option<String>,
    /// A whole number of base units, at least 2.
    #[schema(value_type = Option<i64>, minimum = 2, maximum = 1000000)]
    pub units: Option<serde_json::Number>,
    /// A GTIN-8, -12, -13 or -14 with a valid check digit; null or empty
    /// clears it.
    pub gtin: Option<String>,
    /// Decimal string or number; null clears it (the price is then
    /// `units` × the medicine's selling price).
    #[schema(value_type = Option<String>)]
    #[serde(default, deserialize_with = "input::nullable")]
    pub selling_price: Option<Option<Decimal>>,
    #[schema(value_type = Option<bool>)]
    pub is_sellable: Option<Flag>,
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Flag>,
}

/// A GTIN field: 14 digits once checked, `None` for null or empty (400
/// naming `field` when it is not a GTIN with a valid check digit).
pub fn gtin_field(field: &str, value: &str) -> Result<Option<String>> {
    let v = input::text(field, value, input::max::CODE)?;
    if v.is_empty() {
        return Ok(None);
    }
    Gtin::parse(&v).map(|g| Some(g.to_string())).ok_or_else(|| {
        Error::validation(
            field,
            format!("`{field}` must be a GTIN-8, -12, -13 or -14 with a valid check digit."),
        )
    })
}

/// Refuses a GTIN another product holds (409 `gtin_taken` naming it); the
/// register's primary key has the last word under a race.
pub async fn gtin_free<C: GenericClient + Sync>(
    c: &C,
    gtin: &str,
    medicine_id: Uuid,
    pack_id: Option<Uuid>,
) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT g.medicine_id, g.pack_id, m.name, p.name AS pack_name
           FROM product_gtins g JOIN medicines m ON m.id = g.medicine_id
           LEFT JOIN medicine_packs p ON p.id = g.pack_id
           WHERE g.gtin = {gtin}"#
    );
    let Some(holder) = db::raw_opt(c, &q.sql, q.values).await? else {
        return Ok(());
    };
    let (held_by, held_pack): (Uuid, Option<Uuid>) = (holder.get(0), holder.get(1));
    if held_by == medicine_id && held_pack == pack_id {
        return Ok(());
    }
    let name: String = holder.get(2);
    let what = match holder.get::<_, Option<String>>(3) {
        Some(pack) => format!("the {pack} of {name}"),
        None => name,
    };
    Err(Error::coded(
        Code::GtinTaken,
        Some("gtin"),
        format!("GTIN {gtin} already names {what}."),
    ))
}

/// The pack columns a write sets.
#[derive(Iden, Clone, Copy)]
enum PackColumn {
    MedicineId,
    Name,
    Units,
    Gtin,
    SellingPrice,
    IsSellable,
    IsActive,
    IsDeleted,
}

type Fields = Patch<PackColumn>;

/// What a write sets, checked (400 naming the field).
fn fields(body: PackWrite) -> Result<(Fields, Option<String>)> {
    use PackColumn as Col;
    let mut f = Fields::new();
    if let Some(v) = body.name {
        f.set(Col::Name, input::required_text("name", &v, MAX_NAME)?);
    }
    if let Some(n) = body.units {
        let units = n
            .as_i64()
            .filter(|u| (2..=MAX_UNITS).contains(u))
            .ok_or_else(|| {
                Error::validation(
                    "units",
                    format!("`units` must be a whole number from 2 to {MAX_UNITS}."),
                )
            })?;
        f.set(Col::Units, units as i32);
    }
    let mut gtin = None;
    if let Some(v) = body.gtin {
        gtin = gtin_field("gtin", &v)?;
        f.set(Col::Gtin, gtin.clone());
    }
    match body.selling_price {
        Some(Some(p)) => f.set(Col::SellingPrice, input::amount("selling_price", p)?),
        Some(None) => f.set(Col::SellingPrice, Option::<Decimal>::None),
        None => {}
    }
    if let Some(Flag(v)) = body.is_sellable {
        f.set(Col::IsSellable, v);
    }
    if let Some(Flag(v)) = body.is_active {
        f.set(Col::IsActive, v);
    }
    Ok((f, gtin))
}

/// The medicine a pack write names must be live (404 otherwise), locked so
/// that its packs change one writer at a time.
async fn lock_medicine<C: GenericClient + Sync>(c: &C, medicine_id: Uuid) -> Result<()> {
    let q = Query::select()
        .column("id")
        .from(Table::Medicines)
        .and_where(Expr::col("id").eq(medicine_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .lock(sea_query::LockType::Update)
        .to_owned();
    db::fetch_opt(c, &q)
        .await?
        .map(|_| ())
        .ok_or_else(|| Error::not_found("Medicine not found"))
}

/// A unit count or name another active pack of the medicine has: 409.
fn clash(e: Error) -> Error {
    match e {
        Error::Conflict(_) => Error::conflict(
            "Another active pack of this medicine already has this number of units or this name.",
        ),
        other => other,
    }
}

/// Adds a pack to a live medicine (`name` and `units` required).
pub async fn create(pool: &Pool, medicine_id: Uuid, body: PackWrite) -> Result<Pack> {
    if body.name.is_none() || body.units.is_none() {
        let field = if body.name.is_none() { "name" } else { "units" };
        return Err(Error::validation(
            field,
            format!("The field `{field}` is required."),
        ));
    }
    let (mut f, gtin) = fields(body)?;
    f.set(PackColumn::MedicineId, medicine_id);
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    lock_medicine(&tx, medicine_id).await?;
    if let Some(g) = &gtin {
        gtin_free(&tx, g, medicine_id, None).await?;
    }
    let (row, rev) = synced::insert(&tx, Table::MedicinePacks, &COLUMNS, f)
        .await
        .map_err(clash)?;
    let pack = Pack::from_row(&row);
    emit(&tx, rev, &pack, Op::Create).await?;
    crate::db::commit(tx).await?;
    Ok(pack)
}

/// Changes the fields sent of a medicine's live pack (404 when there is none).
pub async fn update(
    pool: &Pool,
    medicine_id: Uuid,
    pack_id: Uuid,
    body: PackWrite,
) -> Result<Pack> {
    let (f, gtin) = fields(body)?;
    if f.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    lock_medicine(&tx, medicine_id).await?;
    let pack = write(&tx, medicine_id, pack_id, f, gtin, Op::Update).await?;
    crate::db::commit(tx).await?;
    Ok(pack)
}

/// Deletes a pack (soft: it stays for the sales and receipts naming it, and
/// lets its GTIN go).
pub async fn delete(pool: &Pool, medicine_id: Uuid, pack_id: Uuid) -> Result<()> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let mut f = Fields::of(PackColumn::IsActive, false);
    f.set(PackColumn::IsDeleted, true);
    write(&tx, medicine_id, pack_id, f, None, Op::Delete).await?;
    crate::db::commit(tx).await?;
    Ok(())
}

async fn write<C: GenericClient + Sync>(
    tx: &C,
    medicine_id: Uuid,
    pack_id: Uuid,
    f: Fields,
    gtin: Option<String>,
    op: Op,
) -> Result<Pack> {
    let current = get(tx, medicine_id, pack_id)
        .await?
        .ok_or_else(|| Error::not_found("Pack not found"))?;
    if let Some(g) = &gtin {
        gtin_free(tx, g, medicine_id, Some(current.id)).await?;
    }
    let (row, rev) = synced::update(tx, Table::MedicinePacks, &COLUMNS, pack_id, f)
        .await
        .map_err(clash)?
        .ok_or_else(|| Error::not_found("Pack not found"))?;
    let pack = Pack::from_row(&row);
    emit(tx, rev, &pack, op).await?;
    Ok(pack)
}

/// Pack changes are organisation-wide, like the medicines they belong to.
async fn emit<C: GenericClient + Sync>(tx: &C, rev: i64, p: &Pack, op: Op) -> Result<()> {
    let change = Change {
        entity: "medicine_pack",
        entity_id: p.id.to_string(),
        op,
        branch_id: None,
        payload: serde_json::to_value(p).map_err(Error::internal)?,
    };
    changes::append(tx, rev, change).await
}

fn select() -> sea_query::SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Table::MedicinePacks)
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned()
}

/// A live pack of the medicine.
pub async fn get<C: GenericClient + Sync>(
    c: &C,
    medicine_id: Uuid,
    pack_id: Uuid,
) -> Result<Option<Pack>> {
    let q = select()
        .and_where(Expr::col("id").eq(pack_id))
        .and_where(Expr::col("medicine_id").eq(medicine_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Pack::from_row(&r)))
}

/// A live medicine's live packs, fewest units first (404 when the medicine
/// is missing or deleted); `active_only` leaves out deactivated ones.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    medicine_id: Uuid,
    active_only: bool,
) -> Result<Vec<Pack>> {
    let exists = Query::select()
        .column("id")
        .from(Table::Medicines)
        .and_where(Expr::col("id").eq(medicine_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    if db::fetch_opt(c, &exists).await?.is_none() {
        return Err(Error::not_found("Medicine not found"));
    }
    of_medicine(c, medicine_id, active_only).await
}

/// The packs of `medicine_id`, whether or not the medicine exists (the
/// caller knows): one statement, so it can share a round trip.
async fn of_medicine<C: GenericClient + Sync>(
    c: &C,
    medicine_id: Uuid,
    active_only: bool,
) -> Result<Vec<Pack>> {
    let mut q = select()
        .and_where(Expr::col("medicine_id").eq(medicine_id))
        .order_by("units", Order::Asc)
        .to_owned();
    if active_only {
        q.and_where(Expr::col("is_active").eq(true));
    }
    Ok(db::fetch_all(c, &q)
        .await?
        .iter()
        .map(Pack::from_row)
        .collect())
}

/// `GET /medicines/{id}`: a live, active medicine with its stock in
/// `branch_id`'s scope and its active packs, in one statement (the
/// medicine, and its packs laterally: a row per pack). The packs of a
/// medicine that is not there are never shown.
pub async fn medicine_with_packs<C: GenericClient + Sync>(
    c: &C,
    id: Uuid,
    branch_id: Option<Uuid>,
) -> Result<Option<MedicineView>> {
    let q = Query::select()
        .expr(Expr::cust("m.*, p.*"))
        .from_subquery(medicines::live_one(id, branch_id), "m")
        .join_lateral(JoinType::LeftJoin, packs_of_m(), "p", Expr::cust("true"))
        .order_by_expr(Expr::cust("p.pack_units"), Order::Asc)
        .to_owned();
    Ok(view_of(&db::fetch_all(c, &q).await?))
}

/// `medicine_with_packs` for a caller whose token is checked in the same
/// statement (`sessions::token_subquery`): the token's state (none when
/// there is no such user), and the medicine, read only when the token
/// stands. The caller decides on the state before showing anything.
pub async fn medicine_with_packs_for<C: GenericClient + Sync>(
    c: &C,
    signer: Signer,
    id: Uuid,
    branch_id: Option<Uuid>,
) -> Result<(Option<TokenState>, Option<MedicineView>)> {
    let medicine = medicines::live_one(id, branch_id)
        .and_where(sessions::stands_in("k", signer.token_version))
        .to_owned();
    let q = Query::select()
        .expr(Expr::cust("k.*, m.*, p.*"))
        .from_subquery(sessions::token_subquery(signer), "k")
        .join_lateral(JoinType::LeftJoin, medicine, "m", Expr::cust("true"))
        .join_lateral(JoinType::LeftJoin, packs_of_m(), "p", Expr::cust("true"))
        .order_by_expr(Expr::cust("p.pack_units"), Order::Asc)
        .to_owned();
    let rows = db::fetch_all(c, &q).await?;
    Ok((rows.first().map(TokenState::of), view_of(&rows)))
}

/// The active packs of the medicine `m` of a lateral join, their columns
/// named `pack_<column>` (a medicine has columns of the same names).
fn packs_of_m() -> sea_query::SelectStatement {
    let mut q = Query::select();
    for column in COLUMNS {
        q.expr_as(
            Expr::col(column),
            Alias::new(format!("{PACK_PREFIX}{column}")),
        );
    }
    q.from(Table::MedicinePacks)
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_active").eq(true))
        .and_where(Expr::cust("medicine_packs.medicine_id = m.id"))
        .to_owned()
}

const PACK_PREFIX: &str = "pack_";

/// The medicine of a `m.*, p.*` read (none when its columns are null) with
/// the packs of its rows.
fn view_of(rows: &[Row]) -> Option<MedicineView> {
    let first = rows.first()?;
    first.get::<_, Option<Uuid>>("id")?;
    let mut view = Medicine::from_row(first).view();
    let packs = rows
        .iter()
        .filter(|r| r.get::<_, Option<Uuid>>("pack_id").is_some())
        .map(|r| Pack::from_columns(r, PACK_PREFIX))
        .collect();
    view.packs = Some(packs);
    Some(view)
}
