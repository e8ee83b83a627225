//! Alternating rounds: one `wrk` run and what it measured, the CPU each
//! request cost the server and the store, medians and ratios, and the
//! affinities that pin a side to a core.

use std::process::Command;

use crate::{CONNECTIONS, REPLAY_SCRIPT_NAME, ROUNDS, SECONDS};

/// The load script plus a callback that prints the first non-2xx answers,
/// for a short diagnostic run after a failed round.
pub(crate) const DIAGNOSE: &str = r#"
local shown = 0
response = function(status, headers, body)
  if status >= 300 and shown < 3 then
    shown = shown + 1
    print("non-2xx answer: " .. status .. " " .. body)
  end
end
"#;

pub(crate) fn diagnose(url: &str, script: &str) -> String {
    let path = format!("{script}.diagnose.lua");
    let text = std::fs::read_to_string(script).unwrap_or_default() + DIAGNOSE;
    if std::fs::write(&path, text).is_err() {
        return String::new();
    }
    let out = Command::new("wrk")
        .args(["-t1", "-c4", "-d1s", "-s", &path, url])
        .output();
    let _ = std::fs::remove_file(&path);
    out.map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("non-2xx"))
            .collect::<Vec<_>>()
            .join("\n")
    })
    .unwrap_or_default()
}

/// What one round measured: requests per second, and the latency of the
/// median and the 99th percentile request, in microseconds.
#[derive(Clone, Copy)]
pub(crate) struct Load {
    pub(crate) rps: f64,
    pub(crate) p50: f64,
    pub(crate) p99: f64,
}

/// A latency as wrk prints it (`792.00us`, `3.88ms`, `1.02s`), in
/// microseconds.
pub(crate) fn micros(text: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e6)
    } else {
        return None;
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

/// One wrk run; returns its [`Load`], refusing runs with errors or non-2xx
/// answers (those would make a variant look faster than it is).
pub(crate) fn wrk(url: &str, script: &str) -> Result<Load, String> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{CONNECTIONS}"),
            &format!("-d{SECONDS}s"),
            "--latency",
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
        return Err(format!(
            "wrk saw errors or non-2xx answers:\n{text}\nsample now:\n{}",
            diagnose(url, script)
        ));
    }
    let rps = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk output:\n{text}"))?;
    let percentile = |p: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(p))
            .and_then(|v| micros(v.trim()))
            .ok_or_else(|| format!("no {p} latency in wrk output:\n{text}"))
    };
    Ok(Load {
        rps,
        p50: percentile("50%")?,
        p99: percentile("99%")?,
    })
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU time (user + system, in clock ticks) used so far by this process
/// (`own`) and by each process named `store` (the Redis or PostgreSQL server
/// and all of its backends, by pid), read from `/proc`. `None` where `/proc`
/// is missing.
pub(crate) struct CpuTicks {
    pub(crate) own: u64,
    pub(crate) store: std::collections::HashMap<u32, u64>,
}

impl CpuTicks {
    /// `server`: the process serving the variant, if not this one.
    fn read(store: Option<&str>, server: Option<u32>) -> Option<Self> {
        fn ticks(stat: &str) -> Option<(String, u64)> {
            // pid (comm) state ... utime(14) stime(15): comm may hold spaces.
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_owned();
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((
                comm,
                f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
            ))
        }
        let own = match server {
            Some(pid) => format!("/proc/{pid}/stat"),
            None => "/proc/self/stat".to_owned(),
        };
        let own = ticks(&std::fs::read_to_string(own).ok()?)?.1;
        let mut by_pid = std::collections::HashMap::new();
        if let Some(store) = store {
            for entry in std::fs::read_dir("/proc").ok()?.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
                    continue;
                };
                if let Some((comm, t)) = std::fs::read_to_string(entry.path().join("stat"))
                    .ok()
                    .as_deref()
                    .and_then(ticks)
                {
                    if comm == store {
                        by_pid.insert(pid, t);
                    }
                }
            }
        }
        Some(Self { own, store: by_pid })
    }

    /// Ticks used since `earlier`: this process, and the store's processes
    /// (those started since count whole; those that exited since are lost,
    /// so the store's figure is a lower bound).
    fn since(&self, earlier: &Self) -> (u64, u64) {
        let store = self
            .store
            .iter()
            .map(|(pid, t)| t.saturating_sub(earlier.store.get(pid).copied().unwrap_or(0)))
            .sum();
        (self.own.saturating_sub(earlier.own), store)
    }
}

/// Tick counts of a few minutes' runs are far below 2^52: exact in `f64`.
pub(crate) fn ticks_f64(t: u64) -> f64 {
    f64::from(u32::try_from(t).unwrap_or(u32::MAX))
}

/// Linux's clock ticks per second for `/proc` CPU times.
pub(crate) const TICKS_PER_SECOND: f64 = 100.0;

/// `  ([median ]CPU per request: server S us[, store T us])`.
pub(crate) fn cpu_text(prefix: &str, store: Option<&str>, (server, theirs): (f64, f64)) -> String {
    match store {
        Some(name) => {
            format!("  ({prefix}CPU per request: server {server:.0} us, {name} {theirs:.0} us)")
        }
        None => format!("  ({prefix}CPU per request: server {server:.0} us)"),
    }
}

pub(crate) fn compare<const N: usize>(
    label: &str,
    names: [&str; N],
    urls: [&str; N],
    script: &str,
    store: Option<&str>,
) -> Result<(), String> {
    let keys = if script.ends_with(REPLAY_SCRIPT_NAME) {
        "the same 500 keys over and over (idem: every request a replay)"
    } else {
        "new key per request"
    };
    println!("{label}: POST /accounts/{{id}}/debits, {keys}, wrk -t1 -c{CONNECTIONS} -d{SECONDS}s, {ROUNDS} alternating rounds");
    compare_with(names, store, |v| wrk(urls[v], script))
}

/// [`compare`], with variants served by other processes (`servers[v]`, or
/// `None` for this one), whose CPU is theirs.
pub(crate) fn compare_served<const N: usize>(
    label: &str,
    names: [&str; N],
    urls: [&str; N],
    servers: [Option<u32>; N],
    script: &str,
    store: Option<&str>,
) -> Result<(), String> {
    println!("{label}: POST /accounts/{{id}}/debits, new key per request, wrk -t1 -c{CONNECTIONS} -d{SECONDS}s, {ROUNDS} alternating rounds");
    compare_in(names, servers, store, |v| wrk(urls[v], script))
}

/// Alternating rounds of `measure(variant)` (requests per second over
/// `SECONDS`), with the CPU each request cost, then the medians and the
/// ratios: of the last variant (idem) to the first (the baseline), and with
/// three, of each to the one before.
pub(crate) fn compare_with<const N: usize>(
    names: [&str; N],
    store: Option<&str>,
    measure: impl Fn(usize) -> Result<Load, String>,
) -> Result<(), String> {
    compare_in(names, [None; N], store, measure)
}

/// [`compare_with`], each variant served by `servers[v]` (`None`: this
/// process).
pub(crate) fn compare_in<const N: usize>(
    names: [&str; N],
    servers: [Option<u32>; N],
    store: Option<&str>,
    measure: impl Fn(usize) -> Result<Load, String>,
) -> Result<(), String> {
    let mut rps: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    // Latency of the median and the 99th percentile request, per round.
    let mut latency: [Vec<(f64, f64)>; N] = std::array::from_fn(|_| Vec::new());
    // CPU microseconds per request: [server, store] per variant and round.
    let mut cpu: [Vec<(f64, f64)>; N] = std::array::from_fn(|_| Vec::new());
    for round in 1..=ROUNDS {
        for v in 0..N {
            let before = CpuTicks::read(store, servers[v]);
            let Load { rps: r, p50, p99 } = measure(v)?;
            let used = before.zip(CpuTicks::read(store, servers[v])).map(|(b, a)| {
                let (own, theirs) = a.since(&b);
                let per_request =
                    |t: u64| ticks_f64(t) / TICKS_PER_SECOND * 1e6 / (r * f64::from(SECONDS));
                (per_request(own), per_request(theirs))
            });
            let detail = used.map_or(String::new(), |u| cpu_text("", store, u));
            println!(
                "  round {round}: {:<26} {r:>10.0} req/s  p50 {p50:.0} us, p99 {p99:.0} us{detail}",
                names[v]
            );
            rps[v].push(r);
            latency[v].push((p50, p99));
            cpu[v].extend(used);
        }
    }
    let rates = rps.map(median);
    for (v, &rate) in rates.iter().enumerate() {
        let detail = if cpu[v].is_empty() {
            String::new()
        } else {
            let server = median(cpu[v].iter().map(|c| c.0).collect());
            let theirs = median(cpu[v].iter().map(|c| c.1).collect());
            cpu_text("median ", store, (server, theirs))
        };
        let p50 = median(latency[v].iter().map(|l| l.0).collect());
        let p99 = median(latency[v].iter().map(|l| l.1).collect());
        println!(
            "  median {:<25} {rate:>10.0} req/s  p50 {p50:.0} us, p99 {p99:.0} us{detail}",
            names[v]
        );
    }
    if N > 2 {
        for v in 1..N {
            println!(
                "  ratio ({} / {}): {:.3}",
                names[v],
                names[v - 1],
                rates[v] / rates[v - 1]
            );
        }
    }
    println!("  ratio (idem / baseline): {:.3}", rates[N - 1] / rates[0]);
    Ok(())
}

/// The affinity mask of a process (hex, as `taskset -p` prints it).
pub(crate) fn affinity(pid: u32) -> Result<String, String> {
    let out = Command::new("taskset")
        .args(["-p", &pid.to_string()])
        .output()
        .map_err(|e| format!("cannot run taskset ({e})"))?;
    String::from_utf8_lossy(&out.stdout)
        .rsplit(": ")
        .next()
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .ok_or_else(|| format!("taskset -p {pid} printed no mask"))
}

/// Sets a process's affinity (`all`: every thread of it) to a hex mask.
pub(crate) fn set_affinity(pid: u32, mask: &str, all: bool) -> Result<(), String> {
    let flags = if all { "-ap" } else { "-p" };
    let status = Command::new("taskset")
        .args([flags, mask, &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot run taskset ({e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("taskset {flags} {mask} {pid} failed"))
    }
}
