use dynamodb_lock_core::settings::Kind;
use dynamodb_lock_model::machines::{check, Config};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kind = if a[1] == "closed" { Kind::FailClosed } else { Kind::FailOpen };
    let mut c = Config::new(kind);
    let n = |i: usize| a.get(i).and_then(|s| s.parse::<u16>().ok());
    if let Some(v) = n(2) { c.horizon = v; }
    if let Some(v) = n(3) { c.faults = v as u8; }
    if let Some(v) = n(4) { c.lease = v; }
    if let Some(v) = n(5) { c.reread = v; c.acquire_period = v; }
    if let Some(v) = n(6) { c.request_timeout = v; }
    let t = std::time::Instant::now();
    let r = check(c, 20_000_000);
    println!("{} states depth {} trunc {} {:.1}s", r.states, r.depth, r.truncated, t.elapsed().as_secs_f64()); if let Some(v) = r.violation { println!("{} {}\n{}", v.0, v.1, v.2.join("\n")); }
}
