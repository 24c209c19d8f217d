use reqwest::StatusCode;

use crate::common::TestApp;

#[tokio::test]
async fn the_demo_chain_has_a_catalogue_stock_and_a_month_of_sales() {
    let app = TestApp::spawn().await;
    assert!(pharmacy::seed::seed_demo(&app.pool).await.unwrap());
    assert!(!pharmacy::seed::seed_demo(&app.pool).await.unwrap());
    let client = app.pool.get().await.unwrap();
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM medicines").await, 24);
    assert!(count("SELECT count(*) FROM medicines WHERE is_controlled").await > 0);
    assert!(count("SELECT count(*) FROM medicines WHERE requires_cold_chain").await > 0);
    assert!(count("SELECT count(*) FROM medicines WHERE vat_category = 'standard'").await > 0);
    assert!(count("SELECT count(*) FROM batches WHERE expiry_date < org_today()").await > 0);
    assert!(
        count("SELECT count(*) FROM batches WHERE expiry_date BETWEEN org_today() AND org_today() + 30").await
            > 0
    );
    assert!(count("SELECT count(DISTINCT branch_id) FROM sales").await >= 3);
    assert!(
        count("SELECT count(DISTINCT created_at::date) FROM sales").await >= 28,
        "a month of sales"
    );
    for status in ["unpaid", "partial", "paid"] {
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM supplier_invoices WHERE status = $1",
                &[&status],
            )
            .await
            .unwrap()
            .get(0);
        assert!(n > 0, "no {status} supplier invoice");
    }
    assert!(
        count("SELECT count(*) FROM customer_ledger WHERE transaction_type = 'PAYMENT'").await > 0
    );
    assert!(count("SELECT count(*) FROM customers WHERE current_balance > 0").await > 0);
    app.assert_invariants().await;
    let (_, login) = app
        .login(
            &pharmacy::seed::demo_email(domain::Role::Admin, "HQ"),
            pharmacy::seed::DEMO_PASSWORD,
        )
        .await;
    let token = login["access_token"].as_str().unwrap();
    let branch: uuid::Uuid = client
        .query_one("SELECT id FROM branches WHERE code = 'KLA'", &[])
        .await
        .unwrap()
        .get(0);
    let (status, report) = app
        .get(&format!("/sales/verify-chain?branch_id={branch}"), token)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["status"], "ok", "{report}");
}
