//! A fresh PostgreSQL schema per test, on the server the machine runs (`CASTLOG_TEST_POSTGRES`,
//! default `postgres://postgres@127.0.0.1:5432/test`), dropped with everything in it when the
//! test is done. A server that does not answer fails the test, naming the URL: CI runs one,
//! so a PostgreSQL test never passes by not running.

use std::sync::atomic::{AtomicU64, Ordering};

/// The server the PostgreSQL tests use.
pub fn server_url() -> String {
    std::env::var("CASTLOG_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A schema of the test server that exists for one test.
pub struct ScratchSchema {
    name: String,
    server: String,
}

/// Creates an empty schema with a name no other test (in this process or another) uses.
pub fn scratch_schema() -> ScratchSchema {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let server = server_url();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        "castlog_test_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut client = connect(&server);
    client
        .batch_execute(&format!("CREATE SCHEMA \"{name}\""))
        .unwrap_or_else(|e| panic!("cannot create schema {name} on {server}: {e}"));
    ScratchSchema { name, server }
}

/// A plain client of the test server, or a panic that says what to do.
pub fn connect(server: &str) -> postgres::Client {
    postgres::Client::connect(server, postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "the PostgreSQL tests need a server at {server} (set CASTLOG_TEST_POSTGRES to use another; \
             .ci/run starts one): {e}"
        )
    })
}

impl ScratchSchema {
    /// The `--db` URL of a log in this schema.
    pub fn url(&self) -> String {
        let sep = if self.server.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.server, self.name)
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A client whose `search_path` is this schema, to read or damage its tables directly.
    pub fn client(&self) -> postgres::Client {
        let mut client = connect(&self.server);
        client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.name))
            .unwrap();
        client
    }
}

impl Drop for ScratchSchema {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.name));
        }
    }
}
