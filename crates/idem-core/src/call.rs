//! `Call`: one idempotent invocation.

use std::borrow::Cow;
use std::time::Duration;

use crate::fingerprint::Fingerprint;
use crate::key::{IdempotencyKey, RecordId, Scope};
use crate::policy::{OnInFlight, Overrides};

/// One idempotent invocation: who asks (scope), under which key, for what
/// (fingerprint), with optional per-call policy overrides.
#[derive(Clone, Debug)]
pub struct Call {
    pub(crate) scope: Scope,
    key: IdempotencyKey,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) id: RecordId,
    pub(crate) overrides: Overrides,
    pub(crate) operation: Cow<'static, str>,
}

impl Call {
    /// A call of the request `fingerprint` (a [`Fingerprint`], or the
    /// [`FingerprintBuilder`](crate::FingerprintBuilder) that makes it)
    /// under `key` in `scope`.
    pub fn new(
        scope: impl Into<Scope>,
        key: IdempotencyKey,
        fingerprint: impl Into<Fingerprint>,
    ) -> Self {
        let (scope, fingerprint) = (scope.into(), fingerprint.into());
        let id = RecordId::new(&scope, &key);
        Self {
            scope,
            key,
            fingerprint,
            id,
            overrides: Overrides::default(),
            operation: Cow::Borrowed(""),
        }
    }

    /// Overrides the engine's record lifetime for this call.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.overrides = self.overrides.ttl(ttl);
        self
    }

    /// Overrides the engine's lease for this call.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.overrides = self.overrides.lease(lease);
        self
    }

    /// Overrides the engine's duplicate handling for this call.
    #[must_use]
    pub fn on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.overrides = self.overrides.on_in_flight(on_in_flight);
        self
    }

    /// Replaces this call's overrides.
    #[must_use]
    pub fn with_overrides(mut self, overrides: Overrides) -> Self {
        self.overrides = overrides;
        self
    }

    /// This call's overrides of the engine's policy.
    pub fn overrides(&self) -> &Overrides {
        &self.overrides
    }

    /// Names the operation in metrics (`idem.operation`); by default none.
    /// Keep the set of names small: one per endpoint or handler, never a
    /// per-request value.
    #[must_use]
    pub fn with_operation(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.operation = name.into();
        self
    }

    /// The operation's name (empty if none was given).
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The key.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The record address (digest of scope and key).
    pub fn record_id(&self) -> &RecordId {
        &self.id
    }
}
