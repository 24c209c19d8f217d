//! Bootstrap data: the first admin (`create-admin`) and the demo chain
//! (`seed-demo`).
//!
//! One file over 600 lines on purpose: it is the demo chain's data, read
//! top to bottom as one story (branches, users, catalogue, stock, a month
//! of sales), and every write goes through the same domain functions as
//! the API.

use deadpool_postgres::{GenericClient, Pool};
use domain::tables::Table;
use sea_query::{Expr, ExprTrait, Query};
use uuid::Uuid;

use crate::auth::passwords;
use domain::branches::{self, BranchFields};
use domain::users::{self, NewUser};
use domain::{db, Result, Role};

/// Password of every demo user (documented in the README).
pub const DEMO_PASSWORD: &str = "Demo-Pass-2026";
/// The demo chain's branches: code, name, city.
pub const DEMO_BRANCHES: [(&str, &str, &str); 3] = [
    ("HQ", "Head Office Pharmacy", "Kampala"),
    ("KLA", "Kampala Road Pharmacy", "Kampala"),
    ("EBB", "Entebbe Pharmacy", "Entebbe"),
];

/// The organisation, created on first use.
pub async fn ensure_organisation<C: GenericClient + Sync>(c: &C, name: &str) -> Result<Uuid> {
    let q = Query::select()
        .column("id")
        .from(Table::Organisations)
        .limit(1)
        .to_owned();
    if let Some(row) = db::fetch_opt(c, &q).await? {
        return Ok(row.get(0));
    }
    let id = Uuid::now_v7();
    let insert = Query::insert()
        .into_table(Table::Organisations)
        .columns(["id", "name"])
        .values_panic([id.into(), name.into()])
        .to_owned();
    db::execute(c, &insert).await?;
    Ok(id)
}

async fn branch_by_code<C: GenericClient + Sync>(c: &C, code: &str) -> Result<Option<Uuid>> {
    let q = Query::select()
        .column("id")
        .from(Table::Branches)
        .and_where(Expr::col("code").eq(code))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)))
}

async fn ensure_branch<C: GenericClient + Sync>(
    c: &C,
    org: Uuid,
    code: &str,
    name: &str,
    city: &str,
) -> Result<Uuid> {
    if let Some(id) = branch_by_code(c, code).await? {
        return Ok(id);
    }
    let fields = BranchFields {
        code: Some(code.to_owned()),
        name: Some(name.to_owned()),
        city: Some(city.to_owned()),
        currency_code: Some("UGX".to_owned()),
        ..Default::default()
    };
    Ok(branches::insert(c, org, fields).await?.id)
}

/// Outcome of `create-admin`.
pub enum AdminOutcome {
    Created(Uuid),
    AlreadyExists(Uuid),
}

/// Creates an admin (and the organisation and head-office branch when there
/// are none). Idempotent for an existing email.
pub async fn create_admin(
    pool: &Pool,
    email: &str,
    password: &str,
    name: &str,
) -> Result<AdminOutcome> {
    passwords::validate_new(password)?;
    let mut client = pool.get().await?;
    if let Some(c) = users::credentials(&client, email).await? {
        return Ok(AdminOutcome::AlreadyExists(c.user.id));
    }
    let hash = passwords::hash_blocking(password.to_owned()).await?;
    let tx = client.transaction().await?;
    let org = ensure_organisation(&tx, "Pharmacy").await?;
    let any_branch = Query::select()
        .column("id")
        .from(Table::Branches)
        .and_where(Expr::col("is_deleted").eq(false))
        .limit(1)
        .to_owned();
    let branch = match db::fetch_opt(&tx, &any_branch).await? {
        Some(r) => branch_by_code(&tx, "HQ").await?.unwrap_or(r.get(0)),
        None => ensure_branch(&tx, org, "HQ", "Head Office", "").await?,
    };
    let user = users::insert(
        &tx,
        NewUser {
            org_id: org,
            branch_id: branch,
            email: email.trim().to_lowercase(),
            password_hash: hash,
            full_name: name.to_owned(),
            phone: String::new(),
            role: Role::Admin,
        },
    )
    .await?;
    domain::db::commit(tx).await?;
    Ok(AdminOutcome::Created(user.id))
}

/// A demo login: (email, role, branch code).
pub fn demo_logins() -> Vec<(String, Role, &'static str)> {
    DEMO_BRANCHES
        .iter()
        .flat_map(|(code, _, _)| {
            Role::ALL
                .into_iter()
                .map(move |role| (demo_email(role, code), role, *code))
        })
        .collect()
}

pub fn demo_email(role: Role, branch_code: &str) -> String {
    format!(
        "{}.{}@demo.pharmacy",
        role.as_str().replace('_', "-"),
        branch_code.to_lowercase()
    )
}

/// Seeds the demo chain. Returns false when it was already there.
pub async fn seed_demo(pool: &Pool) -> Result<bool> {
    let mut client = pool.get().await?;
    if users::credentials(&client, &demo_email(Role::Admin, "HQ"))
        .await?
        .is_some()
    {
        return Ok(false);
    }
    let hash = passwords::hash_blocking(DEMO_PASSWORD.to_owned()).await?;
    let tx = client.transaction().await?;
    let org = ensure_organisation(&tx, "Demo Pharmacy Chain").await?;
    let mut sellers = Vec::new();
    for (code, name, city) in DEMO_BRANCHES {
        let branch = ensure_branch(&tx, org, code, name, city).await?;
        for role in Role::ALL {
            let email = demo_email(role, code);
            if users::credentials(&tx, &email).await?.is_some() {
                continue;
            }
            let title = role.as_str().replace('_', " ");
            let user = users::insert(
                &tx,
                NewUser {
                    org_id: org,
                    branch_id: branch,
                    email,
                    password_hash: hash.clone(),
                    full_name: format!("Demo {title} ({code})"),
                    phone: String::new(),
                    role,
                },
            )
            .await?;
            if role == Role::Pharmacist {
                sellers.push((branch, user.id));
            }
        }
    }
    seed_catalogue_and_sales(&tx, &sellers).await?;
    domain::db::commit(tx).await?;
    seed_supplier_invoices(pool, sellers[0]).await?;
    Ok(true)
}

/// Whether any user exists (first start of the dev service seeds the demo).
pub async fn has_users(pool: &Pool) -> Result<bool> {
    let client = pool.get().await?;
    let q = Query::select()
        .expr(Expr::cust("1"))
        .from(Table::Users)
        .limit(1)
        .to_owned();
    Ok(db::fetch_opt(&client, &q).await?.is_some())
}

/// A demo medicine: name, generic name, category, form, strength, price,
/// flags (prescription, controlled, cold chain), VAT category.
type DemoMedicine = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    i64,
    (bool, bool, bool),
    &'static str,
);

const DEMO_MEDICINES: [DemoMedicine; 24] = [
    (
        "Panadol 500mg",
        "paracetamol",
        "Analgesics",
        "tablet",
        "500mg",
        500,
        (false, false, false),
        "zero",
    ),
    (
        "Brufen 400mg",
        "ibuprofen",
        "Analgesics",
        "tablet",
        "400mg",
        800,
        (false, false, false),
        "zero",
    ),
    (
        "Diclofenac 50mg",
        "diclofenac",
        "Analgesics",
        "tablet",
        "50mg",
        600,
        (false, false, false),
        "zero",
    ),
    (
        "Amoxil 500mg",
        "amoxicillin",
        "Antibiotics",
        "capsule",
        "500mg",
        1500,
        (true, false, false),
        "zero",
    ),
    (
        "Augmentin 625mg",
        "amoxicillin/clavulanate",
        "Antibiotics",
        "tablet",
        "625mg",
        4500,
        (true, false, false),
        "zero",
    ),
    (
        "Ciprofloxacin 500mg",
        "ciprofloxacin",
        "Antibiotics",
        "tablet",
        "500mg",
        1200,
        (true, false, false),
        "zero",
    ),
    (
        "Coartem 80/480",
        "artemether/lumefantrine",
        "Antimalarials",
        "tablet",
        "80/480mg",
        12000,
        (false, false, false),
        "zero",
    ),
    (
        "Duo-Cotecxin",
        "dihydroartemisinin/piperaquine",
        "Antimalarials",
        "tablet",
        "40/320mg",
        9000,
        (false, false, false),
        "zero",
    ),
    (
        "Metformin 500mg",
        "metformin",
        "Diabetes",
        "tablet",
        "500mg",
        300,
        (true, false, false),
        "zero",
    ),
    (
        "Actrapid 100IU/ml",
        "human insulin",
        "Diabetes",
        "vial",
        "100IU/ml",
        28000,
        (true, false, true),
        "zero",
    ),
    (
        "Amlodipine 5mg",
        "amlodipine",
        "Cardiovascular",
        "tablet",
        "5mg",
        400,
        (true, false, false),
        "zero",
    ),
    (
        "Losartan 50mg",
        "losartan",
        "Cardiovascular",
        "tablet",
        "50mg",
        700,
        (true, false, false),
        "zero",
    ),
    (
        "Morphine 10mg/ml",
        "morphine sulphate",
        "Controlled",
        "ampoule",
        "10mg/ml",
        6000,
        (true, true, false),
        "zero",
    ),
    (
        "Pethidine 50mg/ml",
        "pethidine",
        "Controlled",
        "ampoule",
        "50mg/ml",
        7000,
        (true, true, false),
        "zero",
    ),
    (
        "Diazepam 5mg",
        "diazepam",
        "Controlled",
        "tablet",
        "5mg",
        200,
        (true, true, false),
        "zero",
    ),
    (
        "ORS sachet",
        "oral rehydration salts",
        "Gastro",
        "sachet",
        "20.5g",
        500,
        (false, false, false),
        "zero",
    ),
    (
        "Omeprazole 20mg",
        "omeprazole",
        "Gastro",
        "capsule",
        "20mg",
        600,
        (false, false, false),
        "zero",
    ),
    (
        "Cetirizine 10mg",
        "cetirizine",
        "Allergy",
        "tablet",
        "10mg",
        300,
        (false, false, false),
        "zero",
    ),
    (
        "Vitamin C 1000mg",
        "ascorbic acid",
        "Supplements",
        "effervescent",
        "1000mg",
        8000,
        (false, false, false),
        "standard",
    ),
    (
        "Multivitamin syrup",
        "multivitamin",
        "Supplements",
        "syrup",
        "200ml",
        9500,
        (false, false, false),
        "standard",
    ),
    (
        "Hand sanitiser 500ml",
        "ethanol 70%",
        "Personal care",
        "gel",
        "500ml",
        12000,
        (false, false, false),
        "standard",
    ),
    (
        "Sunscreen SPF50",
        "",
        "Personal care",
        "cream",
        "100ml",
        35000,
        (false, false, false),
        "standard",
    ),
    (
        "Hepatitis B vaccine",
        "HBsAg vaccine",
        "Vaccines",
        "vial",
        "20mcg/ml",
        25000,
        (true, false, true),
        "exempt",
    ),
    (
        "Condoms (3 pack)",
        "",
        "Family planning",
        "pack",
        "3",
        1000,
        (false, false, false),
        "exempt",
    ),
];

const DEMO_SUPPLIERS: [(&str, &str, i32); 3] = [
    ("Quality Chemicals Ltd", "1000012345", 5),
    ("Abacus Pharma (A) Ltd", "1000098765", 7),
    ("National Medical Stores", "1000055555", 14),
];

/// Catalogue, suppliers, customers, stock with spread expiry dates and a
/// month of sales on every demo branch.
async fn seed_catalogue_and_sales<C: GenericClient + Sync>(
    tx: &C,
    branches: &[(Uuid, Uuid)],
) -> Result<()> {
    use chrono::{Duration, Utc};
    use domain::medicines::{self, Fields, MedicineColumn as Col};
    use domain::sales::{self, Line, NewSale};
    use domain::stock::{self, Kind, NewBatch};
    use rand::{Rng, SeedableRng};
    use rust_decimal::Decimal;

    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    let mut suppliers = Vec::new();
    for (name, tin, lead) in DEMO_SUPPLIERS {
        use domain::suppliers::SupplierColumn as Col;
        let mut fields = domain::suppliers::Fields::new();
        fields.set(Col::Name, name);
        fields.set(Col::TaxNumber, tin);
        fields.set(Col::LeadTimeDays, lead);
        suppliers.push((domain::suppliers::insert(tx, fields).await?.id, name));
    }
    let mut customers = Vec::new();
    for (i, (name, phone, limit)) in [
        ("Akello Grace", "+256772000111", 200_000),
        ("Mukasa John", "+256701000222", 500_000),
        ("Nakato Clinic", "+256414000333", 2_000_000),
    ]
    .into_iter()
    .enumerate()
    {
        use domain::customers::CustomerColumn as Col;
        let mut fields = domain::customers::Fields::new();
        fields.set(Col::Name, name);
        fields.set(Col::Phone, phone);
        fields.set(Col::NationalId, format!("CM{:09}", 100 + i));
        fields.set(Col::IsCreditAllowed, true);
        fields.set(Col::CreditLimit, Decimal::from(limit));
        customers.push(domain::customers::insert(tx, fields).await?.id);
    }
    let today = Utc::now().date_naive();
    let mut catalogue = Vec::new();
    for (n, (name, generic, category, form, strength, price, flags, vat)) in
        DEMO_MEDICINES.into_iter().enumerate()
    {
        let mut f = Fields::new();
        f.set(Col::Name, name);
        f.set(Col::GenericName, generic);
        f.set(
            Col::Category,
            medicines::ensure_category(tx, category).await?,
        );
        f.set(Col::Form, form);
        f.set(Col::Strength, strength);
        f.set(Col::Unit, form);
        f.set(Col::Barcode, format!("6009{:09}", 1000 + n));
        f.set(Col::SellingPrice, Decimal::from(price));
        f.set(Col::MaxPublicPrice, Decimal::from(price * 6 / 5));
        f.set(Col::RequiresPrescription, flags.0);
        f.set(Col::IsControlled, flags.1);
        f.set(Col::ControlSchedule, if flags.1 { "Class A" } else { "" });
        f.set(Col::RequiresColdChain, flags.2);
        f.set(Col::VatCategory, vat);
        f.set(
            Col::RegulatorRegistrationNo,
            format!("NDA/MAL/{:05}", 300 + n),
        );
        let m = medicines::insert(tx, f).await?;
        catalogue.push((m.id, price, flags.0));
    }
    for &(branch, user) in branches {
        for (n, &(medicine, price, _)) in catalogue.iter().enumerate() {
            // Long-dated stock, plus on some lines stock that is expired or
            // expiring within 30 or 90 days, so the dashboard has something to show.
            let mut lots = vec![(today + Duration::days(400 + n as i64 * 7), 300)];
            match n % 6 {
                0 => lots.push((today - Duration::days(20), 12)),
                1 => lots.push((today + Duration::days(20), 25)),
                2 => lots.push((today + Duration::days(75), 40)),
                _ => {}
            }
            if n % 8 == 5 {
                lots = vec![(today + Duration::days(200), 4)]; // low stock
            }
            for (k, (expiry, qty)) in lots.into_iter().enumerate() {
                let (supplier_id, supplier_name) = suppliers[(n + k) % suppliers.len()];
                let batch = NewBatch {
                    medicine_id: medicine,
                    branch_id: branch,
                    supplier_id: Some(supplier_id),
                    batch_number: format!("LOT-{}-{:03}", n, k + 1),
                    expiry_date: expiry,
                    manufacturing_date: Some(expiry - Duration::days(730)),
                    quantity: qty,
                    unit_cost: Decimal::from(price * 3 / 5),
                    received_total: Decimal::from(price * 3 / 5) * Decimal::from(qty),
                    pack: None,
                    origin: "purchase",
                    notes: String::new(),
                    user_id: user,
                };
                let batch = stock::receive(tx, batch, Kind::In, None).await?;
                // Reported to the tax authority like a posted receipt.
                let increase = domain::fiscal::payload::stock_increase(
                    batch.id,
                    batch.branch_id,
                    supplier_name,
                    batch.created_at,
                    &[domain::fiscal::payload::StockLine {
                        medicine_id: batch.medicine_id,
                        quantity: batch.qty_received,
                        unit_cost: batch.unit_cost,
                    }],
                );
                domain::fiscal::outbox::enqueue(tx, &[increase]).await?;
            }
        }
        for day in (0..30).rev() {
            for _ in 0..rng.gen_range(3..8) {
                let mut lines: Vec<Line> = Vec::new();
                for _ in 0..rng.gen_range(1..4) {
                    let (medicine_id, _, rx) = catalogue[rng.gen_range(0..catalogue.len())];
                    if !rx && lines.iter().all(|l| l.medicine_id != medicine_id) {
                        lines.push(Line::loose(medicine_id, rng.gen_range(1..4), None));
                    }
                }
                if lines.is_empty() {
                    continue;
                }
                let method =
                    ["cash", "cash", "card", "mobile_money", "credit"][rng.gen_range(0..5)];
                let customer_id =
                    (method == "credit").then(|| customers[rng.gen_range(0..customers.len())]);
                let at =
                    Utc::now() - Duration::days(day) - Duration::minutes(rng.gen_range(0..600));
                let sale = NewSale {
                    branch_id: branch,
                    user_id: user,
                    // The demo sellers are pharmacists.
                    role: Role::Pharmacist,
                    lines,
                    payment_method: method.to_owned(),
                    customer_id,
                    prescription_id: None,
                    coupon_code: None,
                    device_id: None,
                    client_mutation_id: None,
                    occurred_at: Some(std::cmp::min(at, Utc::now())),
                    signer: None,
                };
                // A line that runs out of sellable stock just skips the sale.
                match sales::create(tx, &sale).await {
                    Ok(_) | Err(domain::Error::Validation { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    // Each credit customer has paid part of what they owe.
    let (branch, user) = branches[0];
    for customer_id in customers {
        let owed = domain::customers::get(tx, customer_id)
            .await?
            .map(|c| c.current_balance)
            .unwrap_or_default();
        let amount = (owed / Decimal::from(3)).round_dp(0);
        if amount > Decimal::ZERO {
            let payment = domain::customers::RecordPayment {
                customer_id,
                branch_id: branch,
                amount,
                notes: "Part payment".to_owned(),
                user_id: user,
                client_mutation_id: None,
                signer: None,
            };
            domain::customers::pay(tx, payment).await?;
        }
    }
    Ok(())
}

/// Supplier invoices at the first branch in every status: unpaid, partly
/// paid and paid, paid through the same command as the API.
async fn seed_supplier_invoices(pool: &Pool, (branch_id, user_id): (Uuid, Uuid)) -> Result<()> {
    use domain::suppliers::invoices::{self, NewInvoice, PaySupplierInvoice};
    use domain::Command;
    use rust_decimal::Decimal;

    let client = pool.get().await?;
    let q = Query::select()
        .column("id")
        .from(Table::Suppliers)
        .order_by("name", sea_query::Order::Asc)
        .to_owned();
    let suppliers: Vec<Uuid> = db::fetch_all(&client, &q)
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for (n, supplier_id) in suppliers.into_iter().enumerate() {
        for (k, paid_share) in [0, 40, 100].into_iter().enumerate() {
            let total = Decimal::from(500_000 + 250_000 * (n as i64 + k as i64));
            let invoice = invoices::insert(
                &client,
                NewInvoice {
                    supplier_id,
                    branch_id,
                    invoice_no: format!("INV-{}{:03}", n + 1, k + 1),
                    total_amount: total,
                    due_date: Some(chrono::Utc::now().date_naive() + chrono::Duration::days(30)),
                    notes: String::new(),
                    created_by: user_id,
                },
            )
            .await?;
            let Some(invoice) = invoice else { continue };
            let amount = total * Decimal::from(paid_share) / Decimal::ONE_HUNDRED;
            if amount > Decimal::ZERO {
                PaySupplierInvoice {
                    invoice_id: invoice.id,
                    amount,
                    method: "bank_transfer".to_owned(),
                    reference: format!("TRF-{}{:03}", n + 1, k + 1),
                    user_id,
                }
                .run(pool.clone())
                .await?;
            }
        }
    }
    Ok(())
}
