//! The benchmark's data, made through the API the way an organisation would
//! set itself up: branches, a cashier per branch, devices, a supplier,
//! medicines with deep stock, credit customers who owe money, open cash
//! sessions, and (for `snapshot`) a large catalogue.

use anyhow::{Context, Result};
use futures_util::{stream, StreamExt, TryStreamExt};
use serde::Serialize;
use serde_json::json;

use crate::api::{id, Api};

pub const PASSWORD: &str = "Bench-Pass-2026";
pub const ADMIN_EMAIL: &str = "admin@bench.pharmacy";

/// How much to make.
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    pub branches: usize,
    pub customers: usize,
    /// Medicines stocked at every branch (the ones sales pick from).
    pub stocked: usize,
    pub devices: usize,
    pub device_branches: usize,
    /// Units received per branch and stocked medicine.
    pub units: i64,
    /// Medicines in the catalogue in all (for `snapshot`); 0 = only the stocked.
    pub catalogue: usize,
    /// Branches where nothing is sold (`fleet` parks its idle tills there).
    pub quiet: usize,
}

#[derive(Debug, Clone)]
pub struct Branch {
    pub id: String,
    pub token: String,
}

#[derive(Debug, Clone)]
pub struct World {
    pub admin: String,
    pub branches: Vec<Branch>,
    pub medicines: Vec<String>,
    /// Customer ids; customer `i` bought on credit at branch `i % branches`.
    pub customers: Vec<String>,
    /// (device id, branch index).
    pub devices: Vec<(String, usize)>,
    pub catalogue: usize,
    /// Branches nobody sells at, with a cashier each (`fleet`).
    pub quiet: Vec<Branch>,
}

const PARALLEL: usize = 8;

pub async fn prepare(api: &Api, admin: String, sizes: &Sizes) -> Result<World> {
    let a = admin.as_str();
    // Branches and their cashiers; then the quiet ones.
    let branches = open_branches(
        api,
        a,
        (0..sizes.branches).map(|i| format!("B{:02}", i + 1)),
    )
    .await
    .context("branches, cashiers and cash sessions")?;
    let quiet = open_branches(api, a, (0..sizes.quiet).map(|i| format!("Q{:02}", i + 1)))
        .await
        .context("quiet branches")?;

    let supplier = id(&api
        .post("/suppliers", a, json!({"name": "Bench Wholesale Ltd"}))
        .await?)?;

    // Stocked medicines: the first is the expensive one credit balances come from.
    let medicines: Vec<String> = stream::iter(0..sizes.stocked)
        .map(|i| async move {
            let price = if i == 0 { 100_000 } else { 500 + 250 * i };
            let m = api
                .post(
                    "/medicines",
                    a,
                    json!({"name": format!("Bench medicine {i:03}"), "selling_price": price,
                           "form": "tablet", "unit": "box"}),
                )
                .await?;
            id(&m)
        })
        .buffered(PARALLEL)
        .try_collect()
        .await
        .context("stocked medicines")?;

    let lots: Vec<(usize, usize)> = (0..branches.len())
        .flat_map(|b| (0..medicines.len()).map(move |m| (b, m)))
        .collect();
    stream::iter(lots)
        .map(|(b, m)| {
            let (branches, medicines, supplier) = (&branches, &medicines, &supplier);
            async move {
                api.post(
                    "/purchases",
                    a,
                    json!({"supplier_id": supplier, "medicine_id": medicines[m],
                           "branch_id": branches[b].id, "batch_number": format!("LOT-{b}-{m}"),
                           "expiry_date": "2031-12-31", "quantity": sizes.units,
                           "unit_cost": "100.00"}),
                )
                .await
            }
        })
        .buffered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await
        .context("purchases")?;

    // Credit customers, each owing 100,000 from one credit sale.
    let customers: Vec<String> = stream::iter(0..sizes.customers)
        .map(|i| {
            let (branches, credit_med) = (&branches, &medicines[0]);
            async move {
                let c = api
                    .post(
                        "/customers",
                        a,
                        json!({"name": format!("Bench customer {i:04}"),
                               "phone": format!("+25670{i:07}"),
                               "credit_limit": 10_000_000, "is_credit_allowed": true}),
                    )
                    .await?;
                let customer = id(&c)?;
                let branch = &branches[i % branches.len()];
                api.post(
                    "/sales",
                    &branch.token,
                    json!({"items": [{"medicine_id": credit_med, "quantity": 1}],
                           "payment_method": "credit", "customer_id": customer}),
                )
                .await?;
                anyhow::Ok(customer)
            }
        })
        .buffered(PARALLEL)
        .try_collect()
        .await
        .context("credit customers")?;

    let devices: Vec<(String, usize)> = stream::iter(0..sizes.devices)
        .map(|i| {
            let branches = &branches;
            async move {
                let b = i % sizes.device_branches.clamp(1, branches.len());
                let d = api
                    .post(
                        "/devices",
                        a,
                        json!({"name": format!("Till {i:02}"), "branch_id": branches[b].id}),
                    )
                    .await?;
                anyhow::Ok((id(&d)?, b))
            }
        })
        .buffered(PARALLEL)
        .try_collect()
        .await
        .context("devices")?;

    let mut world = World {
        admin,
        branches,
        medicines,
        customers,
        devices,
        catalogue: 0,
        quiet,
    };
    world.catalogue = world.medicines.len();
    if sizes.catalogue > world.catalogue {
        grow_catalogue(api, &mut world, sizes.catalogue).await?;
    }
    Ok(world)
}

/// A branch per code, each with a cashier signed in and a cash session open.
async fn open_branches(
    api: &Api,
    admin: &str,
    codes: impl Iterator<Item = String>,
) -> Result<Vec<Branch>> {
    stream::iter(codes)
        .map(|code| async move {
            let b = api
                .post(
                    "/branches",
                    admin,
                    json!({"code": code, "name": format!("Bench branch {code}"), "city": "Kampala"}),
                )
                .await?;
            let branch_id = id(&b)?;
            let email = format!("cashier.{}@bench.pharmacy", code.to_lowercase());
            api.post(
                "/users",
                admin,
                json!({"email": email, "password": PASSWORD, "full_name": format!("Cashier {code}"),
                       "role": "cashier", "branch_id": branch_id}),
            )
            .await?;
            let token = api.login(&email, PASSWORD).await?;
            api.post("/sessions/open", &token, json!({"opening_float": 50000}))
                .await?;
            anyhow::Ok(Branch {
                id: branch_id,
                token,
            })
        })
        .buffered(4)
        .try_collect()
        .await
}

/// Adds unstocked medicines until the catalogue holds `target`.
pub async fn grow_catalogue(api: &Api, world: &mut World, target: usize) -> Result<()> {
    let a = world.admin.as_str();
    let from = world.catalogue;
    let categories = [
        "analgesics",
        "antibiotics",
        "antimalarials",
        "vitamins",
        "antacids",
    ];
    stream::iter(from..target)
        .map(|i| async move {
            api.post(
                "/medicines",
                a,
                json!({"name": format!("Catalogue item {i:05}"),
                       "generic_name": format!("Generic {i:05}"),
                       "barcode": format!("62{i:011}"),
                       "category": categories[i % categories.len()],
                       "form": "tablet", "strength": "500 mg", "unit": "box",
                       "selling_price": 1000 + (i % 50) * 100}),
            )
            .await
        })
        .buffered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await
        .context("catalogue")?;
    world.catalogue = target;
    Ok(())
}
