//! Kubernetes resource quantities (`10Gi`, `500M`, `1e9`) as byte counts, to
//! compare a volume's requested and actual sizes whatever units each uses.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The bytes a quantity stands for, rounded up to a whole byte; `None` for
/// anything that is not a quantity (or a negative one).
pub fn bytes(q: &Quantity) -> Option<u128> {
    let s = q.0.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let (mantissa_digits, scale) = decimal(number)?;
    // value = mantissa_digits * 10^-scale * multiplier
    let (base, exp): (u128, i32) = match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        e if e.starts_with(['e', 'E']) => (1, e[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    let exp = exp - scale as i32;
    let value = mantissa_digits.checked_mul(base)?;
    if exp >= 0 {
        value.checked_mul(10u128.checked_pow(exp as u32)?)
    } else {
        let div = 10u128.checked_pow((-exp) as u32)?;
        Some(value.div_ceil(div))
    }
}

/// `"12.5"` → (125, 1): the digits as an integer and how many were after the
/// point. Signs: `+` allowed, `-` only for zero (sizes are never negative).
fn decimal(number: &str) -> Option<(u128, u32)> {
    let (negative, number) = match number.as_bytes().first()? {
        b'+' => (false, &number[1..]),
        b'-' => (true, &number[1..]),
        _ => (false, number),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = format!("{whole}{frac}");
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: u128 = digits.parse().ok()?;
    if negative && value != 0 {
        return None;
    }
    Some((value, frac.len() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Option<u128> {
        bytes(&Quantity(s.into()))
    }

    #[test]
    fn binary_decimal_and_exponent_suffixes() {
        assert_eq!(b("10Gi"), Some(10 << 30));
        assert_eq!(b("10240Mi"), b("10Gi"));
        assert_eq!(b("1G"), Some(1_000_000_000));
        assert_eq!(b("1e9"), Some(1_000_000_000));
        assert_eq!(b("1.5Gi"), Some(3 << 29));
        assert_eq!(b("134217728"), Some(128 << 20));
        assert_eq!(b("+64Mi"), Some(64 << 20));
        assert_eq!(b("0"), Some(0));
    }

    #[test]
    fn fractions_of_a_byte_round_up() {
        assert_eq!(b("500m"), Some(1));
        assert_eq!(b("1500m"), Some(2));
        assert_eq!(b("0.1"), Some(1));
    }

    #[test]
    fn anything_else_is_not_a_size() {
        for bad in [
            "", "Gi", "banana", "10Gb", "1.2.3Gi", "-1Gi", "10 Gi", "1e", ".",
        ] {
            assert_eq!(b(bad), None, "{bad:?}");
        }
    }
}
