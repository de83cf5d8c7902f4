//! Keeping secrets out of children and out of the log.
//!
//! Two rules, applied wherever castlog meets the outside:
//! - A program castlog starts (a `cmd:` agent, a utility, a `cmd:` sender or fetcher) gets
//!   castlog's environment without the variables of [`DENY_LIST`], unless the person passes one
//!   on purpose (`--pass-env NAME`, see [`crate::process::Launcher`]). A program that echoes
//!   its environment then has no key to echo.
//! - Text that comes from outside and is recorded (a program's stdout and stderr, a model's
//!   reply, an HTTP error body, a URL) goes through [`Redactor::scrub`] first: the values of
//!   the deny-listed variables set in castlog's environment (passed on or not) become `***`,
//!   and so does the userinfo of every URL (`http://user:pass@host` is recorded as
//!   `http://***@host`).
//!
//! Values shorter than [`MIN_SCRUBBED_LEN`] bytes are not scrubbed: they would match ordinary
//! text everywhere, and a key that short protects nothing.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// The environment variables no child gets unless passed with `--pass-env`, and whose values
/// are scrubbed from recorded text: castlog's own key and the keys of the common model
/// providers.
pub const DENY_LIST: [&str; 15] = [
    "CASTLOG_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "XAI_API_KEY",
    "COHERE_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
];

/// The shortest value that is scrubbed.
pub const MIN_SCRUBBED_LEN: usize = 8;

/// What a scrubbed secret is replaced with.
pub const MASK: &str = "***";

/// Replaces secret values and URL userinfo in text that is about to be recorded. Cheap to
/// clone; `Debug` shows how many values it holds, never the values.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a value that contains another is masked whole.
    values: Arc<[String]>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("values", &self.values.len())
            .finish()
    }
}

impl Redactor {
    /// Scrubs the values of the [`DENY_LIST`] variables set in this process's environment.
    pub fn from_env() -> Self {
        Self::with_values(DENY_LIST.iter().filter_map(|name| std::env::var(name).ok()))
    }

    /// Scrubs `values` (those of at least [`MIN_SCRUBBED_LEN`] bytes).
    pub fn with_values(values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = values
            .into_iter()
            .map(|v| v.trim().to_owned())
            .filter(|v| v.len() >= MIN_SCRUBBED_LEN)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Self {
            values: values.into(),
        }
    }

    /// `text` with every secret value and every URL's userinfo replaced by [`MASK`].
    pub fn scrub(&self, text: &str) -> String {
        let mut out = Cow::Borrowed(text);
        for value in self.values.iter() {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), MASK));
            }
        }
        without_userinfo(&out).into_owned()
    }
}

/// `text` with the userinfo of each `scheme://user:pass@host` replaced by [`MASK`]. The
/// authority is taken to end at whitespace, a path, query or fragment, or a character that
/// closes a quoted or bracketed URL; its last `@` ends the userinfo.
pub fn without_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| {
                c.is_whitespace()
                    || matches!(
                        c,
                        '/' | '?' | '#' | '"' | '\'' | '`' | '<' | '>' | '\\' | ')'
                    )
            })
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(last) => {
                out.push_str(MASK);
                out.push_str(&authority[last..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_masked_and_the_rest_kept() {
        let cases = [
            ("http://user:pass@host/v1", "http://***@host/v1"),
            (
                "see https://u@h:8080?x=1 now",
                "see https://***@h:8080?x=1 now",
            ),
            ("\"ssh://a:b@c@d/x\"", "\"ssh://***@d/x\""),
            ("http://host/a@b", "http://host/a@b"),
            (
                "two: http://a:b@x, ftp://c:d@y",
                "two: http://***@x, ftp://***@y",
            ),
            ("git@github.com:castlog", "git@github.com:castlog"),
            ("http://k:s@[::1]:9/v1", "http://***@[::1]:9/v1"),
            ("no url here", "no url here"),
        ];
        for (text, want) in cases {
            assert_eq!(without_userinfo(text), want, "{text}");
        }
    }

    #[test]
    fn secret_values_are_masked_longest_first_and_short_ones_kept() {
        let redactor = Redactor::with_values([
            "sk-live-1234".to_owned(),
            "sk-live-1234-and-more".to_owned(),
            "short".to_owned(),
            String::new(),
        ]);
        assert_eq!(
            redactor.scrub("a sk-live-1234-and-more b sk-live-1234 c short"),
            "a *** b *** c short"
        );
        assert_eq!(
            redactor.scrub("key=sk-live-1234 at http://me:sk-live-1234@h/"),
            "key=*** at http://***@h/"
        );
        assert!(!format!("{redactor:?}").contains("sk-live"));
    }
}
