//! Reading a pushed change: its shape, its digest, and the fields its payload
//! must carry.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value as Json};
use uuid::Uuid;

use super::Pusher;
use crate::error::{Error, Result};
use crate::idempotency::RequestDigest;
use crate::input;
use crate::sales::{NewSale, SaleRequest};

/// Longest `entity` or `op` a change may name (the longest real one is 8).
pub const MAX_NAME_CHARS: usize = 50;

/// How far in the past an offline sale may be dated.
pub(super) const MAX_SALE_AGE_DAYS: i64 = 90;

/// A push as a till sends it. The changes are read one by one
/// (`Change::parse`), so a change of the wrong shape is answered naming
/// its index and field.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct PushRequest {
    pub device_id: String,
    /// At most 500 changes, applied in order.
    #[schema(value_type = Vec<PushChange>)]
    pub changes: Vec<Json>,
}

/// One queued change, as a till sends it.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct PushChange {
    /// The till's id for this change; a repeat has one effect and gets the
    /// first answer again.
    // Its bounds (not blank, `input::max::MUTATION_ID` characters) are
    // documented by the web layer's request rules from the same constant.
    pub client_mutation_id: String,
    /// `sale`, `sale_return`, `customer`, `supplier` or `medicine`.
    pub entity: String,
    /// `create` (every entity), `update`, `delete` (customer, supplier,
    /// medicine).
    pub op: String,
    /// A sale: the `POST /sales` body (plus `occurred_at` for a sale made
    /// offline); a return: the `POST /sales/{id}/returns` body plus
    /// `sale_id`. Others: the record's fields; `update`/`delete` name its
    /// `id` and may carry `base_rev`.
    #[schema(value_type = Object)]
    pub payload: serde_json::Map<String, Json>,
}

/// One change as the till sent it, with the digest that tells a retry from
/// a different change reusing its mutation id.
#[derive(Debug, Clone)]
pub struct Change {
    pub client_mutation_id: String,
    pub entity: String,
    pub op: String,
    pub payload: Json,
    pub(super) digest: RequestDigest,
}

impl Change {
    /// The shape of `changes[index]`: an object with a `client_mutation_id`
    /// of 1 to 200 characters, string `entity` and `op`, and an object
    /// `payload`; else 400 naming the field. (Unknown entities and ops are
    /// not shape errors: they are answered per change as `unsupported`.)
    pub fn parse(raw: &Json, index: usize) -> Result<Change> {
        let field = |k: &str| format!("changes[{index}].{k}");
        let shape = |k: &str| {
            let detail = match k {
                "client_mutation_id" => format!(
                    "Each change needs a `client_mutation_id` of 1 to {} characters.",
                    input::max::MUTATION_ID
                ),
                "payload" => format!("`{}` must be an object.", field(k)),
                _ => format!("`{}` must be a string.", field(k)),
            };
            Error::validation(field(k), detail)
        };
        let typed: PushChange = serde_path_to_error::deserialize(raw).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().to_string();
            let named = ["client_mutation_id", "entity", "op", "payload"]
                .into_iter()
                .find(|k| path == *k || message.contains(&format!("`{k}`")));
            // Not an object at all: its first field is what is missing.
            shape(named.unwrap_or("client_mutation_id"))
        })?;
        let cmid = typed.client_mutation_id.as_str();
        if cmid.trim().is_empty() || cmid.chars().count() > input::max::MUTATION_ID {
            return Err(shape("client_mutation_id"));
        }
        let (entity, op) = (typed.entity.as_str(), typed.op.as_str());
        for (k, v) in [("entity", entity), ("op", op)] {
            if v.chars().count() > MAX_NAME_CHARS {
                return Err(Error::validation(
                    field(k),
                    format!(
                        "`{}` must be at most {MAX_NAME_CHARS} characters.",
                        field(k)
                    ),
                ));
            }
        }
        let payload = Json::Object(typed.payload);
        let digest =
            RequestDigest::of_json(&json!({"entity": entity, "op": op, "payload": payload}));
        Ok(Change {
            client_mutation_id: cmid.to_owned(),
            entity: entity.to_owned(),
            op: op.to_owned(),
            payload,
            digest,
        })
    }
}

pub(super) fn is_sale(change: &Change) -> bool {
    change.entity == "sale" && change.op == "create"
}

/// The `POST /sales` body of a pushed sale, checked, for the device's branch.
pub(super) fn new_sale(pusher: &Pusher, cmid: &str, payload: &Json) -> Result<NewSale> {
    let request: SaleRequest = serde_json::from_value(payload.clone())
        .map_err(|e| Error::bad_request(format!("The sale does not fit: {e}.")))?;
    if request.branch_id.is_some_and(|b| b != pusher.branch_id) {
        return Err(Error::forbidden("A device sells only on its own branch."));
    }
    let mut new_sale = request.validate(pusher.branch_id, pusher.user_id, pusher.role)?;
    new_sale.device_id = Some(pusher.device_id);
    new_sale.client_mutation_id = Some(cmid.to_owned());
    new_sale.occurred_at = occurred_at(payload)?;
    Ok(new_sale)
}

pub(super) fn occurred_at(payload: &Json) -> Result<Option<DateTime<Utc>>> {
    let Some(raw) = payload.get("occurred_at").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = raw
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| {
            Error::validation(
                "occurred_at",
                "`occurred_at` must be an RFC 3339 timestamp.",
            )
        })?;
    let now = Utc::now();
    if at > now + Duration::minutes(5) || at < now - Duration::days(MAX_SALE_AGE_DAYS) {
        return Err(Error::validation(
            "occurred_at",
            format!("`occurred_at` must be within the last {MAX_SALE_AGE_DAYS} days."),
        ));
    }
    Ok(Some(at))
}

pub(super) fn required_id(payload: &Json) -> Result<Uuid> {
    optional_id(payload)?
        .ok_or_else(|| Error::validation("id", "The payload needs the record's `id`."))
}

pub(super) fn optional_id(payload: &Json) -> Result<Option<Uuid>> {
    match payload.get("id") {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| Error::validation("id", "`id` must be a UUID string.")),
    }
}

pub(super) fn base_rev(payload: &Json) -> Result<Option<i64>> {
    match payload.get("base_rev") {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v.as_i64().filter(|r| *r >= 0).map(Some).ok_or_else(|| {
            Error::validation("base_rev", "`base_rev` must be a non-negative integer.")
        }),
    }
}
