//! One client mutation id, one effect: what every flow taking a client
//! mutation id shares (REST sales and returns, customer payments, sync push)
//! to tell a retry, answered again from what was stored, from a different
//! request reusing the id, refused.
//!
//! - The key: a client mutation id within its scope (a branch's REST
//!   requests, a till's pushes, a customer's payments), kept in the table of
//!   its flow, where a unique index backs it.
//! - The request digest stored beside the key: one type, computed the one
//!   way of its flow (stored rows keep matching), compared one way.
//! - The lookup and its decision: a new key, the same request again, or a
//!   different request under the key (refused with the one mismatch text).
//! - The race rule: an insert that loses a unique-violation race to another
//!   writer of the same key reads the winner's row and replays it, or
//!   refuses a different request as a lookup would.
//!
//! Flows answering many requests at once read their keys in one round trip
//! (pipelined lookups, or one `= ANY(...)` statement) and decide each row
//! with `judge`; `earlier_with_same_key` finds a group's repeated keys.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;

use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query, SelectStatement};
use serde_json::Value as Json;
use sha2::{Digest as _, Sha256};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db;
use crate::error::{Error, Result};

/// The column every flow keeps its request digest in.
pub const DIGEST_COLUMN: &str = "request_digest";

/// What a client mutation id is unique within.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A branch's REST requests: `branch_id`, with no `device_id`.
    Branch(Uuid),
    /// A till's pushes: `device_id`.
    Device(Uuid),
    /// A customer's payments: `customer_id`.
    Customer(Uuid),
}

/// A client mutation id in its scope, and the table keeping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key<'a> {
    pub table: &'static str,
    pub scope: Scope,
    pub client_mutation_id: &'a str,
}

impl Key<'_> {
    /// The row holding this key: `columns` and then the stored digest.
    pub fn select(&self, columns: &[&'static str]) -> SelectStatement {
        let mut q = Query::select()
            .columns(columns.iter().copied())
            .column(DIGEST_COLUMN)
            .from(self.table)
            .and_where(Expr::col("client_mutation_id").eq(self.client_mutation_id))
            .to_owned();
        match self.scope {
            Scope::Branch(branch_id) => q
                .and_where(Expr::col("branch_id").eq(branch_id))
                .and_where(Expr::col("device_id").is_null()),
            Scope::Device(device_id) => q.and_where(Expr::col("device_id").eq(device_id)),
            Scope::Customer(customer_id) => q.and_where(Expr::col("customer_id").eq(customer_id)),
        };
        q
    }
}

/// What tells a retry from a different request under the same key. Each
/// flow computes it its own way (the way its stored rows were digested);
/// the comparison is this type's.
#[derive(Debug, Clone)]
pub struct RequestDigest(String);

impl RequestDigest {
    /// A canonical JSON body's digest: the hex SHA-256 of its compact text
    /// (object keys sorted). Sales, returns and pushed changes.
    pub fn of_json(canonical: &Json) -> Self {
        RequestDigest(hex::encode(Sha256::digest(
            canonical.to_string().as_bytes(),
        )))
    }

    /// A digest that is the flow's own text (a payment's branch and amount).
    pub fn text(text: String) -> Self {
        RequestDigest(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// Whether `stored` (a key's stored digest) is this request's; a row
    /// stored without a digest matches no request.
    pub fn matches(&self, stored: Option<&str>) -> bool {
        stored == Some(self.as_str())
    }
}

/// How a request stands against what its key holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen<T> {
    /// The key holds nothing (or the request has no key): a new request.
    New,
    /// The key holds this request's effect: a retry, answered from `T`.
    Same(T),
    /// The key was used for a different request.
    Different,
}

impl<T> Seen<T> {
    /// The stored effect to replay, `None` for a new request, and the
    /// mismatch conflict (409) for a different request; `what` names the
    /// flow's request ("sale", "payment").
    pub fn or_refuse(self, what: &str) -> Result<Option<T>> {
        match self {
            Seen::New => Ok(None),
            Seen::Same(t) => Ok(Some(t)),
            Seen::Different => Err(mismatch(what)),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Seen<U> {
        match self {
            Seen::New => Seen::New,
            Seen::Same(t) => Seen::Same(f(t)),
            Seen::Different => Seen::Different,
        }
    }
}

/// The decision on what a key holds: nothing, or a stored digest with the
/// stored effect.
pub fn judge<T>(found: Option<(Option<&str>, T)>, digest: &RequestDigest) -> Seen<T> {
    match found {
        None => Seen::New,
        Some((stored, t)) if digest.matches(stored) => Seen::Same(t),
        Some(_) => Seen::Different,
    }
}

/// The one text of a mutation id reused for a different request.
pub fn mismatch_message(what: &str) -> String {
    format!("This client_mutation_id was already used for a different {what}.")
}

/// The refusal (409) of a mutation id reused for a different request.
pub fn mismatch(what: &str) -> Error {
    Error::conflict(mismatch_message(what))
}

/// The row holding `key` (its `columns`), judged against `digest`.
pub async fn lookup<C: GenericClient + Sync>(
    c: &C,
    key: Option<Key<'_>>,
    digest: &RequestDigest,
    columns: &[&'static str],
) -> Result<Seen<Row>> {
    let Some(key) = key else {
        return Ok(Seen::New);
    };
    let Some(row) = db::fetch_opt(c, &key.select(columns)).await? else {
        return Ok(Seen::New);
    };
    let stored: Option<String> = row.get(DIGEST_COLUMN);
    Ok(judge(Some((stored.as_deref(), row)), digest))
}

/// The race rule. `attempt` is a keyed request's insert (and commit); when
/// it lost a unique-violation race to another writer of the same key (a
/// conflict), `reread` looks the key up again: the winner's effect is
/// replayed, a different request refused as `reread` refuses it, and a key
/// still empty answered busy (retry).
pub async fn replay_after_race<T, Fut>(
    attempt: Result<T>,
    keyed: bool,
    what: &str,
    reread: impl FnOnce() -> Fut,
) -> Result<T>
where
    Fut: Future<Output = Result<Option<T>>>,
{
    match attempt {
        Err(Error::Conflict(_)) if keyed => reread().await?.ok_or_else(|| {
            Error::busy(format!("The {what} conflicted with another; please retry."))
        }),
        other => other,
    }
}

/// For each request of a group, the index of the earlier request with the
/// same key (`None` for a first use or a request without a key).
pub fn earlier_with_same_key<K: Eq + Hash>(
    keys: impl IntoIterator<Item = Option<K>>,
) -> Vec<Option<usize>> {
    let mut first: HashMap<K, usize> = HashMap::new();
    keys.into_iter()
        .enumerate()
        .map(|(k, key)| {
            let key = key?;
            match first.get(&key) {
                Some(earlier) => Some(*earlier),
                None => {
                    first.insert(key, k);
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_json_digest_is_the_hex_sha256_of_the_compact_sorted_text() {
        let d = RequestDigest::of_json(&json!({"op": "create", "entity": "sale"}));
        let text = r#"{"entity":"sale","op":"create"}"#;
        assert_eq!(d.as_str(), hex::encode(Sha256::digest(text.as_bytes())));
        assert_eq!(d.as_str().len(), 64);
        // Key order does not matter: the canonical text sorts them.
        let again = RequestDigest::of_json(&json!({"entity": "sale", "op": "create"}));
        assert!(d.matches(Some(again.as_str())));
    }

    #[test]
    fn a_digest_matches_only_the_same_stored_digest() {
        let d = RequestDigest::text("b:10.00".to_owned());
        assert!(d.matches(Some("b:10.00")));
        assert!(!d.matches(Some("b:10.01")));
        assert!(!d.matches(Some("")));
        assert!(!d.matches(None));
    }

    #[test]
    fn judging_tells_new_retry_and_different_requests() {
        let d = RequestDigest::text("x".to_owned());
        assert_eq!(judge::<u8>(None, &d), Seen::New);
        assert_eq!(judge(Some((Some("x"), 7)), &d), Seen::Same(7));
        assert_eq!(judge(Some((Some("y"), 7)), &d), Seen::Different);
        assert_eq!(judge(Some((None, 7)), &d), Seen::Different);
    }

    #[test]
    fn a_different_request_is_refused_with_the_one_mismatch_conflict() {
        assert!(matches!(Seen::<u8>::New.or_refuse("sale"), Ok(None)));
        assert!(matches!(Seen::Same(3).or_refuse("sale"), Ok(Some(3))));
        match Seen::<u8>::Different.or_refuse("payment") {
            Err(Error::Conflict(m)) => assert_eq!(
                m,
                "This client_mutation_id was already used for a different payment."
            ),
            other => panic!("expected the mismatch conflict, got {other:?}"),
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_lost_race_replays_the_winner_or_refuses_as_the_lookup_does() {
        let lost = || Err::<u8, _>(Error::conflict("duplicate key"));
        let won = block_on(replay_after_race(lost(), true, "sale", || async {
            Ok(Some(9))
        }));
        assert!(matches!(won, Ok(9)));
        let differs = block_on(replay_after_race(lost(), true, "sale", || async {
            Seen::<u8>::Different.or_refuse("sale")
        }));
        assert!(matches!(differs, Err(Error::Conflict(_))));
        let empty = block_on(replay_after_race(lost(), true, "sale", || async {
            Ok(None)
        }));
        match empty {
            Err(e) => assert_eq!(
                e.to_string(),
                "The sale conflicted with another; please retry."
            ),
            Ok(v) => panic!("expected busy, got {v}"),
        }
        // Without a key, or for another error, nothing is read again.
        let unkeyed = block_on(replay_after_race(lost(), false, "sale", || async {
            panic!("read again without a key")
        }));
        assert!(matches!(unkeyed, Err(Error::Conflict(_))));
        let other = block_on(replay_after_race(
            Err::<u8, _>(Error::not_found("x")),
            true,
            "sale",
            || async { panic!("read again after a refusal") },
        ));
        assert!(matches!(other, Err(Error::NotFound(_))));
        let ok = block_on(replay_after_race(Ok(1u8), true, "sale", || async {
            panic!("read again after a success")
        }));
        assert!(matches!(ok, Ok(1)));
    }

    #[test]
    fn repeated_keys_point_at_their_first_use() {
        let keys = [
            Some("a"),
            None,
            Some("b"),
            Some("a"),
            None,
            Some("a"),
            Some("b"),
        ];
        assert_eq!(
            earlier_with_same_key(keys),
            vec![None, None, None, Some(0), None, Some(0), Some(2)]
        );
    }

    #[test]
    fn a_key_selects_its_scope() {
        use sea_query::PostgresQueryBuilder;
        let id = Uuid::nil();
        let sql = |scope| {
            Key {
                table: "t",
                scope,
                client_mutation_id: "m",
            }
            .select(&["id"])
            .to_string(PostgresQueryBuilder)
        };
        let branch = sql(Scope::Branch(id));
        assert!(branch.contains(r#""branch_id" = "#), "{branch}");
        assert!(branch.contains(r#""device_id" IS NULL"#), "{branch}");
        assert!(
            branch.contains(r#"SELECT "id", "request_digest" FROM "t""#),
            "{branch}"
        );
        let device = sql(Scope::Device(id));
        assert!(device.contains(r#""device_id" = "#), "{device}");
        assert!(!device.contains("branch_id"), "{device}");
        let customer = sql(Scope::Customer(id));
        assert!(customer.contains(r#""customer_id" = "#), "{customer}");
    }
}
