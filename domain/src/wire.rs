//! Wire formats shared by every response: RFC 3339 UTC timestamps with
//! milliseconds, money as decimal strings or JSON numbers as the spec says
//! per field, and 0/1 integer flags for the snapshot shapes.

use chrono::{DateTime, SecondsFormat, Utc};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::Serializer;

pub fn format_ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn ts<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_ts(t))
}

pub fn ts_opt<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&format_ts(t)),
        None => s.serialize_none(),
    }
}

/// Money rendered with two decimal places, as a string (`"1500.00"`).
pub fn money_str<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&two_places(*d))
}

pub fn money_str_opt<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.collect_str(&two_places(*d)),
        None => s.serialize_none(),
    }
}

/// Money as a JSON number where the spec says `number`.
pub fn money_num<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.to_f64().unwrap_or_default())
}

pub fn money_num_opt<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.to_f64().unwrap_or_default()),
        None => s.serialize_none(),
    }
}

/// A cost per base unit as a decimal string: two places like money
/// (`"1.50"`), four where the cost really has more (`"1.2350"`, a box of 10
/// at 12.35). Costs are stored with 4 places since receiving by pack.
pub fn cost_str<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&cost_places(*d))
}

/// A cost with 2 places when that loses nothing, else with 4.
pub fn cost_places(d: Decimal) -> Decimal {
    let two = two_places(d);
    if two == d {
        return two;
    }
    let mut four =
        d.round_dp_with_strategy(4, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
    four.rescale(4);
    four
}

/// A boolean as the snapshot's `int01` flag.
pub fn int01<S: Serializer>(b: &bool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u8(u8::from(*b))
}

pub fn two_places(d: Decimal) -> Decimal {
    let mut d = d.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
    d.rescale(2);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(s: &str) -> String {
        two_places(s.parse().unwrap()).to_string()
    }

    #[test]
    fn money_rounds_half_up_to_two_places() {
        // Half away from zero, never to even (2.665 would be 2.66 to even).
        assert_eq!(two("2.665"), "2.67");
        assert_eq!(two("2.675"), "2.68");
        assert_eq!(two("1.005"), "1.01");
        assert_eq!(two("1.00499"), "1.00");
        assert_eq!(two("-1.005"), "-1.01");
        // Always two places, whatever the scale it came with.
        assert_eq!(two("7"), "7.00");
        assert_eq!(two("7.5"), "7.50");
        assert_eq!(two("0"), "0.00");
    }

    #[test]
    fn a_cost_shows_four_places_only_when_it_has_them() {
        let cost = |s: &str| cost_places(s.parse().unwrap()).to_string();
        assert_eq!(cost("1.5000"), "1.50");
        assert_eq!(cost("120.5"), "120.50");
        assert_eq!(cost("0.0000"), "0.00");
        assert_eq!(cost("1.2350"), "1.2350");
        assert_eq!(cost("3.3333"), "3.3333");
        assert_eq!(cost("0.001"), "0.0010");
    }
}
