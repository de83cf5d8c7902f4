//! Where a PostgreSQL log lives: a `postgres://` (or `postgresql://`) URL as libpq reads it,
//! plus castlog's own query parameter `schema=NAME`, the schema its tables are in (created
//! if missing by a command that may create a database; `public`, or the server's
//! `search_path`, without it). Several logs can share one database that way (a test run
//! each, or a team each).

use crate::log::LogError;

/// A parsed `postgres://` locator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locator {
    /// The URL handed to the client, without castlog's `schema` parameter.
    pub(crate) url: String,
    /// The schema castlog's tables are in, if one is named.
    pub schema: Option<String>,
    /// The locator as shown in messages: the URL given, without its password.
    pub shown: String,
}

/// Whether `text` names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

impl Locator {
    /// Parses `url`; only the `schema` parameter is read here, the rest is the client's.
    pub fn parse(url: &str) -> Result<Self, LogError> {
        let shown = without_password(url);
        if !is_postgres_url(url) {
            return Err(LogError::open(
                shown,
                "a PostgreSQL database is named by a postgres:// URL",
            ));
        }
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (url, None),
        };
        let mut schema = None;
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("schema", name)) => {
                    if name.is_empty()
                        || !name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    {
                        return Err(LogError::open(
                            shown,
                            format!(
                                "schema {name:?} is not a name castlog uses: letters, digits, `_` and `-` only"
                            ),
                        ));
                    }
                    schema = Some(name.to_owned());
                }
                _ if pair.is_empty() => {}
                _ => kept.push(pair),
            }
        }
        let url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok(Self { url, schema, shown })
    }

    /// The URL for a plain client, without castlog's `schema` parameter (and with the password
    /// given, so never for messages).
    pub fn client_url(&self) -> &str {
        &self.url
    }

    /// The schema as an SQL identifier (double-quoted).
    pub(crate) fn quoted_schema(&self) -> Option<String> {
        self.schema.as_ref().map(|s| format!("\"{s}\""))
    }
}

/// `url` without the password of its user part, for messages.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{scheme}://{name}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parameter_is_castlogs_and_the_rest_the_clients() {
        let loc = Locator::parse("postgres://root@127.0.0.1/test?schema=run_1&connect_timeout=5")
            .unwrap();
        assert_eq!(loc.url, "postgres://root@127.0.0.1/test?connect_timeout=5");
        assert_eq!(loc.schema.as_deref(), Some("run_1"));
        assert_eq!(loc.quoted_schema().as_deref(), Some("\"run_1\""));
        let plain = Locator::parse("postgresql://root@localhost/test").unwrap();
        assert_eq!(plain.url, "postgresql://root@localhost/test");
        assert_eq!(plain.schema, None);
    }

    #[test]
    fn a_schema_name_that_would_need_quoting_is_refused() {
        let err = Locator::parse("postgres://root@h/db?schema=a\"b").unwrap_err();
        assert!(err.to_string().contains("not a name castlog uses"), "{err}");
    }

    #[test]
    fn messages_never_show_a_password() {
        let loc = Locator::parse("postgres://alice:secret@db.example/castlog").unwrap();
        assert_eq!(loc.shown, "postgres://alice:***@db.example/castlog");
        assert!(
            !Locator::parse("file.db")
                .unwrap_err()
                .to_string()
                .contains("secret")
        );
    }
}
