//! AWS Signature Version 4 for DynamoDB's JSON requests: always `POST`, the same four or
//! five headers, a small body. The derived signing key changes once a day per secret and
//! region, so it is kept, keyed into an HMAC state, with the start of the `Authorization`
//! header; each request then costs two SHA-256 digests (the canonical request is hashed as it
//! is written, never built) and one HMAC, and allocates only the header it returns.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::sign::v4::generate_signing_key;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

pub const SERVICE: &str = "dynamodb";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

type HmacSha256 = hmac::Hmac<Sha256>;

/// The headers a signed request carries besides `host` and `content-type`.
pub struct Signed {
    pub amz_date: AmzDate,
    pub authorization: String,
}

/// What is the same for every request signed on one day with one set of credentials.
struct DayKey {
    day: [u8; 8],
    secret: String,
    access_key_id: String,
    with_token: bool,
    /// `<day>/<region>/dynamodb/aws4_request`
    scope: String,
    /// HMAC keyed with the day's signing key, before any input.
    mac: HmacSha256,
    /// `AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=`
    authorization_start: String,
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
        let amz_date = AmzDate::new(now);
        let token = credentials.session_token();
        let signed_headers = if token.is_some() {
            "content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
        } else {
            "content-type;host;x-amz-date;x-amz-target"
        };

        let mut canonical = Sha256::new();
        for part in [
            "POST\n",
            path,
            "\n\ncontent-type:",
            CONTENT_TYPE,
            "\nhost:",
            host,
            "\nx-amz-date:",
            amz_date.as_str(),
        ] {
            canonical.update(part.as_bytes());
        }
        if let Some(t) = token {
            canonical.update(b"\nx-amz-security-token:");
            canonical.update(t.as_bytes());
        }
        for part in ["\nx-amz-target:", target, "\n\n", signed_headers, "\n"] {
            canonical.update(part.as_bytes());
        }
        canonical.update(hex(&Sha256::digest(body)));

        let mut cached = self.day_key.lock().unwrap_or_else(|p| p.into_inner());
        let key = match &*cached {
            Some(k) if k.fits(amz_date.day(), credentials) => k,
            _ => cached.insert(self.day_key(amz_date.day(), credentials, now, signed_headers)),
        };
        let mut mac = key.mac.clone();
        for part in [
            &b"AWS4-HMAC-SHA256\n"[..],
            amz_date.as_str().as_bytes(),
            b"\n",
            key.scope.as_bytes(),
            b"\n",
            &hex(&canonical.finalize()),
        ] {
            mac.update(part);
        }
        let signature = hex(&mac.finalize().into_bytes());
        let mut authorization = String::with_capacity(key.authorization_start.len() + signature.len());
        authorization.push_str(&key.authorization_start);
        // Hex digits are ASCII.
        authorization.push_str(std::str::from_utf8(&signature).unwrap_or_default());
        Signed {
            amz_date,
            authorization,
        }
    }

    fn day_key(&self, day: &[u8; 8], credentials: &Credentials, now: SystemTime, signed_headers: &str) -> DayKey {
        let secret = credentials.secret_access_key();
        let signing_key = generate_signing_key(secret, now, &self.region, SERVICE);
        let day_text = std::str::from_utf8(day).unwrap_or_default();
        let scope = format!("{day_text}/{}/{SERVICE}/aws4_request", self.region);
        DayKey {
            day: *day,
            secret: secret.to_string(),
            access_key_id: credentials.access_key_id().to_string(),
            with_token: credentials.session_token().is_some(),
            authorization_start: format!(
                "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature=",
                credentials.access_key_id()
            ),
            scope,
            // An HMAC takes a key of any length.
            mac: HmacSha256::new_from_slice(signing_key.as_ref()).expect("HMAC accepts any key"),
        }
    }
}

impl DayKey {
    fn fits(&self, day: &[u8; 8], c: &Credentials) -> bool {
        self.day == *day
            && self.secret == c.secret_access_key()
            && self.access_key_id == c.access_key_id()
            && self.with_token == c.session_token().is_some()
    }
}

/// Lower-case hex of a 32-byte digest.
fn hex(bytes: &[u8]) -> [u8; 64] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (i, b) in bytes.iter().take(32).enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
    out
}

/// `YYYYMMDD'T'HHMMSS'Z'` in UTC, without an allocation.
#[derive(Clone, Copy)]
pub struct AmzDate([u8; 16]);

impl AmzDate {
    pub fn new(t: SystemTime) -> AmzDate {
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
        let mut out = *b"00000000T000000Z";
        let mut put = |at: usize, width: usize, mut v: u64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, 4, year.clamp(0, 9999) as u64);
        put(4, 2, month as u64);
        put(6, 2, day as u64);
        put(9, 2, rem / 3_600);
        put(11, 2, rem % 3_600 / 60);
        put(13, 2, rem % 60);
        AmzDate(out)
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits, `T` and `Z` are ever written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    fn day(&self) -> &[u8; 8] {
        self.0.first_chunk().expect("16 bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_smithy_runtime_api::client::identity::Identity;
    use std::time::Duration;

    fn amz_date(t: SystemTime) -> String {
        AmzDate::new(t).as_str().to_string()
    }

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
                assert_eq!(ours.amz_date.as_str(), amz_date(now));
                // The next day needs a new signing key.
                now += Duration::from_secs(86_400);
            }
        }
        // Other credentials on the same day: a new key and a new credential scope.
        let other = Credentials::new("AKIDOTHER", "secret0", None, None, "t");
        let ours = signer.sign(&other, now, host, "/", target, body);
        assert_eq!(ours.authorization, reference(&other, now, host, target, body));
    }
}
