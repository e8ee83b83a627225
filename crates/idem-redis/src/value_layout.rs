//! The layout of a record's value, shared by the scripts (each gets it as a
//! prelude of Lua names, [`lua_prelude`], written from the constants here)
//! and the Rust that reads their replies.
//!
//! | bytes | what |
//! | --- | --- |
//! | 0 | state: `F` in flight, `C` completed, `R` released or removed, `2` completed and traced |
//! | 1..33 | the request's fingerprint |
//! | 33..49 | the fencing token, 16 decimal digits (at least) |
//! | 49.. | the recorded outcome (`C` records) |
//! | 49..62 | `2` records: the trace, how long the key outlives the replay, 13 decimal digits of milliseconds |
//! | 62.. | `2` records: the recorded outcome |
//!
//! Format 1 is the `F`, `C` and `R` records. Format 2 adds the traced
//! record (first byte `2`): a completed record that carries its own
//! late-retry trace. Its key lives its TTL and then the trace: while more
//! than the trace is left of the key's time to live it answers as a `C`
//! record, and after, a retry of it is refused as expired (or as another
//! request) until the key expires.
//! One key a record instead of a record and a trace key (`<key>:t`, which
//! the version before wrote, and which every script still reads). A record
//! whose first byte names a later format (`3` and on) is refused as newer
//! (`idem: newer record format`) instead of misread.

use std::ops::Range;

/// The record format this version writes and reads (and every one before).
pub(crate) const FORMAT: u8 = 2;

/// The state byte of a claim in flight.
pub(crate) const IN_FLIGHT: u8 = b'F';
/// The state byte of a completed record.
pub(crate) const COMPLETED: u8 = b'C';
/// The state byte of a record released or removed (kept 1 ms, so that the
/// next claim's token is drawn above its token).
pub(crate) const RELEASED: u8 = b'R';
/// The state byte of a completed record that carries its trace (format 2).
pub(crate) const TRACED: u8 = b'2';
/// Where the fingerprint is.
pub(crate) const FINGERPRINT: Range<usize> = 1..33;
/// Where the token is.
pub(crate) const TOKEN: Range<usize> = 33..49;
/// Where the outcome starts; also the least length of a record.
pub(crate) const OUTCOME: usize = 49;
/// Where a traced record's trace is: how long its key outlives its replay
/// (milliseconds, 13 digits).
pub(crate) const TRACE: Range<usize> = 49..62;
/// Where a traced record's outcome starts; also its least length.
pub(crate) const TRACED_OUTCOME: usize = 62;

/// The layout as Lua names, put before every script: the state bytes (and
/// the one-letter strings a script writes), the 1-based inclusive
/// `string.sub` bounds of the fingerprint, the token, the outcome and a
/// traced record's deadline and outcome, the least lengths of a record,
/// `refuse_newer`, which refuses a record of a newer format rather than
/// misread it; `replay_left` (what is left of a traced record's replay:
/// its key's time to live less its trace); over the record's four keys
/// (key_layout.rs), `find` (the key holding the record, its trace's key
/// and the value; else the written layout's keys and nil), `look` (all
/// four read in one `MGET`, for `begin` and `peek`: the record's key and
/// value, else its trace's key and value) and `wake_key` (the hex key,
/// which wake-ups name); and `traced`, the answer to a
/// retry of an expired record from its trace (expired, or mismatch; with
/// the durable mode, made a write of the connection's own as begin's other
/// answers are); and `answer_each`, a batch script's reply: each record's
/// answer, or `{'!', error}` for one that raised (before writing).
pub(crate) fn lua_prelude() -> String {
    let tag = |b: u8| char::from(b);
    format!(
        "local IN_FLIGHT, COMPLETED, RELEASED, TRACED = {IN_FLIGHT}, {COMPLETED}, {RELEASED}, {TRACED}\n\
         local IN_FLIGHT_TAG, COMPLETED_TAG, RELEASED_TAG, TRACED_TAG = '{}', '{}', '{}', '{}'\n\
         local FINGERPRINT_FROM, FINGERPRINT_TO = {}, {}\n\
         local TOKEN_FROM, TOKEN_TO = {}, {}\n\
         local OUTCOME_FROM, LEAST = {}, {OUTCOME}\n\
         local TRACE_FROM, TRACE_TO, TRACED_OUTCOME_FROM, TRACED_LEAST = {}, {}, {}, {TRACED_OUTCOME}\n\
         local function refuse_newer(state)\n\
         \x20 if state ~= IN_FLIGHT and state ~= COMPLETED and state ~= RELEASED and state ~= TRACED then\n\
         \x20   error('idem: newer record format ' .. string.char(state))\n\
         \x20 end\n\
         end\n\
         local function replay_left(key, v)\n\
         \x20 return redis.call('PTTL', key) - tonumber(string.sub(v, TRACE_FROM, TRACE_TO))\n\
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
         local function existing(key, v, fingerprint, durable, want_ttl)\n\
         \x20 local state = string.byte(v)\n\
         \x20 refuse_newer(state)\n\
         \x20 if #v < LEAST or (state == TRACED and #v < TRACED_LEAST) then error('idem: corrupt record') end\n\
         \x20 if durable == '1' then\n\
         \x20   local at = redis.call('PEXPIRETIME', key)\n\
         \x20   if at > 0 then redis.call('PEXPIREAT', key, at) end\n\
         \x20 end\n\
         \x20 if string.sub(v, FINGERPRINT_FROM, FINGERPRINT_TO) ~= fingerprint then return {{'M'}} end\n\
         \x20 if state == IN_FLIGHT then return {{'I', redis.call('PTTL', key)}} end\n\
         \x20 if state == COMPLETED then\n\
         \x20   if want_ttl == '1' then return {{'R', string.sub(v, OUTCOME_FROM), redis.call('PTTL', key)}} end\n\
         \x20   return {{'R', string.sub(v, OUTCOME_FROM)}}\n\
         \x20 end\n\
         \x20 if state == TRACED then\n\
         \x20   local left = replay_left(key, v)\n\
         \x20   if left <= 0 then return {{'E'}} end\n\
         \x20   if want_ttl == '1' then return {{'R', string.sub(v, TRACED_OUTCOME_FROM), left}} end\n\
         \x20   return {{'R', string.sub(v, TRACED_OUTCOME_FROM)}}\n\
         \x20 end\n\
         \x20 error('idem: corrupt record')\n\
         end\n\
         local function answer_each(n, one)\n\
         \x20 local answers = {{}}\n\
         \x20 for i = 0, n - 1 do\n\
         \x20   local ok, answer = pcall(one, i)\n\
         \x20   if not ok then\n\
         \x20     if type(answer) == 'table' then answer = answer.err end\n\
         \x20     answer = {{'!', tostring(answer)}}\n\
         \x20   end\n\
         \x20   answers[i + 1] = answer\n\
         \x20 end\n\
         \x20 return answers\n\
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
        tag(TRACED),
        FINGERPRINT.start + 1,
        FINGERPRINT.end,
        TOKEN.start + 1,
        TOKEN.end,
        OUTCOME + 1,
        TRACE.start + 1,
        TRACE.end,
        TRACED_OUTCOME + 1,
    )
}

/// The prelude a script needs: every name of the layout, and of the
/// helpers only those it calls (and those they call). Defining a helper
/// makes a closure on every call of the script, about a microsecond of
/// Redis CPU for all of them, so a script pays only for its own.
pub(crate) fn lua_prelude_for(script: &str) -> String {
    let full = lua_prelude();
    // The names, then each helper from its `local function` line to its
    // closing `end`.
    let mut names = String::new();
    let mut helpers: Vec<(String, String)> = Vec::new();
    let mut open = false;
    for line in full.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("local function ") {
            let name = rest.split('(').next().unwrap_or_default().to_owned();
            helpers.push((name, line.to_owned()));
            open = true;
        } else if let Some((_, body)) = helpers.last_mut().filter(|_| open) {
            body.push_str(line);
            // A helper ends at the `end` in its first column.
            open = line != "end\n";
        } else {
            names.push_str(line);
        }
    }
    let calls = |text: &str, name: &str| text.contains(&format!("{name}("));
    let mut needed: Vec<bool> = helpers.iter().map(|(n, _)| calls(script, n)).collect();
    // What a needed helper calls is needed too (helpers call only those
    // defined before them).
    for i in (0..helpers.len()).rev() {
        if needed[i] {
            for j in 0..i {
                needed[j] |= calls(&helpers[i].1, &helpers[j].0);
            }
        }
    }
    helpers
        .iter()
        .zip(needed)
        .filter(|(_, n)| *n)
        .fold(names, |mut prelude, ((_, body), _)| {
            prelude.push_str(body);
            prelude
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPTS: [(&str, &str); 10] = [
        ("begin", include_str!("lua/begin.lua")),
        ("begin_batch", include_str!("lua/begin_batch.lua")),
        ("complete_batch", include_str!("lua/complete_batch.lua")),
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
                for state in [IN_FLIGHT, COMPLETED, RELEASED, TRACED] {
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
    fn each_script_gets_the_helpers_it_calls_and_no_other() {
        let helpers = [
            "refuse_newer",
            "replay_left",
            "find",
            "look",
            "wake_key",
            "existing",
            "answer_each",
            "traced",
        ];
        let full = lua_prelude();
        for (name, script) in SCRIPTS {
            let prelude = lua_prelude_for(script);
            // Every name of the layout, whatever the script.
            assert!(full.starts_with(prelude.split("local function").next().unwrap_or("")));
            assert!(prelude.contains("local TRACE_FROM"), "{name}");
            for helper in helpers {
                let defined = prelude.contains(&format!("local function {helper}("));
                let called = format!("{prelude}{script}")
                    .replace(&format!("local function {helper}("), "")
                    .contains(&format!("{helper}("));
                assert_eq!(defined, called, "{name}.lua: {helper}");
            }
        }
        let complete = lua_prelude_for(include_str!("lua/complete.lua"));
        assert!(!complete.contains("local function existing("));
        assert!(complete.contains("local function wake_key("));
        let begin = lua_prelude_for(include_str!("lua/begin.lua"));
        for helper in ["existing", "refuse_newer", "replay_left", "look", "traced"] {
            assert!(
                begin.contains(&format!("local function {helper}(")),
                "{helper}"
            );
        }
    }

    #[test]
    fn the_prelude_names_the_layout_as_this_file_does() {
        let prelude = lua_prelude();
        assert!(prelude.contains("local IN_FLIGHT, COMPLETED, RELEASED, TRACED = 70, 67, 82, 50\n"));
        assert!(prelude.contains(
            "local IN_FLIGHT_TAG, COMPLETED_TAG, RELEASED_TAG, TRACED_TAG = 'F', 'C', 'R', '2'\n"
        ));
        // 1-based, inclusive bounds in Lua.
        assert!(prelude.contains("local FINGERPRINT_FROM, FINGERPRINT_TO = 2, 33\n"));
        assert!(prelude.contains("local TOKEN_FROM, TOKEN_TO = 34, 49\n"));
        assert!(prelude.contains("local OUTCOME_FROM, LEAST = 50, 49\n"));
        assert!(prelude.contains(
            "local TRACE_FROM, TRACE_TO, TRACED_OUTCOME_FROM, TRACED_LEAST = 50, 62, 63, 62\n"
        ));
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
