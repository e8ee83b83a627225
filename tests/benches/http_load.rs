//! Load benchmark: the payments debit route with idem (memory store) against
//! the same route without idem, side by side in one run, driven by `wrk` over
//! 127.0.0.1 with a fresh `Idempotency-Key` on every request (every request
//! is a first request: one begin and one complete).
//!
//! `cargo bench -p idem-tests --bench http_load` (needs `wrk`: `apt-get install wrk`).
//!
//! Rounds alternate between the two servers so that drift on a noisy machine
//! hits both; the report gives the median of the rounds and the ratio.

#![allow(missing_docs)]

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Engine, MemoryStore};
use idem_examples::payments::{router, router_without_idem, App, MemoryLedger};

const ROUNDS: usize = 5;
const SECONDS: u32 = 4;
const CONNECTIONS: u32 = 32;

const SCRIPT: &str = r#"
math.randomseed(os.time() + math.floor(os.clock() * 1000000))
local prefix = tostring(math.random(1, 1000000000))
local n = 0
request = function()
  n = n + 1
  local path = "/accounts/acct-" .. (n % 500) .. "/debits"
  local headers = {}
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = prefix .. "-" .. n
  return wrk.format("POST", path, headers, '{"amount":1}')
end
"#;

fn app() -> App {
    // Records are kept 24 hours: room for every request of the run.
    App {
        engine: Engine::new(MemoryStore::builder().capacity(20_000_000).build()),
        ledger: Arc::new(MemoryLedger::default()),
        debit_delay: Duration::ZERO,
    }
}

/// One wrk run; returns requests per second, refusing runs with errors or
/// non-2xx answers (those would make a variant look faster than it is).
fn wrk(url: &str, script: &str) -> Result<f64, String> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{CONNECTIONS}"),
            &format!("-d{SECONDS}s"),
            "-s",
            script,
            url,
        ])
        .output()
        .map_err(|e| format!("cannot run wrk ({e}); install it with `apt-get install wrk`"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "wrk failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        return Err(format!("wrk saw errors or non-2xx answers:\n{text}"));
    }
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk output:\n{text}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; `cargo test --benches` would pass other
    // flags: only run the load when asked to benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        println!("http_load: run with `cargo bench -p idem-tests --bench http_load`");
        return ExitCode::SUCCESS;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (bare, idem) = rt.block_on(async {
        (
            idem_tests::serve(router_without_idem(app())).await,
            idem_tests::serve(router(app())).await,
        )
    });
    let script = std::env::temp_dir().join(format!("idem-http-load-{}.lua", std::process::id()));
    if let Err(e) = std::fs::write(&script, SCRIPT) {
        eprintln!("http_load: cannot write the wrk script: {e}");
        return ExitCode::FAILURE;
    }
    let script = script.to_string_lossy().into_owned();
    println!(
        "http_load: POST /accounts/{{id}}/debits, new key per request, wrk -t1 -c{CONNECTIONS} -d{SECONDS}s, {ROUNDS} alternating rounds"
    );
    let (mut bare_rps, mut idem_rps) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        for (name, url, into) in [
            ("without idem", &bare, &mut bare_rps),
            ("with idem", &idem, &mut idem_rps),
        ] {
            match wrk(url, &script) {
                Ok(rps) => {
                    println!("  round {round}: {name:<13} {rps:>10.0} req/s");
                    into.push(rps);
                }
                Err(e) => {
                    eprintln!("http_load: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let (b, i) = (median(bare_rps), median(idem_rps));
    println!("median without idem: {b:.0} req/s");
    println!("median with idem:    {i:.0} req/s");
    println!("ratio (with / without): {:.3}", i / b);
    let _ = std::fs::remove_file(&script);
    ExitCode::SUCCESS
}
