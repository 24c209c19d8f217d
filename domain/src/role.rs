//! The roles named by the interface, and the role policy: one table of the
//! actions a caller may take and the roles allowed to take each. Handlers
//! (`Caller::require`), sync push's per-entity rules and the domain rules
//! (a price override, giving credit) all ask this table; no other file lists
//! roles. docs/roles.md's role matrix is rendered from it
//! (`Action::markdown_table`), and a test keeps the two equal; the
//! console's labels are `Role::label`, and a test keeps the database's
//! CHECK on `users.role` equal to `Role::ALL`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Admin,
    BranchManager,
    InventoryManager,
    Pharmacist,
    Cashier,
    Auditor,
}

impl Role {
    pub const ALL: [Role; 6] = [
        Role::Admin,
        Role::BranchManager,
        Role::InventoryManager,
        Role::Pharmacist,
        Role::Cashier,
        Role::Auditor,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::BranchManager => "branch_manager",
            Role::InventoryManager => "inventory_manager",
            Role::Pharmacist => "pharmacist",
            Role::Cashier => "cashier",
            Role::Auditor => "auditor",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The role as people read it (the console's pages and menus).
    pub fn label(self) -> &'static str {
        match self {
            Role::Admin => "Admin",
            Role::BranchManager => "Branch manager",
            Role::InventoryManager => "Inventory manager",
            Role::Pharmacist => "Pharmacist",
            Role::Cashier => "Cashier",
            Role::Auditor => "Auditor",
        }
    }

    /// The column heading of the role matrix (docs/roles.md's legend).
    pub fn abbreviation(self) -> &'static str {
        match self {
            Role::Admin => "A",
            Role::BranchManager => "BM",
            Role::InventoryManager => "IM",
            Role::Pharmacist => "P",
            Role::Cashier => "C",
            Role::Auditor => "AU",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Something only some roles may do. Whatever is not an action here (reads
/// of the catalogue, sales, customers, the front desk's will-call and
/// approval requests, one's own account) is open to every signed-in user,
/// within its branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Sell,
    OverridePrice,
    ReturnSale,
    IssueCreditNote,
    OpenCloseCashSession,
    WriteCustomers,
    TakeCustomerPayment,
    GiveCredit,
    WritePrescriptions,
    DecideApprovals,
    WriteCatalogue,
    ManagePacks,
    WriteSuppliers,
    ReceivePurchases,
    ReceiveGoods,
    ReadGoodsReceived,
    AllowOverReceipt,
    AcceptShortDated,
    QuarantineBatches,
    ReadReorderSuggestions,
    ManageSupplierInvoices,
    ReleaseSupplierInvoices,
    ManagePurchaseOrders,
    ApprovePurchaseOrders,
    ReadPurchaseOrders,
    SubmitStockCount,
    WriteOffStock,
    ReturnToSupplier,
    ReadSupplierReturns,
    ManageTransfers,
    ReadTransfers,
    WriteCoupons,
    ReadReports,
    ReadStockValue,
    VerifyInvoiceChain,
    ReadAuditLog,
    ReadFiscalDocuments,
    RetryFiscalDocuments,
    ManageUsers,
    ManageAdminUsers,
    ManageDevices,
    Push,
    ResolveConflicts,
    ManageBranches,
    WorkOnAnyBranch,
    ManagePrinting,
    WriteSettings,
    ManageCurrencyRates,
    OperateActors,
}

use Role::{
    Admin as A, Auditor as AU, BranchManager as BM, Cashier as C, InventoryManager as IM,
    Pharmacist as P,
};

impl Action {
    /// Every action, in the order of docs/roles.md's role matrix.
    pub const ALL: [Action; 49] = [
        Action::Sell,
        Action::OverridePrice,
        Action::ReturnSale,
        Action::IssueCreditNote,
        Action::OpenCloseCashSession,
        Action::WriteCustomers,
        Action::TakeCustomerPayment,
        Action::GiveCredit,
        Action::WritePrescriptions,
        Action::DecideApprovals,
        Action::WriteCatalogue,
        Action::ManagePacks,
        Action::WriteSuppliers,
        Action::ReceivePurchases,
        Action::ReceiveGoods,
        Action::ReadGoodsReceived,
        Action::AllowOverReceipt,
        Action::AcceptShortDated,
        Action::QuarantineBatches,
        Action::ReadReorderSuggestions,
        Action::ManageSupplierInvoices,
        Action::ReleaseSupplierInvoices,
        Action::ManagePurchaseOrders,
        Action::ApprovePurchaseOrders,
        Action::ReadPurchaseOrders,
        Action::SubmitStockCount,
        Action::WriteOffStock,
        Action::ReturnToSupplier,
        Action::ReadSupplierReturns,
        Action::ManageTransfers,
        Action::ReadTransfers,
        Action::WriteCoupons,
        Action::ReadReports,
        Action::ReadStockValue,
        Action::VerifyInvoiceChain,
        Action::ReadAuditLog,
        Action::ReadFiscalDocuments,
        Action::RetryFiscalDocuments,
        Action::ManageUsers,
        Action::ManageAdminUsers,
        Action::ManageDevices,
        Action::Push,
        Action::ResolveConflicts,
        Action::ManageBranches,
        Action::WorkOnAnyBranch,
        Action::ManagePrinting,
        Action::WriteSettings,
        Action::ManageCurrencyRates,
        Action::OperateActors,
    ];

    /// The roles allowed to take this action: the role policy.
    pub fn allowed(self) -> &'static [Role] {
        match self {
            // The till's work: anyone who serves customers at the counter.
            Action::Sell
            | Action::ReturnSale
            | Action::OpenCloseCashSession
            | Action::WriteCustomers
            | Action::TakeCustomerPayment => &[A, BM, P, C],
            // A return from anyone else waits for a manager's approval.
            Action::OverridePrice | Action::IssueCreditNote | Action::WritePrescriptions => {
                &[A, BM, P]
            }
            Action::GiveCredit
            | Action::DecideApprovals
            | Action::SubmitStockCount
            | Action::WriteCoupons
            | Action::ManageUsers
            | Action::ManageDevices => &[A, BM],
            // The catalogue and stock, without the counter.
            Action::WriteCatalogue
            | Action::WriteSuppliers
            | Action::ManageSupplierInvoices
            | Action::ReturnToSupplier
            | Action::ManageTransfers => &[A, BM, IM],
            Action::ReceivePurchases => &[A, P],
            // A delivery is counted in by whoever is at the back door.
            Action::ReceiveGoods => &[A, BM, IM, P],
            Action::ReadGoodsReceived => &[A, BM, IM, P, AU],
            // Taking more than was ordered, or paying an invoice that does
            // not match, commits the chain's money.
            Action::AllowOverReceipt | Action::ReleaseSupplierInvoices => &[A, BM],
            // Short-dated stock is a clinical and a commercial call.
            Action::AcceptShortDated => &[A, BM, P],
            // Buyers draft and send orders; a manager approves them.
            Action::ManagePurchaseOrders => &[A, BM, IM],
            Action::ApprovePurchaseOrders => &[A, BM],
            Action::ReadPurchaseOrders => &[A, BM, IM, AU],
            // Pack sizes and GTINs are master data of the stock side.
            Action::ManagePacks => &[A, IM],
            Action::QuarantineBatches | Action::ReadReorderSuggestions | Action::WriteOffStock => {
                &[A, BM, IM, P]
            }
            Action::ReadTransfers | Action::ReadSupplierReturns => &[A, BM, IM, AU],
            Action::ReadReports | Action::VerifyInvoiceChain => &[A, BM, AU],
            Action::ReadStockValue => &[A, BM, IM, AU],
            Action::ReadAuditLog => &[A, AU],
            // The tax authority's documents: the branch manager answers for
            // the branch's, the auditor reads them, the manager re-sends.
            Action::ReadFiscalDocuments => &[A, BM, AU],
            Action::RetryFiscalDocuments => &[A, BM],
            Action::Push => &[A, C],
            Action::ManageAdminUsers
            | Action::ResolveConflicts
            | Action::ManageBranches
            | Action::WorkOnAnyBranch
            | Action::ManagePrinting
            | Action::WriteSettings
            | Action::ManageCurrencyRates
            | Action::OperateActors => &[A],
        }
    }

    /// Whether `role` may take this action.
    pub fn permits(self, role: Role) -> bool {
        self.allowed().contains(&role)
    }

    /// The action as docs/roles.md's role matrix names it.
    pub fn label(self) -> &'static str {
        match self {
            Action::Sell => "sell (`POST /sales`, pushed `sale`)",
            Action::OverridePrice => "sell below the selling price (price override, audited)",
            Action::ReturnSale => {
                "take back a sale (`POST /sales/{id}/returns`, pushed `sale_return`)"
            }
            Action::IssueCreditNote => {
                "issue a credit note at once (anyone else's return waits for an approval)"
            }
            Action::OpenCloseCashSession => "open and close a cash session",
            Action::WriteCustomers => "create, edit, delete customers (REST or pushed `customer`)",
            Action::TakeCustomerPayment => "take a customer payment",
            Action::GiveCredit => {
                "give credit (`credit_limit` raised above 0, `is_credit_allowed` on)"
            }
            Action::WritePrescriptions => "create, dispense, cancel or delete a prescription",
            Action::DecideApprovals => "approve or reject an approval request",
            Action::WriteCatalogue => "create, edit, delete medicines (REST or pushed `medicine`)",
            Action::ManagePacks => "create, edit, delete a medicine's packs",
            Action::WriteSuppliers => "create, edit, delete suppliers (REST or pushed `supplier`)",
            Action::ReceivePurchases => "receive stock (`POST /purchases`)",
            Action::ReceiveGoods => "draft and post goods received notes",
            Action::ReadGoodsReceived => "read goods received notes",
            Action::AllowOverReceipt => {
                "post a goods received note beyond what its orders have outstanding"
            }
            Action::AcceptShortDated => {
                "post a goods received note with stock inside the minimum shelf life"
            }
            Action::QuarantineBatches => "quarantine, release or recall a batch",
            Action::ReadReorderSuggestions => "read reorder suggestions",
            Action::ManageSupplierInvoices => "record, list and pay supplier invoices",
            Action::ReleaseSupplierInvoices => "release a supplier invoice on hold (not one's own)",
            Action::ManagePurchaseOrders => {
                "draft, edit, submit, send, close or cancel a purchase order"
            }
            Action::ApprovePurchaseOrders => {
                "approve or reject a purchase order (not one's own submission)"
            }
            Action::ReadPurchaseOrders => "read purchase orders",
            Action::SubmitStockCount => "submit a stock count",
            Action::WriteOffStock => "write off stock (`POST /stock/write-offs`)",
            Action::ReturnToSupplier => {
                "return stock to its supplier for a debit note (`POST /supplier-returns`)"
            }
            Action::ReadSupplierReturns => "read supplier returns and their debit notes",
            Action::ManageTransfers => "create, receive or cancel a transfer",
            Action::ReadTransfers => "read transfers",
            Action::WriteCoupons => "create a coupon",
            Action::ReadReports => "read reports (`/reports/*`, but the two below)",
            Action::ReadStockValue => {
                "read stock value and margins (`/reports/stock-valuation`, `/reports/margins`)"
            }
            Action::VerifyInvoiceChain => "verify the invoice chain (`GET /sales/verify-chain`)",
            Action::ReadAuditLog => "read the audit log",
            Action::ReadFiscalDocuments => {
                "read fiscal documents and their summary (`GET /fiscal/*`)"
            }
            Action::RetryFiscalDocuments => {
                "re-send a rejected fiscal document (`POST /fiscal/documents/{id}/retry`)"
            }
            Action::ManageUsers => "list, create, edit, delete users; read another user",
            Action::ManageAdminUsers => "create, edit or delete an admin user",
            Action::ManageDevices => "register and revoke devices",
            Action::Push => "push from a till (`POST /sync/push`; each change needs its row too)",
            Action::ResolveConflicts => "list and resolve sync conflicts",
            Action::ManageBranches => "create, edit, delete branches",
            Action::WorkOnAnyBranch => "act on any branch (everyone else: its own only)",
            Action::ManagePrinting => "create, edit, delete printers and receipt templates",
            Action::WriteSettings => "change the settings (`PUT /settings`)",
            Action::ManageCurrencyRates => "file a currency rate",
            Action::OperateActors => {
                "`GET /ops/actors`, `GET`/`PUT`/`DELETE /ops/actors/branches/{id}`"
            }
        }
    }

    /// The role matrix as a markdown table: one row per action, one column
    /// per role, ✓ where the role may take the action.
    pub fn markdown_table() -> String {
        let mut out = String::from("| action |");
        for role in Role::ALL {
            out.push(' ');
            out.push_str(role.abbreviation());
            out.push_str(" |");
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(Role::ALL.len()));
        out.push('\n');
        for action in Action::ALL {
            out.push_str("| ");
            out.push_str(action.label());
            out.push_str(" |");
            for role in Role::ALL {
                out.push_str(if action.permits(role) { " ✓ |" } else { " |" });
            }
            out.push('\n');
        }
        out
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_action_once() {
        let mut seen = std::collections::HashSet::new();
        for a in Action::ALL {
            assert!(seen.insert(a), "{a:?} twice in Action::ALL");
            assert!(!a.allowed().is_empty(), "{a:?} admits nobody");
            // An admin may do everything.
            assert!(a.permits(Role::Admin), "{a:?} refuses admins");
        }
        // Adding a variant without listing it fails to compile in
        // `allowed`/`label`; listing it is checked by the count here.
        assert_eq!(seen.len(), Action::ALL.len());
    }

    #[test]
    fn auditors_only_read() {
        for a in Action::ALL {
            if a.permits(Role::Auditor) {
                assert!(
                    matches!(
                        a,
                        Action::ReadReports
                            | Action::ReadStockValue
                            | Action::VerifyInvoiceChain
                            | Action::ReadAuditLog
                            | Action::ReadFiscalDocuments
                            | Action::ReadTransfers
                            | Action::ReadGoodsReceived
                            | Action::ReadPurchaseOrders
                            | Action::ReadSupplierReturns
                    ),
                    "auditors may {a}"
                );
            }
        }
    }

    #[test]
    fn the_table_has_a_row_per_action_and_a_column_per_role() {
        let table = Action::markdown_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "| action | A | BM | IM | P | C | AU |");
        assert_eq!(lines.len(), Action::ALL.len() + 2);
        assert_eq!(
            lines[2],
            "| sell (`POST /sales`, pushed `sale`) | ✓ | ✓ | | ✓ | ✓ | |"
        );
        for line in &lines {
            assert_eq!(line.matches('|').count(), Role::ALL.len() + 2, "{line}");
        }
    }
}
