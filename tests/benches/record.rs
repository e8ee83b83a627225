//! What recording a response costs in CPU, by its size: the payments
//! debit's 99-byte receipt, a 16 KiB JSON list (compressed when recorded)
//! and 16 KiB that do not compress (tried, then kept as they are); each
//! encoded (`idem_http::encode`) and decoded back (`idem_http::decode`, a
//! replay), beside a plain copy of the same body, in one run.
//!
//! `cargo bench -p idem-tests --bench record`

#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn json(len: usize) -> Vec<u8> {
    let mut body = b"[".to_vec();
    let mut i = 0u64;
    while body.len() < len {
        let line = format!(
            r#"{{"debit_id":"dbt_{i:016x}","account":"alice","amount":{}}},"#,
            1000 + i % 997
        );
        body.extend_from_slice(line.as_bytes());
        i += 1;
    }
    body.truncate(len);
    body
}

fn noise(len: usize) -> Vec<u8> {
    let mut x: u32 = 7;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            x.to_be_bytes()[0]
        })
        .collect()
}

fn record(c: &mut Criterion) {
    let bodies = [
        ("receipt-99B", json(99)),
        ("json-16KiB", json(16 << 10)),
        ("noise-16KiB", noise(16 << 10)),
    ];
    let headers: [(&str, &[u8]); 1] = [("content-type", b"application/json")];
    let mut group = c.benchmark_group("record");
    for (name, body) in &bodies {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("copy", name), body, |b, body| {
            b.iter(|| body.clone());
        });
        group.bench_with_input(BenchmarkId::new("encode", name), body, |b, body| {
            b.iter(|| idem_http::encode(201, &headers, body));
        });
        let recorded = idem_http::encode(201, &headers, body);
        println!(
            "{name}: {} bytes recorded for {} of body",
            recorded.len(),
            body.len()
        );
        group.bench_with_input(
            BenchmarkId::new("decode", name),
            &recorded,
            |b, recorded| {
                b.iter(|| idem_http::decode(recorded).map(|r| r.body.len()));
            },
        );
    }
    group.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
