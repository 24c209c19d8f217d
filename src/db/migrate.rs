//! Numbered plain-SQL migrations from `sql/`, embedded in the binary.
//!
//! Each runs in its own transaction and is recorded with a SHA-256 checksum.
//! A migration edited after it was applied stops startup. A session-level
//! advisory lock makes concurrent starts take turns.

use deadpool_postgres::Pool;
use include_dir::{include_dir, Dir};
use sha2::{Digest, Sha256};

static SQL_DIR: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/sql");

/// Advisory lock key serialising migration runs (arbitrary, fixed).
const MIGRATE_LOCK_KEY: i64 = 0x5048_4152_4d4d_4947; // "PHARMMIG"

#[derive(Debug, Clone)]
pub struct Migration {
    pub version: i32,
    pub name: String,
    pub sql: &'static str,
    pub checksum: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("migration file name {0:?} is not NNNN_name.sql")]
    BadName(String),
    #[error(
        "migration {version} ({name}) was edited after it was applied: the database recorded \
         checksum {recorded}, the file now has {current}. Restore the file and put the change \
         in a new migration."
    )]
    Edited {
        version: i32,
        name: String,
        recorded: String,
        current: String,
    },
    #[error("migration {version} ({name}) failed: {cause}")]
    Failed {
        version: i32,
        name: String,
        cause: String,
    },
    #[error("database error while migrating: {0}")]
    Db(String),
}

impl From<tokio_postgres::Error> for MigrateError {
    fn from(e: tokio_postgres::Error) -> Self {
        MigrateError::Db(e.to_string())
    }
}

impl From<deadpool_postgres::PoolError> for MigrateError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        MigrateError::Db(e.to_string())
    }
}

/// The embedded migrations in version order.
pub fn embedded() -> Result<Vec<Migration>, MigrateError> {
    let mut out = Vec::new();
    for file in SQL_DIR.files() {
        let file_name = file.path().to_string_lossy().into_owned();
        let Some(stem) = file_name.strip_suffix(".sql") else {
            continue;
        };
        let (num, name) = stem
            .split_once('_')
            .ok_or_else(|| MigrateError::BadName(file_name.clone()))?;
        let version: i32 = num
            .parse()
            .map_err(|_| MigrateError::BadName(file_name.clone()))?;
        let sql = file
            .contents_utf8()
            .ok_or_else(|| MigrateError::BadName(file_name.clone()))?;
        out.push(Migration {
            version,
            name: name.to_owned(),
            sql,
            checksum: checksum(sql),
        });
    }
    out.sort_by_key(|m| m.version);
    Ok(out)
}

pub fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// Applies every pending migration; returns how many were applied.
pub async fn run(pool: &Pool) -> Result<usize, MigrateError> {
    let migrations = embedded()?;
    let mut client = pool.get().await?;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK_KEY])
        .await?;
    let outcome = apply_pending(&mut client, &migrations).await;
    // Unlock even after a failure; a lost connection releases it anyway.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK_KEY])
        .await;
    outcome
}

#[allow(
    clippy::disallowed_methods,
    reason = "a migration's commit answers no request: it waits for a standby as long as the server does"
)]
async fn apply_pending(
    client: &mut deadpool_postgres::Client,
    migrations: &[Migration],
) -> Result<usize, MigrateError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version     integer PRIMARY KEY,
                name        text NOT NULL,
                checksum    text NOT NULL,
                applied_at  timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await?;
    let applied = client
        .query("SELECT version, checksum FROM schema_migrations", &[])
        .await?;
    let recorded: std::collections::HashMap<i32, String> = applied
        .iter()
        .map(|r| (r.get::<_, i32>(0), r.get::<_, String>(1)))
        .collect();
    let mut count = 0;
    for m in migrations {
        if let Some(sum) = recorded.get(&m.version) {
            if *sum != m.checksum {
                return Err(MigrateError::Edited {
                    version: m.version,
                    name: m.name.clone(),
                    recorded: sum.clone(),
                    current: m.checksum.clone(),
                });
            }
            continue;
        }
        let tx = client.transaction().await?;
        tx.batch_execute(m.sql)
            .await
            .map_err(|e| MigrateError::Failed {
                version: m.version,
                name: m.name.clone(),
                cause: e
                    .as_db_error()
                    .map(|d| d.message().to_owned())
                    .unwrap_or_else(|| e.to_string()),
            })?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &m.checksum],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(version = m.version, name = %m.name, "migration applied");
        count += 1;
    }
    Ok(count)
}
