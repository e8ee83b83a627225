//! `RetryPolicy`: which attempts are retried, after how long, and when the
//! retrying stops. Pure: the middleware tells it what an attempt gave and
//! how long the call has taken, and it answers.

use std::time::Duration;

/// What one attempt gave, as the policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// No answer: the connection failed, was reset, or the attempt timed
    /// out. The request may have run: the same key makes retrying safe.
    NoAnswer,
    /// An answer with this status, and the `Retry-After` it carried, if any.
    Answer {
        /// The status code.
        status: u16,
        /// The `Retry-After` header, in seconds.
        retry_after: Option<Duration>,
    },
}

/// What to do after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextAttempt {
    /// Send the same request, with the same key, after this pause.
    RetryAfter(Duration),
    /// Hand this attempt's result to the caller.
    Stop,
}

/// Which attempts are retried, and how.
///
/// Retried, with the same key: no answer at all (connection errors,
/// resets, timeouts: the request may have run, which is what the key is
/// for); `409` and `425` (the same key is in flight: idem's
/// `request-in-flight`; without `Retry-After`, asked again no sooner than
/// [`in_flight`](Self::in_flight)'s floor, until the deadline);
/// `429` and `503`, honouring `Retry-After` up to a cap; other 5xx when
/// [`server_errors`](Self::server_errors) says so (idem records no 5xx by
/// default, so a retry runs the request again). Never retried: `422` (the
/// key was used for another request), `412` (idem's `key-expired`: the
/// request ran before and its answer is no longer kept), `400` and every
/// other 4xx, and
/// success. Pauses use full jitter (a random pause up to
/// `base × 2^retry`, capped); a `Retry-After` sets the pause instead, up to
/// [`max_retry_after`](Self::max_retry_after). No retry is made after
/// [`max_attempts`](Self::max_attempts), or if its pause would end past
/// the [`deadline`](Self::deadline) counted from the first attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    deadline: Duration,
    base: Duration,
    max_pause: Duration,
    max_retry_after: Duration,
    server_errors: bool,
    in_flight_floor: Duration,
    max_in_flight_attempts: u32,
}

impl Default for RetryPolicy {
    /// 5 attempts within 30 s, pauses from 100 ms up to 5 s, a
    /// `Retry-After` honoured up to 10 s, 5xx retried; a request in flight
    /// (409 or 425) without `Retry-After` asked again no sooner than 1 s,
    /// up to 30 attempts within the deadline.
    fn default() -> Self {
        Self {
            max_attempts: 5,
            deadline: Duration::from_secs(30),
            base: Duration::from_millis(100),
            max_pause: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(10),
            server_errors: true,
            in_flight_floor: Duration::from_secs(1),
            max_in_flight_attempts: 30,
        }
    }
}

impl RetryPolicy {
    /// One attempt only: the key is still sent, nothing is retried.
    pub fn never() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The most attempts per logical request, the first included (at
    /// least 1).
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// How long after the first attempt no retry starts.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The pauses' scale and cap: the n-th retry waits a random time up to
    /// `base × 2^(n-1)`, at most `max`.
    #[must_use]
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base = base;
        self.max_pause = max.max(base);
        self
    }

    /// The longest `Retry-After` honoured; a longer one is cut to it.
    #[must_use]
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// A request the server says is in flight (409, 425, gRPC `ABORTED`)
    /// without saying when to come back (no `Retry-After`, no pushback) is
    /// asked again no sooner than `floor` (default 1 s), and such answers
    /// count against `max_attempts` (default 30) instead of
    /// [`max_attempts`](Self::max_attempts): the work is still running, and
    /// the call ends with the [`deadline`](Self::deadline), not after a few
    /// quick answers.
    #[must_use]
    pub fn in_flight(mut self, floor: Duration, max_attempts: u32) -> Self {
        self.in_flight_floor = floor;
        self.max_in_flight_attempts = max_attempts.max(1);
        self
    }

    /// Whether 5xx answers other than 503 are retried (default `true`).
    #[must_use]
    pub fn server_errors(mut self, retry: bool) -> Self {
        self.server_errors = retry;
        self
    }

    /// The most attempts per logical request.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Whether an attempt that gave `attempt` is worth another one, apart
    /// from counts and time.
    pub fn retries(&self, attempt: Attempt) -> bool {
        match attempt {
            Attempt::NoAnswer => true,
            Attempt::Answer { status, .. } => match status {
                409 | 425 | 429 | 503 => true,
                500..=599 => self.server_errors,
                _ => false,
            },
        }
    }

    /// What to do after attempt number `made` (1 for the first) gave
    /// `attempt`, `elapsed` after the first attempt started. `jitter` is a
    /// random number in `[0, 1)`, which scales the backoff pause.
    pub fn decide(
        &self,
        made: u32,
        elapsed: Duration,
        attempt: Attempt,
        jitter: f64,
    ) -> NextAttempt {
        // In flight, and no word on when: the work runs on; bounded by
        // the deadline (and a cap), not the few quick attempts.
        let in_flight_unsaid = matches!(
            attempt,
            Attempt::Answer {
                status: 409 | 425,
                retry_after: None
            }
        );
        let most = if in_flight_unsaid {
            self.max_in_flight_attempts.max(self.max_attempts)
        } else {
            self.max_attempts
        };
        if made >= most || !self.retries(attempt) {
            return NextAttempt::Stop;
        }
        let pause = if let Attempt::Answer {
            retry_after: Some(after),
            ..
        } = attempt
        {
            after.min(self.max_retry_after)
        } else {
            let exp = made.saturating_sub(1).min(30);
            let ceiling = self.base.saturating_mul(1u32 << exp).min(self.max_pause);
            let pause = ceiling.mul_f64(jitter.clamp(0.0, 1.0));
            if in_flight_unsaid {
                pause.max(self.in_flight_floor)
            } else {
                pause
            }
        };
        if elapsed.saturating_add(pause) >= self.deadline {
            return NextAttempt::Stop;
        }
        NextAttempt::RetryAfter(pause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn attempt() -> impl Strategy<Value = Attempt> {
        prop_oneof![
            Just(Attempt::NoAnswer),
            (100u16..600, prop::option::of(0u64..100)).prop_map(|(status, after)| {
                Attempt::Answer {
                    status,
                    retry_after: after.map(Duration::from_secs),
                }
            }),
        ]
    }

    proptest! {
        /// A run of attempts, each deciding from the last: never more than
        /// the maximum, never a retry that would start past the deadline,
        /// never a retry of a 4xx other than 409 and 429.
        #[test]
        fn retries_stay_within_the_attempts_and_the_deadline(
            max in 1u32..8,
            deadline_ms in 0u64..5_000,
            outcomes in prop::collection::vec((attempt(), 0.0f64..1.0, 0u64..500), 1..12),
        ) {
            let policy = RetryPolicy::default()
                .max_attempts(max)
                .deadline(Duration::from_millis(deadline_ms));
            let mut elapsed = Duration::ZERO;
            let mut made = 0;
            for (attempt, jitter, took_ms) in outcomes {
                made += 1;
                elapsed += Duration::from_millis(took_ms);
                match policy.decide(made, elapsed, attempt, jitter) {
                    NextAttempt::Stop => break,
                    NextAttempt::RetryAfter(pause) => {
                        let unsaid_in_flight = matches!(
                            attempt,
                            Attempt::Answer { status: 409 | 425, retry_after: None }
                        );
                        // An in-flight answer that says not when counts
                        // against its own cap (30), and waits at least 1 s.
                        if unsaid_in_flight {
                            prop_assert!(made < 30, "in-flight attempt {} was retried", made);
                            prop_assert!(pause >= Duration::from_secs(1), "{:?}", pause);
                        } else {
                            prop_assert!(made < max, "attempt {} of {} was retried", made, max);
                        }
                        prop_assert!(elapsed + pause < Duration::from_millis(deadline_ms));
                        if let Attempt::Answer { status, .. } = attempt {
                            prop_assert!(
                                !(400..500).contains(&status) || matches!(status, 409 | 425 | 429),
                                "{} was retried", status
                            );
                        }
                        elapsed += pause;
                    }
                }
            }
            prop_assert!(made <= max.max(30));
        }

        /// A pause is never longer than the cap, or the `Retry-After` cap.
        #[test]
        fn pauses_are_capped(made in 1u32..40, jitter in 0.0f64..1.0, after in prop::option::of(0u64..10_000)) {
            let policy = RetryPolicy::default().max_attempts(64).deadline(Duration::from_secs(100_000));
            let attempt = Attempt::Answer { status: 503, retry_after: after.map(Duration::from_secs) };
            if let NextAttempt::RetryAfter(pause) = policy.decide(made, Duration::ZERO, attempt, jitter) {
                prop_assert!(pause <= Duration::from_secs(10));
            }
            if let NextAttempt::RetryAfter(pause) = policy.decide(made, Duration::ZERO, Attempt::NoAnswer, jitter) {
                prop_assert!(pause <= Duration::from_secs(5));
            }
        }
    }

    #[test]
    fn a_reused_key_and_a_bad_request_are_never_retried() {
        let policy = RetryPolicy::default();
        for status in [400, 401, 403, 404, 412, 413, 422] {
            let attempt = Attempt::Answer {
                status,
                retry_after: None,
            };
            assert_eq!(
                policy.decide(1, Duration::ZERO, attempt, 0.5),
                NextAttempt::Stop,
                "{status}"
            );
        }
        let in_flight = Attempt::Answer {
            status: 409,
            retry_after: Some(Duration::from_secs(1)),
        };
        assert_eq!(
            policy.decide(1, Duration::ZERO, in_flight, 0.5),
            NextAttempt::RetryAfter(Duration::from_secs(1))
        );
    }
}
