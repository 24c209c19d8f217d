//! The report summaries (`sales_days`, `medicine_days`, `medicine_months`)
//! always equal what the ledger says, whatever mix of sales, credit notes
//! (issued at once or after approval), receipts and later corrections
//! (rows moved to other days and months, a new time zone) wrote them; and
//! the reports that read them answer what the ledger's own sums answer for
//! any window up to a year and any past day.
//!
//! The sequences come from a proptest strategy with a fixed seed, so a
//! failure replays; each case runs against its own database.

use chrono::NaiveDate;
use proptest::prelude::{any, prop_oneof, Just, Strategy};
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use reqwest::StatusCode;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{Role, TestApp};

#[derive(Debug, Clone)]
enum Op {
    Sell {
        medicine: usize,
        qty: i64,
        method: usize,
    },
    GiveBack {
        sale: usize,
        by_cashier: bool,
    },
    Receive {
        medicine: usize,
        qty: i64,
        cost: usize,
    },
    MoveSale {
        sale: usize,
        days_back: i64,
    },
    MoveMovement {
        nth: usize,
        days_back: i64,
    },
    MoveReturn {
        nth: usize,
        days_back: i64,
    },
    TimeZone {
        zone: usize,
    },
    /// The chain-wide roll-up of the months that are over (0030).
    RollUp,
}

const METHODS: [&str; 3] = ["cash", "card", "mobile_money"];
const COSTS: [&str; 3] = ["40.00", "12.35", "7.50"];
const ZONES: [&str; 3] = ["Africa/Kampala", "UTC", "Asia/Kathmandu"];

fn op() -> impl Strategy<Value = Op> {
    let days = 0i64..420;
    prop_oneof![
        4 => (0usize..3, 1i64..4, 0usize..3)
            .prop_map(|(medicine, qty, method)| Op::Sell { medicine, qty, method }),
        2 => (any::<usize>(), any::<bool>())
            .prop_map(|(sale, by_cashier)| Op::GiveBack { sale, by_cashier }),
        1 => (0usize..3, 5i64..20, 0usize..3)
            .prop_map(|(medicine, qty, cost)| Op::Receive { medicine, qty, cost }),
        2 => (any::<usize>(), days.clone()).prop_map(|(sale, days_back)| Op::MoveSale { sale, days_back }),
        1 => (any::<usize>(), days.clone())
            .prop_map(|(nth, days_back)| Op::MoveMovement { nth, days_back }),
        1 => (any::<usize>(), days).prop_map(|(nth, days_back)| Op::MoveReturn { nth, days_back }),
        1 => (0usize..3).prop_map(|zone| Op::TimeZone { zone }),
        1 => Just(Op::TimeZone { zone: 0 }),
        2 => Just(Op::RollUp),
    ]
}

struct Shop {
    app: TestApp,
    branch: Uuid,
    admin: String,
    manager: String,
    pharmacist: String,
    cashier: String,
    medicines: Vec<Value>,
    sales: Vec<Value>,
}

impl Shop {
    async fn open() -> Shop {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
        let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        exec(
            &app,
            "INSERT INTO settings (org_id, tax_enabled, tax_rate) VALUES ($1, true, 0.18)",
            &[&app.org_id],
        )
        .await;
        let mut medicines = Vec::new();
        for (name, price, vat) in [
            ("Amoxil", 100, "standard"),
            ("Zinc", 35, "zero"),
            ("Ors", 250, "exempt"),
        ] {
            let m = app
                .medicine(
                    &admin,
                    json!({"name": name, "selling_price": price, "vat_category": vat,
                           "category": format!("{name} group")}),
                )
                .await;
            app.receive(&admin, &m["id"], branch, 200, "2030-12-31")
                .await;
            medicines.push(m);
        }
        Shop {
            app,
            branch,
            admin,
            manager,
            pharmacist,
            cashier,
            medicines,
            sales: Vec::new(),
        }
    }

    async fn apply(&mut self, op: &Op) {
        match *op {
            Op::Sell {
                medicine,
                qty,
                method,
            } => {
                let body = json!({"items": [{"medicine_id": self.medicines[medicine]["id"], "quantity": qty},
                                            {"medicine_id": self.medicines[(medicine + 1) % 3]["id"], "quantity": 1}],
                                  "payment_method": METHODS[method]});
                let (status, sale) = self.app.post("/sales", &self.pharmacist, body).await;
                assert_eq!(status, StatusCode::CREATED, "{sale}");
                self.sales.push(sale);
            }
            Op::GiveBack { sale, by_cashier } => self.give_back(sale, by_cashier).await,
            Op::Receive {
                medicine,
                qty,
                cost,
            } => {
                let supplier = self.app.supplier("Wholesale").await;
                let body = json!({"supplier_id": supplier, "medicine_id": self.medicines[medicine]["id"],
                                  "branch_id": self.branch, "batch_number": format!("B-{}", Uuid::now_v7().simple()),
                                  "expiry_date": "2031-06-30", "quantity": qty, "unit_cost": COSTS[cost]});
                let (status, b) = self.app.post("/purchases", &self.admin, body).await;
                assert_eq!(status, StatusCode::CREATED, "{b}");
            }
            Op::MoveSale { sale, days_back } if !self.sales.is_empty() => {
                let id: Uuid = self.sales[sale % self.sales.len()]["id"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                exec(
                    &self.app,
                        "UPDATE sales SET created_at = now() - make_interval(days => $2::int) WHERE id = $1",
                        &[&id, &(days_back as i32)],
                    )
                    .await;
            }
            Op::MoveMovement { nth, days_back } => {
                exec(
                    &self.app,
                        "UPDATE stock_movements SET created_at = now() - make_interval(days => $2::int)
                         WHERE id = (SELECT id FROM stock_movements ORDER BY id
                                     OFFSET $1::bigint % greatest((SELECT count(*) FROM stock_movements), 1)
                                     LIMIT 1)",
                        &[&((nth % 1000) as i64), &(days_back as i32)],
                    )
                    .await;
            }
            Op::MoveReturn { nth, days_back } => {
                exec(
                    &self.app,
                    "UPDATE sale_returns SET issued_at = now() - make_interval(days => $2::int)
                         WHERE id = (SELECT id FROM sale_returns WHERE status = 'issued' ORDER BY id
                                     OFFSET $1::bigint % greatest((SELECT count(*) FROM sale_returns
                                                                    WHERE status = 'issued'), 1)
                                     LIMIT 1)",
                    &[&((nth % 1000) as i64), &(days_back as i32)],
                )
                .await;
            }
            Op::TimeZone { zone } => {
                exec(
                    &self.app,
                    "UPDATE settings SET time_zone = $1",
                    &[&ZONES[zone]],
                )
                .await;
            }
            Op::RollUp => exec(&self.app, "SELECT roll_up_chain_months()", &[]).await,
            Op::MoveSale { .. } => {}
        }
    }

    /// One unit of the sale's first line back; a cashier's return waits
    /// for the manager's approval, which issues it by an update.
    async fn give_back(&mut self, sale: usize, by_cashier: bool) {
        if self.sales.is_empty() {
            return;
        }
        let sale = self.sales[sale % self.sales.len()].clone();
        let body = json!({"items": [{"sale_item_id": sale["items"][0]["id"], "quantity": 1}],
                          "reason": "Wrong strength dispensed"});
        let path = format!("/sales/{}/returns", sale["id"].as_str().unwrap());
        let token = if by_cashier {
            &self.cashier
        } else {
            &self.pharmacist
        };
        let (status, note) = self.app.post(&path, token, body).await;
        if status != StatusCode::CREATED && status != StatusCode::ACCEPTED {
            // Everything of that line was returned already.
            assert_eq!(note["code"], "return_exceeds_sold", "{note}");
            return;
        }
        if note["status"] == "pending_approval" {
            let approve = format!(
                "/approvals/{}/approve",
                note["approval_id"].as_str().unwrap()
            );
            let (status, body) = self.app.post(&approve, &self.manager, json!({})).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    }

    async fn text(&self, sql: &str, from: NaiveDate, to: NaiveDate) -> String {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[&from, &to]).await.unwrap().get(0)
    }
}

async fn exec(app: &TestApp, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) {
    let client = app.pool.get().await.unwrap();
    client.execute(sql, params).await.unwrap();
}

fn money(v: &Value) -> Decimal {
    match v {
        Value::String(s) => s.parse().unwrap(),
        Value::Number(n) => n.to_string().parse::<Decimal>().unwrap().round_dp(2),
        other => panic!("not money: {other}"),
    }
}

/// The window's bounds in the organisation's zone, as SQL.
const BOUNDS: &str = "WITH w AS (SELECT $1::date::timestamp AT TIME ZONE org_time_zone() AS lo,
                                        ($2::date + 1)::timestamp AT TIME ZONE org_time_zone() AS hi)";

/// Each report equals the ledger's own sums over the window.
async fn reports_agree_with_the_ledger(shop: &Shop, from: NaiveDate, to: NaiveDate) {
    let q = format!("?from_date={from}&to_date={to}");
    let (status, sales) = shop
        .app
        .get(&format!("/reports/sales{q}"), &shop.admin)
        .await;
    assert_eq!(status, StatusCode::OK, "{sales}");
    let ledger = shop
        .text(
            &format!(
                "{BOUNDS} SELECT ((SELECT coalesce(sum(total), 0) FROM sales, w
                                   WHERE created_at >= w.lo AND created_at < w.hi)
                                - (SELECT coalesce(sum(total), 0) FROM sale_returns, w
                                   WHERE status = 'issued' AND issued_at >= w.lo AND issued_at < w.hi))::text"
            ),
            from,
            to,
        )
        .await;
    assert_eq!(
        money(&sales["totals"]["revenue"]),
        ledger.parse().unwrap(),
        "sales {from}..{to}"
    );
    let days: Decimal = sales["by_day"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| money(&d["total"]))
        .sum();
    assert_eq!(days, ledger.parse().unwrap(), "sales by day {from}..{to}");

    let (_, vat) = shop.app.get(&format!("/reports/vat{q}"), &shop.admin).await;
    let ledger = shop
        .text(
            &format!(
                "{BOUNDS} SELECT ((SELECT coalesce(sum(vat_amount), 0) FROM sale_items, w
                                   WHERE sold_at >= w.lo AND sold_at < w.hi)
                                - (SELECT coalesce(sum(ri.vat_amount), 0)
                                   FROM sale_returns r JOIN sale_return_items ri ON ri.return_id = r.id, w
                                   WHERE r.status = 'issued' AND r.issued_at >= w.lo AND r.issued_at < w.hi))::text"
            ),
            from,
            to,
        )
        .await;
    assert_eq!(
        money(&vat["totals"]["vat_collected"]),
        ledger.parse().unwrap(),
        "vat {from}..{to}"
    );

    for group in ["medicine", "category", "day"] {
        let (_, margins) = shop
            .app
            .get(
                &format!("/reports/margins{q}&group_by={group}"),
                &shop.admin,
            )
            .await;
        let ledger = shop
            .text(
                &format!(
                    "{BOUNDS} SELECT round((SELECT coalesce(sum(quantity * cost_at_sale), 0) FROM sale_items, w
                                           WHERE sold_at >= w.lo AND sold_at < w.hi)
                                        - (SELECT coalesce(sum(ri.quantity * i.cost_at_sale), 0)
                                           FROM sale_returns r JOIN sale_return_items ri ON ri.return_id = r.id
                                           JOIN sale_items i ON i.id = ri.sale_item_id, w
                                           WHERE ri.restocked AND r.status = 'issued'
                                             AND r.issued_at >= w.lo AND r.issued_at < w.hi), 2)::text"
                ),
                from,
                to,
            )
            .await;
        assert_eq!(
            margins["totals"]["cost_of_goods_sold"], ledger,
            "margins by {group} {from}..{to}: {margins}"
        );
    }
}

/// The valuation at a day's end equals each medicine's batches summed from
/// the movements up to then, valued at their unit value.
async fn valuation_agrees_with_the_ledger(shop: &Shop, day: NaiveDate) {
    let (status, v) = shop
        .app
        .get(
            &format!("/reports/stock-valuation?as_of={day}"),
            &shop.admin,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let ledger = shop
        .text(
            &format!(
                "{BOUNDS} SELECT coalesce(sum(value), 0)::numeric(14, 2)::text FROM (
                     SELECT round(sum(h.qty * batch_unit_value(b.unit_cost, b.received_total, b.qty_received)), 2)
                              AS value
                     FROM (SELECT batch_id, sum(qty) AS qty FROM stock_movements, w
                           WHERE created_at < w.hi GROUP BY batch_id) h
                     JOIN batches b ON b.id = h.batch_id
                     GROUP BY b.medicine_id HAVING sum(h.qty) <> 0) x"
            ),
            day,
            day,
        )
        .await;
    assert_eq!(v["total_value"], ledger, "valuation at {day}: {v}");
}

#[tokio::test]
async fn summaries_always_equal_the_ledger_and_reports_read_them_right() {
    let mut runner = TestRunner::deterministic();
    let strategy = proptest::collection::vec(op(), 15..30);
    for case in 0..3 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut shop = Shop::open().await;
        for op in &ops {
            shop.apply(op).await;
        }
        if case % 2 == 0 {
            // The reports then read every month that is over rolled up.
            shop.apply(&Op::RollUp).await;
        }
        shop.app.assert_invariants().await;
        let today: NaiveDate = {
            let client = shop.app.pool.get().await.unwrap();
            client
                .query_one("SELECT org_today()", &[])
                .await
                .unwrap()
                .get(0)
        };
        let back = |d: i64| today - chrono::Duration::days(d);
        for (from, to) in [
            (back(365), today),
            (back(400), back(35)),
            (back(45), back(3)),
            (today, today),
        ] {
            reports_agree_with_the_ledger(&shop, from, to).await;
        }
        for d in [0, 1, 29, 31, 100, 300, 419] {
            valuation_agrees_with_the_ledger(&shop, back(d)).await;
        }
        eprintln!("case {case}: {} operations agree", ops.len());
    }
}

/// Roll-ups racing with writes to the months they roll up (sales moved into
/// them while several connections roll up) never keep a month's roll-up
/// that misses a committed write.
#[tokio::test]
async fn a_roll_up_racing_late_writes_never_keeps_a_stale_month() {
    let mut shop = Shop::open().await;
    for i in 0..12 {
        shop.apply(&Op::Sell {
            medicine: i % 3,
            qty: 1 + (i as i64 % 3),
            method: i % 3,
        })
        .await;
    }
    let ids: Vec<Uuid> = shop
        .sales
        .iter()
        .map(|s| s["id"].as_str().unwrap().parse().unwrap())
        .collect();
    // One writer moves the sales into months that are over, one at a
    // time (two refreshes of one branch and day at once are not what this
    // checks), while three connections roll up over and over.
    let mut tasks = Vec::new();
    let pool = shop.app.pool.clone();
    tasks.push(tokio::spawn(async move {
        let client = pool.get().await.unwrap();
        for round in 0..4i32 {
            for (n, id) in ids.iter().enumerate() {
                let days = 40 + 31 * ((n as i32 + round) % 5);
                client
                    .execute(
                        "UPDATE sales SET created_at = now() - make_interval(days => $2::int)
                         WHERE id = $1",
                        &[id, &days],
                    )
                    .await
                    .unwrap();
            }
        }
    }));
    for _ in 0..3 {
        let pool = shop.app.pool.clone();
        tasks.push(tokio::spawn(async move {
            let client = pool.get().await.unwrap();
            for _ in 0..12 {
                client
                    .execute("SELECT roll_up_chain_months()", &[])
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    exec(&shop.app, "SELECT roll_up_chain_months()", &[]).await;
    let client = shop.app.pool.get().await.unwrap();
    let rolled: i64 = client
        .query_one("SELECT count(*) FROM chain_months", &[])
        .await
        .unwrap()
        .get(0);
    assert!(rolled > 0, "no month was rolled up");
    drop(client);
    shop.app.assert_invariants().await;
    let today: NaiveDate = {
        let client = shop.app.pool.get().await.unwrap();
        client
            .query_one("SELECT org_today()", &[])
            .await
            .unwrap()
            .get(0)
    };
    reports_agree_with_the_ledger(&shop, today - chrono::Duration::days(365), today).await;
}

/// A refresh (an approval, a correction) never fails because another
/// process's writer of the same branch committed a row for a new day or
/// medicine while the refresh was between its delete and its insert (0031).
/// The writer here holds the refresh's delete on a row it updated, and
/// commits a row for a day the refresh's delete could not see.
#[tokio::test]
async fn a_refresh_beside_a_writer_of_the_same_branch_does_not_fail() {
    let shop = Shop::open().await;
    let mut writer = shop.app.pool.get().await.unwrap();
    let batch: Uuid = writer
        .query_one(
            "SELECT id FROM batches WHERE medicine_id = $1",
            &[&shop.medicines[0]["id"]
                .as_str()
                .unwrap()
                .parse::<Uuid>()
                .unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    // Two adjustments that net to nothing: one today (the row the refresh
    // waits on), one yesterday (a day with no summary row yet).
    let tx = writer.transaction().await.unwrap();
    for days_back in [0, 1] {
        tx.execute(
            "INSERT INTO stock_movements (id, batch_id, medicine_id, branch_id, kind, qty, created_at)
             SELECT gen_random_uuid(), b.id, b.medicine_id, b.branch_id, 'ADJUST',
                    CASE WHEN $2::int = 0 THEN 1 ELSE -1 END, now() - make_interval(days => $2::int)
             FROM batches b WHERE b.id = $1",
            &[&batch, &days_back],
        )
        .await
        .unwrap();
    }
    let pool = shop.app.pool.clone();
    let branch = shop.branch;
    let refresh = tokio::spawn(async move {
        let client = pool.get().await.unwrap();
        client
            .execute(
                "SELECT refresh_report_summaries($1, org_today() - 1, org_today())",
                &[&branch],
            )
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(
        !refresh.is_finished(),
        "the refresh did not wait for the writer"
    );
    tx.commit().await.unwrap();
    let done = refresh.await.unwrap();
    assert!(done.is_ok(), "the refresh failed: {done:?}");
    shop.app.assert_invariants().await;
    let client = shop.app.pool.get().await.unwrap();
    let differences: Vec<String> = client
        .query("SELECT report_summary_differences()", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(differences.is_empty(), "summaries differ: {differences:#?}");
}
