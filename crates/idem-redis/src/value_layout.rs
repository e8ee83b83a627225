//! The layout of a record's value, shared by the scripts (each gets it as a
//! prelude of Lua names, [`lua_prelude`], written from the constants here)
//! and the Rust that reads their replies.
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

/// The layout as Lua names, put before every script: the state bytes (and
/// the one-letter strings a script writes), the 1-based inclusive
/// `string.sub` bounds of the fingerprint, the token and the outcome, the
/// least length of a record, `refuse_newer`, which refuses a record of a
/// newer format rather than misread it; over the record's four keys
/// (key_layout.rs), `find` (the key holding the record, its trace's key
/// and the value; else the written layout's keys and nil), `look` (all
/// four read in one `MGET`, for `begin` and `peek`: the record's key and
/// value, else its trace's key and value) and `wake_key` (the hex key,
/// which wake-ups name); and `traced`, the answer to a
/// retry of an expired record from its trace (expired, or mismatch; with
/// the durable mode, made a write of the connection's own as begin's other
/// answers are).
pub(crate) fn lua_prelude() -> String {
    let tag = |b: u8| char::from(b);
    format!(
        "local IN_FLIGHT, COMPLETED, RELEASED = {IN_FLIGHT}, {COMPLETED}, {RELEASED}\n\
         local IN_FLIGHT_TAG, COMPLETED_TAG, RELEASED_TAG = '{}', '{}', '{}'\n\
         local FINGERPRINT_FROM, FINGERPRINT_TO = {}, {}\n\
         local TOKEN_FROM, TOKEN_TO = {}, {}\n\
         local OUTCOME_FROM, LEAST = {}, {OUTCOME}\n\
         local function refuse_newer(state)\n\
         \x20 if state ~= IN_FLIGHT and state ~= COMPLETED and state ~= RELEASED then\n\
         \x20   error('idem: newer record format ' .. string.char(state))\n\
         \x20 end\n\
         end\n\
         local function find()\n\
         \x20 local v = redis.call('GET', KEYS[1])\n\
         \x20 if v then return KEYS[1], KEYS[2], v end\n\
         \x20 v = redis.call('GET', KEYS[3])\n\
         \x20 if v then return KEYS[3], KEYS[4], v end\n\
         \x20 return KEYS[1], KEYS[2], nil\n\
         end\n\
         local function look()\n\
         \x20 local v = redis.call('MGET', KEYS[1], KEYS[3], KEYS[2], KEYS[4])\n\
         \x20 if v[1] then return KEYS[1], v[1] end\n\
         \x20 if v[2] then return KEYS[3], v[2] end\n\
         \x20 if v[3] then return nil, nil, KEYS[2], v[3] end\n\
         \x20 if v[4] then return nil, nil, KEYS[4], v[4] end\n\
         \x20 return nil, nil\n\
         end\n\
         local function wake_key()\n\
         \x20 if string.sub(KEYS[1], -1) == '}}' then return KEYS[1] end\n\
         \x20 return KEYS[3]\n\
         end\n\
         local function traced(trace, trace_key, fingerprint, durable)\n\
         \x20 if durable == '1' then\n\
         \x20   local at = redis.call('PEXPIRETIME', trace_key)\n\
         \x20   if at > 0 then redis.call('PEXPIREAT', trace_key, at) end\n\
         \x20 end\n\
         \x20 if trace ~= fingerprint then return {{'M'}} end\n\
         \x20 return {{'E'}}\n\
         end\n",
        tag(IN_FLIGHT),
        tag(COMPLETED),
        tag(RELEASED),
        FINGERPRINT.start + 1,
        FINGERPRINT.end,
        TOKEN.start + 1,
        TOKEN.end,
        OUTCOME + 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPTS: [(&str, &str); 8] = [
        ("begin", include_str!("lua/begin.lua")),
        ("peek", include_str!("lua/peek.lua")),
        ("complete", include_str!("lua/complete.lua")),
        ("commit", include_str!("lua/commit.lua")),
        ("release", include_str!("lua/release.lua")),
        ("renew", include_str!("lua/renew.lua")),
        ("inspect", include_str!("lua/inspect.lua")),
        ("remove", include_str!("lua/remove.lua")),
    ];

    #[test]
    fn no_script_spells_the_layout_itself() {
        for (name, script) in SCRIPTS {
            let code: Vec<&str> = script
                .lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect();
            for line in &code {
                // Ranges, lengths, state bytes and letters by their names.
                let spelled = |at: &str| {
                    line.split(at)
                        .skip(1)
                        .any(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
                };
                assert!(
                    !spelled("string.sub(v, "),
                    "{name}.lua spells a range: {line}"
                );
                assert!(!spelled("#v < "), "{name}.lua spells a length: {line}");
                for state in [IN_FLIGHT, COMPLETED, RELEASED] {
                    let letter = format!("'{}' ..", char::from(state));
                    assert!(!line.contains(&letter), "{name}.lua spells a state: {line}");
                    assert!(
                        !line.contains(&format!("= {state}"))
                            && !line.contains(&format!("{state},")),
                        "{name}.lua spells a state byte: {line}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_prelude_names_the_layout_as_this_file_does() {
        let prelude = lua_prelude();
        assert!(prelude.contains("local IN_FLIGHT, COMPLETED, RELEASED = 70, 67, 82\n"));
        assert!(
            prelude.contains("local IN_FLIGHT_TAG, COMPLETED_TAG, RELEASED_TAG = 'F', 'C', 'R'\n")
        );
        // 1-based, inclusive bounds in Lua.
        assert!(prelude.contains("local FINGERPRINT_FROM, FINGERPRINT_TO = 2, 33\n"));
        assert!(prelude.contains("local TOKEN_FROM, TOKEN_TO = 34, 49\n"));
        assert!(prelude.contains("local OUTCOME_FROM, LEAST = 50, 49\n"));
        for (name, script) in SCRIPTS {
            let uses_layout = [
                "IN_FLIGHT",
                "COMPLETED",
                "RELEASED",
                "TOKEN_",
                "FINGERPRINT_",
                "OUTCOME_FROM",
            ]
            .iter()
            .any(|n| script.contains(n));
            assert!(
                uses_layout,
                "{name}.lua reads the record by the prelude's names"
            );
        }
    }
}
