//! Property tests of key parsing and fingerprints.

use idem_core::{Fingerprint, IdempotencyKey, KeyError, MAX_KEY_LEN};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Any input at all gives a key or an error that names a rule; never a panic.
    #[test]
    fn parsing_arbitrary_bytes_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..600)) {
        match IdempotencyKey::parse_bytes(&raw) {
            Ok(key) => {
                prop_assert!(!key.as_str().is_empty() && key.as_str().len() <= MAX_KEY_LEN);
                prop_assert!(key.as_str().bytes().all(|b| (0x20..=0x7e).contains(&b)));
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn parsing_arbitrary_strings_never_panics(raw in ".{0,300}") {
        let _ = IdempotencyKey::parse(&raw);
    }

    /// Every visible-ASCII key of 1 to 255 characters is accepted as is (a value
    /// opening with `"` is read as a quoted string, so bare keys start with
    /// anything else), and quoting it (with escapes) gives the same key.
    #[test]
    fn valid_keys_round_trip_through_quoting(raw in "[!#-~][!-~]{0,254}") {
        let bare = IdempotencyKey::parse(&raw).expect("visible ASCII within the limit");
        prop_assert_eq!(bare.as_str(), raw.as_str());
        let quoted = format!("\"{}\"", raw.replace('\\', "\\\\").replace('"', "\\\""));
        prop_assert_eq!(IdempotencyKey::parse(&quoted).expect("quoted form"), bare);
    }

    #[test]
    fn over_long_keys_are_refused_with_their_length(len in 256usize..1000) {
        prop_assert_eq!(IdempotencyKey::parse(&"k".repeat(len)), Err(KeyError::TooLong { len }));
    }

    /// Key order never changes a fingerprint.
    #[test]
    fn fingerprint_ignores_map_order(entries in proptest::collection::btree_map("[a-z]{1,8}", any::<i64>(), 0..20)) {
        let forward: serde_json::Map<String, serde_json::Value> =
            entries.iter().map(|(k, v)| (k.clone(), (*v).into())).collect();
        let members: Vec<String> = entries.iter().rev().map(|(k, v)| format!("\"{k}\" :\n{v}")).collect();
        let backward_text = format!("{{{}}}", members.join(" , "));
        let backward: serde_json::Value = serde_json::from_str(&backward_text).expect("json");
        prop_assert_eq!(
            Fingerprint::of("op", &forward).expect("fp"),
            Fingerprint::of("op", &backward).expect("fp")
        );
    }
}
