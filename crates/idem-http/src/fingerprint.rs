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
    let mut fp = idem_core::Fingerprint::builder(operation);
    fp.bytes("method", method.as_bytes());
    fp.bytes("route", route.unwrap_or("").as_bytes());
    fp.bytes("path", path.as_bytes());
    let mut pairs: Vec<(&str, &str)> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in pairs {
        fp.bytes("query-name", k.as_bytes());
        fp.bytes("query-value", v.as_bytes());
    }
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
