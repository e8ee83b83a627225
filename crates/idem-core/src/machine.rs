//! The transition table, as one pure function.
//!
//! Every store keeps these rules in one atomic step per call. [`MemoryStore`]
//! applies [`step`] directly under a lock; the Redis and PostgreSQL stores
//! restate it in a script or a statement and prove the equivalence with the
//! conformance kit.
//!
//! Time is the store's clock in microseconds since the Unix epoch.
//!
//! | record (live) | event | answer | effect |
//! | --- | --- | --- | --- |
//! | none | begin | `Acquired` | put in-flight, new token |
//! | in-flight, same fp | begin | `InFlight { retry_after }` | none |
//! | completed, same fp | begin | `Replay(outcome)` | none |
//! | in-flight or completed, other fp | begin | `Mismatch` | none |
//! | expired, traced, same fp | begin | `Expired` | none |
//! | expired, traced, other fp | begin | `Mismatch` | none |
//! | in-flight, holder's token | complete | `Completed` | put completed until `now + ttl`, traced `trace` longer |
//! | completed by the holder's token | complete | `Completed` | none (first outcome kept) |
//! | in-flight, holder's token | release | `Released` | the lease ends now |
//! | in-flight, holder's token | renew | `Renewed` | lease until `now + duration` |
//! | anything else | complete, release, renew | `LeaseLost` | none |
//! | completed, traced, or in-flight with `force` | remove | `Removed` | ends now, token kept |
//! | in-flight, no `force` | remove | `RemoveRefused` | none |
//! | none | remove | `Absent` | none |
//!
//! A record is *live* while it is in flight before its lease deadline, or
//! completed before its expiry; a record that is not live counts as none,
//! but for one case: a completed record past its expiry is *traced* until
//! its trace ends (`trace` after its expiry, a store's setting), and a
//! retry of it then is refused as `Expired` rather than run again.
//!
//! A new claim's fencing token is `max(previous token + 1, now)`, so tokens
//! grow for as long as a record (live or not) is kept, and from the clock once
//! it is gone. A store may drop a record that is not live only once the clock
//! has passed its token ([`Record::droppable`]): then no later claim can get a
//! token equal to or below it.
//!
//! [`MemoryStore`]: crate::MemoryStore

use std::time::Duration;

use crate::fingerprint::Fingerprint;
use crate::store::{Begin, FencingToken, Lease, Outcome};

/// A stored record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The fingerprint of the request that created it.
    pub fingerprint: Fingerprint,
    /// The token of the latest claim.
    pub token: FencingToken,
    /// In flight or completed.
    pub state: RecordState,
}

/// The state of a [`Record`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RecordState {
    /// A holder runs the operation.
    InFlight {
        /// When the lease ends, in store-clock microseconds.
        lease_until: u64,
    },
    /// The operation finished and its outcome is kept.
    Completed {
        /// The recorded outcome.
        outcome: Outcome,
        /// When the record expires, in store-clock microseconds.
        expires_at: u64,
        /// Until when a trace of it refuses a late retry (`expires_at` when
        /// the store keeps none), in store-clock microseconds.
        traced_until: u64,
    },
}

impl Record {
    /// Whether the record still counts at `now`.
    pub fn is_live(&self, now: u64) -> bool {
        match self.state {
            RecordState::InFlight { lease_until } => lease_until > now,
            RecordState::Completed { expires_at, .. } => expires_at > now,
        }
    }

    /// Whether the record, no longer live, is still traced at `now`: a
    /// completed record past its expiry, before its trace ends.
    pub fn is_traced(&self, now: u64) -> bool {
        match self.state {
            RecordState::InFlight { .. } => false,
            RecordState::Completed {
                expires_at,
                traced_until,
                ..
            } => expires_at <= now && traced_until > now,
        }
    }

    /// Whether a store may forget this record at `now`: it is neither live
    /// nor traced, and the clock has passed its token, so that a token
    /// drawn from the clock later is still greater.
    pub fn droppable(&self, now: u64) -> bool {
        !self.is_live(now) && !self.is_traced(now) && self.token.0 < now
    }
}

/// A call on a record.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// [`Store::begin`](crate::Store::begin).
    Begin {
        /// The request's fingerprint.
        fingerprint: &'a Fingerprint,
        /// The lease asked for.
        lease: Duration,
    },
    /// [`Store::complete`](crate::Store::complete).
    Complete {
        /// The holder's lease.
        lease: &'a Lease,
        /// What to record.
        outcome: &'a Outcome,
        /// How long to keep it.
        ttl: Duration,
        /// How long to keep a trace of it once it has expired (the store's
        /// setting; zero keeps none).
        trace: Duration,
    },
    /// [`Store::release`](crate::Store::release).
    Release {
        /// The holder's lease.
        lease: &'a Lease,
    },
    /// [`Store::renew`](crate::Store::renew).
    Renew {
        /// The holder's lease.
        lease: &'a Lease,
        /// The new lease length from now.
        duration: Duration,
    },
    /// [`Store::remove`](crate::Store::remove): an operator ends a record.
    Remove {
        /// End an in-flight claim too.
        force: bool,
    },
}

/// The answer to an [`Event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The answer to a begin.
    Begin(Begin),
    /// The record is completed with the holder's outcome (now or before).
    Completed,
    /// The claim was given up.
    Released,
    /// The lease was extended.
    Renewed(Lease),
    /// The presented lease is not the live claim; nothing changed.
    LeaseLost,
    /// The record was ended; a retry runs again.
    Removed,
    /// The record is in flight and removal was not forced; nothing changed.
    RemoveRefused,
    /// There is no live record; nothing changed.
    Absent,
}

/// What the store must write after an [`Event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing.
    Keep,
    /// Store this record.
    Put(Record),
}

/// Converts a duration to microseconds, saturating.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// An operator ends a record (or its trace). Ended rather than deleted: the
/// record stays, not live, with its token, so that the next claim's token is
/// greater.
fn remove(live: Option<&Record>, now: u64, force: bool) -> (Answer, Effect) {
    match live {
        None => (Answer::Absent, Effect::Keep),
        Some(r) if !force && matches!(r.state, RecordState::InFlight { .. }) => {
            (Answer::RemoveRefused, Effect::Keep)
        }
        Some(r) => (
            Answer::Removed,
            Effect::Put(Record {
                fingerprint: r.fingerprint,
                token: r.token,
                state: RecordState::InFlight { lease_until: now },
            }),
        ),
    }
}

/// A claim is asked for: granted on a record neither live nor traced;
/// otherwise answered from the record found (`kept`, live or traced).
fn begin(
    record: Option<&Record>,
    kept: Option<&Record>,
    now: u64,
    fingerprint: &Fingerprint,
    lease: Duration,
) -> (Answer, Effect) {
    match kept {
        Some(r) if r.fingerprint != *fingerprint => (Answer::Begin(Begin::Mismatch), Effect::Keep),
        Some(r) if r.is_traced(now) => (Answer::Begin(Begin::Expired), Effect::Keep),
        None => {
            let token = FencingToken(
                record
                    .map_or(1, |r| r.token.0.saturating_add(1))
                    .max(now)
                    .max(1),
            );
            let put = Record {
                fingerprint: *fingerprint,
                token,
                state: RecordState::InFlight {
                    lease_until: now.saturating_add(micros(lease)),
                },
            };
            (
                Answer::Begin(Begin::Acquired(Lease {
                    token,
                    duration: lease,
                })),
                Effect::Put(put),
            )
        }
        Some(Record {
            state: RecordState::InFlight { lease_until },
            ..
        }) => (
            Answer::Begin(Begin::InFlight {
                retry_after: Duration::from_micros(lease_until - now),
            }),
            Effect::Keep,
        ),
        Some(Record {
            state: RecordState::Completed { outcome, .. },
            ..
        }) => (Answer::Begin(Begin::Replay(outcome.clone())), Effect::Keep),
    }
}

/// Applies `event` to the record found (`None` if there is none) at store time
/// `now` (microseconds), returning the answer and the write to perform.
pub fn step(record: Option<&Record>, now: u64, event: Event<'_>) -> (Answer, Effect) {
    let live = record.filter(|r| r.is_live(now));
    let traced = record.filter(|r| r.is_traced(now));
    match event {
        Event::Begin { fingerprint, lease } => {
            begin(record, live.or(traced), now, fingerprint, lease)
        }
        Event::Complete {
            lease,
            outcome,
            ttl,
            trace,
        } => match live {
            Some(r) if r.token == lease.token => match r.state {
                RecordState::InFlight { .. } => {
                    let expires_at = now.saturating_add(micros(ttl));
                    (
                        Answer::Completed,
                        Effect::Put(Record {
                            fingerprint: r.fingerprint,
                            token: r.token,
                            state: RecordState::Completed {
                                outcome: outcome.clone(),
                                expires_at,
                                traced_until: expires_at.saturating_add(micros(trace)),
                            },
                        }),
                    )
                }
                RecordState::Completed { .. } => (Answer::Completed, Effect::Keep),
            },
            _ => (Answer::LeaseLost, Effect::Keep),
        },
        Event::Release { lease } => match live {
            Some(r)
                if r.token == lease.token && matches!(r.state, RecordState::InFlight { .. }) =>
            {
                (
                    Answer::Released,
                    Effect::Put(Record {
                        fingerprint: r.fingerprint,
                        token: r.token,
                        state: RecordState::InFlight { lease_until: now },
                    }),
                )
            }
            _ => (Answer::LeaseLost, Effect::Keep),
        },
        Event::Renew { lease, duration } => match live {
            Some(r)
                if r.token == lease.token && matches!(r.state, RecordState::InFlight { .. }) =>
            {
                (
                    Answer::Renewed(Lease {
                        token: r.token,
                        duration,
                    }),
                    Effect::Put(Record {
                        fingerprint: r.fingerprint,
                        token: r.token,
                        state: RecordState::InFlight {
                            lease_until: now.saturating_add(micros(duration)),
                        },
                    }),
                )
            }
            _ => (Answer::LeaseLost, Effect::Keep),
        },
        Event::Remove { force } => remove(live.or(traced), now, force),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(10);
    const TTL: Duration = Duration::from_secs(100);
    const TRACE: Duration = Duration::from_secs(100);
    const S: u64 = 1_000_000;

    fn fp(n: u8) -> Fingerprint {
        Fingerprint::from_bytes([n; 32])
    }

    fn in_flight(token: u64, lease_until: u64) -> Record {
        Record {
            fingerprint: fp(1),
            token: FencingToken(token),
            state: RecordState::InFlight { lease_until },
        }
    }

    fn completed(token: u64, expires_at: u64) -> Record {
        Record {
            fingerprint: fp(1),
            token: FencingToken(token),
            state: RecordState::Completed {
                outcome: Outcome::new(b"ok".to_vec()),
                expires_at,
                traced_until: expires_at,
            },
        }
    }

    fn lease(token: u64) -> Lease {
        Lease {
            token: FencingToken(token),
            duration: LEASE,
        }
    }

    fn begin(n: u8) -> (Event<'static>, Fingerprint) {
        let f: &'static Fingerprint = Box::leak(Box::new(fp(n)));
        (
            Event::Begin {
                fingerprint: f,
                lease: LEASE,
            },
            *f,
        )
    }

    // ---- begin, for every state -------------------------------------------------

    #[test]
    fn begin_on_nothing_acquires_with_a_token_from_the_clock() {
        let (ev, f) = begin(1);
        let (a, e) = step(None, 50 * S, ev);
        assert_eq!(
            a,
            Answer::Begin(Begin::Acquired(Lease {
                token: FencingToken(50 * S),
                duration: LEASE
            }))
        );
        assert_eq!(
            e,
            Effect::Put(Record {
                fingerprint: f,
                token: FencingToken(50 * S),
                state: RecordState::InFlight {
                    lease_until: 60 * S
                }
            })
        );
    }

    #[test]
    fn begin_on_live_in_flight_same_fp_answers_in_flight_with_time_left() {
        let r = in_flight(7, 60 * S);
        let (a, e) = step(Some(&r), 55 * S, begin(1).0);
        assert_eq!(
            a,
            Answer::Begin(Begin::InFlight {
                retry_after: Duration::from_secs(5)
            })
        );
        assert_eq!(e, Effect::Keep);
    }

    #[test]
    fn begin_on_live_in_flight_other_fp_is_a_mismatch() {
        let r = in_flight(7, 60 * S);
        assert_eq!(
            step(Some(&r), 55 * S, begin(2).0),
            (Answer::Begin(Begin::Mismatch), Effect::Keep)
        );
    }

    #[test]
    fn begin_on_expired_lease_takes_over_with_a_greater_token() {
        // Whatever the fingerprint: the old request never finished.
        for n in [1, 2] {
            let r = in_flight(70 * S, 60 * S);
            let (a, e) = step(Some(&r), 60 * S, begin(n).0);
            let Answer::Begin(Begin::Acquired(l)) = a else {
                panic!("{a:?}")
            };
            assert_eq!(
                l.token,
                FencingToken(70 * S + 1),
                "token keeps growing past the old one"
            );
            assert!(
                matches!(e, Effect::Put(Record { state: RecordState::InFlight { lease_until }, .. }) if lease_until == 70 * S)
            );
        }
    }

    #[test]
    fn begin_on_completed_same_fp_replays() {
        let r = completed(7, 100 * S);
        let (a, e) = step(Some(&r), 99 * S, begin(1).0);
        assert_eq!(
            a,
            Answer::Begin(Begin::Replay(Outcome::new(b"ok".to_vec())))
        );
        assert_eq!(e, Effect::Keep);
    }

    #[test]
    fn begin_on_completed_other_fp_is_a_mismatch_and_reveals_nothing() {
        let r = completed(7, 100 * S);
        assert_eq!(
            step(Some(&r), 99 * S, begin(2).0),
            (Answer::Begin(Begin::Mismatch), Effect::Keep)
        );
    }

    #[test]
    fn begin_on_expired_completed_acquires_again() {
        let r = completed(7, 100 * S);
        let (a, _) = step(Some(&r), 100 * S, begin(2).0);
        assert!(matches!(a, Answer::Begin(Begin::Acquired(l)) if l.token == FencingToken(100 * S)));
    }

    fn traced(token: u64, expires_at: u64, traced_until: u64) -> Record {
        let mut r = completed(token, expires_at);
        if let RecordState::Completed {
            traced_until: t, ..
        } = &mut r.state
        {
            *t = traced_until;
        }
        r
    }

    #[test]
    fn a_late_retry_of_a_traced_record_is_refused_not_run_again() {
        let r = traced(7, 100 * S, 200 * S);
        assert!(!r.is_live(100 * S) && r.is_traced(100 * S));
        assert_eq!(
            step(Some(&r), 100 * S, begin(1).0),
            (Answer::Begin(Begin::Expired), Effect::Keep)
        );
        assert_eq!(
            step(Some(&r), 199 * S, begin(2).0),
            (Answer::Begin(Begin::Mismatch), Effect::Keep),
            "another request under the key is still a mismatch"
        );
        assert!(!r.droppable(199 * S), "kept while traced");
        // Once the trace ends, the key is free again.
        let (a, _) = step(Some(&r), 200 * S, begin(1).0);
        assert!(matches!(a, Answer::Begin(Begin::Acquired(l)) if l.token == FencingToken(200 * S)));
        assert!(r.droppable(200 * S));
        // While live, the trace changes nothing.
        assert_eq!(
            step(Some(&r), 99 * S, begin(1).0),
            (
                Answer::Begin(Begin::Replay(Outcome::new(b"ok".to_vec()))),
                Effect::Keep
            )
        );
    }

    #[test]
    fn an_operator_removes_a_trace_and_the_key_runs_again() {
        let r = traced(7, 100 * S, 200 * S);
        let (a, e) = step(Some(&r), 150 * S, Event::Remove { force: false });
        assert_eq!(a, Answer::Removed);
        let Effect::Put(ended) = e else {
            panic!("{e:?}")
        };
        let (a, _) = step(Some(&ended), 150 * S, begin(1).0);
        assert!(matches!(a, Answer::Begin(Begin::Acquired(l)) if l.token == FencingToken(150 * S)));
    }

    // ---- complete ---------------------------------------------------------------

    #[test]
    fn complete_by_holder_records_until_ttl() {
        let r = in_flight(7, 60 * S);
        let out = Outcome::new(b"receipt".to_vec());
        let (a, e) = step(
            Some(&r),
            55 * S,
            Event::Complete {
                lease: &lease(7),
                outcome: &out,
                ttl: TTL,
                trace: TRACE,
            },
        );
        assert_eq!(a, Answer::Completed);
        assert_eq!(
            e,
            Effect::Put(Record {
                fingerprint: fp(1),
                token: FencingToken(7),
                state: RecordState::Completed {
                    outcome: out,
                    expires_at: 155 * S,
                    traced_until: 255 * S,
                }
            })
        );
    }

    #[test]
    fn complete_by_a_fenced_off_holder_changes_nothing() {
        let out = Outcome::new(b"late".to_vec());
        // taken over: the live claim has a newer token
        let r = in_flight(8, 60 * S);
        let ev = Event::Complete {
            lease: &lease(7),
            outcome: &out,
            ttl: TTL,
            trace: TRACE,
        };
        assert_eq!(
            step(Some(&r), 55 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
        // lease ran out, nobody took over yet: still lost
        let r = in_flight(7, 60 * S);
        assert_eq!(
            step(Some(&r), 60 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
        // record gone (released or expired)
        assert_eq!(step(None, 55 * S, ev), (Answer::LeaseLost, Effect::Keep));
        // completed by someone else
        let r = completed(8, 100 * S);
        assert_eq!(
            step(Some(&r), 55 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
    }

    #[test]
    fn complete_again_by_the_same_holder_keeps_the_first_outcome() {
        let r = completed(7, 100 * S);
        let out = Outcome::new(b"second".to_vec());
        let ev = Event::Complete {
            lease: &lease(7),
            outcome: &out,
            ttl: TTL,
            trace: TRACE,
        };
        assert_eq!(
            step(Some(&r), 55 * S, ev),
            (Answer::Completed, Effect::Keep)
        );
    }

    // ---- release ----------------------------------------------------------------

    #[test]
    fn release_by_holder_ends_the_lease_now_and_keeps_token_order() {
        let r = in_flight(7, 60 * S);
        let (a, e) = step(Some(&r), 55 * S, Event::Release { lease: &lease(7) });
        assert_eq!(a, Answer::Released);
        let Effect::Put(released) = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            released.state,
            RecordState::InFlight {
                lease_until: 55 * S
            }
        );
        assert!(!released.is_live(55 * S), "released means free at once");
        // A retry in the same microsecond still gets a greater token.
        let (a, _) = step(Some(&released), 55 * S, begin(1).0);
        assert!(matches!(a, Answer::Begin(Begin::Acquired(l)) if l.token == FencingToken(55 * S)));
        let tombstone = in_flight(55 * S, 55 * S);
        let (a, _) = step(Some(&tombstone), 55 * S, begin(1).0);
        assert!(
            matches!(a, Answer::Begin(Begin::Acquired(l)) if l.token == FencingToken(55 * S + 1))
        );
        assert!(
            !tombstone.droppable(55 * S),
            "kept until the clock passes its token"
        );
        assert!(tombstone.droppable(55 * S + 1));
    }

    #[test]
    fn release_is_fenced() {
        let ev = Event::Release { lease: &lease(7) };
        assert_eq!(
            step(Some(&in_flight(8, 60 * S)), 55 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
        assert_eq!(
            step(Some(&in_flight(7, 60 * S)), 61 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
        assert_eq!(step(None, 55 * S, ev), (Answer::LeaseLost, Effect::Keep));
        // a completed record is never released, not even by its own holder
        assert_eq!(
            step(Some(&completed(7, 100 * S)), 55 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
    }

    // ---- renew ------------------------------------------------------------------

    #[test]
    fn renew_by_holder_extends_from_now() {
        let r = in_flight(7, 60 * S);
        let (a, e) = step(
            Some(&r),
            58 * S,
            Event::Renew {
                lease: &lease(7),
                duration: Duration::from_secs(30),
            },
        );
        assert_eq!(
            a,
            Answer::Renewed(Lease {
                token: FencingToken(7),
                duration: Duration::from_secs(30)
            })
        );
        assert!(
            matches!(e, Effect::Put(Record { state: RecordState::InFlight { lease_until }, token: FencingToken(7), .. }) if lease_until == 88 * S)
        );
    }

    #[test]
    fn renew_is_fenced() {
        let ev = Event::Renew {
            lease: &lease(7),
            duration: LEASE,
        };
        assert_eq!(
            step(Some(&in_flight(8, 60 * S)), 55 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
        assert_eq!(
            step(Some(&in_flight(7, 60 * S)), 60 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
        assert_eq!(step(None, 55 * S, ev), (Answer::LeaseLost, Effect::Keep));
        assert_eq!(
            step(Some(&completed(7, 100 * S)), 55 * S, ev),
            (Answer::LeaseLost, Effect::Keep)
        );
    }

    #[test]
    fn tokens_grow_even_when_the_clock_stalls() {
        let r = in_flight(100, 10);
        let (a, _) = step(Some(&r), 10, begin(1).0);
        assert!(matches!(a, Answer::Begin(Begin::Acquired(l)) if l.token == FencingToken(101)));
        let (a, _) = step(None, 0, begin(1).0);
        assert!(matches!(a, Answer::Begin(Begin::Acquired(l)) if l.token == FencingToken(1)));
    }
}
