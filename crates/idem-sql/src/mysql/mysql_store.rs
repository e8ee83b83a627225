//! `MySqlStore`: the SQL store on MariaDB or MySQL, and the database its
//! table is in.

use sqlx::MySql;

use crate::names::{check_name, InvalidName};
use crate::sql_store::SqlStore;
use crate::sql_transaction::SqlTransaction;

/// The store on MariaDB or MySQL.
pub type MySqlStore = SqlStore<MySql>;

/// The operation's own transaction on MariaDB or MySQL
/// ([`MySqlStore::begin_transaction`]). The completion locks the record's
/// row until the commit.
pub type MySqlTransaction = SqlTransaction<MySql>;

/// The default table.
pub const DEFAULT_TABLE: &str = "idem_records";

impl SqlStore<MySql> {
    /// Uses a table in `database` rather than the pool's (1 to 64 of
    /// `a-z`, `0-9`, `_`).
    pub fn with_database(mut self, database: &str) -> Result<Self, InvalidName> {
        check_name(database, 64)?;
        self.settings = Some(database.into());
        Ok(self.rendered())
    }

    /// The database, if set with [`with_database`](Self::with_database).
    pub fn database(&self) -> Option<&str> {
        self.settings.as_deref()
    }
}
