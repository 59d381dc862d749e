//! CPU per signature of DynamoDB `UpdateItem` requests (a FailOpen heartbeat and a release, as
//! the addon writes them), signed two ways:
//!
//! - `request signer`: aws-sigv4's `http_request::sign`, with the credentials' `Identity` built
//!   once;
//! - `PostSigner`: the addon's own signer (`src/store/sigv4.rs`, compiled here as a module of
//!   this binary): DynamoDB's canonical request written out, the day's signing key kept.
//!
//! and, for scale, deriving a signing key (which the request signer does on every call) and
//! building the `http::Request` the headers go into. The ways alternate in
//! rounds (each at most `ITERATIONS` calls and `ROUND` of time); a figure is the median round's
//! thread CPU time per call. Both ways are first checked to give the same headers.
//!
//! Usage: `sign-bench [--rounds N] [--json]` (`npm run bench:sign` builds it in release and
//! relates the figures to the client CPU per heartbeat in `bench/results.json`).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../../../src/store/sigv4.rs"]
mod sigv4;

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_smithy_runtime_api::client::identity::Identity;

use sigv4::{PostSigner, CONTENT_TYPE, SERVICE};

const ITERATIONS: u64 = 200_000;
const ROUND: Duration = Duration::from_millis(500);
const HOST: &str = "dynamodb.eu-west-3.amazonaws.com";
const REGION: &str = "eu-west-3";
const TARGET: &str = "DynamoDB_20120810.UpdateItem";

/// A guid as the addon writes it: 64 random bytes, in base64.
fn guid(seed: u8) -> String {
    let bytes: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37).wrapping_add(seed)).collect();
    aws_smithy_types::base64::encode(bytes)
}

/// A FailOpen heartbeat: a new guid, on the condition of the previous one.
fn heartbeat_body() -> String {
    format!(
        concat!(
            r##"{{"TableName":"locks","Key":{{"id":{{"S":"orders/eu/0042"}}}},"##,
            r##""UpdateExpression":"SET #owner = :owner, #guid = :new, #lease = :lease REMOVE #t","##,
            r##""ConditionExpression":"#guid = :g0","##,
            r##""ExpressionAttributeNames":{{"#owner":"owner","#guid":"guid","#lease":"leaseDurationMs","#t":"lockAcquiredTimeUnixMs"}},"##,
            r##""ExpressionAttributeValues":{{":owner":{{"S":"worker-7"}},":new":{{"B":"{}"}},":lease":{{"N":"5000"}},":g0":{{"B":"{}"}}}},"##,
            r##""ReturnValues":"NONE","ReturnValuesOnConditionCheckFailure":"ALL_OLD"}}"##
        ),
        guid(1),
        guid(2)
    )
}

/// A FailOpen release: one guid in the condition.
fn release_body() -> String {
    format!(
        concat!(
            r##"{{"TableName":"locks","Key":{{"id":{{"S":"orders/eu/0042"}}}},"##,
            r##""UpdateExpression":"SET #lease = :released REMOVE #t","ConditionExpression":"#guid = :g0","##,
            r##""ExpressionAttributeNames":{{"#guid":"guid","#lease":"leaseDurationMs","#t":"lockAcquiredTimeUnixMs"}},"##,
            r##""ExpressionAttributeValues":{{":released":{{"N":"1"}},":g0":{{"B":"{}"}}}},"##,
            r##""ReturnValues":"ALL_OLD","ReturnValuesOnConditionCheckFailure":"ALL_OLD"}}"##
        ),
        guid(2)
    )
}

/// aws-sigv4's request signer on DynamoDB's `POST`, the signing headers it gives.
fn request_signer(identity: &Identity, time: SystemTime, body: &[u8]) -> Vec<(&'static str, String)> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(identity)
        .region(REGION)
        .name(SERVICE)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .expect("complete parameters")
        .into();
    let headers = [("content-type", CONTENT_TYPE), ("host", HOST), ("x-amz-target", TARGET)];
    let signable = SignableRequest::new("POST", "/", headers.into_iter(), SignableBody::Bytes(body)).expect("valid");
    let (instructions, _) = sign(signable, &params).expect("signs").into_parts();
    let (headers, _) = instructions.into_parts();
    headers.into_iter().map(|h| (h.name(), h.value().to_string())).collect()
}

/// The rest of what a request costs before it is sent: the `http::Request` with its headers
/// and body, as `src/store/http.rs` builds it.
fn build_request(
    uri: &http::Uri,
    body: &str,
    signature: &[(&'static str, String)],
) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    let mut request = http::Request::post(uri.clone())
        .header(http::header::CONTENT_TYPE, http::HeaderValue::from_static(CONTENT_TYPE))
        .header(http::header::HOST, HOST)
        .header("x-amz-target", TARGET)
        .header(
            http::header::USER_AGENT,
            http::HeaderValue::from_static("dynamodb-lock-native/0.1.0"),
        );
    for (name, value) in signature {
        request = request.header(*name, value.as_str());
    }
    request
        .body(http_body_util::Full::new(bytes::Bytes::from(body.to_string())))
        .expect("valid request")
}

/// This thread's CPU time, from the scheduler's statistics (Linux).
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("/proc/thread-self/schedstat");
    let ns: u64 = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("CPU ns");
    Duration::from_nanos(ns)
}

/// One round: nanoseconds of thread CPU per call, and the calls made.
fn round(mut f: impl FnMut()) -> (f64, u64) {
    let start = Instant::now();
    let cpu = thread_cpu();
    let mut n = 0;
    while n < ITERATIONS && (n % 256 != 0 || start.elapsed() < ROUND) {
        f();
        n += 1;
    }
    ((thread_cpu() - cpu).as_nanos() as f64 / n as f64, n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The medians for one body (ns).
struct Figures {
    name: &'static str,
    bytes: usize,
    request_signer: f64,
    post_signer: f64,
    key: f64,
    build: f64,
}

fn measure(name: &'static str, body: &str, rounds: usize, calls: &mut u64) -> Figures {
    let credentials = Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "bench",
    );
    let identity: Identity = credentials.clone().into();
    let post_signer = PostSigner::new(REGION.into());
    let uri: http::Uri = format!("https://{HOST}/").parse().expect("valid");
    let time = UNIX_EPOCH + Duration::from_secs(1_764_000_000);

    let mut expected = request_signer(&identity, time, body.as_bytes());
    let mut signature = post_signer.sign(&credentials, time, HOST, "/", TARGET, body.as_bytes());
    expected.sort();
    signature.sort();
    assert_eq!(signature, expected, "PostSigner and the request signer disagree");

    let (mut by_request_signer, mut by_post_signer, mut key, mut build) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (ns, n) = round(|| {
            black_box(request_signer(black_box(&identity), time, black_box(body.as_bytes())));
        });
        by_request_signer.push(ns);
        *calls += n;
        let (ns, n) = round(|| {
            black_box(post_signer.sign(
                black_box(&credentials),
                time,
                HOST,
                "/",
                TARGET,
                black_box(body.as_bytes()),
            ));
        });
        by_post_signer.push(ns);
        *calls += n;
        let (ns, n) = round(|| {
            black_box(aws_sigv4::sign::v4::generate_signing_key(
                black_box(credentials.secret_access_key()),
                time,
                REGION,
                SERVICE,
            ));
        });
        key.push(ns);
        *calls += n;
        let (ns, n) = round(|| {
            black_box(build_request(&uri, black_box(body), black_box(&signature)));
        });
        build.push(ns);
        *calls += n;
    }
    Figures {
        name,
        bytes: body.len(),
        request_signer: median(by_request_signer),
        post_signer: median(by_post_signer),
        key: median(key),
        build: median(build),
    }
}

fn main() {
    let mut rounds = 7usize;
    let mut json = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (1..=51).contains(n))
                    .expect("--rounds takes 1 to 51")
            }
            "--json" => json = true,
            _ => panic!("usage: sign-bench [--rounds N] [--json]"),
        }
    }
    let started = Instant::now();
    let mut calls = 0;
    let all = [
        measure("heartbeat", &heartbeat_body(), rounds, &mut calls),
        measure("release", &release_body(), rounds, &mut calls),
    ];
    if json {
        let bodies: Vec<String> = all
            .iter()
            .map(|f| {
                format!(
                    r#"{{"name":"{}","bytes":{},"requestSignerNs":{:.0},"postSignerNs":{:.0},"signingKeyNs":{:.0},"buildRequestNs":{:.0}}}"#,
                    f.name, f.bytes, f.request_signer, f.post_signer, f.key, f.build
                )
            })
            .collect();
        println!(
            r#"{{"rounds":{rounds},"calls":{calls},"bodies":[{}]}}"#,
            bodies.join(",")
        );
        return;
    }
    println!(
        "{rounds} rounds per way and body, {calls} calls in {:.1} s; thread CPU per call, median of rounds",
        started.elapsed().as_secs_f64()
    );
    for f in &all {
        println!("UpdateItem {} ({} bytes):", f.name, f.bytes);
        let line = |label: &str, ns: f64| println!("  {label:<50} {ns:>5.0} ns");
        line("request signer (aws-sigv4 http_request::sign):", f.request_signer);
        line("PostSigner (day key kept):", f.post_signer);
        println!(
            "  ratio {:.2}, difference {:.0} ns",
            f.request_signer / f.post_signer,
            f.request_signer - f.post_signer
        );
        line("deriving a signing key (request signer: per call):", f.key);
        line("building the http::Request:", f.build);
    }
}
