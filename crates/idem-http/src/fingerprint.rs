//! The fingerprint of an HTTP request: method, route, path, query and body.

use idem_core::{FingerprintBuilder, IgnoredFields};

/// Starts the fingerprint of an HTTP request: method, route, path and query.
/// Query parameters are sorted by name (repeated names keep their order), so
/// `?a=1&b=2` and `?b=2&a=1` are the same request.
pub fn request_fingerprint(
    operation: &str,
    method: &str,
    route: Option<&str>,
    path: &str,
    query: Option<&str>,
) -> FingerprintBuilder {
    let mut pairs: Vec<(&str, &str)> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let line = [
        ("method", method.as_bytes()),
        ("route", route.unwrap_or("").as_bytes()),
        ("path", path.as_bytes()),
    ];
    let query = pairs
        .into_iter()
        .flat_map(|(k, v)| [("query-name", k.as_bytes()), ("query-value", v.as_bytes())]);
    let mut fp = idem_core::Fingerprint::builder(operation);
    fp.fields(line.into_iter().chain(query));
    fp
}

/// Adds a request body under `label`: parsed if the request is JSON (so that
/// key order and whitespace do not matter) and it parses, with the fields
/// `ignored` names left out; else byte for byte.
pub fn add_body(
    fp: &mut FingerprintBuilder,
    label: &str,
    json: bool,
    bytes: &[u8],
    ignored: &IgnoredFields,
) {
    let parsed = json
        .then(|| serde_json::from_slice::<serde_json::Value>(bytes).ok())
        .flatten();
    match parsed {
        Some(value) => fp.json_without(label, &value, ignored),
        None => fp.bytes(label, bytes),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form recorded fingerprints were taken with: method, route and
    /// path, then each query parameter (sorted by name) as a name and a
    /// value. A retry sent across an upgrade that changed it would be
    /// refused as a reused key.
    #[test]
    fn a_request_s_fingerprint_keeps_the_form_of_recorded_ones() {
        let mut by_part = idem_core::Fingerprint::builder("http");
        for (name, value) in [
            ("method", "POST"),
            ("route", "/accounts/{id}/debits"),
            ("path", "/accounts/kim/debits"),
            ("query-name", "a"),
            ("query-value", "1"),
            ("query-name", "b"),
            ("query-value", ""),
        ] {
            by_part.bytes(name, value.as_bytes());
        }
        let built = request_fingerprint(
            "http",
            "POST",
            Some("/accounts/{id}/debits"),
            "/accounts/kim/debits",
            Some("b&a=1"),
        );
        assert_eq!(built.finish(), by_part.finish());
    }
}
