//! Stock counts and transfers in the console: a count posted on screen is
//! the stock the API then reads, with the variance shown before posting;
//! a transfer sent and received on screen moves the API's stock; both
//! keep the API's role and branch rules.

use reqwest::header::LOCATION;
use reqwest::StatusCode;

use crate::common::{Role, TestApp};
use crate::console::{stocked, text_of, Console};

#[tokio::test]
async fn a_count_shows_its_variance_then_posts_what_the_api_reads() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = stocked(&app, &admin, a, "Paracetamol 500mg", 1500).await;
    let id = m["id"].as_str().unwrap().to_owned();
    let (_, keeper) = Console::of(&app, a, Role::BranchManager).await;
    let (status, html, _) = keeper.get("/console/stock").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"href="/console/stock/count""#));

    let (status, html, _) = keeper
        .post(
            "/console/stock/count",
            &[("code", "paracet"), ("op", "add")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(&format!(r#"name="line-0-medicine" value="{id}""#)));
    assert!(!html.contains("post-count"));
    // A line without its count: beside the line.
    let (status, html, _) = keeper
        .post(
            "/console/stock/count",
            &[
                ("line-0-medicine", id.as_str()),
                ("line-0-counted", ""),
                ("op", "check"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "line-0-error").is_some(), "{html}");
    // Checked: the variance, and only then the post button.
    let counted = [
        ("line-0-medicine", id.as_str()),
        ("line-0-counted", "95"),
        ("line-0-notes", "shelf 3"),
    ];
    let mut check = counted.to_vec();
    check.push(("op", "check"));
    let (status, html, _) = keeper.post("/console/stock/count", &check).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert_eq!(text_of(&html, "variance-0").unwrap(), "-5");
    assert!(html.contains("post-count"));
    let (_, m) = app.get(&format!("/medicines/{id}"), &admin).await;
    assert_eq!(m["stock_quantity"], 100);
    let mut post = counted.to_vec();
    post.push(("op", "post"));
    let (status, html, headers) = keeper.post("/console/stock/count", &post).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, html, _) = keeper.get(headers[LOCATION].to_str().unwrap()).await;
    assert!(text_of(&html, "notice-ok").unwrap().contains("1 line(s)"));
    let (_, m) = app.get(&format!("/medicines/{id}"), &admin).await;
    assert_eq!(m["stock_quantity"], 95);

    // A cashier does not count, even by address.
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, _, _) = cashier.get("/console/stock/count").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = cashier.post("/console/stock/count", &post).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, html, _) = cashier.get("/console/stock").await;
    assert!(!html.contains(r#"href="/console/stock/count""#));
}

#[tokio::test]
async fn a_transfer_sent_and_received_on_screen_moves_the_apis_stock() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let c = app.branch("JIN").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = stocked(&app, &admin, a, "Amoxicillin 500mg", 1200).await;
    let id = m["id"].as_str().unwrap().to_owned();
    let (_, sender) = Console::of(&app, a, Role::InventoryManager).await;
    let b_text = b.to_string();

    // Refused beside the field: no destination, then more than there is.
    let (status, html, _) = sender
        .post(
            "/console/transfers",
            &[("medicine", "amoxi"), ("to_branch_id", ""), ("qty", "10")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "to_branch_id-error").is_some(), "{html}");
    let (status, html, _) = sender
        .post(
            "/console/transfers",
            &[
                ("medicine", "nothing-like-it"),
                ("to_branch_id", &b_text),
                ("qty", "10"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "medicine-error").is_some(), "{html}");
    let (status, html, headers) = sender
        .post(
            "/console/transfers",
            &[
                ("medicine", "amoxi"),
                ("to_branch_id", &b_text),
                ("qty", "10"),
                ("notes", "for the weekend"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    assert!(headers[LOCATION].to_str().unwrap().contains("done=sent"));
    let (_, list) = app.get("/transfers", &admin).await;
    assert_eq!(list["total"], 1, "{list}");
    let t = &list["items"][0];
    assert_eq!(t["status"], "in_transit");
    assert_eq!(t["qty"], 10);
    assert_eq!(t["medicine_id"].as_str().unwrap(), id);
    let tid = t["id"].as_str().unwrap().to_owned();

    // The sender's page has no receive button; a third branch cannot
    // reach it even by address; the destination receives it.
    let (_, html, _) = sender.get("/console/transfers").await;
    assert!(html.contains(&format!("cancel-{tid}")));
    assert!(!html.contains(&format!("receive-{tid}")));
    let (_, stranger) = Console::of(&app, c, Role::BranchManager).await;
    let (status, _, _) = stranger
        .post(&format!("/console/transfers/{tid}/receive"), &[])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, receiver) = Console::of(&app, b, Role::BranchManager).await;
    let (_, html, _) = receiver.get("/console/transfers").await;
    assert!(html.contains(&format!("receive-{tid}")), "{html}");
    let (status, html, _) = receiver
        .post(&format!("/console/transfers/{tid}/receive"), &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, t) = app.get(&format!("/transfers/{tid}"), &admin).await;
    assert_eq!(t["status"], "received");
    let (_, m) = app
        .get(&format!("/medicines/{id}?branch_id={b_text}"), &admin)
        .await;
    assert_eq!(m["stock_quantity"], 10, "{m}");
    // Received twice: a conflict in words, not a problem body.
    let (status, html, _) = receiver
        .post(&format!("/console/transfers/{tid}/receive"), &[])
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(text_of(&html, "page-error").is_some(), "{html}");

    // A cashier reads no transfers.
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, _, _) = cashier.get("/console/transfers").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
