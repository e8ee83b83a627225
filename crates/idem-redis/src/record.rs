//! The layout of a record's value, shared by the scripts (which spell the
//! state bytes as numbers, `IN_FLIGHT = 70` and so on, and the ranges as
//! 1-based `string.sub` bounds) and the Rust that reads their replies.
//!
//! | bytes | what |
//! | --- | --- |
//! | 0 | state: `F` in flight, `C` completed, `R` released or removed |
//! | 1..33 | the request's fingerprint |
//! | 33..49 | the fencing token, 16 decimal digits (at least) |
//! | 49.. | the recorded outcome (completed records) |
//!
//! That is record format 1: its first byte is `F`, `C` or `R`. A later
//! format starts with another byte (its number, `2` and on), which the
//! scripts refuse as a newer format (`idem: newer record format`) instead
//! of misreading it; a later version keeps reading format 1.

use std::ops::Range;

/// The record format this version writes and reads.
pub(crate) const FORMAT: u8 = 1;

/// The state byte of a claim in flight.
pub(crate) const IN_FLIGHT: u8 = b'F';
/// The state byte of a completed record.
pub(crate) const COMPLETED: u8 = b'C';
/// The state byte of a record released or removed (kept 1 ms, so that the
/// next claim's token is drawn above its token).
pub(crate) const RELEASED: u8 = b'R';
/// Where the fingerprint is.
pub(crate) const FINGERPRINT: Range<usize> = 1..33;
/// Where the token is.
pub(crate) const TOKEN: Range<usize> = 33..49;
/// Where the outcome starts; also the least length of a record.
pub(crate) const OUTCOME: usize = 49;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_spell_the_layout_as_this_file_does() {
        let states =
            format!("local IN_FLIGHT, COMPLETED, RELEASED = {IN_FLIGHT}, {COMPLETED}, {RELEASED}");
        assert!(include_str!("lua/begin.lua").contains(&states));
        // 1-based, inclusive bounds in Lua.
        let token = format!("string.sub(v, {}, {})", TOKEN.start + 1, TOKEN.end);
        let fingerprint = format!(
            "string.sub(v, {}, {})",
            FINGERPRINT.start + 1,
            FINGERPRINT.end
        );
        let outcome = format!("string.sub(v, {})", OUTCOME + 1);
        let begin = include_str!("lua/begin.lua");
        for spelled in [&token, &fingerprint, &outcome] {
            assert!(begin.contains(spelled.as_str()), "begin.lua: {spelled}");
        }
        for script in [
            include_str!("lua/complete.lua"),
            include_str!("lua/commit.lua"),
            include_str!("lua/release.lua"),
            include_str!("lua/renew.lua"),
        ] {
            assert!(script.contains(&token), "{script}");
            assert!(script.contains("local IN_FLIGHT"), "{script}");
        }
    }
}
