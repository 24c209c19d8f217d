//! Category slugs: an unknown slug is added on first use.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query};

use crate::sync::changes::{self, Change, Op};
use crate::{db, wire, Error, Result};

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
        .from(Table::Categories)
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
