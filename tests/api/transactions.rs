//! `domain::db::Tx`, the transaction whose BEGIN travels with its first
//! statement: it commits what it did, a dropped one rolls back and leaves
//! its connection outside any transaction, a dropped savepoint undoes only
//! its own work, and a failed statement commits nothing.

use domain::db::Tx;

use crate::common::TestApp;

async fn rows(app: &TestApp) -> Vec<i32> {
    let client = app.pool.get().await.unwrap();
    client
        .query("SELECT n FROM tx_probe ORDER BY n", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
async fn a_tx_commits_rolls_back_when_dropped_and_keeps_savepoints_apart() {
    let app = TestApp::spawn().await;
    let setup = app.pool.get().await.unwrap();
    setup
        .batch_execute("CREATE TABLE tx_probe (n int PRIMARY KEY CHECK (n > 0))")
        .await
        .unwrap();
    drop(setup);
    let client = app.pool.get().await.unwrap();
    let insert = "INSERT INTO tx_probe VALUES ($1)";

    let tx = Tx::begin(&client);
    tx.execute(insert, &[&1]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(rows(&app).await, [1]);

    // Dropped: rolled back, and the connection's next statement runs on
    // its own (committed at once, seen by another connection).
    let tx = Tx::begin(&client);
    tx.execute(insert, &[&2]).await.unwrap();
    drop(tx);
    client.execute(insert, &[&3]).await.unwrap();
    assert_eq!(rows(&app).await, [1, 3]);

    // A dropped savepoint undoes its own work only.
    let mut tx = Tx::begin(&client);
    tx.execute(insert, &[&4]).await.unwrap();
    {
        let sp = tx.savepoint("probe");
        sp.execute(insert, &[&5]).await.unwrap();
    }
    {
        let sp = tx.savepoint("probe");
        sp.execute(insert, &[&6]).await.unwrap();
        sp.commit().await.unwrap();
    }
    tx.commit().await.unwrap();
    assert_eq!(rows(&app).await, [1, 3, 4, 6]);

    // A failed statement: nothing of the transaction stands.
    let tx = Tx::begin(&client);
    tx.execute(insert, &[&7]).await.unwrap();
    assert!(tx.execute(insert, &[&-1]).await.is_err());
    drop(tx);
    client.execute(insert, &[&8]).await.unwrap();
    assert_eq!(rows(&app).await, [1, 3, 4, 6, 8]);
    let open: bool = client
        .query_one("SELECT pg_current_xact_id_if_assigned() IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!open, "the connection is left outside any transaction");
}
