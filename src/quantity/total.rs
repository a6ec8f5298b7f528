//! Sums and maxima of quantities as apimachinery's `Quantity.Add` and
//! `Cmp` make them, printed as its `Quantity.String()` prints the result:
//! what a pod's request and limit totals look like in its status.
//!
//! Why the format matters: a Go quantity remembers how it was written
//! (`BinarySI` for `Ki`..`Ei`, `DecimalExponent` for `e3`, else
//! `DecimalSI`); a sum keeps the format of the amount it started from
//! (or of the first non-zero amount added to a zero) and prints in that
//! format's canonical form: `100m` + `200m` is `300m`, `128Mi` + `128Mi`
//! is `256Mi`, `1Gi` + `100M` is `1173741824`. Printing every total
//! canonically matches kubelet for pods from the API server, which stores
//! quantities in canonical form.
//!
//! Amounts are kept exactly in nano-units (apimachinery rounds anything
//! finer up to nano when it parses); a negative or unparseable quantity
//! counts as absent (the API server rejects them in requests and limits).

use super::Quantity;

/// How apimachinery prints a quantity (`resource.Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `Ki`, `Mi`, ... suffixes.
    BinarySI,
    /// `e3`, `E-2`, ... exponents.
    DecimalExponent,
    /// `m`, `k`, `M`, ... suffixes, or none.
    DecimalSI,
}

impl Format {
    /// The format apimachinery's `ParseQuantity` gives `s`.
    fn of(s: &str) -> Format {
        let s = s.trim();
        let suffix = s.trim_start_matches(|c: char| c.is_ascii_digit() || "+-.".contains(c));
        if suffix.ends_with('i') {
            Format::BinarySI
        } else if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSI
        }
    }
}

/// An amount being totalled: its nano-units and its format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Total {
    nanos: u128,
    format: Format,
}

impl Total {
    /// The amount `s` denotes, in the format it was written in; `None`
    /// when it is negative, malformed or beyond 128 bits of nano-units.
    pub fn parse(s: &str) -> Option<Total> {
        let q = Quantity::parse(s).ok()?;
        if q.is_negative() {
            return None;
        }
        Some(Total {
            nanos: q.ceil_scaled_wide(9).ok()?,
            format: Format::of(s),
        })
    }

    /// Whole millis in `DecimalSI` (`resource.NewMilliQuantity`).
    pub fn from_millis(millis: u64) -> Total {
        Total {
            nanos: u128::from(millis) * 1_000_000,
            format: Format::DecimalSI,
        }
    }

    /// Whole units in `BinarySI` (`resource.NewQuantity(n, BinarySI)`).
    pub fn from_bytes(bytes: u64) -> Total {
        Total {
            nanos: u128::from(bytes) * 1_000_000_000,
            format: Format::BinarySI,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// `Quantity.Add`: a zero takes the format of what is added to it.
    pub fn add(&mut self, other: &Total) {
        if self.nanos == 0 {
            self.format = other.format;
        }
        self.nanos = self.nanos.saturating_add(other.nanos);
    }

    /// Whether `self` is more than `other` (`Cmp(..) > 0`).
    pub fn exceeds(&self, other: &Total) -> bool {
        self.nanos > other.nanos
    }

    /// `Quantity.String()` of the amount in its format's canonical form.
    pub fn to_go_string(&self) -> String {
        if self.nanos == 0 {
            return "0".into();
        }
        let whole = self
            .nanos
            .is_multiple_of(1_000_000_000)
            .then_some(self.nanos / 1_000_000_000);
        match (self.format, whole) {
            (Format::BinarySI, Some(n)) if n >= 1024 => binary(n),
            (Format::DecimalExponent, _) => decimal(self.nanos, true),
            _ => decimal(self.nanos, false),
        }
    }
}

/// Whole units with the largest power of 1024 that divides them.
fn binary(mut n: u128) -> String {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut k = 0;
    while k + 1 < SUFFIXES.len() && n.is_multiple_of(1024) {
        n /= 1024;
        k += 1;
    }
    format!("{n}{}", SUFFIXES[k])
}

/// Nano-units as the smallest integer mantissa times a power of ten that
/// is a multiple of three (apimachinery's `AsCanonicalBytes`), with its SI
/// suffix or, for `exponent` or beyond `E`, as `e<power>`.
fn decimal(nanos: u128, exponent: bool) -> String {
    let (mut n, mut e) = (nanos, -9i32);
    while n.is_multiple_of(10) {
        n /= 10;
        e += 1;
    }
    let r = e.rem_euclid(3);
    n = n.saturating_mul(10u128.pow(r.unsigned_abs()));
    e -= r;
    let si = match e {
        -9 => Some("n"),
        -6 => Some("u"),
        -3 => Some("m"),
        0 => Some(""),
        3 => Some("k"),
        6 => Some("M"),
        9 => Some("G"),
        12 => Some("T"),
        15 => Some("P"),
        18 => Some("E"),
        _ => None,
    };
    match si {
        _ if e == 0 => n.to_string(),
        Some(s) if !exponent => format!("{n}{s}"),
        _ => format!("{n}e{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(items: &[&str]) -> String {
        let mut t = Total::parse(items[0]).unwrap();
        for s in &items[1..] {
            t.add(&Total::parse(s).unwrap());
        }
        t.to_go_string()
    }

    #[test]
    fn a_sum_prints_canonically_in_the_format_of_its_first_amount() {
        assert_eq!(sum(&["100m", "200m"]), "300m");
        assert_eq!(sum(&["500m", "500m"]), "1");
        assert_eq!(sum(&["1", "1500m"]), "2500m");
        assert_eq!(sum(&["128Mi", "128Mi"]), "256Mi");
        assert_eq!(sum(&["1Gi", "100M"]), "1173741824");
        assert_eq!(sum(&["100M", "1Gi"]), "1173741824");
        assert_eq!(sum(&["100M", "28M"]), "128M");
        assert_eq!(sum(&["1e3", "1e3"]), "2e3");
        assert_eq!(sum(&["1", "2"]), "3");
        assert_eq!(sum(&["1Ki", "1Ki"]), "2Ki");
    }

    #[test]
    fn a_zero_takes_the_format_of_what_is_added_to_it() {
        assert_eq!(sum(&["0", "64Mi"]), "64Mi");
        assert_eq!(sum(&["0Mi", "100m"]), "100m");
    }

    #[test]
    fn binary_amounts_below_1024_or_fractional_print_as_decimal() {
        assert_eq!(sum(&["512", "1Ki"]), "1536");
        assert_eq!(sum(&["1Ki", "512"]), "1536");
        assert_eq!(sum(&["1000Mi", "24Mi"]), "1Gi");
        // apimachinery prints a BinarySI amount below 1024 as DecimalSI.
        assert_eq!(Total::from_bytes(1000).to_go_string(), "1k");
        assert_eq!(Total::from_bytes(0).to_go_string(), "0");
    }

    #[test]
    fn built_amounts_print_as_apimachinery_prints_them() {
        assert_eq!(Total::from_millis(79).to_go_string(), "79m");
        assert_eq!(Total::from_millis(2000).to_go_string(), "2");
        assert_eq!(Total::from_bytes(268_435_456).to_go_string(), "256Mi");
    }

    #[test]
    fn the_larger_amount_exceeds_whatever_the_format() {
        let a = Total::parse("1Gi").unwrap();
        let b = Total::parse("1G").unwrap();
        assert!(a.exceeds(&b));
        assert!(!b.exceeds(&a));
        assert!(Total::parse("-1").is_none());
    }
}
