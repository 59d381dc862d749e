//! AWS Signature Version 4 through the aws-sigv4 crate (the signer the AWS SDK for Rust uses).
//!
//! DynamoDB's JSON requests use `PostSigner`: a `POST` with the same four or five headers, whose
//! canonical request is the one fixed form below, signed with aws-sigv4's v4 functions and a
//! signing key kept for the day (deriving it takes four HMACs; aws-sigv4's request signer
//! derives it on every call, and builds its canonical request from any request's parts).
//! Tests check that both sign alike, and aws-sigv4's request signer against AWS's published
//! example.
//!
//! CPU per signature (`npm run bench:sign`: release build, AMD EPYC, one thread, median of
//! 7 rounds), with the credentials' identity built once for the request signer:
//!
//! | request | `PostSigner` | `http_request::sign` | ratio |
//! |---|---|---|---|
//! | heartbeat `UpdateItem`, 648 bytes | 1.58 µs | 4.36 µs | 2.8 |
//! | release `UpdateItem`, 476 bytes | 1.47 µs | 4.28 µs | 2.9 |
//!
//! Deriving the signing key is 0.92 µs of the request signer's 2.78 µs more. A heartbeat costs
//! the client 17.0 µs of CPU at 10,000 held locks, 20.7 µs at 1,000 and 62.3 µs at 100
//! (`bench/results.md`): `PostSigner` is 9.3%, 7.6% and 2.5% of it; the request signer would
//! be 25.7%, 21.1% and 7.0%, adding 16%, 13% and 4.5% to every heartbeat.

use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use aws_credential_types::Credentials;
#[cfg(test)]
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
#[cfg(test)]
use aws_smithy_runtime_api::client::identity::Identity;

pub const SERVICE: &str = "dynamodb";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// A request to sign: `headers` are the ones to sign (lower case names).
#[cfg(test)]
pub struct ToSign<'a> {
    pub method: &'a str,
    pub uri: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// The headers that sign `request` for `service` in `region` at `time`, by aws-sigv4's
/// request signer: the reference `PostSigner` is checked against.
#[cfg(test)]
pub fn signature_headers(
    credentials: &Credentials,
    region: &str,
    service: &str,
    time: SystemTime,
    request: &ToSign<'_>,
) -> Result<Vec<(&'static str, String)>, String> {
    let identity: Identity = credentials.clone().into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.uri,
        request.headers.iter().copied(),
        SignableBody::Bytes(request.body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(signable, &params).map_err(|e| e.to_string())?.into_parts();
    let (headers, _) = instructions.into_parts();
    Ok(headers.into_iter().map(|h| (h.name(), h.value().to_string())).collect())
}

/// The signing key of one day, secret and region.
struct DayKey {
    day: String,
    access_key_id: String,
    secret: String,
    key: Vec<u8>,
}

/// Signs DynamoDB's `POST` requests for one region, keeping the day's signing key.
pub struct PostSigner {
    region: String,
    day_key: Mutex<Option<DayKey>>,
}

/// `x-amz-date` (`YYYYMMDDTHHMMSSZ`) of `time`.
fn amz_date(time: SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let iso = aws_smithy_types::DateTime::from_secs(secs)
        .fmt(aws_smithy_types::date_time::Format::DateTime)
        .unwrap_or_default();
    iso.chars().filter(|c| *c != '-' && *c != ':').collect()
}

impl PostSigner {
    pub fn new(region: String) -> Self {
        PostSigner {
            region,
            day_key: Mutex::new(None),
        }
    }

    /// The headers that sign `POST <path>` to `host` with `x-amz-target: <target>` and `body`
    /// (content type `CONTENT_TYPE`): `x-amz-date`, `authorization`, and
    /// `x-amz-security-token` with session credentials.
    pub fn sign(
        &self,
        credentials: &Credentials,
        time: SystemTime,
        host: &str,
        path: &str,
        target: &str,
        body: &[u8],
    ) -> Vec<(&'static str, String)> {
        let date_time = amz_date(time);
        let day = &date_time[..8];
        let token = credentials.session_token();
        let signed_headers = if token.is_some() {
            "content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
        } else {
            "content-type;host;x-amz-date;x-amz-target"
        };
        let mut canonical = String::with_capacity(256 + path.len() + host.len() + target.len());
        canonical.push_str("POST\n");
        canonical.push_str(path);
        canonical.push_str("\n\ncontent-type:");
        canonical.push_str(CONTENT_TYPE);
        canonical.push_str("\nhost:");
        canonical.push_str(host);
        canonical.push_str("\nx-amz-date:");
        canonical.push_str(&date_time);
        if let Some(t) = token {
            canonical.push_str("\nx-amz-security-token:");
            canonical.push_str(t);
        }
        canonical.push_str("\nx-amz-target:");
        canonical.push_str(target);
        canonical.push_str("\n\n");
        canonical.push_str(signed_headers);
        canonical.push('\n');
        canonical.push_str(&hex::encode(Sha256::digest(body)));
        let scope = format!("{day}/{}/{SERVICE}/aws4_request", self.region);
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{date_time}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let signature = {
            let mut cached = self.day_key.lock().unwrap_or_else(|p| p.into_inner());
            let fits = cached.as_ref().is_some_and(|k| {
                k.day == day
                    && k.access_key_id == credentials.access_key_id()
                    && k.secret == credentials.secret_access_key()
            });
            if !fits {
                let key = aws_sigv4::sign::v4::generate_signing_key(
                    credentials.secret_access_key(),
                    time,
                    &self.region,
                    SERVICE,
                );
                *cached = Some(DayKey {
                    day: day.to_string(),
                    access_key_id: credentials.access_key_id().to_string(),
                    secret: credentials.secret_access_key().to_string(),
                    key: key.as_ref().to_vec(),
                });
            }
            let key = cached.as_ref().map(|k| k.key.as_slice()).unwrap_or_default();
            aws_sigv4::sign::v4::calculate_signature(key, string_to_sign.as_bytes())
        };
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            credentials.access_key_id()
        );
        let mut out = vec![("x-amz-date", date_time), ("authorization", authorization)];
        out.extend(token.map(|t| ("x-amz-security-token", t.to_string())));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// AWS's published Signature Version 4 example: IAM `ListUsers`, 2015-08-30T12:36:00Z,
    /// the documentation's example keys; the signature is the one the documentation shows.
    #[test]
    fn the_published_example_signs_as_documented() {
        let creds = Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            None,
            "example",
        );
        let time = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let headers = [
            ("content-type", "application/x-www-form-urlencoded; charset=utf-8"),
            ("host", "iam.amazonaws.com"),
        ];
        let request = ToSign {
            method: "GET",
            uri: "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
            headers: &headers,
            body: b"",
        };
        let out = signature_headers(&creds, "us-east-1", "iam", time, &request).unwrap();
        let get = |name: &str| {
            out.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(
            get("authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date, \
                 Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
            )
        );
    }

    /// The hot path signs exactly as aws-sigv4's request signer does, with and without a
    /// session token, across a day boundary (the kept key is renewed).
    #[test]
    fn post_signatures_match_the_request_signer() {
        let signer = PostSigner::new("eu-west-3".into());
        let host = "dynamodb.eu-west-3.amazonaws.com";
        let target = "DynamoDB_20120810.UpdateItem";
        let body = br#"{"TableName":"locks","Key":{"id":{"S":"a \"b\""}}}"#;
        for token in [None, Some("session-token".to_string())] {
            let creds = Credentials::new("AKID", "wJalrXUtnFEMI/K7MDENG", token, None, "test");
            for secs in [1_440_938_160u64, 1_440_979_199, 1_440_979_200] {
                let time = UNIX_EPOCH + Duration::from_secs(secs);
                let headers = [("content-type", CONTENT_TYPE), ("host", host), ("x-amz-target", target)];
                let request = ToSign {
                    method: "POST",
                    uri: "/",
                    headers: &headers,
                    body,
                };
                let mut expected = signature_headers(&creds, "eu-west-3", SERVICE, time, &request).unwrap();
                let mut ours = signer.sign(&creds, time, host, "/", target, body);
                expected.sort();
                ours.sort();
                assert_eq!(ours, expected, "at {secs}");
            }
        }
    }

    #[test]
    fn session_credentials_add_their_token() {
        let creds = Credentials::new("AKID", "secret", Some("token-1".into()), None, "example");
        let headers = [("content-type", CONTENT_TYPE), ("host", "127.0.0.1:8000")];
        let request = ToSign {
            method: "POST",
            uri: "http://127.0.0.1:8000/",
            headers: &headers,
            body: b"{}",
        };
        let out = signature_headers(&creds, "eu-west-3", SERVICE, SystemTime::now(), &request).unwrap();
        assert!(out
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("x-amz-security-token") && v == "token-1"));
        let auth = &out
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .unwrap()
            .1;
        assert!(auth.contains("/eu-west-3/dynamodb/aws4_request"), "{auth}");
    }
}
