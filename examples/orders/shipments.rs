//! Where the order examples count each order's shipments, committed with
//! idem's record in one transaction by
//! [`commit_with_record`](idem_queue::commit_with_record): in Redis (by
//! default), or in PostgreSQL when `DATABASE_URL` is set.

use idem_core::{Claim, Engine};
use idem_postgres::PgStore;
use idem_redis::RedisStore;
use sqlx::AssertSqlSafe;

use crate::shipping::{ShipError, Shipment};

/// The shipment counts and the store that keeps idem's records beside them.
#[derive(Clone)]
pub enum Shipments {
    /// `<prefix>shipments:<order>` keys in Redis, records in the same Redis.
    Redis {
        /// Records and shipments.
        store: RedisStore,
        /// The shipments' key prefix.
        prefix: String,
    },
    /// `<schema>.shipments` rows, records in the same schema.
    Postgres {
        /// Records and shipments.
        store: PgStore,
        /// The statement that counts one shipment more.
        ship: String,
    },
}

impl Shipments {
    /// Shipments in Redis at `url`, keys under `prefix` (records under
    /// `<prefix>idem:`).
    ///
    /// # Errors
    ///
    /// Redis did not answer.
    pub async fn redis(url: &str, prefix: &str) -> Result<Self, Box<dyn std::error::Error>> {
        let store = RedisStore::connect(url)
            .await?
            .with_prefix(&format!("{prefix}idem:"));
        Ok(Self::Redis {
            store,
            prefix: prefix.to_owned(),
        })
    }

    /// Shipments in PostgreSQL at `url`, in `schema` (records and the
    /// `shipments` table both made there if missing).
    ///
    /// # Errors
    ///
    /// PostgreSQL did not answer, or `schema` is not a valid name.
    pub async fn postgres(url: &str, schema: &str) -> Result<Self, Box<dyn std::error::Error>> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect(url)
            .await?;
        let store = PgStore::new(pool).with_schema(schema)?;
        store.migrate().await?;
        let table = Self::postgres_table(schema);
        sqlx::query(AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {table} \
             (order_id text PRIMARY KEY, shipped bigint NOT NULL)"
        )))
        .execute(store.pool())
        .await?;
        let ship = format!(
            "INSERT INTO {table} AS s (order_id, shipped) VALUES ($1, 1) \
             ON CONFLICT (order_id) DO UPDATE SET shipped = s.shipped + 1"
        );
        Ok(Self::Postgres { store, ship })
    }

    /// The table of shipments in `schema`, quoted.
    pub fn postgres_table(schema: &str) -> String {
        format!("\"{schema}\".shipments")
    }

    /// The key counting `order_id`'s shipments in Redis.
    pub fn redis_key(prefix: &str, order_id: &str) -> String {
        format!("{prefix}shipments:{order_id}")
    }

    /// An engine on the store that keeps the shipments, so that a shipment
    /// and its record commit together.
    pub fn engine(&self) -> Engine {
        match self {
            Self::Redis { store, .. } => Engine::new(store.clone()),
            Self::Postgres { store, .. } => Engine::new(store.clone()),
        }
    }

    /// Counts one shipment of `shipment`'s order and records `shipment` as
    /// the handler's result, together, only while `claim` holds.
    ///
    /// # Errors
    ///
    /// [`ShipError::Fenced`] if the claim was lost (nothing counted), else
    /// [`ShipError::NotCommitted`].
    pub async fn ship(&self, claim: &Claim, shipment: Shipment) -> Result<Shipment, ShipError> {
        let not_committed = |e: &dyn std::fmt::Display| ShipError::NotCommitted(e.to_string());
        match self {
            Self::Redis { store, prefix } => {
                let key = Self::redis_key(prefix, &shipment.order_id);
                let mut tx = store.transaction();
                let shipped = tx
                    .get(&key)
                    .await
                    .map_err(|e| not_committed(&e))?
                    .and_then(|v| String::from_utf8(v).ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                tx.set(key, (shipped + 1).to_string());
                idem_queue::commit_with_record(claim, tx, shipment).await
            }
            Self::Postgres { store, ship } => {
                let mut tx = store
                    .begin_transaction()
                    .await
                    .map_err(|e| not_committed(&e))?;
                sqlx::query(AssertSqlSafe(ship.clone()))
                    .bind(&shipment.order_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| not_committed(&e))?;
                idem_queue::commit_with_record(claim, tx, shipment).await
            }
        }
    }
}
