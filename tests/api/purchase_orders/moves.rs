//! The moves of an order and their refusals: the states, self-approval,
//! the roles and the branch, and two decisions at once.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{refused, shop, text};
use crate::common::Role;

#[tokio::test]
async fn an_order_goes_from_draft_to_sent_through_a_manager() {
    let s = shop().await;
    let order = s.create(&s.buyer, s.order()).await;
    // Nothing but submit (or cancel) applies to a draft.
    for step in ["approve", "reject", "send", "close"] {
        let (status, body) = s.step(&s.manager, &order, step).await;
        refused(status, &body, StatusCode::CONFLICT, None);
        assert!(text(&body["detail"]).contains("is draft"), "{step}: {body}");
    }
    let submitted = s.step_ok(&s.manager, &order, "submit").await;
    assert_eq!(submitted["status"], "submitted");
    assert_eq!(submitted["submitted_by"], s.manager_id.to_string());
    // Lines change only in draft.
    let path = format!("/purchase-orders/{}", text(&order["id"]));
    let (status, body) = s
        .app
        .call(Method::PUT, &path, Some(&s.buyer), Some(s.order()))
        .await;
    refused(status, &body, StatusCode::CONFLICT, None);
    assert!(text(&body["detail"]).contains("is submitted"), "{body}");
    // The submitter may not decide on its own submission.
    for step in ["approve", "reject"] {
        let (status, body) = s.step(&s.manager, &order, step).await;
        refused(status, &body, StatusCode::FORBIDDEN, None);
    }
    // An inventory manager may submit and send, never approve.
    let (status, body) = s.step(&s.buyer, &order, "approve").await;
    refused(status, &body, StatusCode::FORBIDDEN, None);
    let approved = s.step_ok(&s.second_manager, &order, "approve").await;
    assert_eq!(approved["status"], "approved");
    assert!(approved["approved_by"].is_string());
    for step in ["submit", "approve", "reject", "close"] {
        let (status, body) = s.step(&s.admin, &order, step).await;
        refused(status, &body, StatusCode::CONFLICT, None);
        assert!(
            text(&body["detail"]).contains("is approved"),
            "{step}: {body}"
        );
    }
    let sent = s.step_ok(&s.buyer, &order, "send").await;
    assert_eq!(sent["status"], "sent");
    for step in ["submit", "approve", "reject", "send", "close"] {
        let (status, body) = s.step(&s.admin, &order, step).await;
        refused(status, &body, StatusCode::CONFLICT, None);
        assert!(text(&body["detail"]).contains("is sent"), "{step}: {body}");
    }
    let audited = s
        .scalar("SELECT count(*) FROM audit_log WHERE entity_type = 'purchase_order' AND action = 'purchase_order.approve'")
        .await;
    assert_eq!(audited, 1);
}

#[tokio::test]
async fn a_rejected_order_returns_to_draft_and_can_be_changed() {
    let s = shop().await;
    let order = s.create(&s.buyer, s.order()).await;
    s.step_ok(&s.buyer, &order, "submit").await;
    let rejected = s.step_ok(&s.manager, &order, "reject").await;
    assert_eq!(rejected["status"], "draft");
    assert_eq!(rejected["submitted_by"], Value::Null);
    // Back in draft: its lines and header are replaced, its number stays.
    let path = format!("/purchase-orders/{}", text(&order["id"]));
    let other = s.app.supplier("Abacus").await;
    let body = json!({"supplier_id": other, "notes": "Fewer",
                      "lines": [{"medicine_id": s.medicines[1], "quantity": 7, "unit_cost": "2.00"}]});
    let (status, changed) = s
        .app
        .call(Method::PUT, &path, Some(&s.buyer), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["po_number"], order["po_number"]);
    assert_eq!(changed["supplier_id"], other.to_string());
    assert_eq!(changed["expected_date"], Value::Null);
    assert_eq!(changed["lines"].as_array().unwrap().len(), 1);
    assert_eq!(changed["lines"][0]["line_no"], 1);
    assert_eq!(changed["total"], "14.00");
    // A refused replace changes nothing.
    let before = s.written().await;
    let bad = json!({"supplier_id": other,
                     "lines": [{"medicine_id": Uuid::now_v7(), "quantity": 1, "unit_cost": 1}]});
    let (status, body) = s
        .app
        .call(Method::PUT, &path, Some(&s.buyer), Some(bad))
        .await;
    refused(
        status,
        &body,
        StatusCode::BAD_REQUEST,
        Some("lines[0].medicine_id"),
    );
    assert_eq!(s.written().await, before);
    let (_, again) = s.app.get(&path, &s.buyer).await;
    assert_eq!(again, changed);
    let rejections = s
        .scalar("SELECT count(*) FROM audit_log WHERE action = 'purchase_order.reject'")
        .await;
    assert_eq!(rejections, 1);
}

#[tokio::test]
async fn cancel_applies_before_the_first_receipt_and_close_after_it() {
    let s = shop().await;
    // A draft, a submitted and an approved order cancel.
    for stop in ["draft", "submitted", "approved"] {
        let order = s.create(&s.buyer, s.order()).await;
        if stop != "draft" {
            s.step_ok(&s.buyer, &order, "submit").await;
        }
        if stop == "approved" {
            s.step_ok(&s.manager, &order, "approve").await;
        }
        let cancelled = s.step_ok(&s.buyer, &order, "cancel").await;
        assert_eq!(cancelled["status"], "cancelled");
        assert_eq!(cancelled["lines"][0]["outstanding"], 0);
        for step in ["submit", "approve", "reject", "send", "close", "cancel"] {
            let (status, body) = s.step(&s.admin, &order, step).await;
            refused(status, &body, StatusCode::CONFLICT, None);
            assert!(text(&body["detail"]).contains("is cancelled"), "{body}");
        }
    }
    // A sent order cancels while nothing came; once goods came, it closes.
    let order = s.create(&s.buyer, s.order()).await;
    s.step_ok(&s.buyer, &order, "submit").await;
    s.step_ok(&s.manager, &order, "approve").await;
    s.step_ok(&s.buyer, &order, "send").await;
    let (status, body) = s.step(&s.buyer, &order, "close").await;
    refused(status, &body, StatusCode::CONFLICT, None);
    s.receive_first_line(&order, 40).await;
    let (status, body) = s.step(&s.buyer, &order, "cancel").await;
    refused(status, &body, StatusCode::CONFLICT, None);
    assert!(
        text(&body["detail"]).contains("is partially_received"),
        "{body}"
    );
    let path = format!("/purchase-orders/{}", text(&order["id"]));
    let (_, partly) = s.app.get(&path, &s.buyer).await;
    assert_eq!(partly["lines"][0]["quantity_received"], 40);
    assert_eq!(partly["lines"][0]["outstanding"], 60);
    let closed = s.step_ok(&s.manager, &order, "close").await;
    assert_eq!(closed["status"], "closed");
    assert_eq!(closed["lines"][0]["quantity_received"], 40);
    assert_eq!(closed["lines"][0]["outstanding"], 0);
    let (status, body) = s.step(&s.manager, &order, "close").await;
    refused(status, &body, StatusCode::CONFLICT, None);
    assert!(text(&body["detail"]).contains("is closed"), "{body}");
    let audited = s
        .scalar(
            "SELECT count(*) FROM audit_log WHERE entity_type = 'purchase_order'
               AND action IN ('purchase_order.cancel', 'purchase_order.close')",
        )
        .await;
    assert_eq!(audited, 4);
    s.app.assert_invariants().await;
}

#[tokio::test]
async fn the_roles_and_the_branch_decide_who_sees_and_moves_an_order() {
    let s = shop().await;
    let (_, cashier) = s.app.signed_in(s.branch, Role::Cashier).await;
    let (_, pharmacist) = s.app.signed_in(s.branch, Role::Pharmacist).await;
    let (_, auditor) = s.app.signed_in(s.branch, Role::Auditor).await;
    let before = s.written().await;
    for token in [&cashier, &pharmacist, &auditor] {
        let (status, body) = s.app.post("/purchase-orders", token, s.order()).await;
        refused(status, &body, StatusCode::FORBIDDEN, None);
    }
    assert_eq!(s.written().await, before);
    let order = s.create(&s.buyer, s.order()).await;
    let path = format!("/purchase-orders/{}", text(&order["id"]));
    for token in [&cashier, &pharmacist] {
        let (status, _) = s.app.get(&path, token).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) = s.step(token, &order, "submit").await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    // An auditor reads, never moves.
    let (status, read) = s.app.get(&path, &auditor).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    let (status, list) = s.app.get("/purchase-orders", &auditor).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 1);
    let (status, _) = s.step(&auditor, &order, "submit").await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Another branch's staff neither see nor move it, nor order for it.
    let other = s.app.branch("EBB").await;
    let (_, their_manager) = s.app.signed_in(other, Role::BranchManager).await;
    let (status, _) = s.app.get(&path, &their_manager).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.step_ok(&s.buyer, &order, "submit").await;
    let (status, _) = s.step(&their_manager, &order, "approve").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list) = s.app.get("/purchase-orders", &their_manager).await;
    assert_eq!(list["total"], 0);
    let (status, _) = s
        .app
        .get(
            &format!("/purchase-orders?branch_id={}", s.branch),
            &their_manager,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut body = s.order();
    body["branch_id"] = json!(s.branch);
    let (status, _) = s.app.post("/purchase-orders", &their_manager, body).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn two_approvals_at_once_approve_once() {
    let s = shop().await;
    let (_, third_manager) = s.app.signed_in(s.branch, Role::BranchManager).await;
    let order = s.create(&s.buyer, s.order()).await;
    s.step_ok(&s.buyer, &order, "submit").await;
    let (a, b) = tokio::join!(
        s.step(&s.second_manager, &order, "approve"),
        s.step(&third_manager, &order, "approve"),
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::CONFLICT],
        "{a:?} {b:?}"
    );
    let loser = if a.0 == StatusCode::CONFLICT {
        a.1
    } else {
        b.1
    };
    assert!(text(&loser["detail"]).contains("is approved"), "{loser}");
    let audited = s
        .scalar("SELECT count(*) FROM audit_log WHERE action = 'purchase_order.approve'")
        .await;
    assert_eq!(audited, 1);
}

#[tokio::test]
async fn a_posted_delivery_moves_a_sent_order_and_close_ends_the_rest() {
    let s = shop().await;
    let order = s.create(&s.buyer, s.order()).await;
    s.step_ok(&s.buyer, &order, "submit").await;
    s.step_ok(&s.manager, &order, "approve").await;
    s.step_ok(&s.buyer, &order, "send").await;
    s.receive_first_line(&order, 30).await;
    let order_path = format!("/purchase-orders/{}", text(&order["id"]));
    let (_, partly) = s.app.get(&order_path, &s.buyer).await;
    assert_eq!(partly["status"], "partially_received");
    assert_eq!(partly["lines"][0]["quantity_received"], 30);
    assert_eq!(partly["lines"][0]["outstanding"], 70);
    // Goods came: it no longer cancels, it closes.
    let (status, body) = s.step(&s.buyer, &order, "cancel").await;
    refused(status, &body, StatusCode::CONFLICT, None);
    let closed = s.step_ok(&s.manager, &order, "close").await;
    assert_eq!(closed["status"], "closed");
    assert_eq!(closed["lines"][0]["outstanding"], 0);
    assert_eq!(closed["lines"][1]["outstanding"], 0);
    s.app.assert_invariants().await;
}
