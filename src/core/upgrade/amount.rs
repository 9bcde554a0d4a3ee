//! USDC amounts. On every chain the service takes, USDC has 6 decimals, so
//! an amount is held as an integer of atomic units (1 USDC = 1 000 000) and
//! written with exactly six decimals. Floats never touch money.

use std::fmt;

/// Atomic units per USDC.
pub const ATOMIC_PER_USDC: u64 = 1_000_000;
/// One cent in atomic units: an invoice's tag lives below it.
pub const CENT: u64 = 10_000;

/// An amount of USDC in atomic units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usdc(pub u64);

impl Usdc {
    /// Reads a decimal price such as `"5"`, `"5.00"` or `"15.5"`: digits, at
    /// most one point, at most 6 decimals, at most 1 000 000 USDC. `None`
    /// for anything else (signs, exponents, spaces inside, empty parts).
    pub fn parse(s: &str) -> Option<Usdc> {
        let s = s.trim();
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || whole.len() > 7 || !digits(whole) || !digits(frac) || frac.len() > 6
        {
            return None;
        }
        if s.contains('.') && frac.is_empty() {
            return None;
        }
        let whole: u64 = whole.parse().ok()?;
        let frac_atomic: u64 = format!("{frac:0<6}").parse().ok()?;
        let total = whole
            .checked_mul(ATOMIC_PER_USDC)?
            .checked_add(frac_atomic)?;
        (total <= 1_000_000 * ATOMIC_PER_USDC).then_some(Usdc(total))
    }

    /// Whether this is a whole number of cents (prices must be, so the
    /// sub-cent digits are free for the invoice tag).
    pub fn is_whole_cents(self) -> bool {
        self.0.is_multiple_of(CENT)
    }
}

impl fmt::Display for Usdc {
    /// Always six decimals: `5.004217`, `15.000000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}",
            self.0 / ATOMIC_PER_USDC,
            self.0 % ATOMIC_PER_USDC
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_parse_exactly() {
        assert_eq!(Usdc::parse("5.00"), Some(Usdc(5_000_000)));
        assert_eq!(Usdc::parse("5"), Some(Usdc(5_000_000)));
        assert_eq!(Usdc::parse("15.5"), Some(Usdc(15_500_000)));
        assert_eq!(Usdc::parse("0.000001"), Some(Usdc(1)));
        assert_eq!(Usdc::parse(" 5.01 "), Some(Usdc(5_010_000)));
        for bad in [
            "",
            ".",
            "5.",
            ".5",
            "-5",
            "+5",
            "5e2",
            "5.0000001",
            "1,5",
            "5 .0",
            "NaN",
            "1000001",
        ] {
            assert_eq!(Usdc::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn amounts_print_with_six_decimals() {
        assert_eq!(Usdc(5_004_217).to_string(), "5.004217");
        assert_eq!(Usdc(15_000_000).to_string(), "15.000000");
        assert_eq!(Usdc(1).to_string(), "0.000001");
        assert!(Usdc(5_000_000).is_whole_cents());
        assert!(!Usdc(5_004_217).is_whole_cents());
    }
}
