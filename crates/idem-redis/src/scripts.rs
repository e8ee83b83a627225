//! The Lua scripts, one per transition of a record (each branch names its
//! row of `idem_core::machine`'s table), and how they are called.

use redis::Script;

/// `begin(fingerprint, lease_ms, want_ttl, durable)`. A new key is claimed
/// by reading its keys (one `MGET`), `TIME` and `SET`. A fresh claim
/// replies with its token as a string, every other answer is a tagged
/// array.
///
/// A record is one string ([`crate::value_layout`]): state (`F` in flight,
/// `C` completed, `R` released, `2` completed and carrying its trace),
/// fingerprint (32 bytes), fencing token (16 decimal digits of server-clock
/// microseconds), then the outcome of a completed record. The key's own
/// expiry is the lease deadline (in flight), the TTL (completed), or the
/// TTL and the trace, so no script needs the clock to know whether a lease
/// is alive: an expired lease is a missing key.
pub(crate) const BEGIN: &str = include_str!("lua/begin.lua");

/// `complete(token, ttl_ms, outcome, channel, trace_ms)`: 1 done (now, or
/// before by this token), 0 lost. With a trace, the completed record
/// carries it (record format 2): its key outlives the replay by
/// `trace_ms`, and in that time `begin` answers a retry of it `Expired`
/// instead of claiming it again.
pub(crate) const COMPLETE: &str = include_str!("lua/complete.lua");

/// `begin` for each record of a batch ([`crate::batch`]), one call: the
/// batch's keys read in one `MGET`, the clock read once; an answer per
/// record as `begin` gives it, or `{'!', error}`. A call for one record
/// runs [`BEGIN`], which costs less alone.
pub(crate) const BEGIN_BATCH: &str = include_str!("lua/begin_batch.lua");

/// `complete` for each claim of a batch, one call: the records read in one
/// `MGET`; an answer per claim as `complete` gives it, or `{'!', error}`.
pub(crate) const COMPLETE_BATCH: &str = include_str!("lua/complete_batch.lua");

/// `release(token)`: the lease ends now. The record stays a millisecond as
/// released, so that a claim in that time draws its token above this one.
pub(crate) const RELEASE: &str = include_str!("lua/release.lua");

/// `renew(token, lease_ms)`: the key's expiry moves to now + lease.
pub(crate) const RENEW: &str = include_str!("lua/renew.lua");

/// `commit(token, ttl_ms, outcome, channel, reads, writes)`: a
/// transaction's writes with the record's completion (see the script).
pub(crate) const COMMIT: &str = include_str!("lua/commit.lua");

/// `peek(fingerprint, durable)`: begin's answers for an existing record,
/// writing nothing that needs memory, for a server too full to claim.
pub(crate) const PEEK: &str = include_str!("lua/peek.lua");

/// `inspect()`: 0 if no live record, else `{value, pttl}`.
pub(crate) const INSPECT: &str = include_str!("lua/inspect.lua");

/// `remove(force)`: 1 removed (ended now, token kept, as a release; or only
/// its trace), 2 in flight and not forced, 0 no live record nor trace.
pub(crate) const REMOVE: &str = include_str!("lua/remove.lua");

pub(crate) struct Scripts {
    pub(crate) begin: Script,
    pub(crate) begin_batch: Script,
    pub(crate) peek: Script,
    pub(crate) complete: Script,
    pub(crate) complete_batch: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) inspect: Script,
    pub(crate) remove: Script,
    pub(crate) commit: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            begin: with_layout(BEGIN),
            begin_batch: with_layout(BEGIN_BATCH),
            peek: with_layout(PEEK),
            complete: with_layout(COMPLETE),
            complete_batch: with_layout(COMPLETE_BATCH),
            release: with_layout(RELEASE),
            renew: with_layout(RENEW),
            inspect: with_layout(INSPECT),
            remove: with_layout(REMOVE),
            commit: with_layout(COMMIT),
        }
    }
}

/// `source` with the record's layout and the helpers it calls put before it
/// (after its `#!lua` line, which must stay first).
fn with_layout(source: &str) -> Script {
    let prelude = crate::value_layout::lua_prelude_for(source);
    let (shebang, body) = match source.strip_prefix("#!") {
        Some(_) => source.split_once('\n').unwrap_or((source, "")),
        None => ("", source),
    };
    let mut script = String::with_capacity(shebang.len() + prelude.len() + body.len() + 1);
    if !shebang.is_empty() {
        script.push_str(shebang);
        script.push('\n');
    }
    script.push_str(&prelude);
    script.push_str(body);
    Script::new(&script)
}

/// `EVALSHA` of `script` on `keys` (the record's first) with `args`, built
/// directly (one copy of the arguments); on `NOSCRIPT` (a restarted or
/// flushed server) the script is loaded and the call retried once.
pub(crate) fn evalsha(script: &Script, keys: &[&str], args: &[&[u8]]) -> redis::Cmd {
    let data = 7
        + 40
        + 1
        + keys.iter().map(|k| k.len()).sum::<usize>()
        + args.iter().map(|a| a.len()).sum::<usize>();
    let mut eval = redis::Cmd::with_capacity(3 + keys.len() + args.len(), data);
    eval.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
    for key in keys {
        eval.arg(*key);
    }
    for arg in args {
        eval.arg(*arg);
    }
    eval
}

/// The key of an `EVALSHA <sha> <numkeys> <key> ...` (its fourth argument).
pub(crate) fn eval_key(eval: &redis::Cmd) -> &[u8] {
    match eval.args_iter().nth(3) {
        Some(redis::Arg::Simple(key)) => key,
        _ => b"",
    }
}

pub(crate) fn is_no_script(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// How a script's refusal of a record of a newer format begins (the format
/// follows).
pub(crate) const NEWER_FORMAT: &str = "idem: newer record format ";

/// A script's refusal of a record it cannot read.
pub(crate) const CORRUPT: &str = "idem: corrupt record";

/// The format named by a script's refusal of a newer record, if it is one.
pub(crate) fn newer_format(e: &redis::RedisError) -> Option<u8> {
    let text = e.to_string();
    let at = text.find(NEWER_FORMAT)? + NEWER_FORMAT.len();
    text.as_bytes().get(at).copied()
}

pub(crate) fn is_corrupt(e: &redis::RedisError) -> bool {
    e.to_string().contains(CORRUPT)
}
