//! What stock costs: the cost per base unit of a receipt by pack, and what
//! some units of a batch are worth at cost.
//!
//! A batch's `unit_cost` has 4 decimal places (a box of 3 at 10.00 is
//! 3.3333 a unit), so units × unit cost can miss what was paid by a few
//! hundredths of a cent per unit. The batch keeps its `received_total` (what
//! the received quantity cost, to the cent), and a valuation takes its
//! share of that: the whole batch is worth exactly what it cost.

use rust_decimal::{Decimal, RoundingStrategy};

use crate::wire;

/// Decimal places of a cost per base unit (`batches.unit_cost`).
pub const PLACES: u32 = 4;

/// The cost per base unit of a pack of `units` base units costing
/// `pack_cost`, half up to 4 places (1 unit: the cost itself).
pub fn per_unit(pack_cost: Decimal, units: i32) -> Decimal {
    if units <= 1 {
        return pack_cost;
    }
    let mut cost = (pack_cost / Decimal::from(units))
        .round_dp_with_strategy(PLACES, RoundingStrategy::MidpointAwayFromZero);
    cost.rescale(PLACES);
    cost
}

/// What `qty` base units of a batch are worth at cost, to the cent: their
/// share of `received_total` over `qty_received`, or `qty × unit_cost` for
/// a batch without a received total (written before receiving by pack;
/// its cost has 2 places, so both agree). SQL `batch_value` (migration
/// 0023) is the same rule for the reports.
pub fn value(
    qty: i32,
    unit_cost: Decimal,
    received_total: Option<Decimal>,
    qty_received: i32,
) -> Decimal {
    match received_total {
        Some(total) if qty_received > 0 => {
            wire::two_places(total * Decimal::from(qty) / Decimal::from(qty_received))
        }
        _ => wire::two_places(unit_cost * Decimal::from(qty)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn a_pack_cost_is_spread_over_its_units_to_four_places() {
        assert_eq!(per_unit(d("12.35"), 10).to_string(), "1.2350");
        assert_eq!(per_unit(d("10.00"), 3).to_string(), "3.3333");
        assert_eq!(per_unit(d("20.00"), 3).to_string(), "6.6667");
        assert_eq!(per_unit(d("0.01"), 200).to_string(), "0.0001");
        assert_eq!(per_unit(d("0.01"), 300).to_string(), "0.0000");
        assert_eq!(per_unit(d("120.50"), 1), d("120.50"));
    }

    #[test]
    fn a_whole_batch_is_worth_what_it_cost() {
        // 100 boxes of 3 at 10.00: 300 units at 3.3333 would be 999.99.
        let (cost, total) = (d("3.3333"), Some(d("1000.00")));
        assert_eq!(value(300, cost, total, 300), d("1000.00"));
        assert_eq!(value(3, cost, total, 300), d("10.00"));
        assert_eq!(value(1, cost, total, 300), d("3.33"));
        assert_eq!(value(2, cost, total, 300), d("6.67"));
        assert_eq!(value(0, cost, total, 300), d("0.00"));
        // Without a received total, and for a 2-place cost, units × cost.
        assert_eq!(value(7, d("1.50"), None, 10), d("10.50"));
        assert_eq!(value(7, d("1.50"), Some(d("15.00")), 10), d("10.50"));
        assert_eq!(value(7, d("1.50"), Some(d("0.00")), 0), d("10.50"));
    }
}
