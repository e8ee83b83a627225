//! `IgnoredFields`: the fields of a JSON input that a fingerprint leaves out,
//! named by JSON pointers (RFC 6901).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// Fields of a JSON input that do not make it another request: a producer's
/// `sent_at`, a trace id, a retry counter. A retry that differs from the
/// first attempt only in these fields is the same request, replayed; any
/// other difference under the same key is still refused as a reused key.
///
/// Each field is a JSON pointer (RFC 6901): `/sent_at`, `/meta/trace_id`,
/// `/items/0/added_at` (`~1` stands for `/` in a name, `~0` for `~`). A
/// field left out of an object is removed from it; an element of an array
/// is replaced by `null`, so the other elements keep their positions. A
/// pointer that names nothing in an input changes nothing in it.
///
/// Leave out only what cannot change the operation's effect: a field left
/// out here is one a retry may change without being refused, and the
/// retry gets the first attempt's answer.
///
/// ```
/// use idem_core::{Fingerprint, IgnoredFields};
/// use serde_json::json;
///
/// let ignored = IgnoredFields::new(["/sent_at", "/meta/trace"])?;
/// let first = json!({"order": 42, "sent_at": "10:00", "meta": {"trace": "a"}});
/// let retry = json!({"order": 42, "sent_at": "10:05", "meta": {"trace": "b"}});
/// let other = json!({"order": 43, "sent_at": "10:00", "meta": {"trace": "a"}});
/// let fp = |v| Fingerprint::of_without("ship", &v, &ignored);
/// assert_eq!(fp(first.clone()), fp(retry));
/// assert_ne!(fp(first), fp(other));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct IgnoredFields {
    /// `None` when no field is left out.
    named: Option<Arc<Named>>,
}

#[derive(PartialEq, Eq)]
struct Named {
    /// Each pointer split into its unescaped names.
    fields: Vec<Vec<String>>,
    /// The pointers as given, for `Debug`.
    pointers: Vec<String>,
}

/// A field that is not a JSON pointer to a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pointer:?} cannot name a field to leave out of a fingerprint: {why}")]
pub struct IgnoredFieldError {
    pointer: String,
    why: &'static str,
}

impl IgnoredFields {
    /// The fields named by `pointers`.
    ///
    /// # Errors
    ///
    /// A pointer that does not start with `/` (the empty pointer, which
    /// would leave out the whole input, included) or holds a `~` not
    /// followed by `0` or `1`.
    pub fn new<I, S>(pointers: I) -> Result<Self, IgnoredFieldError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let pointers: Vec<String> = pointers.into_iter().map(Into::into).collect();
        let fields = pointers
            .iter()
            .map(|p| parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        let named = (!fields.is_empty()).then(|| Arc::new(Named { fields, pointers }));
        Ok(Self { named })
    }

    /// No field left out: what a fingerprint takes by default.
    pub const NONE: Self = Self { named: None };

    /// No field is left out.
    pub fn is_empty(&self) -> bool {
        self.named.is_none()
    }

    /// The pointers, as given.
    pub fn pointers(&self) -> impl Iterator<Item = &str> {
        self.named
            .iter()
            .flat_map(|n| n.pointers.iter().map(String::as_str))
    }

    /// Removes the fields from `value`: from an object, the member; from an
    /// array, the element's value, replaced by `null`.
    pub fn remove_from(&self, value: &mut Value) {
        let Some(named) = &self.named else {
            return;
        };
        for names in &named.fields {
            let Some((last, parents)) = names.split_last() else {
                continue;
            };
            let parent = parents
                .iter()
                .try_fold(&mut *value, |at, name| child(at, name));
            match parent {
                Some(Value::Object(members)) => {
                    members.remove(last);
                }
                Some(Value::Array(items)) => {
                    if let Some(item) = index(last).and_then(|i| items.get_mut(i)) {
                        *item = Value::Null;
                    }
                }
                _ => {}
            }
        }
    }
}

impl fmt::Debug for IgnoredFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.pointers()).finish()
    }
}

fn child<'v>(at: &'v mut Value, name: &str) -> Option<&'v mut Value> {
    match at {
        Value::Object(members) => members.get_mut(name),
        Value::Array(items) => index(name).and_then(|i| items.get_mut(i)),
        _ => None,
    }
}

/// An array index as RFC 6901 writes it: digits, without a leading zero.
fn index(name: &str) -> Option<usize> {
    let digits = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
    let canonical = name == "0" || !name.starts_with('0');
    (digits && canonical).then(|| name.parse().ok()).flatten()
}

fn parse(pointer: &str) -> Result<Vec<String>, IgnoredFieldError> {
    let refuse = |why| IgnoredFieldError {
        pointer: pointer.to_owned(),
        why,
    };
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(refuse(if pointer.is_empty() {
            "the empty pointer names the whole input"
        } else {
            "a JSON pointer starts with '/'"
        }));
    };
    rest.split('/')
        .map(|name| {
            let mut out = String::with_capacity(name.len());
            let mut chars = name.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => out.push('~'),
                    Some('1') => out.push('/'),
                    _ => return Err(refuse("'~' is written '~0' and '/' in a name '~1'")),
                }
            }
            Ok(out)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn without(pointers: &[&str], mut value: Value) -> Value {
        IgnoredFields::new(pointers.iter().copied())
            .expect("pointers")
            .remove_from(&mut value);
        value
    }

    #[test]
    fn members_are_removed_and_array_elements_nulled() {
        let value = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, {"t": 4, "u": 5}, 3]});
        assert_eq!(
            without(&["/a", "/b/c", "/e/1/t", "/e/2"], value),
            json!({"b": {"d": 3}, "e": [1, {"u": 5}, null]})
        );
    }

    #[test]
    fn escaped_names_and_missing_paths() {
        let value = json!({"a/b": 1, "m~n": 2, "k": 3, "arr": [1]});
        assert_eq!(
            without(
                &[
                    "/a~1b",
                    "/m~0n",
                    "/nope/deeper",
                    "/k/x",
                    "/arr/01",
                    "/arr/9"
                ],
                value
            ),
            json!({"k": 3, "arr": [1]})
        );
    }

    #[test]
    fn a_pointer_that_names_no_field_is_refused_with_the_reason() {
        for (pointer, why) in [
            ("", "whole input"),
            ("sent_at", "starts with '/'"),
            ("/a~2", "'~0'"),
            ("/a~", "'~0'"),
        ] {
            let e = IgnoredFields::new([pointer]).expect_err(pointer);
            assert!(e.to_string().contains(why), "{pointer}: {e}");
            assert!(e.to_string().contains(&format!("{pointer:?}")), "{e}");
        }
    }
}
