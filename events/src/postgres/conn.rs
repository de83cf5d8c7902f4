//! One pooled PostgreSQL connection with its prepared statements, and the small pool of them.
//!
//! The pool is a mutex over idle connections, the same shape as the SQLite log's reader pool:
//! an operation takes an idle connection (or opens one), uses it alone and puts it back, so a
//! scan visitor may itself read from the log on another connection without deadlock, and
//! concurrent appends run on connections of their own (the server serializes them per cast
//! with a row lock). A connection the server closed is not put back.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use postgres::{Client, NoTls, Statement};

use super::error::{Pg, map_err};
use super::locator::Locator;
use crate::log::LogError;

/// Idle connections kept open.
const POOL_SIZE: usize = 4;

/// A connection and the statements prepared on it, by their SQL text.
pub(crate) struct Conn {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Conn {
    /// Connects as `locator` says and sets the session up: the schema first in `search_path`
    /// (so every query names tables unqualified), and full durability (an acknowledged commit
    /// is flushed to disk), whatever the server's default.
    pub(crate) fn connect(locator: &Locator) -> Result<Self, LogError> {
        let open_err = |e: postgres::Error| LogError::open(locator.shown.clone(), Pg::new(e));
        let config: postgres::Config = locator.url.parse().map_err(open_err)?;
        let mut client = config.connect(NoTls).map_err(open_err)?;
        let mut setup = String::from("SET synchronous_commit = on;");
        if let Some(schema) = locator.quoted_schema() {
            setup.push_str(&format!("SET search_path TO {schema};"));
        }
        client.batch_execute(&setup).map_err(open_err)?;
        Ok(Self {
            client,
            statements: HashMap::new(),
        })
    }

    /// The client alone, for a session of its own (a listener).
    pub(crate) fn into_client(self) -> Client {
        self.client
    }

    pub(crate) fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// `sql` prepared on this connection (once; later calls reuse it).
    pub(crate) fn prepared(&mut self, sql: &'static str) -> Result<Statement, LogError> {
        if let Some(stmt) = self.statements.get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self
            .client
            .prepare(sql)
            .map_err(|e| map_err("preparing a statement", e))?;
        self.statements.insert(sql, stmt.clone());
        Ok(stmt)
    }

    /// Runs `work` between `begin` (a `BEGIN ...` statement) and `COMMIT`, rolling back if it
    /// fails: all of its writes or none.
    pub(crate) fn transaction<T>(
        &mut self,
        begin: &str,
        work: impl FnOnce(&mut Self) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        self.client
            .batch_execute(begin)
            .map_err(|e| map_err("starting a transaction", e))?;
        match work(self) {
            Ok(out) => {
                self.client
                    .batch_execute("COMMIT")
                    .map_err(|e| map_err("committing", e))?;
                Ok(out)
            }
            Err(err) => {
                // A connection that cannot roll back is closed and dropped by the pool.
                let _ = self.client.batch_execute("ROLLBACK");
                Err(err)
            }
        }
    }
}

/// Idle connections to one log.
pub(crate) struct Pool {
    locator: Locator,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    pub(crate) fn new(locator: Locator, first: Conn) -> Self {
        Self {
            locator,
            idle: Mutex::new(vec![first]),
        }
    }

    pub(crate) fn locator(&self) -> &Locator {
        &self.locator
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Conn>> {
        // The list holds no invariant a panic could break; take it back if poisoned.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `work` on an idle connection (opening one if none is idle).
    pub(crate) fn with<T>(
        &self,
        work: impl FnOnce(&mut Conn) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        let idle = self.idle().pop();
        let mut conn = match idle {
            Some(conn) => conn,
            None => Conn::connect(&self.locator)?,
        };
        let out = work(&mut conn);
        if !conn.client.is_closed() {
            let mut idle = self.idle();
            if idle.len() < POOL_SIZE {
                idle.push(conn);
            }
        }
        out
    }
}
