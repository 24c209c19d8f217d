//! The tables (and views) the query builder names, once: a misspelt table
//! is a compile error, and a search for a variant finds every query of it.
//! Raw SQL (`raw_query!`) names its tables in its text.

use sea_query::Iden;

/// A table by name: `Table::SaleReturnItems` is `sale_return_items`.
#[derive(Iden, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Approvals,
    AuditLog,
    AuthSessions,
    Batches,
    Branches,
    CashSessions,
    Categories,
    ChangeLog,
    ControlledDispenses,
    Coupons,
    Currencies,
    CustomerLedger,
    Customers,
    Devices,
    ExchangeRates,
    FiscalAttempts,
    FiscalDocuments,
    GoodsReceivedCharges,
    GoodsReceivedLines,
    GoodsReceivedNotes,
    MarketingEnquiries,
    MedicinePacks,
    Medicines,
    Organisations,
    PgTimezoneNames,
    PrescriptionCounters,
    PrescriptionItems,
    Prescriptions,
    PrintJobs,
    PurchaseOrderCounters,
    PurchaseOrderLines,
    PurchaseOrders,
    ProductGtins,
    PushMutations,
    RateLimits,
    RefreshTokens,
    SaleReturnItems,
    SaleReturns,
    Sales,
    Settings,
    StockCountLines,
    StockCounts,
    SupplierInvoiceCharges,
    SupplierInvoiceLines,
    SupplierReturnItems,
    SupplierReturns,
    Suppliers,
    SyncConflicts,
    TransferLines,
    Transfers,
    Users,
    WillCallPickups,
    WriteOffItems,
    WriteOffs,
}

#[cfg(test)]
mod tests {
    use super::Table;
    use sea_query::Iden;

    #[test]
    fn variants_are_the_tables_snake_case_names() {
        assert_eq!(Table::SaleReturnItems.to_string(), "sale_return_items");
        assert_eq!(Table::Users.to_string(), "users");
        assert_eq!(Table::PgTimezoneNames.to_string(), "pg_timezone_names");
    }
}
