use std::process::Command;

use pharmacy::db::{self, migrate};

use crate::common::{drop_database, empty_database, test_config};

#[tokio::test]
async fn an_edited_applied_migration_stops_startup() {
    let (name, url) = empty_database().await;
    let pool = db::pool(&url, &test_config().database).unwrap();
    let applied = migrate::run(&pool).await.unwrap();
    assert_eq!(applied, migrate::embedded().unwrap().len());
    assert_eq!(
        migrate::run(&pool).await.unwrap(),
        0,
        "a second run applies nothing"
    );
    // Simulate an edit of 0001 after it was applied.
    let client = pool.get().await.unwrap();
    client
        .execute(
            "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1",
            &[],
        )
        .await
        .unwrap();
    drop(client);
    let err = migrate::run(&pool).await.unwrap_err();
    assert!(
        matches!(err, migrate::MigrateError::Edited { version: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("edited after it was applied"));
    pool.close();
    drop_database(&name);
}

#[tokio::test]
async fn two_processes_migrating_at_once_do_not_race() {
    let (name, url) = empty_database().await;
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_pharmacy"))
            .arg("migrate")
            .env("DATABASE_URL", &url)
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn(), spawn());
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    let pool = db::pool(&url, &test_config().database).unwrap();
    let client = pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n as usize, migrate::embedded().unwrap().len());
    drop(client);
    pool.close();
    drop_database(&name);
}
