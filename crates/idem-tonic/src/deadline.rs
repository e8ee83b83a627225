//! The call's deadline, from its `grpc-timeout` header, so that a call that
//! outlives it is answered `DEADLINE_EXCEEDED` by the layer.
//!
//! tonic's server enforces the same header too, but answers
//! `CANCELLED "Timeout expired"`, which retry policies do not treat as a
//! passed deadline. The layer answers a little before it, with the code the
//! gRPC spec gives; the covered method is not cancelled (it finishes on a
//! task of its own and is recorded, as for any caller that goes away).

use std::time::Duration;

use http::HeaderMap;

/// How much earlier than tonic's own timer the layer answers, so that its
/// answer is the one the client gets.
pub(crate) const AHEAD: Duration = Duration::from_millis(3);

/// The `grpc-timeout` of a call: at most 8 digits and a unit (`H`, `M`,
/// `S`, `m`, `u`, `n`); `None` if absent or malformed.
pub(crate) fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &str) -> Option<Duration> {
        let mut h = HeaderMap::new();
        h.insert("grpc-timeout", v.parse().unwrap());
        grpc_timeout(&h)
    }

    #[test]
    fn timeouts_parse_as_the_spec_spells_them() {
        assert_eq!(parse("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse("1H"), Some(Duration::from_hours(1)));
        assert_eq!(parse("5M"), Some(Duration::from_mins(5)));
        assert_eq!(parse("250u"), Some(Duration::from_micros(250)));
        assert_eq!(parse("99999999n"), Some(Duration::from_nanos(99_999_999)));
        assert_eq!(parse("123456789m"), None, "more than 8 digits");
        assert_eq!(parse("m"), None);
        assert_eq!(parse("10x"), None);
        assert_eq!(parse("-1S"), None);
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }
}
