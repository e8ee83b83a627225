//! The protocol, checked exhaustively with `stateright`: three callers on one
//! key (two sending the same request, one reusing the key for another), a
//! store clock that advances by whole lease-ticks at any moment, leases that
//! expire, renewals, takeover after expiry, transient failures that release,
//! completion with fencing tokens, and holders that crash or stall at any
//! point. Every transition of the store is `idem_core::machine::step`, the
//! function `MemoryStore` applies and the Redis and PostgreSQL stores restate.
//!
//! Each bug class that double-executed operations in other libraries is also
//! written as a broken transition function, and the checker must find a
//! counterexample for it (the test prints the trace): a checker that cannot
//! fail is not a check.

use std::time::Duration;

use idem_core::machine::{step, Answer, Effect, Event, Record, RecordState};
use idem_core::store::Begin;
use idem_core::{FencingToken, Fingerprint, Lease, Outcome};
use stateright::{Checker, Model, Property};

/// One tick of the model's clock, in store microseconds.
const TICK: u64 = 1_000_000;
/// The lease callers ask for: two ticks.
const LEASE: Duration = Duration::from_secs(2);
/// How long completed records are kept: beyond the horizon, so a completed
/// record lives for the whole run.
const TTL: Duration = Duration::from_secs(1_000);
/// The last tick.
const HORIZON: u64 = 5;

/// The store's transition function under check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// `idem_core::machine::step`.
    Correct,
    /// A takeover decided on the record as the caller read it earlier (it
    /// had expired then), written without checking the record now.
    StaleSnapshotTakeover,
    /// An in-flight record has no deadline: a begin treats it as abandoned.
    NoDeadlineOnInFlight,
    /// Completion stores the record without the request's fingerprint.
    FingerprintDroppedAtCompletion,
    /// The operation mutated its input, so completion addresses the record of
    /// the mutated input, and writes it whatever is there.
    MutatedInputCompletesAnotherRecord,
    /// Requests without a key all map to one record.
    KeylessRequestsShareARecord,
    /// A renewal extends the live claim whatever token it presents.
    RenewalWithoutTokenCheck,
    /// A release ends the live claim whatever token it presents.
    ReleaseByStaleHolder,
    /// An in-flight record never expires (liveness: a crashed holder blocks
    /// its key forever).
    InFlightNeverExpires,
}

/// A caller: which key it sends (0 or 1) and which request (fingerprint).
#[derive(Clone, Copy, Debug)]
struct Caller {
    key: usize,
    request: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Client {
    /// Not holding a claim: it (re)tries after `last`, the tick of its last
    /// begin; `seen` is the record it read then; `declined` if its own
    /// last attempt failed transiently (and released its claim).
    Idle {
        last: Option<u64>,
        seen: Option<Record>,
        declined: bool,
    },
    /// Holding a claim with `token`; `ran` once its effect was attempted.
    Holding {
        token: u64,
        ran: bool,
        renewed_at: u64,
    },
    /// Got its final answer.
    Done(Ending),
    /// Crashed (or stalled for good) while holding its claim.
    Crashed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Ending {
    Executed,
    Replayed,
    Mismatch,
    LeaseLost,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Begin(usize),
    Run(usize),
    Complete(usize),
    Renew(usize),
    Release(usize),
    Crash(usize),
}

/// What went wrong, found while taking a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Violation {
    TwoEffectsWhileARecordLives,
    EffectCommittedTwice,
    ReplayNotTheFirstOutcome,
    StaleHolderCompleted,
    StaleHolderRenewed,
    StaleHolderReleased,
    LiveHolderToldLeaseLost,
    ReusedKeyRanAnotherRequest,
    ClaimedWhileAnotherClaimLives,
    IdenticalRequestRefused,
    UsedKeyRefusedForAnotherKey,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    now: u64,
    records: [Option<Record>; 2],
    clients: Vec<Client>,
    /// Per key, the highest fencing token a downstream system accepted.
    fence: [u64; 2],
    /// Effects the downstream accepted: (caller, key, token).
    effects: Vec<(usize, usize, u64)>,
    /// Per key, completions the store accepted.
    committed: [u8; 2],
    /// Per key, the first completed outcome and the request that made it.
    first: [Option<(Outcome, u8)>; 2],
    /// Per key, the request of the latest claim.
    claimed_by: [Option<u8>; 2],
    violations: Vec<Violation>,
}

struct Protocol {
    variant: Variant,
    callers: Vec<Caller>,
    /// Check only this property (a broken variant breaks it; exploring on
    /// for the others would take much longer).
    only: Option<&'static str>,
}

fn fingerprint(request: u8) -> Fingerprint {
    Fingerprint::from_bytes([request; 32])
}

fn outcome_of(caller: usize) -> Outcome {
    Outcome::new(vec![u8::try_from(caller).unwrap_or(u8::MAX)])
}

fn live_token(record: Option<&Record>, now: u64) -> Option<u64> {
    record.filter(|r| r.is_live(now)).map(|r| r.token.0)
}

impl Protocol {
    fn new(variant: Variant) -> Self {
        // Two callers send the same request under key 0; the third reuses
        // key 0 for another request, or, to check keyless sharing, sends its
        // own request under its own key.
        let third = if variant == Variant::KeylessRequestsShareARecord {
            Caller { key: 1, request: 2 }
        } else {
            Caller { key: 0, request: 2 }
        };
        Self {
            variant,
            callers: vec![
                Caller { key: 0, request: 1 },
                Caller { key: 0, request: 1 },
                third,
            ],
            only: None,
        }
    }

    /// The record a caller's event goes to.
    fn slot(&self, caller: Caller, completing: bool) -> usize {
        match self.variant {
            Variant::KeylessRequestsShareARecord => 0,
            Variant::MutatedInputCompletesAnotherRecord if completing => 1 - caller.key,
            _ => caller.key,
        }
    }

    /// The store's transition under the variant checked.
    fn transition(
        &self,
        record: Option<&Record>,
        seen: Option<&Record>,
        now: u64,
        event: Event<'_>,
    ) -> (Answer, Effect) {
        let current_token = record.map(|r| r.token);
        match (self.variant, event) {
            // The other variants never read `seen`: a correct store decides
            // on the record as it is now.
            (Variant::StaleSnapshotTakeover, Event::Begin { fingerprint, lease }) => {
                if let Some(old) = seen.filter(|s| !s.is_live(now)) {
                    // Decided on the old read: overwrite whatever is there.
                    return step(Some(old), now, Event::Begin { fingerprint, lease });
                }
                step(record, now, event)
            }
            (Variant::NoDeadlineOnInFlight, Event::Begin { .. }) => match record {
                Some(r) if matches!(r.state, RecordState::InFlight { .. }) => {
                    let abandoned = Record {
                        state: RecordState::InFlight { lease_until: 0 },
                        ..r.clone()
                    };
                    step(Some(&abandoned), now, event)
                }
                _ => step(record, now, event),
            },
            (Variant::InFlightNeverExpires, _) => match record {
                Some(r) if matches!(r.state, RecordState::InFlight { .. }) => {
                    let forever = Record {
                        state: RecordState::InFlight {
                            lease_until: u64::MAX,
                        },
                        ..r.clone()
                    };
                    step(Some(&forever), now, event)
                }
                _ => step(record, now, event),
            },
            (Variant::FingerprintDroppedAtCompletion, Event::Complete { .. }) => {
                match step(record, now, event) {
                    (answer, Effect::Put(mut r)) => {
                        r.fingerprint = Fingerprint::from_bytes([0; 32]);
                        (answer, Effect::Put(r))
                    }
                    other => other,
                }
            }
            (
                Variant::MutatedInputCompletesAnotherRecord,
                Event::Complete {
                    lease,
                    outcome,
                    ttl,
                    trace,
                },
            ) => {
                // Written whatever is there: as if this claim held it.
                let claimed = Record {
                    fingerprint: record.map_or(fingerprint(0), |r| r.fingerprint),
                    token: lease.token,
                    state: RecordState::InFlight {
                        lease_until: u64::MAX,
                    },
                };
                step(
                    Some(&claimed),
                    now,
                    Event::Complete {
                        lease,
                        outcome,
                        ttl,
                        trace,
                    },
                )
            }
            (Variant::RenewalWithoutTokenCheck, Event::Renew { lease, duration }) => {
                let lease = Lease {
                    token: current_token.unwrap_or(lease.token),
                    duration: lease.duration,
                };
                step(
                    record,
                    now,
                    Event::Renew {
                        lease: &lease,
                        duration,
                    },
                )
            }
            (Variant::ReleaseByStaleHolder, Event::Release { lease }) => {
                let lease = Lease {
                    token: current_token.unwrap_or(lease.token),
                    duration: lease.duration,
                };
                step(record, now, Event::Release { lease: &lease })
            }
            _ => step(record, now, event),
        }
    }
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 1,
            records: [None, None],
            clients: vec![
                Client::Idle {
                    last: None,
                    seen: None,
                    declined: false,
                };
                self.callers.len()
            ],
            fence: [0, 0],
            effects: Vec::new(),
            committed: [0, 0],
            first: [None, None],
            claimed_by: [None, None],
            violations: Vec::new(),
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < HORIZON {
            actions.push(Action::Tick);
        }
        for (i, client) in state.clients.iter().enumerate() {
            match client {
                Client::Idle {
                    last,
                    seen,
                    declined,
                } => {
                    // A caller retries once the clock moved; at the horizon,
                    // also when the record changed since it last looked (it
                    // would be woken), unless its own attempt just failed.
                    let key = self.slot(self.callers[i], false);
                    let changed = *seen != state.records[key];
                    if last.is_none_or(|t| t < state.now)
                        || (state.now == HORIZON && !declined && changed)
                    {
                        actions.push(Action::Begin(i));
                    }
                }
                Client::Holding {
                    ran, renewed_at, ..
                } => {
                    if *ran {
                        actions.push(Action::Complete(i));
                    } else {
                        actions.push(Action::Run(i));
                        // A transient failure: nothing took effect.
                        actions.push(Action::Release(i));
                    }
                    if *renewed_at < state.now {
                        actions.push(Action::Renew(i));
                    }
                    actions.push(Action::Crash(i));
                }
                _ => {}
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now_us = s.now * TICK;
        match action {
            Action::Tick => s.now += 1,
            Action::Crash(i) => s.clients[i] = Client::Crashed,
            Action::Begin(i) => self.begin(&mut s, i, now_us),
            Action::Run(i) => {
                let Client::Holding { token, .. } = s.clients[i] else {
                    return None;
                };
                let key = self.callers[i].key;
                // A downstream system that checks fencing tokens accepts an
                // effect only from the latest claim it has seen.
                if token >= s.fence[key] {
                    s.fence[key] = token;
                    let other_live = s.effects.iter().any(|&(j, k, t)| {
                        j != i && k == key && live_token(s.records[key].as_ref(), now_us) == Some(t)
                    });
                    if other_live {
                        s.violations.push(Violation::TwoEffectsWhileARecordLives);
                    }
                    s.effects.push((i, key, token));
                }
                if let Client::Holding { ran, .. } = &mut s.clients[i] {
                    *ran = true;
                }
            }
            Action::Complete(i) => self.complete(&mut s, i, now_us),
            Action::Renew(i) => self.renew(&mut s, i, now_us),
            Action::Release(i) => self.release(&mut s, i, now_us),
        }
        s.violations.sort();
        s.violations.dedup();
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties: Vec<Property<Self>> = vec![
            Property::always("(a) one effect while a record lives", |_, s: &State| {
                !s.violations
                    .contains(&Violation::TwoEffectsWhileARecordLives)
                    && !s
                        .violations
                        .contains(&Violation::ClaimedWhileAnotherClaimLives)
            }),
            Property::always("(a) one committed effect per key", |_, s: &State| {
                !s.violations.contains(&Violation::EffectCommittedTwice)
            }),
            Property::always(
                "(b) a completed record is never overwritten",
                |_, s: &State| {
                    (0..2).all(|k| match &s.first[k] {
                    None => true,
                    Some((o, _)) => matches!(
                        &s.records[k],
                        Some(Record { state: RecordState::Completed { outcome, .. }, .. }) if outcome == o
                    ),
                })
                },
            ),
            Property::always("(c) every replay is the first outcome", |_, s: &State| {
                !s.violations.contains(&Violation::ReplayNotTheFirstOutcome)
            }),
            Property::always(
                "(d) a stale holder never completes, renews or releases",
                |_, s: &State| {
                    !s.violations.iter().any(|v| {
                        matches!(
                            v,
                            Violation::StaleHolderCompleted
                                | Violation::StaleHolderRenewed
                                | Violation::StaleHolderReleased
                                | Violation::LiveHolderToldLeaseLost
                        )
                    })
                },
            ),
            Property::always(
                "(e) a reused key never runs another request",
                |_, s: &State| {
                    !s.violations
                        .contains(&Violation::ReusedKeyRanAnotherRequest)
                },
            ),
            Property::always(
                "(e) an identical or new request is never refused",
                |_, s: &State| {
                    !s.violations.contains(&Violation::IdenticalRequestRefused)
                        && !s
                            .violations
                            .contains(&Violation::UsedKeyRefusedForAnotherKey)
                },
            ),
        ];
        properties.push(Property::eventually(
            "a caller that keeps retrying gets an answer once crashed holders' leases end",
            |m: &Protocol, s: &State| {
                s.clients.iter().enumerate().all(|(i, c)| match c {
                    Client::Done(_) | Client::Crashed => true,
                    // Still waiting at the horizon only because time ran
                    // out: behind a claim whose lease (as stored) has not
                    // ended, or right after its own transient failure.
                    Client::Idle { last, declined, .. } => {
                        s.now == HORIZON
                            && ((*declined && *last == Some(HORIZON))
                                || s.records[m.callers[i].key].as_ref().is_some_and(|r| {
                                    matches!(r.state, RecordState::InFlight { .. })
                                        && r.is_live(s.now * TICK)
                                }))
                    }
                    Client::Holding { .. } => false,
                })
            },
        ));
        properties.retain(|p| self.only.is_none_or(|only| p.name == only));
        properties
    }
}

impl Protocol {
    fn begin(&self, s: &mut State, i: usize, now: u64) {
        let caller = self.callers[i];
        let slot = self.slot(caller, false);
        let fp = fingerprint(caller.request);
        let seen = match &s.clients[i] {
            Client::Idle { seen, .. } => seen.clone(),
            _ => None,
        };
        let before = s.records[slot].clone();
        let (answer, effect) = self.transition(
            before.as_ref(),
            seen.as_ref(),
            now,
            Event::Begin {
                fingerprint: &fp,
                lease: LEASE,
            },
        );
        if let Effect::Put(r) = effect {
            s.records[slot] = Some(r);
        }
        match answer {
            Answer::Begin(Begin::Acquired(lease)) => {
                if let Some(b) = before.as_ref().filter(|b| b.is_live(now)) {
                    s.violations.push(if b.fingerprint == fp {
                        Violation::ClaimedWhileAnotherClaimLives
                    } else {
                        Violation::ReusedKeyRanAnotherRequest
                    });
                }
                s.claimed_by[slot] = Some(caller.request);
                s.clients[i] = Client::Holding {
                    token: lease.token.0,
                    ran: false,
                    renewed_at: s.now,
                };
            }
            Answer::Begin(Begin::Replay(outcome)) => {
                let first = s.first[slot].as_ref().map(|(o, _)| o);
                if first != Some(&outcome) {
                    s.violations.push(Violation::ReplayNotTheFirstOutcome);
                }
                s.clients[i] = Client::Done(Ending::Replayed);
            }
            Answer::Begin(Begin::InFlight { .. }) => {
                s.clients[i] = Client::Idle {
                    last: Some(s.now),
                    seen: before,
                    declined: false,
                };
            }
            Answer::Begin(Begin::Mismatch) => {
                // Refused as another request: right only if a live record
                // of this key was made by another request.
                match s.claimed_by[slot] {
                    Some(r) if r == caller.request => {
                        s.violations.push(Violation::IdenticalRequestRefused);
                    }
                    _ if slot != caller.key => {
                        s.violations.push(Violation::UsedKeyRefusedForAnotherKey);
                    }
                    _ => {}
                }
                s.clients[i] = Client::Done(Ending::Mismatch);
            }
            _ => {}
        }
    }

    fn holder(s: &State, i: usize) -> Option<Lease> {
        match s.clients[i] {
            Client::Holding { token, .. } => Some(Lease {
                token: FencingToken(token),
                duration: LEASE,
            }),
            _ => None,
        }
    }

    fn complete(&self, s: &mut State, i: usize, now: u64) {
        let Some(lease) = Self::holder(s, i) else {
            return;
        };
        let caller = self.callers[i];
        let slot = self.slot(caller, true);
        let own_live = live_token(s.records[caller.key].as_ref(), now) == Some(lease.token.0);
        let outcome = outcome_of(i);
        let (answer, effect) = self.transition(
            s.records[slot].as_ref(),
            None,
            now,
            Event::Complete {
                lease: &lease,
                outcome: &outcome,
                ttl: TTL,
                // Records outlive the run: no trace is ever reached.
                trace: Duration::ZERO,
            },
        );
        if let Effect::Put(r) = effect {
            s.records[slot] = Some(r);
        }
        if answer == Answer::Completed {
            {
                if !own_live {
                    s.violations.push(Violation::StaleHolderCompleted);
                }
                s.committed[caller.key] += 1;
                if s.committed[caller.key] > 1 {
                    s.violations.push(Violation::EffectCommittedTwice);
                }
                if s.first[slot].is_none() {
                    s.first[slot] = Some((outcome, caller.request));
                }
                s.clients[i] = Client::Done(Ending::Executed);
            }
        } else {
            if own_live {
                s.violations.push(Violation::LiveHolderToldLeaseLost);
            }
            s.clients[i] = Client::Done(Ending::LeaseLost);
        }
    }

    fn renew(&self, s: &mut State, i: usize, now: u64) {
        let Some(lease) = Self::holder(s, i) else {
            return;
        };
        let slot = self.callers[i].key;
        let own_live = live_token(s.records[slot].as_ref(), now) == Some(lease.token.0);
        let (answer, effect) = self.transition(
            s.records[slot].as_ref(),
            None,
            now,
            Event::Renew {
                lease: &lease,
                duration: LEASE,
            },
        );
        if let Effect::Put(r) = effect {
            s.records[slot] = Some(r);
        }
        let renewed = matches!(answer, Answer::Renewed(_));
        if renewed && !own_live {
            s.violations.push(Violation::StaleHolderRenewed);
        }
        if !renewed && own_live {
            s.violations.push(Violation::LiveHolderToldLeaseLost);
        }
        // Refused, the engine marks the claim lost; the operation may still
        // finish and try to complete.
        if let Client::Holding { renewed_at, .. } = &mut s.clients[i] {
            *renewed_at = s.now;
        }
    }

    fn release(&self, s: &mut State, i: usize, now: u64) {
        let Some(lease) = Self::holder(s, i) else {
            return;
        };
        let slot = self.callers[i].key;
        let own_live = live_token(s.records[slot].as_ref(), now) == Some(lease.token.0);
        let (answer, effect) = self.transition(
            s.records[slot].as_ref(),
            None,
            now,
            Event::Release { lease: &lease },
        );
        if let Effect::Put(r) = effect {
            s.records[slot] = Some(r);
        }
        if answer == Answer::Released && !own_live {
            s.violations.push(Violation::StaleHolderReleased);
        }
        // A transient failure: the caller retries later.
        s.clients[i] = Client::Idle {
            last: Some(s.now),
            seen: s.records[slot].clone(),
            declined: true,
        };
    }
}

fn check(variant: Variant, only: Option<&'static str>) -> impl Checker<Protocol> {
    Protocol {
        only,
        ..Protocol::new(variant)
    }
    .checker()
    .spawn_bfs()
    .join()
}

#[test]
fn every_interleaving_of_three_callers_keeps_every_property() {
    let checker = check(Variant::Correct, None);
    eprintln!(
        "the correct protocol: {} states, {} unique",
        checker.state_count(),
        checker.unique_state_count()
    );
    checker.assert_properties();
    assert!(
        checker.unique_state_count() > 1_000,
        "the model explores many interleavings"
    );
}

/// Asserts that the checker finds `property` broken under `variant`, and
/// prints the trace it found.
fn finds(variant: Variant, property: &'static str) {
    let checker = check(variant, Some(property));
    let Some(path) = checker.discovery(property) else {
        panic!("{variant:?}: the checker found no counterexample for `{property}`");
    };
    eprintln!("{variant:?} breaks `{property}`:");
    for (state, action) in path.clone().into_vec() {
        if let Some(action) = action {
            eprintln!(
                "  {action:?}   (at tick {}, records {:?})",
                state.now, state.records
            );
        }
    }
    eprintln!("  ends in {:?}", path.last_state().violations);
}

#[test]
fn a_takeover_from_a_stale_read_is_caught() {
    finds(
        Variant::StaleSnapshotTakeover,
        "(b) a completed record is never overwritten",
    );
}

#[test]
fn an_in_flight_record_without_a_deadline_is_caught() {
    finds(
        Variant::NoDeadlineOnInFlight,
        "(a) one effect while a record lives",
    );
}

#[test]
fn a_completion_that_drops_the_fingerprint_is_caught() {
    finds(
        Variant::FingerprintDroppedAtCompletion,
        "(e) an identical or new request is never refused",
    );
}

#[test]
fn a_completion_of_the_mutated_input_is_caught() {
    finds(
        Variant::MutatedInputCompletesAnotherRecord,
        "(d) a stale holder never completes, renews or releases",
    );
}

#[test]
fn keyless_requests_sharing_a_record_are_caught() {
    finds(
        Variant::KeylessRequestsShareARecord,
        "(e) an identical or new request is never refused",
    );
}

#[test]
fn a_renewal_without_a_token_check_is_caught() {
    finds(
        Variant::RenewalWithoutTokenCheck,
        "(d) a stale holder never completes, renews or releases",
    );
}

#[test]
fn a_release_by_a_stale_holder_is_caught() {
    finds(
        Variant::ReleaseByStaleHolder,
        "(d) a stale holder never completes, renews or releases",
    );
}

#[test]
fn a_claim_that_never_expires_is_caught_by_liveness() {
    finds(
        Variant::InFlightNeverExpires,
        "a caller that keeps retrying gets an answer once crashed holders' leases end",
    );
}
