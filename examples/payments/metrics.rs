//! `/metrics` for the payments example: idem's metrics (decisions, store
//! call durations, claims held) in Prometheus's text format, from the
//! `metrics` facade's Prometheus recorder.

use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder};

/// Installs the process's Prometheus recorder and returns the router that
/// serves what it holds at `GET /metrics`.
pub fn router() -> Result<Router, BuildError> {
    let handle = PrometheusBuilder::new().install_recorder()?;
    Ok(Router::new().route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move { handle.render() }
        }),
    ))
}
