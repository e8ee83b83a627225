//! `PgStore`: the SQL store on PostgreSQL, and what only PostgreSQL is set
//! up with: the schema, a transaction pooler, and where its `LISTEN`
//! connects.

use std::fmt;
use std::sync::Arc;

use sqlx::postgres::PgConnectOptions;
use sqlx::Postgres;

use crate::names::{check_name, InvalidName};
use crate::sql_store::SqlStore;
use crate::sql_transaction::SqlTransaction;

/// The store on PostgreSQL.
pub type PgStore = SqlStore<Postgres>;

/// The operation's own transaction on PostgreSQL
/// ([`PgStore::begin_transaction`]). The completion locks the record's row
/// until the commit.
pub type PgTransaction = SqlTransaction<Postgres>;

/// The default schema.
pub const DEFAULT_SCHEMA: &str = "idem";
/// The default table.
pub const DEFAULT_TABLE: &str = "records";

/// What a store on PostgreSQL is rendered and run with beside its table:
/// built by [`PgStore`]'s methods.
#[derive(Clone, Debug)]
pub struct PgSettings {
    pub(crate) schema: Arc<str>,
    /// Statements prepared once per connection and kept (named), or sent
    /// with their parameters as literals (for a transaction pooler).
    pub(crate) persistent: bool,
    pub(crate) listen: Listen,
}

impl Default for PgSettings {
    fn default() -> Self {
        Self {
            schema: DEFAULT_SCHEMA.into(),
            persistent: true,
            listen: Listen::Pool,
        }
    }
}

/// Where the woken wait listens.
#[derive(Clone)]
pub(crate) enum Listen {
    /// On a connection of the pool's own options.
    Pool,
    /// On a direct connection with these options.
    Direct(Arc<PgConnectOptions>),
    /// Nowhere: waiters poll (and are woken by this process's changes).
    Off,
}

impl fmt::Debug for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Listen::Pool => "Pool",
            Listen::Direct(_) => "Direct",
            Listen::Off => "Off",
        })
    }
}

impl SqlStore<Postgres> {
    /// Uses another schema (1 to 63 of `a-z`, `0-9`, `_`).
    pub fn with_schema(mut self, schema: &str) -> Result<Self, InvalidName> {
        check_name(schema, 63)?;
        self.settings.schema = schema.into();
        Ok(self.rendered())
    }

    /// The schema.
    pub fn schema(&self) -> &str {
        &self.settings.schema
    }

    /// For a pool that reaches PostgreSQL through a pooler in transaction
    /// mode (PgBouncer's `pool_mode = transaction`, and others alike), which
    /// hands each server connection to another client once the server is
    /// idle:
    ///
    /// - the store sends each statement as one simple query with its
    ///   parameters written in as literals (hex `bytea`, digits), since no
    ///   prepared statement, named or unnamed, is safe across the pooler's
    ///   hand-overs (see below); one round trip each, as before;
    /// - the woken wait's `LISTEN` needs a session of its own, which a
    ///   transaction pooler does not give: set one with
    ///   [`listen_with`](Self::listen_with) (a direct connection to the
    ///   server, one per store), or waiting duplicates poll.
    ///
    /// Transactional completion ([`begin_transaction`](Self::begin_transaction)
    /// and `Claim::commit`) works unchanged: a transaction keeps its server
    /// connection from `BEGIN` to `COMMIT`.
    ///
    /// Your own statements through the pooler: inside a transaction, make
    /// them unnamed (`sqlx::query(..).persistent(false)`); outside one, a
    /// bound statement is not safe at all (sqlx sends `Parse`, waits for
    /// the server, then `Bind`, which the pooler may route to another
    /// client's server connection), so run it in a transaction, or use a
    /// pooler that tracks prepared statements (PgBouncer 1.21 and later, with
    /// `max_prepared_statements`).
    #[must_use]
    pub fn behind_transaction_pooler(mut self) -> Self {
        self.settings.persistent = false;
        if matches!(self.settings.listen, Listen::Pool) {
            self.settings.listen = Listen::Off;
        }
        self.rendered()
    }

    /// Whether the store was set up for a transaction pooler
    /// ([`behind_transaction_pooler`](Self::behind_transaction_pooler)): your
    /// statements on its pool should then be unnamed too.
    pub fn is_behind_transaction_pooler(&self) -> bool {
        !self.settings.persistent
    }

    /// The woken wait's `LISTEN` connects with `options` (a direct
    /// connection to the server, when the pool goes through a transaction
    /// pooler) instead of the pool's.
    #[must_use]
    pub fn listen_with(mut self, options: PgConnectOptions) -> Self {
        self.settings.listen = Listen::Direct(Arc::new(options));
        self.rendered()
    }
}
