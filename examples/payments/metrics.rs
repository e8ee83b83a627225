//! `/metrics` for the payments example: idem's metrics (decisions, store
//! call durations, claims held) in Prometheus's text format, from the
//! `metrics` facade's Prometheus recorder.

use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};

/// Installs the process's Prometheus recorder and returns the router that
/// serves what it holds at `GET /metrics`. The store's call durations are a
/// histogram with [`idem_core::STORE_DURATION_BUCKETS`] (the exporter's
/// default for a histogram is a summary, whose quantiles cannot be
/// aggregated across instances).
pub fn router() -> Result<Router, BuildError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("idem_store_duration".into()),
            idem_core::STORE_DURATION_BUCKETS,
        )?
        .install_recorder()?;
    Ok(Router::new().route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move { handle.render() }
        }),
    ))
}
