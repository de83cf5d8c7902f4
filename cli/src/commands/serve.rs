//! `serve`: the casts and their reports over HTTP (axum), live while a cast runs.
//!
//! Reading: every request opens the database on a blocking thread and renders the same pages
//! as `castlog report` (`castlog_viewer`). Live updates are server-sent events: a blocking
//! thread per open stream reads the cast's events after the last one sent, a few times a
//! second, and stops once the page has gone. Writing (only with `--allow-input`): a
//! refinement or a continue is recorded by the very code `castlog refine` and `castlog
//! continue` run (`cast::feed`, without an agent, so the next prompt is held), on the thread
//! that owns the command's settings; the server hands it each request over a channel.
//!
//! Access: bound to a loopback address the server answers anyone on the machine; bound beyond
//! it, `--token` is required and checked on every request (`Authorization: Bearer T`, `?token=T`,
//! or the cookie set when a `?token=` link is opened). A form post from another origin is
//! refused, so a page elsewhere cannot post into a cast through a browser.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use axum::extract::{Form, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use castlog_core::id::{CastId, Seq};
use castlog_core::input::Input;
use castlog_events::EventLog;
use castlog_projections::timeline::TimelineLine;
use castlog_viewer::casts::Filter;
use castlog_viewer::report::Extras;
use serde::Deserialize;

use crate::args::{PostArgs, ServeArgs};
use crate::error::CliError;

/// How often a live stream looks for new events.
const POLL: Duration = Duration::from_millis(200);

/// The cookie a `?token=` link sets, so the page's own links and forms carry the token.
const COOKIE: &str = "castlog_token";

/// An input to record, and where to say how it went.
struct InputRequest {
    cast: String,
    input: Input,
    done: mpsc::Sender<Result<(), String>>,
}

/// What every handler shares. The database is opened per request (a SQLite open is cheap and
/// keeps no connection across the runtime's threads); inputs go to the thread that owns the
/// command's settings, one at a time, as the CLI records them.
struct App {
    db: PathBuf,
    allow_input: bool,
    token: Option<String>,
    inputs: mpsc::Sender<InputRequest>,
}

/// `castlog serve`.
pub fn run(db: &Path, args: &ServeArgs, globals: &crate::globals::Globals) -> Result<(), CliError> {
    let addr: SocketAddr = args.bind.parse().map_err(|_| {
        CliError::user(format!(
            "--bind {:?} is not IP:PORT, e.g. 127.0.0.1:8080",
            args.bind
        ))
    })?;
    let token = args.token.clone().filter(|t| !t.is_empty());
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(CliError::user(format!(
            "--bind {addr} is reachable beyond this machine: give --token T (every request must carry it)"
        )));
    }
    // The database must open now, not at the first request.
    drop(super::open(db)?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::internal(format!("cannot start the server's runtime: {e}")))?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|e| CliError::user(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::internal(format!("the listening address: {e}")))?;
    let (inputs, requests) = mpsc::channel::<InputRequest>();
    let app = Arc::new(App {
        db: db.to_path_buf(),
        allow_input: args.allow_input,
        token,
        inputs,
    });
    let router = axum::Router::new()
        .route("/", get(list))
        .route("/casts/{cast}", get(cast_page))
        .route("/casts/{cast}/events", get(events))
        .route("/casts/{cast}/input", post(input))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guard))
        .with_state(app);
    crate::say!(
        "castlog serve: listening on http://{bound}/{}",
        if args.allow_input {
            " (input allowed)"
        } else {
            " (read-only)"
        }
    );
    std::thread::scope(|scope| {
        let server = scope.spawn(move || {
            runtime.block_on(async move {
                tokio::select! {
                    served = axum::serve(listener, router) => served.map_err(|e| e.to_string()),
                    _ = tokio::signal::ctrl_c() => Ok(()),
                }
            })
        });
        // Inputs are recorded here, with the command's settings, until the server stops (the
        // router, holding the last sender, is dropped with it).
        for request in requests {
            let done = super::cast::feed(
                db,
                &request.cast,
                &request.input,
                None,
                &PostArgs::default(),
                false,
                globals,
            );
            let _ = request.done.send(done.map_err(|e| e.message));
        }
        match server.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(CliError::internal(format!("the server stopped: {e}"))),
            Err(_) => Err(CliError::internal("the server thread panicked")),
        }
    })
}

/// Compares without stopping at the first differing byte.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

fn query_token(request: &Request) -> Option<String> {
    request.uri().query().and_then(|q| {
        q.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(name, _)| *name == "token")
            .map(|(_, value)| decode(value))
    })
}

/// Checks the token (when one is set) on every request, and refuses a form post from another
/// origin.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let mut set_cookie = None;
    if let Some(token) = &app.token {
        let headers = request.headers();
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let from_query = query_token(&request);
        let ok = [bearer, cookie_token(headers), from_query.as_deref()]
            .into_iter()
            .flatten()
            .any(|given| same_secret(given, token));
        if !ok {
            return (
                StatusCode::UNAUTHORIZED,
                "castlog serve: this server needs its token (Authorization: Bearer T, or ?token=T)\n",
            )
                .into_response();
        }
        if from_query.is_some() {
            set_cookie = HeaderValue::from_str(&format!(
                "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
                encode(token)
            ))
            .ok();
        }
    }
    if request.method() == axum::http::Method::POST && !same_origin(request.headers()) {
        return (
            StatusCode::FORBIDDEN,
            "castlog serve: a form from another origin cannot post here\n",
        )
            .into_response();
    }
    let mut response = next.run(request).await;
    if let Some(cookie) = set_cookie {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// A post without an `Origin` (a script, `curl`) or from the page's own origin.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    host.is_some_and(|h| h == origin_host)
}

/// Percent-encodes everything but unreserved characters (cast ids in links).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A page, or the error that kept it from being made (a person's error is a 404 or 400, the
/// rest a 500), written out as text.
fn answer(made: Result<String, CliError>) -> Response {
    match made {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            let status = if e.code == crate::error::USER {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            (status, format!("castlog serve: {}\n", e.message)).into_response()
        }
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CliError> + Send + 'static,
) -> Result<T, CliError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(CliError::internal(format!("a request's work failed: {e}"))))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    status: Option<String>,
    loadout: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

async fn list(State(app): State<Arc<App>>, Query(q): Query<ListQuery>) -> Response {
    // A day that does not read is the asker's mistake: 400, naming it.
    let days = Filter::day(q.from.as_deref(), "from")
        .and_then(|from| Ok((from, Filter::day(q.to.as_deref(), "to")?)));
    let (from, to) = match days {
        Ok(days) => days,
        Err(why) => {
            return (StatusCode::BAD_REQUEST, format!("castlog serve: {why}\n")).into_response();
        }
    };
    let db = app.db.clone();
    answer(
        blocking(move || {
            let log = super::open(&db)?;
            let filter = Filter {
                from,
                to,
                status: q.status.filter(|s| !s.is_empty()),
                loadout: q.loadout.filter(|l| !l.is_empty()),
            };
            let rows = castlog_viewer::casts::rows(&log, &filter)?;
            Ok(castlog_viewer::casts::page(&rows, &filter, &|cast| {
                format!("/casts/{}", encode(cast))
            }))
        })
        .await,
    )
}

#[derive(Debug, Deserialize)]
struct CastQuery {
    diff: Option<String>,
}

async fn cast_page(
    State(app): State<Arc<App>>,
    UrlPath(cast): UrlPath<String>,
    Query(q): Query<CastQuery>,
) -> Response {
    let db = app.db.clone();
    let allow_input = app.allow_input;
    answer(
        blocking(move || {
            let log = super::open(&db)?;
            let head = super::inspect::head_of(&log, &cast)?;
            let status = castlog_replay::driver::fold(&log, &head.cast)
                .map(|(s, _)| s.status)
                .ok();
            use castlog_core::machine::Status;
            let ended = matches!(status, Some(Status::Completed | Status::Failed));
            let extras = Extras {
                live: (!ended).then(|| format!("/casts/{}/events", encode(&cast))),
                input: (allow_input && status == Some(Status::AwaitingRefinement))
                    .then(|| format!("/casts/{}/input", encode(&cast))),
                back: Some("/".to_owned()),
                ..Extras::default()
            };
            super::report::page(
                &log,
                &cast,
                q.diff.as_deref().filter(|d| !d.is_empty()),
                &extras,
            )
        })
        .await,
    )
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    after: Option<u64>,
}

async fn events(
    State(app): State<Arc<App>>,
    UrlPath(cast): UrlPath<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let db = app.db.clone();
    // A reconnecting page says the last event it got; a new one starts at the head.
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let opened = {
        let cast = cast.clone();
        blocking(move || {
            let log = super::open(&db)?;
            let head = super::inspect::head_of(&log, &cast)?;
            Ok((head.cast, head.seq.get()))
        })
        .await
    };
    let (cast, head) = match opened {
        Ok(opened) => opened,
        Err(e) => return answer(Err(e)),
    };
    let after = resumed.or(q.after).unwrap_or(head);
    let (sent, received) = tokio::sync::mpsc::channel::<SseEvent>(64);
    let db = app.db.clone();
    tokio::task::spawn_blocking(move || follow(&db, &cast, after, &sent));
    let stream = futures_util::stream::unfold(received, |mut received| async move {
        received
            .recv()
            .await
            .map(|event| (Ok::<_, std::convert::Infallible>(event), received))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Sends every event of `cast` after seq `after` as it is appended, until the page goes.
fn follow(db: &Path, cast: &CastId, mut after: u64, sent: &tokio::sync::mpsc::Sender<SseEvent>) {
    let Ok(log) = super::open(db) else { return };
    let mut decoder = castlog_events::Decoder::new();
    while !sent.is_closed() {
        let mut gone = false;
        let scanned = log.scan(cast, Seq(after + 1), &mut |record| {
            let decoded = decoder.event_in(&log, &record);
            let line = TimelineLine::of(&record, decoded.as_ref(), super::CONTEXTS);
            let data = serde_json::json!({
                "seq": line.seq, "kind": line.kind, "summary": line.summary,
            });
            let event = SseEvent::default()
                .event("castlog")
                .id(line.seq.to_string())
                .data(data.to_string());
            if sent.blocking_send(event).is_err() {
                gone = true;
                return ControlFlow::Break(());
            }
            after = line.seq;
            ControlFlow::Continue(())
        });
        if gone || scanned.is_err() {
            return;
        }
        std::thread::sleep(POLL);
    }
}

#[derive(Debug, Deserialize)]
struct InputForm {
    action: String,
    #[serde(default)]
    text: String,
}

async fn input(
    State(app): State<Arc<App>>,
    UrlPath(cast): UrlPath<String>,
    Form(form): Form<InputForm>,
) -> Response {
    if !app.allow_input {
        return (
            StatusCode::FORBIDDEN,
            "castlog serve: read-only; start it with --allow-input to answer casts\n",
        )
            .into_response();
    }
    let input = match form.action.as_str() {
        "refine" if form.text.trim().is_empty() => {
            return (
                StatusCode::BAD_REQUEST,
                "castlog serve: the refinement is empty: say what the next prompt should take into account\n",
            )
                .into_response();
        }
        "refine" => Input::UserRefined {
            text: form.text,
            origin: None,
        },
        "continue" => Input::Continue { origin: None },
        other => {
            return (
                StatusCode::BAD_REQUEST,
                format!("castlog serve: unknown action {other:?}: refine or continue\n"),
            )
                .into_response();
        }
    };
    let (done, outcome) = mpsc::channel();
    let request = InputRequest {
        cast: cast.clone(),
        input,
        done,
    };
    if app.inputs.send(request).is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "castlog serve: stopping\n").into_response();
    }
    let outcome = tokio::task::spawn_blocking(move || outcome.recv())
        .await
        .ok()
        .and_then(Result::ok);
    match outcome {
        Some(Ok(())) => Redirect::to(&format!("/casts/{}", encode(&cast))).into_response(),
        Some(Err(message)) => {
            (StatusCode::CONFLICT, format!("castlog serve: {message}\n")).into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, "castlog serve: stopping\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cast_ids_survive_a_link() {
        let id = "demo 1/ü?&";
        assert_eq!(decode(&encode(id)), id);
        assert_eq!(encode("cast-2025_a.b~"), "cast-2025_a.b~");
    }

    #[test]
    fn the_token_is_compared_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }

    #[test]
    fn a_post_from_another_origin_is_told_apart() {
        let mut headers = HeaderMap::new();
        assert!(same_origin(&headers));
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://elsewhere.example"),
        );
        assert!(!same_origin(&headers));
    }
}
