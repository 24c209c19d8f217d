//! The catalogue entities a till may push (customers, suppliers, medicines):
//! their write rules, the fields a till may change, and their current
//! version as a snapshot object. Writes go through the same store functions
//! as REST, so validation, audit and change-log rows are the same.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, LockType, Query};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};
use uuid::Uuid;

use crate::{db, Action, Error, Result, Role};

use crate::{customers, medicines, suppliers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    Customer,
    Supplier,
    Medicine,
}

impl Entity {
    pub fn parse(name: &str) -> Option<Entity> {
        match name {
            "customer" => Some(Entity::Customer),
            "supplier" => Some(Entity::Supplier),
            "medicine" => Some(Entity::Medicine),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Entity::Customer => "customer",
            Entity::Supplier => "supplier",
            Entity::Medicine => "medicine",
        }
    }

    fn table(self) -> &'static str {
        match self {
            Entity::Customer => "customers",
            Entity::Supplier => "suppliers",
            Entity::Medicine => "medicines",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Entity::Customer => "Customer",
            Entity::Supplier => "Supplier",
            Entity::Medicine => "Medicine",
        }
    }

    /// What writing this entity is in the role policy (the REST rule).
    pub fn action(self) -> Action {
        match self {
            Entity::Customer => Action::WriteCustomers,
            Entity::Supplier => Action::WriteSuppliers,
            Entity::Medicine => Action::WriteCatalogue,
        }
    }

    /// The fields an update may change: the REST allowlist, named as in the
    /// snapshot so client and server versions compare field by field.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Entity::Customer => &[
                "name",
                "phone",
                "national_id",
                "notes",
                "image_url",
                "credit_limit",
                "is_credit_allowed",
            ],
            Entity::Supplier => &[
                "name",
                "tax_number",
                "contact_person",
                "phone",
                "email",
                "address",
                "image_url",
                "supplier_type",
                "lead_time_days",
                "reliability_score",
                "is_active",
            ],
            Entity::Medicine => &[
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
            ],
        }
    }

    /// Only the allowlisted fields of a pushed payload.
    pub fn changed_fields(self, payload: &Json) -> Map<String, Json> {
        let mut out = Map::new();
        if let Some(obj) = payload.as_object() {
            for f in self.fields() {
                if let Some(v) = obj.get(*f) {
                    out.insert((*f).to_owned(), v.clone());
                }
            }
        }
        out
    }

    /// The pushed payload as a conflict keeps it: the entity's own fields
    /// (the allowlist), its `id`, `base_rev` and the `updated_at` the till
    /// sent (last-write-wins reads it); anything else the till sent is
    /// dropped, so no unknown key, whatever its size, is stored.
    pub fn stored_payload(self, payload: &Json) -> Json {
        let mut out = self.changed_fields(payload);
        for key in ["id", "base_rev", "updated_at"] {
            let kept = payload.get(key).filter(|v| match v {
                Json::String(s) => s.chars().count() <= 64,
                Json::Number(_) => true,
                _ => false,
            });
            if let Some(v) = kept {
                out.insert(key.to_owned(), v.clone());
            }
        }
        Json::Object(out)
    }

    /// Checks a stale update by `role` against the live row `id` without
    /// writing: every field sent (allowlisted) for its shape and length
    /// (400), and the fields the till changed since its base for the
    /// entity's role rules (403). What an update must pass before it is kept
    /// as a conflict.
    pub async fn check_update<C: GenericClient + Sync>(
        self,
        tx: &C,
        id: Uuid,
        sent: &Map<String, Json>,
        changed: &Map<String, Json>,
        role: Role,
    ) -> Result<()> {
        let sent = Json::Object(sent.clone());
        match self {
            Entity::Customer => {
                customers::fields(body(&sent)?)?;
                let changed = Json::Object(changed.clone());
                customers::check_credit_edit(tx, id, &body(&changed)?, role).await
            }
            Entity::Supplier => suppliers::fields(body(&sent)?).map(drop),
            Entity::Medicine => medicines::check(&body(&sent)?),
        }
    }

    /// Creates the entity from a pushed payload for a pusher of `role`;
    /// answers its id.
    pub async fn create<C: GenericClient + Sync>(
        self,
        tx: &C,
        payload: &Json,
        id: Option<Uuid>,
        role: Role,
    ) -> Result<Uuid> {
        Ok(match self {
            Entity::Customer => customers::create(tx, body(payload)?, id, role).await?.id,
            Entity::Supplier => suppliers::create(tx, body(payload)?, id).await?.id,
            Entity::Medicine => medicines::create(tx, body(payload)?, id).await?.id,
        })
    }

    /// Applies `fields` (allowlisted, as sent) to a live row for `actor`
    /// (user id and role); answers the row's new version.
    pub async fn update<C: GenericClient + Sync>(
        self,
        tx: &C,
        id: Uuid,
        fields: Map<String, Json>,
        (actor, role): (Uuid, Role),
    ) -> Result<Json> {
        let payload = Json::Object(fields);
        Ok(match self {
            Entity::Customer => to_json(&customers::edit(tx, id, body(&payload)?, role).await?)?,
            Entity::Supplier => to_json(&suppliers::edit(tx, id, body(&payload)?).await?)?,
            Entity::Medicine => medicines::edit(tx, id, body(&payload)?, actor)
                .await?
                .snapshot_json()?,
        })
    }

    pub async fn delete<C: GenericClient + Sync>(self, tx: &C, id: Uuid) -> Result<()> {
        match self {
            Entity::Customer => customers::remove(tx, id).await.map(drop),
            Entity::Supplier => suppliers::remove(tx, id).await.map(drop),
            Entity::Medicine => medicines::remove(tx, id).await.map(drop),
        }
    }

    /// Locks a live row and answers its current version (the snapshot
    /// shape) and rev; `None` when there is no live row.
    pub async fn lock_current<C: GenericClient + Sync>(
        self,
        tx: &C,
        id: Uuid,
    ) -> Result<Option<(Json, i64)>> {
        let q = Query::select()
            .column("rev")
            .from(self.table())
            .and_where(Expr::col("id").eq(id))
            .and_where(Expr::col("is_deleted").eq(false))
            .lock(LockType::Update)
            .to_owned();
        let Some(row) = db::fetch_opt(tx, &q).await? else {
            return Ok(None);
        };
        let rev: i64 = row.get("rev");
        let version = match self {
            Entity::Customer => customers::get(tx, id).await?.map(|c| to_json(&c)),
            Entity::Supplier => suppliers::get(tx, id).await?.map(|s| to_json(&s)),
            Entity::Medicine => medicines::current(tx, id).await?.map(|m| m.snapshot_json()),
        };
        match version {
            Some(v) => Ok(Some((v?, rev))),
            None => Ok(None),
        }
    }

    /// The version a till saw at `rev`, from the change log.
    pub async fn version_at<C: GenericClient + Sync>(
        self,
        c: &C,
        id: Uuid,
        rev: i64,
    ) -> Result<Option<Json>> {
        let q = Query::select()
            .column("payload")
            .from(Table::ChangeLog)
            .and_where(Expr::col("rev").eq(rev))
            .and_where(Expr::col("entity").eq(self.name()))
            .and_where(Expr::col("entity_id").eq(id.to_string()))
            .to_owned();
        Ok(db::fetch_opt(c, &q).await?.map(|r| r.get("payload")))
    }

    pub fn not_found(self) -> Error {
        Error::not_found(format!("{} not found", self.label()))
    }
}

fn body<T: DeserializeOwned>(payload: &Json) -> Result<T> {
    serde_json::from_value(payload.clone())
        .map_err(|e| Error::bad_request(format!("The payload does not fit: {e}.")))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Json> {
    serde_json::to_value(v).map_err(Error::internal)
}

/// Whether two field values mean the same: numbers and numeric strings
/// compare as decimals, booleans as 0/1, anything else exactly.
pub fn same(a: &Json, b: &Json) -> bool {
    if a == b {
        return true;
    }
    let numeric = |v: &Json| matches!(v, Json::Number(_) | Json::Bool(_));
    if !(numeric(a) || numeric(b)) {
        return false;
    }
    match (as_decimal(a), as_decimal(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn as_decimal(v: &Json) -> Option<Decimal> {
    match v {
        Json::Bool(b) => Some(Decimal::from(u8::from(*b))),
        Json::Number(n) => n.to_string().parse().ok(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_flags_compare_by_value() {
        assert!(same(&json!(100), &json!("100.00")));
        assert!(same(&json!(true), &json!(1)));
        assert!(same(&json!(0), &json!(false)));
        assert!(!same(&json!("0700"), &json!("700")));
        assert!(!same(&json!(1.5), &json!("1.25")));
        assert!(same(&json!("a"), &json!("a")));
    }
}
