//! Generates the gRPC payments example's service and client
//! (`payments.v1.Ledger`) with tonic-build, from Rust declarations rather
//! than a `.proto` file, so that building needs no `protoc`. The messages
//! are declared with prost in `grpc_payments/service.rs`.

fn main() {
    let method = |name: &str, route: &str, input: &str, output: &str| {
        tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type(format!("crate::grpc_payments::{input}"))
            .output_type(format!("crate::grpc_payments::{output}"))
            .codec_path("tonic_prost::ProstCodec")
            .build()
    };
    let ledger = tonic_build::manual::Service::builder()
        .name("Ledger")
        .package("payments.v1")
        .method(method("debit", "Debit", "DebitRequest", "Receipt"))
        .method(method(
            "get_balance",
            "GetBalance",
            "BalanceRequest",
            "Account",
        ))
        .build();
    tonic_build::manual::Builder::new().compile(&[ledger]);
}
