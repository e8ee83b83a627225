//! The actix-web and gRPC pairs: the same debit on another framework, with
//! and without idem.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore};
use idem_examples::payments::{
    invalid_account, invalid_amount, Debit, Ledger, MemoryLedger, Receipt,
};

use crate::{
    baseline,
    rounds::{ticks_f64, Load},
    CONNECTIONS, SECONDS,
};

/// The debit on actix-web: the same checks, ledger and receipt as the
/// example's.
pub(crate) async fn actix_debit(
    ledger: actix_web::web::Data<Arc<dyn Ledger>>,
    id: actix_web::web::Path<String>,
    req: actix_web::web::Json<Debit>,
) -> actix_web::HttpResponse {
    if invalid_account(&id)
        .or_else(|| invalid_amount(&req))
        .is_some()
    {
        return actix_web::HttpResponse::BadRequest().finish();
    }
    match ledger.debit(&id, req.amount).await {
        Ok(balance) => actix_web::HttpResponse::Created().json(Receipt {
            debit_id: baseline::next_debit_id(),
            account: id.into_inner(),
            amount: req.amount,
            balance,
        }),
        Err(e) => actix_web::HttpResponse::ServiceUnavailable().body(e.to_string()),
    }
}

/// The actix-web debit without idem and with `idem_actix::Idempotency`.
pub(crate) fn actix_pair() -> [String; 2] {
    let serve = |with_idem: bool| {
        let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(&MemoryStore::new()));
        let engine = Engine::new(MemoryStore::builder().max_bytes(16 << 30).build());
        idem_tests::serve_actix(move || {
            // Both wrapped, so that only idem differs.
            let idempotency = actix_web::middleware::Condition::new(
                with_idem,
                idem_actix::Idempotency::new(engine.clone()),
            );
            actix_web::App::new()
                .app_data(actix_web::web::Data::new(Arc::clone(&ledger)))
                .service(
                    actix_web::web::resource("/accounts/{id}/debits")
                        .route(actix_web::web::post().to(actix_debit))
                        .wrap(idempotency),
                )
        })
    };
    [serve(false), serve(true)]
}

/// The gRPC example without the layer and with it; their addresses.
pub(crate) async fn grpc_pair() -> Result<[String; 2], String> {
    use idem_examples::grpc_payments::{idempotency, ledger_server::LedgerServer, Payments};
    let mut urls = Vec::new();
    for with_idem in [false, true] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let url = format!(
            "http://{}",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        // The balances beside the records: with idem, each debit commits
        // with its record; without, on its own.
        let store = MemoryStore::builder().max_bytes(16 << 30).build();
        let payments = Payments {
            ledger: Arc::new(MemoryLedger::new(&store)),
            debit_delay: Duration::ZERO,
        };
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let engine = Engine::new(store);
        // Both through a layer stack, so that only idem differs.
        let layer = tower::util::option_layer(with_idem.then(|| idempotency(engine)));
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(layer)
                .add_service(LedgerServer::new(payments))
                .serve_with_incoming(incoming),
        );
        urls.push(url);
    }
    Ok([urls.remove(0), urls.remove(0)])
}

/// HTTP/2 connections the gRPC load spreads its calls over.
pub(crate) const GRPC_CHANNELS: u32 = 8;

/// `CONNECTIONS` concurrent debits, each with a new key, over
/// `GRPC_CHANNELS` HTTP/2 connections for `SECONDS`; returns completed calls per second, refusing a
/// run with any failed call.
pub(crate) fn grpc_load(rt: &tokio::runtime::Runtime, url: &str) -> Result<Load, String> {
    use idem_examples::grpc_payments::{ledger_client::LedgerClient, DebitRequest};
    rt.block_on(async {
        let mut channels = Vec::new();
        for _ in 0..GRPC_CHANNELS {
            channels.push(
                tonic::transport::Channel::from_shared(url.to_owned())
                    .map_err(|e| e.to_string())?
                    .connect()
                    .await
                    .map_err(|e| format!("connect to {url}: {e}"))?,
            );
        }
        let run = format!("{}", std::process::id());
        let started = tokio::time::Instant::now();
        let until = started + Duration::from_secs(u64::from(SECONDS));
        let tasks: Vec<_> = (0..CONNECTIONS)
            .map(|t| {
                let mut client = LedgerClient::new(channels[t as usize % channels.len()].clone());
                let run = run.clone();
                tokio::spawn(async move {
                    let mut n: u64 = 0;
                    let mut took = Vec::new();
                    while tokio::time::Instant::now() < until {
                        n += 1;
                        let sent = std::time::Instant::now();
                        let mut request = tonic::Request::new(DebitRequest {
                            // Each task debits accounts of its own: the
                            // ledger's transactions are optimistic, and two
                            // tasks on one account would conflict.
                            account: format!("acct-{t}-{}", n % 500),
                            amount: 1,
                        });
                        let key = format!("{run}-{t}-{n}");
                        request.metadata_mut().insert(
                            "idempotency-key",
                            key.parse().map_err(|_| "key".to_owned())?,
                        );
                        client
                            .debit(request)
                            .await
                            .map_err(|s| format!("a debit failed: {s:?}"))?;
                        took.push(sent.elapsed().as_secs_f64() * 1e6);
                    }
                    Ok::<Vec<f64>, String>(took)
                })
            })
            .collect();
        let mut took = Vec::new();
        for task in tasks {
            took.extend(task.await.map_err(|e| e.to_string())??);
        }
        let calls = u64::try_from(took.len()).unwrap_or(u64::MAX);
        let rps = ticks_f64(calls) / started.elapsed().as_secs_f64();
        took.sort_by(f64::total_cmp);
        let at = |percent: usize| {
            took.get(took.len().saturating_sub(1) * percent / 100)
                .copied()
                .unwrap_or(f64::NAN)
        };
        Ok(Load {
            rps,
            p50: at(50),
            p99: at(99),
        })
    })
}
