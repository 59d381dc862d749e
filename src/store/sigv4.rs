//! AWS Signature Version 4 through the aws-sigv4 crate (the signer the AWS SDK for Rust uses):
//! the request's method, URI, signed headers and body in, the headers to add out
//! (`authorization`, `x-amz-date`, and `x-amz-security-token` with session credentials).

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_smithy_runtime_api::client::identity::Identity;

pub const SERVICE: &str = "dynamodb";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// A request to sign: `headers` are the ones to sign (lower case names).
pub struct ToSign<'a> {
    pub method: &'a str,
    pub uri: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// The headers that sign `request` for `service` in `region` at `time`.
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
