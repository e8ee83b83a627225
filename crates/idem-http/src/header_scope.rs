//! Keys scoped by a request header (an API key, a tenant header): the
//! scope a header's value names.

use idem_core::{Fingerprint, Scope};

use crate::problem::Problem;
use crate::problem_kind::ProblemKind;

/// The scope named by the one value of header `name` (`values`: every
/// value the request sent): `<name>:` and the SHA-256 digest of the value,
/// so that a secret (an API key) is never logged or stored as it is. A
/// request without the header, with it twice, or with a value that is empty
/// or not visible ASCII is refused (400, `bad-request`, saying which).
pub fn scope_from_values<'a>(
    name: &str,
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Scope, Problem> {
    let mut values = values.into_iter();
    let refuse = |what: &str| {
        Err(Problem::new(
            ProblemKind::BadRequest,
            format!("this endpoint keeps idempotency keys per `{name}` header, and {what}"),
        ))
    };
    let (Some(value), None) = (values.next(), values.next()) else {
        return refuse("the request has none, or more than one: send it once");
    };
    let value = value.trim_ascii();
    if value.is_empty() || !value.iter().all(|b| (0x20..0x7f).contains(b)) {
        return refuse("its value is empty or not visible ASCII");
    }
    let digest = Fingerprint::builder("scope-header")
        .bytes(name, value)
        .finish()
        .to_hex();
    Ok(Scope::new(format!("{name}:{digest}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_names_a_scope_without_showing_its_value() {
        let scope = scope_from_values("x-api-key", [&b"sk_live_123"[..]]).map(|s| s.to_string());
        let scope = scope.unwrap_or_default();
        assert!(scope.starts_with("x-api-key:"), "{scope}");
        assert!(!scope.contains("sk_live_123"), "{scope}");
        let again = scope_from_values("x-api-key", [&b" sk_live_123 "[..]]).map(|s| s.to_string());
        assert_eq!(again.unwrap_or_default(), scope);
        let other = scope_from_values("x-api-key", [&b"sk_live_456"[..]]).map(|s| s.to_string());
        assert_ne!(other.unwrap_or_default(), scope);
    }

    #[test]
    fn a_missing_repeated_or_unreadable_header_is_refused_saying_which() {
        for values in [
            vec![],
            vec![&b"a"[..], &b"b"[..]],
            vec![&b""[..]],
            vec![&b"\xff"[..]],
        ] {
            let refused = scope_from_values("x-api-key", values).map(|s| s.to_string());
            let problem = refused.expect_err("refused");
            assert_eq!(problem.status(), 400);
            assert!(
                problem.detail().contains("`x-api-key`"),
                "{}",
                problem.detail()
            );
        }
    }
}
