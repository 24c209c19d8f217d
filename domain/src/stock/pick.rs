//! First-expiry-first-out picks over the batches a sale locked
//! (`lock_sellable` answers them in FEFO order): loose units, whole packs
//! (each pack from one batch), or a named batch (a scanned pack).

use chrono::NaiveDate;
use rust_decimal::Decimal;
use uuid::Uuid;

/// A locked batch with what it still holds, for first-expiry-first-out picks.
#[derive(Debug, Clone)]
pub struct Lot {
    pub batch_id: Uuid,
    pub medicine_id: Uuid,
    pub remaining: i32,
    pub unit_cost: Decimal,
    pub expiry_date: NaiveDate,
}

/// Picks `qty` units from `lots` (already in FEFO order), taking what it
/// uses out of them. `None` when they hold too little.
pub fn pick(lots: &mut [Lot], medicine_id: Uuid, qty: i32) -> Option<Vec<(Lot, i32)>> {
    let available: i64 = lots
        .iter()
        .filter(|l| l.medicine_id == medicine_id)
        .map(|l| i64::from(l.remaining))
        .sum();
    if available < i64::from(qty) {
        return None;
    }
    let mut left = qty;
    let mut picks = Vec::new();
    for l in lots.iter_mut().filter(|l| l.medicine_id == medicine_id) {
        if left == 0 {
            break;
        }
        let take = std::cmp::min(left, l.remaining);
        if take > 0 {
            l.remaining -= take;
            left -= take;
            picks.push((l.clone(), take));
        }
    }
    Some(picks)
}

/// Units of `medicine_id` in `lots`.
pub fn available(lots: &[Lot], medicine_id: Uuid) -> i64 {
    lots.iter()
        .filter(|l| l.medicine_id == medicine_id)
        .map(|l| i64::from(l.remaining))
        .sum()
}

/// Picks `packs` whole packs of `units` base units each from `lots`, first
/// expiry first: every pack comes out of one batch, so a batch holding less
/// than a pack is passed over (its units stay for loose sales). Answers
/// base units per batch; `None` (taking nothing) when the lots hold fewer
/// whole packs.
pub fn pick_whole(
    lots: &mut [Lot],
    medicine_id: Uuid,
    units: i32,
    packs: i32,
) -> Option<Vec<(Lot, i32)>> {
    if whole_packs(lots, medicine_id, units) < i64::from(packs) {
        return None;
    }
    let mut left = packs;
    let mut picks = Vec::new();
    for l in lots.iter_mut().filter(|l| l.medicine_id == medicine_id) {
        if left == 0 {
            break;
        }
        let take = Ord::min(left, l.remaining / units);
        if take > 0 {
            l.remaining -= take * units;
            left -= take;
            picks.push((l.clone(), take * units));
        }
    }
    Some(picks)
}

/// Whole packs of `units` the lots of `medicine_id` hold, each in one batch.
pub fn whole_packs(lots: &[Lot], medicine_id: Uuid, units: i32) -> i64 {
    lots.iter()
        .filter(|l| l.medicine_id == medicine_id && units > 0)
        .map(|l| i64::from(l.remaining / units))
        .sum()
}

/// Takes `qty` base units from the one lot `batch_id` (a scanned pack's
/// batch); `None` (taking nothing) when it is not among the lots or holds
/// less.
pub fn pick_batch(lots: &mut [Lot], batch_id: Uuid, qty: i32) -> Option<Vec<(Lot, i32)>> {
    let l = lots
        .iter_mut()
        .find(|l| l.batch_id == batch_id && l.remaining >= qty)?;
    l.remaining -= qty;
    Some(vec![(l.clone(), qty)])
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expired, quarantined and recalled batches never reach `pick`:
    // `lock_sellable` neither returns nor locks them (its WHERE clause), and
    // returns the rest in FEFO order. These tests cover the pick over that
    // answer; the exclusion itself is covered against PostgreSQL by
    // tests/api/sales.rs (`fefo_takes_the_earliest_sellable_batch_first`).

    fn lot(n: u128, medicine_id: Uuid, remaining: i32, expiry: &str) -> Lot {
        Lot {
            batch_id: Uuid::from_u128(n),
            medicine_id,
            remaining,
            unit_cost: Decimal::new(250, 2),
            expiry_date: expiry.parse().unwrap(),
        }
    }

    fn taken(picks: &[(Lot, i32)]) -> Vec<(u128, i32)> {
        picks
            .iter()
            .map(|(l, q)| (l.batch_id.as_u128(), *q))
            .collect()
    }

    fn left(lots: &[Lot]) -> Vec<i32> {
        lots.iter().map(|l| l.remaining).collect()
    }

    #[test]
    fn pick_empties_the_first_expiring_lot_before_touching_the_next() {
        let m = Uuid::from_u128(100);
        let mut lots = vec![
            lot(1, m, 10, "2027-01-31"),
            lot(2, m, 10, "2028-06-30"),
            lot(3, m, 10, "2029-06-30"),
        ];
        let picks = pick(&mut lots, m, 12).unwrap();
        assert_eq!(taken(&picks), vec![(1, 10), (2, 2)]);
        assert_eq!(left(&lots), vec![0, 8, 10]);
        // A pick answers the lot as it was taken from: its cost, its expiry.
        assert_eq!(picks[1].0.expiry_date.to_string(), "2028-06-30");
        assert_eq!(picks[1].0.unit_cost, Decimal::new(250, 2));
    }

    #[test]
    fn pick_breaks_an_expiry_tie_by_the_order_given_oldest_receipt_first() {
        // Same expiry: `lock_sellable` orders by receipt (created_at, id),
        // and the pick keeps that order.
        let m = Uuid::from_u128(100);
        let mut lots = vec![
            lot(7, m, 3, "2027-03-31"),
            lot(5, m, 3, "2027-03-31"),
            lot(6, m, 3, "2027-03-31"),
        ];
        let picks = pick(&mut lots, m, 5).unwrap();
        assert_eq!(taken(&picks), vec![(7, 3), (5, 2)]);
        assert_eq!(left(&lots), vec![0, 1, 3]);
    }

    #[test]
    fn pick_takes_only_the_lots_of_its_medicine() {
        // The lots of a sale's medicines arrive together, ordered by
        // medicine then expiry; a pick skips the other medicines' lots.
        let (a, b) = (Uuid::from_u128(100), Uuid::from_u128(200));
        let mut lots = vec![
            lot(1, a, 4, "2027-01-31"),
            lot(2, b, 50, "2026-01-31"),
            lot(3, a, 4, "2028-01-31"),
        ];
        assert_eq!(available(&lots, a), 8);
        assert_eq!(available(&lots, b), 50);
        let picks = pick(&mut lots, a, 6).unwrap();
        assert_eq!(taken(&picks), vec![(1, 4), (3, 2)]);
        assert_eq!(left(&lots), vec![0, 50, 2]);
    }

    #[test]
    fn a_second_pick_of_the_same_medicine_continues_where_the_first_stopped() {
        // Two lines of one medicine in one sale share the locked lots.
        let m = Uuid::from_u128(100);
        let mut lots = vec![lot(1, m, 5, "2027-01-31"), lot(2, m, 5, "2028-01-31")];
        assert_eq!(taken(&pick(&mut lots, m, 4).unwrap()), vec![(1, 4)]);
        assert_eq!(taken(&pick(&mut lots, m, 4).unwrap()), vec![(1, 1), (2, 3)]);
        assert_eq!(available(&lots, m), 2);
        // An emptied lot is skipped, not answered with a zero quantity.
        assert_eq!(taken(&pick(&mut lots, m, 2).unwrap()), vec![(2, 2)]);
        assert_eq!(available(&lots, m), 0);
    }

    #[test]
    fn pick_refuses_more_than_the_lots_hold_and_takes_nothing() {
        let (a, b) = (Uuid::from_u128(100), Uuid::from_u128(200));
        let mut lots = vec![
            lot(1, a, 3, "2027-01-31"),
            lot(2, b, 9, "2027-01-31"),
            lot(3, a, 4, "2028-01-31"),
        ];
        // Another medicine's stock does not make up the difference.
        assert!(pick(&mut lots, a, 8).is_none());
        assert_eq!(left(&lots), vec![3, 9, 4]);
        assert!(pick(&mut lots, Uuid::from_u128(300), 1).is_none());
        // Exactly what they hold is fine.
        assert_eq!(taken(&pick(&mut lots, a, 7).unwrap()), vec![(1, 3), (3, 4)]);
        assert_eq!(left(&lots), vec![0, 9, 0]);
    }

    #[test]
    fn a_box_passes_over_a_batch_holding_less_than_a_box() {
        // Batch 1 (older) holds a strip's worth; a box of 10 comes whole
        // out of batch 2, and the 4 loose units of batch 1 stay sellable.
        let m = Uuid::from_u128(100);
        let mut lots = vec![lot(1, m, 4, "2027-01-31"), lot(2, m, 25, "2028-01-31")];
        assert_eq!(whole_packs(&lots, m, 10), 2);
        assert_eq!(
            taken(&pick_whole(&mut lots, m, 10, 1).unwrap()),
            vec![(2, 10)]
        );
        assert_eq!(left(&lots), vec![4, 15]);
        assert_eq!(taken(&pick(&mut lots, m, 3).unwrap()), vec![(1, 3)]);
    }

    #[test]
    fn packs_never_split_over_two_batches() {
        // 7 + 8 units are three packs' worth of 5, but each batch holds one
        // whole pack: a third pack is refused, and nothing is taken.
        let m = Uuid::from_u128(100);
        let mut lots = vec![lot(1, m, 7, "2027-01-31"), lot(2, m, 8, "2028-01-31")];
        assert!(pick_whole(&mut lots, m, 5, 3).is_none());
        assert_eq!(left(&lots), vec![7, 8]);
        let picks = pick_whole(&mut lots, m, 5, 2).unwrap();
        assert_eq!(taken(&picks), vec![(1, 5), (2, 5)]);
        assert!(picks.iter().all(|(_, q)| q % 5 == 0));
    }

    #[test]
    fn a_named_batch_gives_only_what_it_holds() {
        let m = Uuid::from_u128(100);
        let mut lots = vec![lot(1, m, 4, "2027-01-31"), lot(2, m, 20, "2028-01-31")];
        assert_eq!(
            taken(&pick_batch(&mut lots, Uuid::from_u128(2), 10).unwrap()),
            vec![(2, 10)]
        );
        assert!(pick_batch(&mut lots, Uuid::from_u128(1), 10).is_none());
        assert!(pick_batch(&mut lots, Uuid::from_u128(9), 1).is_none());
        assert_eq!(left(&lots), vec![4, 10]);
    }

    proptest::proptest! {
        /// Whatever the lots, a whole-pack pick takes whole packs, each
        /// from one batch, never more than a batch held, and exactly
        /// `packs × units` when it succeeds.
        #[test]
        fn whole_pack_picks_are_whole(
            held in proptest::collection::vec(0i32..40, 1..6),
            units in 2i32..12,
            packs in 1i32..8,
        ) {
            let m = Uuid::from_u128(100);
            let mut lots: Vec<Lot> = held
                .iter()
                .enumerate()
                .map(|(i, &h)| lot(i as u128 + 1, m, h, "2027-01-31"))
                .collect();
            let before = left(&lots);
            match pick_whole(&mut lots, m, units, packs) {
                Some(picks) => {
                    let total: i32 = picks.iter().map(|(_, q)| q).sum();
                    proptest::prop_assert_eq!(total, packs * units);
                    for (l, q) in &picks {
                        proptest::prop_assert_eq!(q % units, 0);
                        let i = l.batch_id.as_u128() as usize - 1;
                        proptest::prop_assert!(*q <= before[i]);
                    }
                }
                None => {
                    let whole: i32 = before.iter().map(|h| h / units).sum();
                    proptest::prop_assert!(whole < packs);
                    proptest::prop_assert_eq!(left(&lots), before);
                }
            }
        }
    }
}
