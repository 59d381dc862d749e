//! AWS Signature Version 4 for DynamoDB's JSON requests: always `POST`, the same four or
//! five headers, a small body. The derived signing key changes once a day per secret and
//! region, so it is kept; each request then costs two SHA-256 digests and one HMAC.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::sign::v4::{calculate_signature, generate_signing_key};
use sha2::{Digest, Sha256};

pub const SERVICE: &str = "dynamodb";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// The headers a signed request carries besides `host` and `content-type`.
pub struct Signed {
    pub amz_date: String,
    pub authorization: String,
}

struct DayKey {
    day: String,
    secret: String,
    key: Vec<u8>,
}

pub struct Signer {
    region: String,
    day_key: Mutex<Option<DayKey>>,
}

impl Signer {
    pub fn new(region: String) -> Self {
        Signer {
            region,
            day_key: Mutex::new(None),
        }
    }

    /// Signs `POST <path>` to `host` with header `x-amz-target: <target>` and `body`.
    pub fn sign(
        &self,
        credentials: &Credentials,
        now: SystemTime,
        host: &str,
        path: &str,
        target: &str,
        body: &[u8],
    ) -> Signed {
        let amz_date = amz_date(now);
        let day = &amz_date[..8];
        let token = credentials.session_token();

        let mut canonical = String::with_capacity(320 + token.map_or(0, str::len));
        canonical.push_str("POST\n");
        canonical.push_str(path);
        canonical.push_str("\n\ncontent-type:");
        canonical.push_str(CONTENT_TYPE);
        canonical.push_str("\nhost:");
        canonical.push_str(host);
        canonical.push_str("\nx-amz-date:");
        canonical.push_str(&amz_date);
        if let Some(t) = token {
            canonical.push_str("\nx-amz-security-token:");
            canonical.push_str(t);
        }
        canonical.push_str("\nx-amz-target:");
        canonical.push_str(target);
        canonical.push_str("\n\n");
        let signed_headers = if token.is_some() {
            "content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
        } else {
            "content-type;host;x-amz-date;x-amz-target"
        };
        canonical.push_str(signed_headers);
        canonical.push('\n');
        push_hex(&mut canonical, &Sha256::digest(body));

        let scope = format!("{day}/{}/{SERVICE}/aws4_request", self.region);
        let mut to_sign = String::with_capacity(160);
        to_sign.push_str("AWS4-HMAC-SHA256\n");
        to_sign.push_str(&amz_date);
        to_sign.push('\n');
        to_sign.push_str(&scope);
        to_sign.push('\n');
        push_hex(&mut to_sign, &Sha256::digest(canonical.as_bytes()));

        let signature = {
            let mut cached = self.day_key.lock().unwrap_or_else(|p| p.into_inner());
            let fresh = matches!(&*cached, Some(k) if k.day == day && k.secret == credentials.secret_access_key());
            if !fresh {
                *cached = Some(DayKey {
                    day: day.to_string(),
                    secret: credentials.secret_access_key().to_string(),
                    key: generate_signing_key(credentials.secret_access_key(), now, &self.region, SERVICE)
                        .as_ref()
                        .to_vec(),
                });
            }
            let key = &cached.as_ref().expect("just set").key;
            calculate_signature(key, to_sign.as_bytes())
        };
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            credentials.access_key_id()
        );
        Signed {
            amz_date,
            authorization,
        }
    }
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

/// `YYYYMMDD'T'HHMMSS'Z'` in UTC.
pub fn amz_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_smithy_runtime_api::client::identity::Identity;
    use std::time::Duration;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(amz_date(UNIX_EPOCH), "19700101T000000Z");
        assert_eq!(
            amz_date(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "20000229T000000Z"
        );
        assert_eq!(
            amz_date(UNIX_EPOCH + Duration::from_secs(1_440_938_160)),
            "20150830T123600Z"
        );
        assert_eq!(
            amz_date(UNIX_EPOCH + Duration::from_secs(4_102_444_799)),
            "20991231T235959Z"
        );
    }

    /// The reference implementation (aws-sigv4's general signer, as the AWS SDK uses it) must
    /// produce the same Authorization header for the same request.
    fn reference(creds: &Credentials, now: SystemTime, host: &str, target: &str, body: &[u8]) -> String {
        let identity: Identity = creds.clone().into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region("eu-west-3")
            .name(SERVICE)
            .time(now)
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let headers = [("content-type", CONTENT_TYPE), ("host", host), ("x-amz-target", target)];
        let request = SignableRequest::new(
            "POST",
            format!("https://{host}/"),
            headers.into_iter(),
            SignableBody::Bytes(body),
        )
        .unwrap();
        let (instructions, _) = sign(request, &params).unwrap().into_parts();
        let authorization = instructions
            .headers()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.to_string());
        authorization.unwrap()
    }

    #[test]
    fn signatures_match_the_reference_signer() {
        let signer = Signer::new("eu-west-3".into());
        let body = br#"{"TableName":"locks","Key":{"id":{"S":"a \u00e9"}}}"#;
        let target = "DynamoDB_20120810.UpdateItem";
        let host = "dynamodb.eu-west-3.amazonaws.com";
        let mut now = UNIX_EPOCH + Duration::from_secs(1_763_000_000);
        for (i, token) in [None, Some("session/token+=")].into_iter().enumerate() {
            let creds = Credentials::new("AKIDEXAMPLE", format!("secret{i}"), token.map(String::from), None, "t");
            for _ in 0..3 {
                let ours = signer.sign(&creds, now, host, "/", target, body);
                assert_eq!(ours.authorization, reference(&creds, now, host, target, body));
                assert_eq!(ours.amz_date, amz_date(now));
                // The next day needs a new signing key.
                now += Duration::from_secs(86_400);
            }
        }
    }
}
