//! Credentials from an AWS SDK for JavaScript client: the native core asks the JavaScript
//! client's own provider whenever its cached credentials near expiry, so STS, SSO and
//! instance-role credentials keep refreshing the way the user configured them.

use std::sync::Arc;

use aws_credential_types::provider::{self, error::CredentialsError, ProvideCredentials};
use aws_credential_types::Credentials;
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi::Status;
use napi_derive::napi;

/// Credentials as the JavaScript side resolves them.
#[napi(object)]
pub struct JsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    /// Expiry as Unix milliseconds, if the credentials expire.
    pub expiration_ms: Option<f64>,
}

pub type CredentialsFn = ThreadsafeFunction<(), Promise<JsCredentials>, (), Status, false, true>;

/// The provider, as messages name it: the user's function, or the AWS SDK client's.
const PROVIDER: &str =
    "the credentials provider in JavaScript (the `dynamodb.credentials` function, or the AWS SDK client's)";

#[derive(Clone)]
pub struct JsCredentialsProvider {
    pub resolve: Arc<CredentialsFn>,
}

impl std::fmt::Debug for JsCredentialsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsCredentialsProvider")
    }
}

impl JsCredentialsProvider {
    async fn fetch(&self) -> provider::Result {
        let promise = self
            .resolve
            .call_async(())
            .await
            .map_err(|e| CredentialsError::provider_error(format!("{PROVIDER} threw: {}", e.reason)))?;
        let c = promise
            .await
            .map_err(|e| CredentialsError::provider_error(format!("{PROVIDER} rejected: {}", e.reason)))?;
        let expiry = c
            .expiration_ms
            .filter(|ms| ms.is_finite() && *ms > 0.0)
            .map(|ms| crate::clock::unix_time(ms as u64));
        Ok(Credentials::new(
            c.access_key_id,
            c.secret_access_key,
            c.session_token,
            expiry,
            "aws-sdk-js-client",
        ))
    }
}

impl ProvideCredentials for JsCredentialsProvider {
    fn provide_credentials<'a>(&'a self) -> provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        provider::future::ProvideCredentials::new(self.fetch())
    }
}
