//! Applying a pushed change on its own: its effect inside a savepoint,
//! updates judged for conflicts. Runs of pushed sales are `runs`'.

use deadpool_postgres::GenericClient;
use serde_json::Value as Json;
use uuid::Uuid;

use super::answer::{AcceptedChange, Answer};
use super::ledger::{claim, rejected, rejection, rejects, store_answer, Answered};
use super::parse::{base_rev, new_sale, optional_id, required_id, Change};
use super::Pusher;
use crate::db::{Pool, Tx};
use crate::error::{Code, Error, Result};
use crate::role::Action;
use crate::sales::Sale;
use crate::sync::conflicts::{self, NewConflict, Origin};
use crate::sync::entities::{same, Entity};
use crate::sync::metrics::SYNC_CHANGES;

/// What a change did, before it is written down as the answer.
pub(super) enum Verdict {
    Accepted {
        id: String,
        icv: Option<i64>,
        invoice_number: Option<String>,
    },
    Conflict(NewConflict),
    /// An entity or op this server does not apply.
    Unsupported(String),
}

/// Applies one change in its own transaction and answers `(accepted,
/// entry)`. A client mistake is a rejection; a fault of ours or of the
/// database stops the batch (the device retries; what was applied replays).
pub(super) async fn apply_change(pool: &Pool, pusher: &Pusher, change: Change) -> Result<Answer> {
    let client = pool.get().await?;
    let mut tx = Tx::begin(&client);
    let answered = apply_in(&mut tx, pusher, &change).await?;
    tx.commit().await?;
    Ok(answered.report(&change))
}

/// One change inside `tx`: claims its key (or reads back its answer), runs
/// the effect in a savepoint, which a rejection rolls back alone, and
/// stores the answer. Any other error is a fault: the caller drops `tx`.
pub(super) async fn apply_in(
    tx: &mut Tx<'_>,
    pusher: &Pusher,
    change: &Change,
) -> Result<Answered> {
    let cmid = change.client_mutation_id.as_str();
    if let Some(stored) = claim(&**tx, pusher.device_id, cmid, change).await? {
        return Ok(stored);
    }
    let verdict = {
        let sp = tx.savepoint("change");
        match effect(&*sp, pusher, cmid, change).await {
            Ok(v) => {
                sp.commit().await?;
                Ok(v)
            }
            Err(e) if rejects(&e) => {
                sp.rollback().await?;
                Err(e)
            }
            Err(e) => return Err(e),
        }
    };
    let (answer, entity_id) = match verdict {
        Ok(Verdict::Accepted {
            id,
            icv,
            invoice_number,
        }) => {
            let answer = AcceptedChange {
                client_mutation_id: cmid.to_owned(),
                icv,
                id: id.clone(),
                invoice_number,
            };
            (Answer::Accepted(answer), Some(id))
        }
        Ok(Verdict::Conflict(c)) => {
            let entity_id = c.entity_id.to_string();
            let origin = Origin {
                org_id: pusher.org_id,
                branch_id: pusher.branch_id,
                device_id: pusher.device_id,
                user_id: pusher.user_id,
                client_mutation_id: cmid,
            };
            let id = conflicts::insert(&**tx, &origin, c).await?;
            let mut answer = rejected(cmid, Code::Conflict.as_str(), &id.to_string());
            answer.conflict_id = Some(id.to_string());
            (Answer::Rejected(answer), Some(entity_id))
        }
        Ok(Verdict::Unsupported(why)) => (
            Answer::Rejected(rejected(cmid, Code::Unsupported.as_str(), &why)),
            None,
        ),
        Err(e) => (Answer::Rejected(rejection(cmid, &e)), None),
    };
    store_answer(&**tx, pusher.device_id, cmid, &answer, entity_id).await?;
    Ok(Answered {
        answer,
        replay: None,
    })
}

pub(super) fn count(entity: &str, outcome: &str) {
    let entity = match entity {
        "sale" | "sale_return" | "customer" | "supplier" | "medicine" => entity,
        _ => "other",
    };
    SYNC_CHANGES.with_label_values(&[entity, outcome]).inc();
}

/// The change's effect, inside its savepoint.
pub(super) async fn effect<C: GenericClient + Sync>(
    tx: &C,
    pusher: &Pusher,
    cmid: &str,
    change: &Change,
) -> Result<Verdict> {
    let entity = Entity::parse(&change.entity);
    let supported = match change.entity.as_str() {
        "sale" | "sale_return" => change.op == "create",
        _ => entity.is_some() && ["create", "update", "delete"].contains(&change.op.as_str()),
    };
    if !supported {
        return Ok(Verdict::Unsupported(format!(
            "`{}`/`{}` is not a change this server applies.",
            change.entity, change.op
        )));
    }
    // The REST rule of each entity; a pushed sale is a sale, a pushed
    // return a return.
    let action = match (entity, change.entity.as_str()) {
        (Some(e), _) => e.action(),
        (None, "sale_return") => Action::ReturnSale,
        (None, _) => Action::Sell,
    };
    if !action.permits(pusher.role) {
        return Err(Error::forbidden(format!(
            "Your role ({}) may not write {} records.",
            pusher.role, change.entity
        )));
    }
    let Some(entity) = entity else {
        if change.entity == "sale_return" {
            let note = crate::returns::push_create(
                tx,
                pusher.device_id,
                pusher.branch_id,
                pusher.user_id,
                pusher.role,
                cmid,
                &change.payload,
            )
            .await?;
            return Ok(Verdict::Accepted {
                id: note.id.to_string(),
                icv: note.cn_seq,
                invoice_number: note.credit_note_number,
            });
        }
        return sale(tx, pusher, cmid, &change.payload).await;
    };
    let payload = &change.payload;
    match change.op.as_str() {
        "create" => {
            let id = optional_id(payload)?;
            let id = entity.create(tx, payload, id, pusher.role).await?;
            Ok(accepted_id(id))
        }
        "update" => update(tx, pusher, entity, payload).await,
        _ => {
            let id = required_id(payload)?;
            entity.delete(tx, id).await?;
            Ok(accepted_id(id))
        }
    }
}

pub(super) fn accepted_id(id: Uuid) -> Verdict {
    Verdict::Accepted {
        id: id.to_string(),
        icv: None,
        invoice_number: None,
    }
}

/// A pushed sale: the `POST /sales` body, made on the device's branch, with
/// the device and mutation id stored on the sale (a unique key backs the
/// one-effect rule) and an optional `occurred_at` for a sale made offline.
pub(super) async fn sale<C: GenericClient + Sync>(
    tx: &C,
    pusher: &Pusher,
    cmid: &str,
    payload: &Json,
) -> Result<Verdict> {
    let made = crate::sales::create(tx, &new_sale(pusher, cmid, payload)?).await?;
    Ok(sold(&made))
}

pub(super) fn sold(made: &Sale) -> Verdict {
    Verdict::Accepted {
        id: made.id.to_string(),
        icv: Some(made.icv),
        invoice_number: Some(made.invoice_number.clone()),
    }
}

/// A pushed update. With a `base_rev` behind the server row, only the
/// fields the till changed since its base are written, and if one of them
/// would overwrite a server value the till never saw, nothing is written: a
/// conflict is recorded instead.
pub(super) async fn update<C: GenericClient + Sync>(
    tx: &C,
    pusher: &Pusher,
    entity: Entity,
    payload: &Json,
) -> Result<Verdict> {
    let id = required_id(payload)?;
    let base_rev = base_rev(payload)?;
    let sent = entity.changed_fields(payload);
    if sent.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let (server, server_rev) = entity
        .lock_current(tx, id)
        .await?
        .ok_or_else(|| entity.not_found())?;
    let actor = (pusher.user_id, pusher.role);
    let Some(base_rev) = base_rev.filter(|b| *b < server_rev) else {
        entity.update(tx, id, sent, actor).await?;
        return Ok(accepted_id(id));
    };
    let base = entity.version_at(tx, id, base_rev).await?;
    let changed: serde_json::Map<String, Json> = sent
        .iter()
        .filter(|(f, v)| match &base {
            Some(b) => !same(v, b.get(f.as_str()).unwrap_or(&Json::Null)),
            None => true,
        })
        .map(|(f, v)| (f.clone(), v.clone()))
        .collect();
    let clash = changed
        .iter()
        .any(|(f, v)| !same(v, server.get(f.as_str()).unwrap_or(&Json::Null)));
    if clash {
        // Kept only if it could be applied: values the entity would refuse
        // (too long, wrong shape) or a role may not write are answered now,
        // not stored for head office.
        entity
            .check_update(tx, id, &sent, &changed, pusher.role)
            .await?;
        let mut client_version = base.clone().unwrap_or_else(|| server.clone());
        if let Some(obj) = client_version.as_object_mut() {
            obj.extend(sent);
        }
        return Ok(Verdict::Conflict(NewConflict {
            entity,
            entity_id: id,
            base_rev,
            server_rev,
            server_version: server,
            client_version,
            base_version: base,
            payload: entity.stored_payload(payload),
        }));
    }
    if !changed.is_empty() {
        entity.update(tx, id, changed, actor).await?;
    }
    Ok(accepted_id(id))
}
