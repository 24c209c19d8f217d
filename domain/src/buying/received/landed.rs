//! Landed cost: a delivery's charges (freight, insurance, clearing) spread
//! over its accepted lines in proportion to their value, so each batch
//! costs what its goods and their share of getting them here cost.
//!
//! Each share is rounded to the cent and the rounding remainder goes to
//! the line of largest value (the first of equals), so the shares sum to
//! the charges exactly and Σ batch value = Σ lines + Σ charges to the cent.
//! Lines of no value (free goods, or a delivery of nothing but free goods)
//! share by base units instead, so charges are never lost.

use rust_decimal::{Decimal, RoundingStrategy};

use crate::wire;

/// What a line brings to the spread: its accepted value and base units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weight {
    pub value: Decimal,
    pub units: i32,
}

/// Each line's share of `charges`, in the lines' order. Lines that accepted
/// nothing (all rejected) get none.
pub fn spread(charges: Decimal, lines: &[Weight]) -> Vec<Decimal> {
    let mut shares = vec![Decimal::ZERO; lines.len()];
    let by_value: Decimal = lines.iter().map(|l| l.value).sum();
    let weights: Vec<Decimal> = if by_value > Decimal::ZERO {
        lines.iter().map(|l| l.value).collect()
    } else {
        lines
            .iter()
            .map(|l| Decimal::from(l.units.max(0)))
            .collect()
    };
    let whole: Decimal = weights.iter().copied().sum();
    if charges <= Decimal::ZERO || whole <= Decimal::ZERO {
        return shares;
    }
    let Some(largest) = largest(&weights) else {
        return shares;
    };
    for (share, weight) in shares.iter_mut().zip(&weights) {
        *share = wire::two_places(charges * *weight / whole);
    }
    let remainder = charges - shares.iter().copied().sum::<Decimal>();
    if shares[largest] + remainder >= Decimal::ZERO {
        shares[largest] += remainder;
        return shares;
    }
    // Many small lines all rounded up past the charges: round every share
    // down instead, so the remainder is never negative.
    for (share, weight) in shares.iter_mut().zip(&weights) {
        *share = (charges * *weight / whole).round_dp_with_strategy(2, RoundingStrategy::ToZero);
    }
    let remainder = charges - shares.iter().copied().sum::<Decimal>();
    shares[largest] += remainder;
    shares
}

/// The index of the largest weight (the first of equals).
fn largest(weights: &[Decimal]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, w) in weights.iter().enumerate() {
        if best.is_none_or(|b| *w > weights[b]) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn w(value: &str, units: i32) -> Weight {
        Weight {
            value: d(value),
            units,
        }
    }

    #[test]
    fn charges_follow_line_value_and_the_remainder_goes_to_the_largest_line() {
        // 10.00 over 100 / 200 / 300: 1.67, 3.33, 5.00 → 10.00 exactly.
        let shares = spread(d("10.00"), &[w("100", 1), w("200", 1), w("300", 1)]);
        assert_eq!(shares, vec![d("1.67"), d("3.33"), d("5.00")]);
        // 0.10 over three equal lines: 0.03 each, the first takes 0.01 more.
        let shares = spread(d("0.10"), &[w("5", 1), w("5", 1), w("5", 1)]);
        assert_eq!(shares, vec![d("0.04"), d("0.03"), d("0.03")]);
    }

    #[test]
    fn free_goods_share_by_units_and_rejected_lines_share_nothing() {
        let shares = spread(d("9.00"), &[w("0", 10), w("0", 20), w("0", 0)]);
        assert_eq!(shares, vec![d("3.00"), d("6.00"), d("0.00")]);
        assert_eq!(spread(d("9.00"), &[w("0", 0)]), vec![d("0.00")]);
        assert_eq!(spread(d("0"), &[w("10", 1)]), vec![d("0")]);
    }

    proptest! {
        #[test]
        fn shares_always_sum_to_the_charges(
            cents in 0i64..10_000_000,
            lines in proptest::collection::vec((0i64..100_000_000, 0i32..10_000), 1..50),
        ) {
            let charges = Decimal::new(cents, 2);
            let weights: Vec<Weight> = lines
                .iter()
                .map(|(v, u)| Weight { value: Decimal::new(*v, 2), units: *u })
                .collect();
            let shares = spread(charges, &weights);
            let any_weight = weights.iter().any(|l| l.value > Decimal::ZERO || l.units > 0);
            let total: Decimal = shares.iter().copied().sum();
            if any_weight {
                prop_assert_eq!(total, charges);
            }
            for s in &shares {
                prop_assert!(*s >= Decimal::ZERO);
                prop_assert_eq!(*s, s.round_dp(2));
            }
        }
    }
}
