//! The PostgreSQL the tests use: its URL, pools, a migrated store in a
//! schema of its own, and a proxy that counts statements on the wire.

use std::time::Duration;

use crate::unique::unique_suffix;

/// The PostgreSQL database the tests use (`IDEM_TEST_DATABASE_URL`, default
/// the local `test` database as `postgres`).
pub fn database_url() -> String {
    std::env::var("IDEM_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test?sslmode=disable".into())
}

/// A schema name no other test, process or run uses: `idem_t_<unix secs>_<pid>_<n>`.
pub fn unique_schema() -> String {
    format!("idem_t_{}", unique_suffix())
}

/// A pool on the test database.
pub async fn pg_pool(max_connections: u32) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&database_url())
        .await
        .expect("PostgreSQL at IDEM_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test)")
}

/// A migrated `PgStore` in a schema of its own. Test schemas older than an
/// hour (left by earlier runs) are dropped on the way.
pub async fn pg_store() -> idem_postgres::PgStore {
    let pool = pg_pool(8).await;
    drop_stale_schemas(&pool).await;
    let store = idem_postgres::PgStore::new(pool)
        .with_schema(&unique_schema())
        .expect("valid schema name");
    store.migrate().await.expect("migration");
    store
}

pub(crate) async fn drop_stale_schemas(pool: &sqlx::PgPool) {
    let cutoff = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(3600);
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    for name in names {
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s < cutoff)
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS \"{name}\" CASCADE"
            )))
            .execute(pool)
            .await;
        }
    }
}

/// A TCP proxy in front of PostgreSQL that counts the statements clients
/// execute: each `Execute` (extended protocol) and `Query` (simple protocol)
/// message. Statements are counted on the wire, not by the code under test.
pub struct PgStatementCounter {
    /// Where clients connect instead of the server.
    pub addr: std::net::SocketAddr,
    executed: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl PgStatementCounter {
    /// Starts a proxy to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let executed = std::sync::Arc::new(AtomicU64::new(0));
        let counter = std::sync::Arc::clone(&executed);
        let upstream = upstream.to_owned();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let counter = std::sync::Arc::clone(&counter);
                tokio::spawn(async move {
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let to_client = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                    });
                    // The startup message has no type byte: length, then body.
                    let mut len = [0u8; 4];
                    if client_read.read_exact(&mut len).await.is_ok() {
                        let mut body =
                            vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                        if client_read.read_exact(&mut body).await.is_ok()
                            && server_write.write_all(&len).await.is_ok()
                            && server_write.write_all(&body).await.is_ok()
                        {
                            // Then typed messages: type, length, body.
                            let mut head = [0u8; 5];
                            while client_read.read_exact(&mut head).await.is_ok() {
                                if head[0] == b'E' || head[0] == b'Q' {
                                    counter.fetch_add(1, Ordering::SeqCst);
                                }
                                let n = (u32::from_be_bytes([head[1], head[2], head[3], head[4]])
                                    as usize)
                                    .saturating_sub(4);
                                let mut body = vec![0u8; n];
                                if client_read.read_exact(&mut body).await.is_err()
                                    || server_write.write_all(&head).await.is_err()
                                    || server_write.write_all(&body).await.is_err()
                                {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = server_write.shutdown().await;
                    to_client.abort();
                });
            }
        });
        Self { addr, executed }
    }

    /// Statements executed through the proxy so far.
    pub fn executed(&self) -> u64 {
        self.executed.load(std::sync::atomic::Ordering::SeqCst)
    }
}
