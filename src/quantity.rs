//! Kubernetes resource quantities (`"100m"`, `"0.5"`, `"128Mi"`, `"1G"`,
//! `"1e3"`): the one parser of that grammar for the whole crate.
//!
//! This module owns the grammar and the conversions to whole numbers; it does
//! not own policy. The config loader, the QoS calculator and the pod-spec
//! translator each used to carry a private parser, and they disagreed at the
//! edges (`"-0"`, huge exponents, overflow). Now they all call
//! [`Quantity::parse`] and apply their own rules on top: the config loader
//! rejects sub-unit suffixes for byte sizes ([`Quantity::sub_unit_suffix`]),
//! QoS saturates instead of failing, the pod translator rejects negatives.
//!
//! It is **pure**: no I/O, no clock, no logging, no allocation on success.
//! [`total`] adds and compares quantities and prints the results as
//! apimachinery does (a pod's request and limit totals in its status).
//!
//! Grammar (as `k8s.io/apimachinery/pkg/api/resource`), with surrounding
//! whitespace ignored:
//!
//! ```text
//! quantity ::= sign? number suffix?
//! sign     ::= "+" | "-"
//! number   ::= digits | digits "." digits? | "." digits
//! suffix   ::= "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"          (2^10 .. 2^60)
//!            | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E"  (10^-9 .. 10^18)
//!            | ("e" | "E") sign? digit{1,4}                          (10^exponent)
//! ```
//!
//! Limits: at most 38 significant digits (the mantissa is a `u128`) and an
//! exponent of at most four digits; anything beyond that is no resource
//! amount a node could have.
//!
//! Rounding: [`Quantity::value`] and [`Quantity::milli_value`] round **up** to
//! the next integer, as Kubernetes' `Quantity.Value()` and
//! `Quantity.MilliValue()` do: `"1.5"` is 2 bytes, `"0.1m"` is 1 millicore,
//! and any positive amount, however small, is at least 1. Kubernetes' reason:
//! if you asked for some of a resource you should get some.

/// What is wrong with a quantity. The message names the problem only; callers
/// add the input and the field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("expected a number with an optional suffix such as Ki, Mi, Gi, k, M, G")]
    NotANumber,
    #[error("too many digits")]
    TooManyDigits,
    #[error(
        "unknown suffix {0:?} (expected Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or an exponent like e3)"
    )]
    UnknownSuffix(String),
    #[error("must not be negative")]
    Negative,
    #[error("too large")]
    TooLarge,
}

/// A parsed quantity, exactly: `±mantissa × 10^exp10 × 1024^pow1024`.
///
/// There is deliberately no `PartialEq`: `"1k"` and `"1000"` are the same
/// amount with different representations; compare [`Quantity::value`]s.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    negative: bool,
    mantissa: u128,
    exp10: i64,
    pow1024: u32,
    sub_unit_suffix: Option<&'static str>,
}

impl Quantity {
    /// `value` whole units (bytes, cores, ...), e.g. a node's capacity.
    pub const fn from_value(value: u64) -> Quantity {
        Quantity {
            negative: false,
            mantissa: value as u128,
            exp10: 0,
            pow1024: 0,
            sub_unit_suffix: None,
        }
    }

    /// `millis` thousandths of a unit, e.g. millicores.
    pub const fn from_millis(millis: u64) -> Quantity {
        Quantity {
            exp10: -3,
            ..Quantity::from_value(millis)
        }
    }

    /// Parses `input` (see the module docs for the grammar).
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        let s = input.trim();
        if s.is_empty() {
            return Err(QuantityError::Empty);
        }
        let (negative, s) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_len = s
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, suffix) = s.split_at(num_len);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
            return Err(QuantityError::NotANumber);
        }
        let mantissa = parse_mantissa(int_part, frac_part)?;
        let mut exp10 =
            -i64::try_from(frac_part.len()).map_err(|_| QuantityError::TooManyDigits)?;
        let mut pow1024 = 0;
        let mut sub_unit_suffix = None;
        match suffix {
            "" => {}
            "Ki" => pow1024 = 1,
            "Mi" => pow1024 = 2,
            "Gi" => pow1024 = 3,
            "Ti" => pow1024 = 4,
            "Pi" => pow1024 = 5,
            "Ei" => pow1024 = 6,
            "n" => (exp10, sub_unit_suffix) = (exp10 - 9, Some("n")),
            "u" => (exp10, sub_unit_suffix) = (exp10 - 6, Some("u")),
            "m" => (exp10, sub_unit_suffix) = (exp10 - 3, Some("m")),
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            other => match parse_exponent(other) {
                Some(e) => exp10 += e,
                None => return Err(QuantityError::UnknownSuffix(other.to_string())),
            },
        }
        Ok(Quantity {
            negative,
            mantissa,
            exp10,
            pow1024,
            sub_unit_suffix,
        })
    }

    /// Whether the amount is zero (`"0"`, `"-0"`, `"0Mi"`, `"0.000"`).
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// Whether the amount is below zero (`"-0"` is not).
    pub fn is_negative(&self) -> bool {
        self.negative && !self.is_zero()
    }

    /// The suffix `"m"`, `"u"` or `"n"` if the quantity was written with one
    /// (a fraction of a unit), for callers to whom that makes no sense.
    pub fn sub_unit_suffix(&self) -> Option<&'static str> {
        self.sub_unit_suffix
    }

    /// The amount in whole units, rounded **up** like Kubernetes'
    /// `Quantity.Value()`: `"1.5"` → 2, `"100m"` → 1, `"1Ki"` → 1024.
    /// Errors if negative or above `u64::MAX`.
    pub fn value(&self) -> Result<u64, QuantityError> {
        self.ceil_scaled(0)
    }

    /// The amount in thousandths, rounded **up** like Kubernetes'
    /// `Quantity.MilliValue()`: `"0.5"` → 500, `"1u"` → 1, `"2"` → 2000.
    /// Errors if negative or above `u64::MAX`.
    pub fn milli_value(&self) -> Result<u64, QuantityError> {
        self.ceil_scaled(3)
    }

    /// `ceil(amount × 10^scale)`.
    fn ceil_scaled(&self, scale: i64) -> Result<u64, QuantityError> {
        u64::try_from(self.ceil_scaled_wide(scale)?).map_err(|_| QuantityError::TooLarge)
    }

    /// `ceil(amount × 10^scale)` in 128 bits.
    fn ceil_scaled_wide(&self, scale: i64) -> Result<u128, QuantityError> {
        if self.is_zero() {
            return Ok(0);
        }
        if self.negative {
            return Err(QuantityError::Negative);
        }
        let num = 1024u128
            .checked_pow(self.pow1024)
            .and_then(|m| m.checked_mul(self.mantissa))
            .ok_or(QuantityError::TooLarge)?;
        let exp = self.exp10 + scale;
        let num = if exp >= 0 {
            u32::try_from(exp)
                .ok()
                .and_then(|e| 10u128.checked_pow(e))
                .and_then(|m| m.checked_mul(num))
                .ok_or(QuantityError::TooLarge)?
        } else {
            match u32::try_from(exp.unsigned_abs())
                .ok()
                .and_then(|e| 10u128.checked_pow(e))
            {
                Some(den) => num.div_ceil(den),
                None => 1, // a positive amount far below one unit rounds up to 1
            }
        };
        Ok(num)
    }
}

/// The digits of `int_part` and `frac_part` as one integer.
fn parse_mantissa(int_part: &str, frac_part: &str) -> Result<u128, QuantityError> {
    let int_part = int_part.trim_start_matches('0');
    let frac_part = if int_part.is_empty() {
        frac_part.trim_start_matches('0')
    } else {
        frac_part
    };
    if int_part.len() + frac_part.len() > 38 {
        return Err(QuantityError::TooManyDigits);
    }
    Ok(int_part
        .bytes()
        .chain(frac_part.bytes())
        .fold(0u128, |n, d| n * 10 + u128::from(d - b'0')))
}

/// The exponent of a suffix like `e3`, `E-2`, `e+6` (one to four digits).
fn parse_exponent(suffix: &str) -> Option<i64> {
    let e = suffix.strip_prefix(['e', 'E'])?;
    let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    e.parse().ok()
}

/// Bytes as a binary-SI quantity with the largest exact suffix, as
/// apimachinery prints a `BinarySI` amount: `4Gi`, `3884376Ki`, `1000`, `0`.
pub fn format_binary(bytes: u64) -> String {
    const SUFFIXES: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if bytes == 0 {
        return "0".into();
    }
    for (s, shift) in SUFFIXES {
        if bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{s}", bytes >> shift);
        }
    }
    bytes.to_string()
}

pub mod total;

#[cfg(test)]
mod tests {
    use super::*;

    fn value(s: &str) -> Result<u64, QuantityError> {
        Quantity::parse(s)?.value()
    }

    fn milli(s: &str) -> Result<u64, QuantityError> {
        Quantity::parse(s)?.milli_value()
    }

    #[test]
    fn every_suffix_scales_the_number_by_its_power() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("123", 123),
            ("1Ki", 1024),
            ("10Mi", 10 * 1024 * 1024),
            ("1Gi", 1 << 30),
            ("2Ti", 2 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("1k", 1_000),
            ("1M", 1_000_000),
            ("1G", 1_000_000_000),
            ("1T", 1_000_000_000_000),
            ("1P", 1_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("1e3", 1000),
            ("1E3", 1000),
            ("1e+3", 1000),
            ("18446744073709551615", u64::MAX),
        ];
        for (input, want) in cases {
            assert_eq!(value(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn sub_unit_suffixes_scale_down_and_are_reported() {
        assert_eq!(milli("100m"), Ok(100));
        assert_eq!(milli("250000u"), Ok(250));
        assert_eq!(milli("1000000n"), Ok(1));
        for (input, suffix) in [("100m", Some("m")), ("1u", Some("u")), ("5n", Some("n"))] {
            assert_eq!(Quantity::parse(input).unwrap().sub_unit_suffix(), suffix);
        }
        for input in ["100M", "1Mi", "1e-3", "0.001"] {
            assert_eq!(
                Quantity::parse(input).unwrap().sub_unit_suffix(),
                None,
                "{input}"
            );
        }
    }

    #[test]
    fn fractions_and_exponents_combine_exactly() {
        assert_eq!(value("1.5Ki"), Ok(1536));
        assert_eq!(value("0.5Gi"), Ok(1 << 29));
        assert_eq!(value("1.5Gi"), Ok(3 << 29));
        assert_eq!(value("1.5e3"), Ok(1500));
        assert_eq!(value(".5k"), Ok(500));
        assert_eq!(value("5."), Ok(5));
        assert_eq!(value("007"), Ok(7));
        assert_eq!(value("  64Mi "), Ok(64 << 20));
        assert_eq!(value("+1k"), Ok(1000));
        assert_eq!(milli("0.1"), Ok(100));
        assert_eq!(milli("0.5"), Ok(500));
        assert_eq!(milli("1.0001"), Ok(1001));
        assert_eq!(milli("0.00000000000000000000000000000000000001"), Ok(1));
    }

    #[test]
    fn value_and_milli_value_round_up_to_the_next_integer() {
        assert_eq!(value("0.5"), Ok(1));
        assert_eq!(value("100m"), Ok(1));
        assert_eq!(value("1e-3"), Ok(1));
        assert_eq!(value("12E-1"), Ok(2));
        assert_eq!(value("1e-9999"), Ok(1));
        assert_eq!(milli("1n"), Ok(1));
        assert_eq!(milli("0.0001"), Ok(1));
        assert_eq!(milli("1.0001"), Ok(1001));
    }

    #[test]
    fn constructed_quantities_convert_back_to_what_they_were_built_from() {
        assert_eq!(Quantity::from_value(7).value(), Ok(7));
        assert_eq!(Quantity::from_value(7).milli_value(), Ok(7000));
        assert_eq!(Quantity::from_millis(1500).milli_value(), Ok(1500));
        assert_eq!(Quantity::from_millis(1500).value(), Ok(2));
        assert!(Quantity::from_value(0).is_zero());
        assert_eq!(Quantity::from_value(u64::MAX).value(), Ok(u64::MAX));
    }

    #[test]
    fn negative_zero_is_zero_but_other_negatives_cannot_convert() {
        for zero in ["-0", "-0.0", "-0Mi", "0m"] {
            let q = Quantity::parse(zero).unwrap();
            assert!(q.is_zero() && !q.is_negative(), "{zero}");
            assert_eq!(q.value(), Ok(0));
        }
        let q = Quantity::parse("-5Mi").unwrap();
        assert!(q.is_negative());
        assert_eq!(q.value(), Err(QuantityError::Negative));
        assert_eq!(milli("-100m"), Err(QuantityError::Negative));
    }

    #[test]
    fn amounts_beyond_u64_are_too_large() {
        assert_eq!(value("16Ei"), Err(QuantityError::TooLarge));
        assert_eq!(value("18446744073709551616"), Err(QuantityError::TooLarge));
        assert_eq!(value("1e9999"), Err(QuantityError::TooLarge));
        assert_eq!(milli("20000000000000000"), Err(QuantityError::TooLarge));
        assert_eq!(value("1000Ei"), Err(QuantityError::TooLarge));
    }

    #[test]
    fn malformed_quantities_say_what_is_wrong() {
        use QuantityError::*;
        let suffix = |s: &str| UnknownSuffix(s.to_string());
        for (input, want) in [
            ("", Empty),
            ("   ", Empty),
            ("Mi", NotANumber),
            ("m", NotANumber),
            ("abc", NotANumber),
            ("--1", NotANumber),
            ("+-1", NotANumber),
            ("1..2", NotANumber),
            ("1.2.3", NotANumber),
            ("1K", suffix("K")),
            ("1mi", suffix("mi")),
            ("10Q", suffix("Q")),
            ("12x", suffix("x")),
            ("1 Mi", suffix(" Mi")),
            ("1e", suffix("e")),
            ("1e3.5", suffix("e3.5")),
            ("1e99999", suffix("e99999")),
            ("1e+", suffix("e+")),
            ("123456789012345678901234567890123456789", TooManyDigits),
        ] {
            assert_eq!(Quantity::parse(input).map(|_| ()), Err(want), "{input:?}");
        }
        assert_eq!(
            QuantityError::UnknownSuffix("K".into()).to_string(),
            "unknown suffix \"K\" (expected Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or an exponent like e3)"
        );
    }
}
