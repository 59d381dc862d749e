//! What the standard AWS environment says about a failure to configure a client: the profile
//! named by `AWS_PROFILE` that the files do not have, a `credential_process` that failed, an
//! SSO login that is missing or expired. aws-config reports these as a chain of causes whose
//! top is generic; the messages here name the file, the profile and the command to run.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use aws_credential_types::provider::error::CredentialsError;
use aws_runtime::env_config::file::EnvConfigFiles;
use aws_runtime::env_config::section::EnvConfigSections;
use aws_runtime::fs_util::{home_dir, Os};
use aws_types::os_shim_internal::{Env, Fs};
use sha1::{Digest, Sha1};

/// The profile `AWS_PROFILE` names, when it is set.
fn named_profile() -> Option<String> {
    std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty())
}

fn home() -> Option<String> {
    home_dir(&Env::real(), Os::real())
}

/// A shared file's path as the AWS SDKs read it: the variable's value (`~` is the home
/// directory), else `~/.aws/<default>`.
fn shared_file(var: &str, default: &str) -> String {
    let home = home();
    let path = match std::env::var(var) {
        Ok(p) if !p.is_empty() => p,
        _ => format!("~/.aws/{default}"),
    };
    match (path.strip_prefix('~'), home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with(['/', '\\']) => Path::new(&home)
            .join(rest.trim_start_matches(['/', '\\']))
            .display()
            .to_string(),
        _ => path,
    }
}

fn config_file() -> String {
    shared_file("AWS_CONFIG_FILE", "config")
}

fn credentials_file() -> String {
    shared_file("AWS_SHARED_CREDENTIALS_FILE", "credentials")
}

async fn profiles() -> Result<EnvConfigSections, String> {
    aws_config::profile::load(&Fs::real(), &Env::real(), &EnvConfigFiles::default(), None)
        .await
        .map_err(|e| e.to_string())
}

/// What keeps the AWS profile files from being used: a file that cannot be parsed, or the
/// profile `AWS_PROFILE` names missing from both files. `None` when there is nothing to say.
pub async fn profile_problem() -> Option<String> {
    let name = named_profile();
    match profiles().await {
        Err(e) => Some(format!("the AWS profile files could not be read: {e}")),
        Ok(set) => {
            let name = name?;
            set.get_profile(&name).is_none().then(|| {
                format!(
                    "the AWS profile \"{name}\" (AWS_PROFILE) was not found in the config file {} ([profile {name}]) nor in the credentials file {} ([{name}])",
                    config_file(),
                    credentials_file()
                )
            })
        }
    }
}

/// The message for a region that could not be found.
pub async fn no_region() -> String {
    let fix = "set `region` in the `dynamodb` options, AWS_REGION, or `region` in the AWS profile";
    match profile_problem().await {
        Some(p) => format!("No AWS region: {p}; {fix}"),
        None => format!("No AWS region: {fix}"),
    }
}

/// The cause of a failure to load credentials from the environment, as a clause for people
/// (what failed, where, and what to do).
pub async fn credentials_cause(e: &CredentialsError) -> Option<String> {
    if let Some(p) = profile_problem().await {
        return Some(p);
    }
    if matches!(e, CredentialsError::CredentialsNotLoaded(_)) {
        return None;
    }
    let deepest = deepest(e);
    let name = named_profile().unwrap_or_else(|| "default".into());
    let set = profiles().await.ok()?;
    let profile = set.get_profile(&name)?;
    if profile.get("credential_process").is_some() {
        return Some(format!(
            "the credential_process of the AWS profile \"{name}\" failed: {deepest}"
        ));
    }
    let identifier = profile.get("sso_session").or_else(|| profile.get("sso_start_url"))?;
    Some(sso_cause(&name, identifier, &deepest))
}

/// The chain of causes of an error as people read it: each cause's own message, outermost
/// first, joined by ": " (never a debug dump of the error's structure; the outer errors of
/// aws-config and hyper say little by themselves).
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out: Vec<String> = Vec::new();
    for e in std::iter::successors(Some(e), |e| e.source()) {
        let text = e.to_string().trim().to_string();
        // A cause that repeats what a wrapper already said adds nothing.
        if !text.is_empty() && !out.iter().any(|said| said.contains(&text)) {
            out.push(text);
        }
    }
    out.join(": ")
}

/// Whether the variable is set to something.
fn is_set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}

/// What a pair of variables that go together says: both set, one without the other, neither.
fn pair(first: &str, second: &str) -> String {
    match (is_set(first), is_set(second)) {
        (true, true) => format!("{first} and {second} are set"),
        (true, false) => format!("{first} is set without {second}"),
        (false, true) => format!("{second} is set without {first}"),
        (false, false) => format!("{first} and {second} are not set"),
    }
}

/// The message for credentials that none of the standard sources had: each source the AWS
/// SDKs' default chain tries, in its order, what was found there, and what to set.
pub async fn no_credentials_found() -> String {
    let name = named_profile().unwrap_or_else(|| "default".into());
    let profile = match profiles().await {
        Err(e) => format!("its files could not be read: {e}"),
        Ok(set) => match set.get_profile(&name) {
            None => format!(
                "\"{name}\" is in neither the config file {} nor the credentials file {}",
                config_file(),
                credentials_file()
            ),
            Some(_) => format!(
                "\"{name}\", in {} or {}, has no aws_access_key_id, credential_process, SSO or role",
                config_file(),
                credentials_file()
            ),
        },
    };
    let container = if is_set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") || is_set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    {
        "the container credentials endpoint gave none"
    } else {
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and AWS_CONTAINER_CREDENTIALS_FULL_URI are not set"
    };
    let metadata_off = std::env::var("AWS_EC2_METADATA_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let instance = if metadata_off {
        "turned off by AWS_EC2_METADATA_DISABLED"
    } else {
        "no instance metadata service gave a role's credentials"
    };
    format!(
        "No AWS credentials could be loaded for DynamoDB. The sources tried, in order: the environment ({}); the AWS \
         profile ({profile}); web identity ({}); the container endpoint ({container}); the EC2 instance role \
         ({instance}). Give `dynamodb.credentials`, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE \
         to a profile that has credentials.",
        pair("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
        pair("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"),
    )
}

/// The innermost cause of an error, trimmed.
pub fn deepest(e: &(dyn std::error::Error + 'static)) -> String {
    let innermost = std::iter::successors(Some(e), |e| e.source()).last().unwrap_or(e);
    innermost.to_string().trim().to_string()
}

/// Where the AWS CLI caches the SSO token of a session name or start URL.
fn sso_cache_path(identifier: &str) -> Option<PathBuf> {
    let name = format!("{}.json", hex::encode(Sha1::digest(identifier.as_bytes())));
    Some(Path::new(&home()?).join(".aws").join("sso").join("cache").join(name))
}

/// A missing or expired SSO login is told apart from a refusal by the SSO portal.
fn sso_cause(profile: &str, identifier: &str, deepest: &str) -> String {
    let login = format!("run `aws sso login --profile {profile}`");
    let Some(path) = sso_cache_path(identifier) else {
        return format!(
            "the SSO login of the AWS profile \"{profile}\" could not be found (no home directory): {deepest}"
        );
    };
    let shown = path.display();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return format!(
            "the AWS profile \"{profile}\" uses SSO and no SSO login is cached ({shown} is missing): {login}"
        );
    };
    let expires_at = json_string(&text, "expiresAt");
    let expired = expires_at
        .as_deref()
        .and_then(|t| aws_smithy_types::DateTime::from_str(t, aws_smithy_types::date_time::Format::DateTime).ok())
        .and_then(|t| SystemTime::try_from(t).ok())
        .is_some_and(|t| t <= SystemTime::now());
    if expired {
        return format!(
            "the SSO login of the AWS profile \"{profile}\" expired at {} ({shown}): {login}",
            expires_at.unwrap_or_default()
        );
    }
    format!("the SSO credentials of the AWS profile \"{profile}\" could not be fetched: {deepest}")
}

/// The string value of a top-level `"key": "..."` in a small JSON document (no escapes in it).
fn json_string(text: &str, key: &str) -> Option<String> {
    let after = &text[text.find(&format!("\"{key}\""))? + key.len() + 2..];
    let after = after.trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
    Some(after[..after.find('"')?].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_are_found_by_the_sha1_of_their_identifier() {
        let p = sso_cache_path("my-sso").unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(name.len(), 40 + ".json".len());
        assert!(p.ends_with(Path::new(".aws/sso/cache").join(&name)));
        assert_ne!(sso_cache_path("other").unwrap(), p);
    }

    #[test]
    fn a_json_string_field_is_read() {
        let t = r#"{"accessToken": "x", "expiresAt" : "2026-01-01T00:00:00Z"}"#;
        assert_eq!(json_string(t, "expiresAt").as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(json_string(t, "missing"), None);
    }

    #[test]
    fn causes_are_their_messages_without_a_debug_dump() {
        let e = CredentialsError::not_loaded(CredentialsError::provider_error(
            "no providers in chain provided credentials",
        ));
        let text = causes(&e);
        assert!(text.ends_with("no providers in chain provided credentials"), "{text}");
        assert!(
            !text.contains("CredentialsNotLoaded") && !text.contains("source:") && !text.contains("Some("),
            "{text}"
        );
    }

    #[test]
    fn the_innermost_cause_is_named() {
        let e =
            CredentialsError::provider_error(CredentialsError::provider_error("exited with code 1. Stderr: boom\n"));
        assert_eq!(deepest(&e), "exited with code 1. Stderr: boom");
    }
}
