//! Request fingerprints: a digest of what an operation was asked to do.

use std::fmt;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::canonical;
use crate::digest::{put_field, Digest, DigestKind};
use crate::ignored_fields::IgnoredFields;

/// A SHA-256 digest of an operation's name and input.
///
/// A key reused with a different fingerprint is a different request, which the
/// engine refuses (`Mismatch`) instead of replaying the first answer.
///
/// The encoding is canonical and length-prefixed: the same input gives the same
/// digest in every process, on every platform and after a restart. JSON objects
/// (and Rust maps, `HashMap` included) are hashed with their keys sorted, so key
/// order and whitespace never matter.
///
/// ```
/// use idem_core::Fingerprint;
/// use std::collections::HashMap;
///
/// let a: HashMap<&str, u32> = [("amount", 1000), ("fee", 5)].into();
/// let b = serde_json::json!({"fee": 5, "amount": 1000});
/// assert_eq!(
///     Fingerprint::of("debit", &a).unwrap(),
///     Fingerprint::of("debit", &b).unwrap(),
/// );
/// assert_ne!(
///     Fingerprint::of("debit", &a).unwrap(),
///     Fingerprint::of("credit", &a).unwrap(),
/// );
/// ```
pub type Fingerprint = Digest<FingerprintKind>;

/// The kind of a [`Fingerprint`].
#[derive(Debug)]
pub enum FingerprintKind {}

impl DigestKind for FingerprintKind {
    const NAME: &'static str = "Fingerprint";
}

/// The input could not be turned into a canonical form (for example a map whose
/// keys are not strings or numbers, or a `Serialize` impl that failed).
#[derive(Debug, thiserror::Error)]
#[error("cannot fingerprint the operation input: {0}")]
pub struct FingerprintError(#[source] serde_json::Error);

impl Digest<FingerprintKind> {
    /// The fingerprint of `operation` applied to any serializable `input`.
    pub fn of<T: Serialize + ?Sized>(operation: &str, input: &T) -> Result<Self, FingerprintError> {
        let mut b = Self::builder(operation);
        b.serialize("input", input)?;
        Ok(b.finish())
    }

    /// The fingerprint of `operation` applied to a JSON `input`, with the
    /// fields `ignored` names left out: a retry that changed only those is
    /// the same request. With no field ignored, the same digest as
    /// [`of`](Self::of) gives the same value.
    pub fn of_without(operation: &str, input: &Value, ignored: &IgnoredFields) -> Self {
        let mut b = Self::builder(operation);
        b.json_without("input", input, ignored);
        b.finish()
    }

    /// Starts a fingerprint of `operation` built from named parts (method,
    /// route, parameters, body...). Parts are hashed in the order given.
    pub fn builder(operation: &str) -> FingerprintBuilder {
        let mut h = Sha256::new();
        put_field(&mut h, b"idem/fingerprint/v1");
        put_field(&mut h, operation.as_bytes());
        FingerprintBuilder { h }
    }
}

/// Builds a [`Fingerprint`] from named parts; see [`Fingerprint::builder`].
#[derive(Clone)]
pub struct FingerprintBuilder {
    h: Sha256,
}

impl fmt::Debug for FingerprintBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FingerprintBuilder").finish_non_exhaustive()
    }
}

impl FingerprintBuilder {
    /// Adds a part given as raw bytes.
    pub fn bytes(&mut self, name: &str, value: &[u8]) -> &mut Self {
        self.h.update(b"b");
        put_field(&mut self.h, name.as_bytes());
        put_field(&mut self.h, value);
        self
    }

    /// Adds named parts given as raw bytes, in order: the same fingerprint
    /// as one [`bytes`](Self::bytes) for each.
    pub fn fields<'a>(
        &mut self,
        parts: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> &mut Self {
        for (name, value) in parts {
            self.bytes(name, value);
        }
        self
    }

    /// Adds a part given as a JSON value, hashed canonically.
    pub fn json(&mut self, name: &str, value: &Value) -> &mut Self {
        self.h.update(b"j");
        put_field(&mut self.h, name.as_bytes());
        canonical::write_value(&mut self.h, value);
        self
    }

    /// Adds a part given as a JSON value with the fields `ignored` names
    /// left out, hashed canonically; the value itself is left as it is.
    pub fn json_without(
        &mut self,
        name: &str,
        value: &Value,
        ignored: &IgnoredFields,
    ) -> &mut Self {
        if ignored.is_empty() {
            return self.json(name, value);
        }
        let mut kept = value.clone();
        ignored.remove_from(&mut kept);
        self.json(name, &kept)
    }

    /// Adds a part given as any serializable value, hashed canonically.
    pub fn serialize<T: Serialize + ?Sized>(
        &mut self,
        name: &str,
        value: &T,
    ) -> Result<&mut Self, FingerprintError> {
        // Written straight from `value` (the form `json` gives its
        // `to_value`, byte for byte), whole before the hash sees any of it.
        let mut form = Vec::with_capacity(128);
        canonical::write(&mut form, value).map_err(FingerprintError)?;
        self.h.update(b"j");
        put_field(&mut self.h, name.as_bytes());
        self.h.update(&form);
        Ok(self)
    }

    /// The finished fingerprint.
    pub fn finish(&self) -> Fingerprint {
        Fingerprint::from_bytes(self.h.clone().finalize().into())
    }
}

/// The finished fingerprint ([`FingerprintBuilder::finish`]): a builder
/// goes straight into [`Call::new`](crate::Call::new).
impl From<FingerprintBuilder> for Fingerprint {
    fn from(builder: FingerprintBuilder) -> Self {
        builder.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Pinned, computed apart from this code: a fingerprint that changed
    /// between versions would answer a retry sent across an upgrade with
    /// 422, as a reused key.
    #[test]
    fn the_form_is_the_one_recorded_fingerprints_were_taken_with() {
        #[derive(serde::Serialize)]
        struct Debit {
            memo: &'static str,
            amount: u64,
            account: i32,
        }
        let typed = Fingerprint::of(
            "debit",
            &Debit {
                memo: "tea",
                amount: 1000,
                account: 42,
            },
        )
        .expect("fingerprint");
        let json = Fingerprint::of(
            "debit",
            &json!({"account": 42, "amount": 1000, "memo": "tea"}),
        )
        .expect("fingerprint");
        let pinned = "e8b3ea40bbb1fd87a6fa713bfaa00286c7e80d4a1de8864584b7baced4fcad2f";
        assert_eq!(typed.to_hex(), pinned);
        assert_eq!(json.to_hex(), pinned);
    }

    /// A fingerprint with no field left out is the one recorded before
    /// fields could be: an upgrade does not turn retries into reused keys.
    #[test]
    fn leaving_out_no_field_is_the_fingerprint_of_the_whole_input() {
        let input = json!({"order": 42, "sent_at": "10:00"});
        let whole = Fingerprint::of("ship", &input).expect("fingerprint");
        assert_eq!(
            Fingerprint::of_without("ship", &input, &IgnoredFields::NONE),
            whole
        );
        let ignored = IgnoredFields::new(["/sent_at"]).expect("pointer");
        let without = Fingerprint::of_without("ship", &input, &ignored);
        assert_ne!(without, whole);
        assert_eq!(
            without,
            Fingerprint::of("ship", &json!({"order": 42})).expect("fingerprint")
        );
    }

    #[test]
    fn key_order_and_spacing_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"x":[1,2],"y":null}}"#).unwrap();
        let b: Value =
            serde_json::from_str("{ \"b\" : { \"y\": null, \"x\": [1, 2] },\n \"a\": 1 }").unwrap();
        assert_eq!(
            Fingerprint::of("op", &a).unwrap(),
            Fingerprint::of("op", &b).unwrap()
        );
    }

    #[test]
    fn types_and_structure_are_distinguished() {
        let fp = |v: Value| Fingerprint::of("op", &v).unwrap();
        assert_ne!(fp(json!("1")), fp(json!(1)));
        assert_ne!(fp(json!([["a"], "b"])), fp(json!([["a", "b"]])));
        assert_ne!(fp(json!({"ab": "c"})), fp(json!({"a": "bc"})));
        assert_ne!(fp(json!(null)), fp(json!(false)));
        assert_ne!(fp(json!([1, 2])), fp(json!([2, 1])));
    }

    #[test]
    fn parts_are_length_prefixed() {
        let one = Fingerprint::builder("op")
            .bytes("p", b"ab")
            .bytes("q", b"c")
            .finish();
        let two = Fingerprint::builder("op")
            .bytes("p", b"a")
            .bytes("q", b"bc")
            .finish();
        assert_ne!(one, two);
    }

    #[test]
    fn digest_is_stable_across_processes() {
        // A fixed value: if this changes, every stored record stops matching its
        // retries, so the change needs a new version tag, not a new constant.
        let fp = Fingerprint::of("debit", &json!({"amount": 1000, "currency": "EUR"})).unwrap();
        assert_eq!(
            fp.to_hex(),
            "b1cf06e5a0415d5f20b1c1abe8e9ddbd51d5d0d56f62c9a6b6403a0f93f5092d"
        );
        // Every kind of number keeps its digits.
        let numbers = json!({"neg": -5, "float": 1.5, "max": u64::MAX, "min": i64::MIN, "zero": 0});
        let fp = Fingerprint::of("numbers", &numbers).unwrap();
        assert_eq!(
            fp.to_hex(),
            "69917442e5fd2fcbb9a923dd25e63338ff8ca2014a2f43af45121ecfdec44bd4"
        );
    }
}
