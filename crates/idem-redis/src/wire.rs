//! How the store talks to Redis: the connection (one server, the primary
//! Sentinel names, or a cluster), and how durations and tokens are spelled
//! in commands.

use std::sync::Arc;
use std::time::Duration;

use idem_core::machine::micros;
use idem_core::FencingToken;
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{Script, Value};

use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};

use crate::sentinel::{may_have_moved, Followed};

#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager),
    Sentinel(Arc<Followed>),
    Cluster(ClusterConnection),
}

impl Connection {
    pub(crate) async fn query(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        match self {
            Self::Single(c) => cmd.query_async(c).await,
            Self::Sentinel(f) => {
                let (generation, mut c) = f.connection();
                let result = cmd.query_async(&mut c).await;
                follow(f, generation, &result);
                result
            }
            Self::Cluster(c) => cmd.query_async(c).await,
        }
    }

    /// A pipeline's replies, all from one node: on a cluster, the primary
    /// of `slot` (a command without keys, `WAIT`, must go where the script
    /// before it ran).
    pub(crate) async fn query_pipeline(
        &mut self,
        pipe: &redis::Pipeline,
        slot: u16,
    ) -> redis::RedisResult<Vec<Value>> {
        match self {
            Self::Single(c) => pipe.query_async(c).await,
            Self::Sentinel(f) => {
                let (generation, mut c) = f.connection();
                let result = pipe.query_async(&mut c).await;
                follow(f, generation, &result);
                result
            }
            Self::Cluster(c) => {
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                // A routed pipeline answers a command's error as a reply:
                // made an error here, as the other connections do.
                c.route_pipeline(pipe.clone(), 0, pipe.len(), route)
                    .await?
                    .into_iter()
                    .map(Value::extract_error)
                    .collect()
            }
        }
    }

    pub(crate) async fn load(&mut self, script: &Script) -> redis::RedisResult<String> {
        match self {
            Self::Single(c) => script.load_async(c).await,
            Self::Sentinel(f) => {
                let (generation, mut c) = f.connection();
                let result = script.load_async(&mut c).await;
                follow(f, generation, &result);
                result
            }
            Self::Cluster(c) => script.load_async(c).await,
        }
    }

    /// Which primary the connection talks to, behind Sentinel (bumped at
    /// each switch); `None` elsewhere.
    pub(crate) fn generation(&self) -> Option<u64> {
        match self {
            Self::Sentinel(f) => Some(f.connection().0),
            Self::Single(_) | Self::Cluster(_) => None,
        }
    }

    /// A call got no answer in time: behind Sentinel, the primary may be
    /// gone without closing its connections (frozen, partitioned).
    pub(crate) fn suspect(&self) {
        if let Self::Sentinel(f) = self {
            f.refresh_soon(f.connection().0);
        }
    }
}

fn follow<T>(followed: &Arc<Followed>, generation: u64, result: &redis::RedisResult<T>) {
    if let Err(e) = result {
        if may_have_moved(e) {
            followed.refresh_soon(generation);
        }
    }
}

/// A duration as whole milliseconds for `PX`, rounded up (at least 1), so
/// that a key never expires before the duration asked for.
pub(crate) fn ms(d: Duration, buf: &mut itoa::Buffer) -> &[u8] {
    buf.format(micros(d).div_ceil(1000).max(1)).as_bytes()
}

/// A token as the records spell it: at least 16 decimal digits.
pub(crate) struct TokenText {
    digits: [u8; 20],
    start: usize,
}

impl TokenText {
    pub(crate) fn new(token: FencingToken) -> Self {
        let mut digits = [b'0'; 20];
        let len = right_aligned(token.0, &mut digits);
        Self {
            digits,
            start: (20 - len).min(4),
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// A trace's length as the scripts take it and a traced record keeps it:
/// 13 decimal digits of milliseconds, rounded up (at most 10^13 - 1, some
/// 317 years), or `0` for no trace.
pub(crate) struct TraceText {
    digits: [u8; 13],
    none: bool,
}

impl TraceText {
    pub(crate) fn new(trace: Duration) -> Self {
        let mut digits = [b'0'; 13];
        let ms = micros(trace).div_ceil(1000);
        right_aligned(ms.min(9_999_999_999_999), &mut digits);
        Self {
            digits,
            none: trace.is_zero(),
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        if self.none {
            b"0"
        } else {
            &self.digits
        }
    }
}

/// Writes `n`'s decimal digits at the end of `out` (which holds enough of
/// them); how many.
fn right_aligned(n: u64, out: &mut [u8]) -> usize {
    let mut buf = itoa::Buffer::new();
    let text = buf.format(n).as_bytes();
    let room = out.len();
    let shown = text.len().min(room);
    out[room - shown..].copy_from_slice(&text[text.len() - shown..]);
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_spelled_with_thirteen_digits_or_zero_for_none() {
        let text = |d: Duration| String::from_utf8(TraceText::new(d).as_bytes().to_vec());
        assert_eq!(text(Duration::ZERO).as_deref(), Ok("0"));
        assert_eq!(
            text(Duration::from_hours(24)).as_deref(),
            Ok("0000086400000")
        );
        assert_eq!(
            text(Duration::from_micros(1500)).as_deref(),
            Ok("0000000000002")
        );
    }

    #[test]
    fn tokens_are_spelled_with_at_least_sixteen_digits() {
        let text = |t: u64| String::from_utf8(TokenText::new(FencingToken(t)).as_bytes().to_vec());
        assert_eq!(text(0).as_deref(), Ok("0000000000000000"));
        assert_eq!(text(42).as_deref(), Ok("0000000000000042"));
        assert_eq!(
            text(1_764_480_000_123_456).as_deref(),
            Ok("1764480000123456")
        );
        assert_eq!(text(u64::MAX).as_deref(), Ok("18446744073709551615"));
    }

    #[test]
    fn expiries_round_up_to_whole_milliseconds() {
        let px = |d| String::from_utf8(ms(d, &mut itoa::Buffer::new()).to_vec());
        assert_eq!(px(Duration::ZERO).as_deref(), Ok("1"));
        assert_eq!(px(Duration::from_micros(1)).as_deref(), Ok("1"));
        assert_eq!(px(Duration::from_micros(1001)).as_deref(), Ok("2"));
        assert_eq!(px(Duration::from_secs(30)).as_deref(), Ok("30000"));
    }
}
