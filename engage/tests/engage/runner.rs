//! The engagement runner on the in-memory log with scripted roles: the reference behaviours of
//! engagement-spec.md §5 that need effects (numbers in test names) and castlog's fixes.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use castlog_core::claims::ClaimStatus;
use castlog_core::id::{CastId, Seq};
use castlog_core::input::SendOutcome;
use castlog_engage::fetcher::Fetcher;
use castlog_engage::pipeline::collect::DISCORD_EPOCH_MS;
use castlog_engage::pipeline::fingerprint::fingerprint;
use castlog_engage::pipeline::input::{self, EngageInput};
use castlog_engage::pipeline::live::Fetched;
use castlog_engage::report::EngagementReport;
use castlog_engage::runner::{Roles, engage};
use castlog_events::{EventLog, InMemoryLog};
use castlog_projections::claims::ClaimsLedger;
use castlog_replay::agent::{Agent, AgentTurn, TurnRequest};
use castlog_replay::sender::{Outbound, Sender};
use serde_json::{Value, json};

use crate::rival::{RivalLog, assert_lost_to_the_rival};

const NOW: i64 = 1_781_103_600_000; // 2026-06-10T15:00:00Z
const DAY: i64 = 86_400_000;

/// What the roles did, in order (`fetch:<turn>`, `draft:<turn>`, `hook:<turn>`, `send`).
type Trace = Rc<RefCell<Vec<String>>>;

/// Answers from a list; records which candidate each prompt was about.
struct Role {
    name: &'static str,
    replies: VecDeque<Result<String, String>>,
    trace: Trace,
    turns: Vec<String>,
}

impl Role {
    fn new(
        name: &'static str,
        replies: &[Result<&str, &str>],
        trace: &Trace,
        turns: &[String],
    ) -> Self {
        Role {
            name,
            replies: replies
                .iter()
                .map(|r| r.map(str::to_owned).map_err(str::to_owned))
                .collect(),
            trace: trace.clone(),
            turns: turns.to_vec(),
        }
    }
}

impl Agent for Role {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        let prompt = request
            .messages
            .iter()
            .map(|m| m.content.clone())
            .collect::<String>();
        let about = self
            .turns
            .iter()
            .find(|t| prompt.contains(&format!("[{t}]")))
            .cloned()
            .unwrap_or_default();
        self.trace
            .borrow_mut()
            .push(format!("{}:{about}", self.name));
        match self.replies.pop_front() {
            Some(Ok(text)) => AgentTurn::Reply { text, usage: None },
            Some(Err(message)) => AgentTurn::Failed {
                class: castlog_core::event::FailureClass::Interruption,
                message,
            },
            None => AgentTurn::Exhausted(format!("{} has no more answers", self.name)),
        }
    }
}

/// Serves each message id a fixed answer (default: a live copy of the candidate).
struct Source {
    answers: BTreeMap<String, Fetched>,
    turns: BTreeMap<String, String>,
    trace: Trace,
}

impl Fetcher for Source {
    fn fetch(&mut self, _channel: &str, message: &str) -> Fetched {
        let turn = self.turns.get(message).cloned().unwrap_or_default();
        self.trace.borrow_mut().push(format!("fetch:{turn}"));
        self.answers
            .get(message)
            .cloned()
            .unwrap_or(Fetched::Response {
                status: 404,
                payload: Value::Null,
            })
    }
}

/// Counts sends and answers with a fixed outcome.
struct Outbox {
    outcome: SendOutcome,
    sent: Vec<(String, String)>,
    trace: Trace,
}

impl Sender for Outbox {
    fn send(&mut self, post: &Outbound<'_>) -> SendOutcome {
        self.trace.borrow_mut().push("send".into());
        self.sent
            .push((post.destination.to_owned(), post.body.to_owned()));
        self.outcome.clone()
    }
    fn spec(&self) -> String {
        "test:outbox".into()
    }
}

/// One candidate of a scenario.
#[derive(Clone)]
struct Person {
    turn: String,
    actor: u32,
    age_days: i64,
    text: String,
}

fn person(turn: &str, actor: u32, age_days: i64, text: &str) -> Person {
    Person {
        turn: turn.into(),
        actor,
        age_days,
        text: format!("[{turn}] {text}"),
    }
}

fn message_id(p: &Person) -> String {
    let ms = NOW - p.age_days * DAY + i64::from(p.actor);
    (((ms - DISCORD_EPOCH_MS) as u64) << 22).to_string()
}

fn input_of(people: &[Person]) -> EngageInput {
    let results: Vec<Value> = people
        .iter()
        .map(|p| {
            json!({"text": p.text, "provenance": {
                "canonical_turn_id": p.turn, "source_role": "requester",
                "actor_id": format!("actor:discord:{}", p.actor), "origin_channel_id": "111",
                "source_message_id": message_id(p)}})
        })
        .collect();
    let sources: BTreeMap<String, Value> = people
        .iter()
        .map(|p| {
            (
                p.turn.clone(),
                json!({"message_id": message_id(p), "channel_id": "111", "guild_id": "g",
                       "author_id": p.actor.to_string(),
                       "source_actor_id": format!("actor:discord:{}", p.actor)}),
            )
        })
        .collect();
    let doc = json!({
        "conversation_id": "conv",
        "now": NOW,
        "results": results,
        "sources": sources,
        "allowlist": {"source_channel_ids": ["111"], "post_channel_ids": ["999"]},
    });
    input::parse(&doc.to_string()).unwrap()
}

fn live(p: &Person) -> Fetched {
    Fetched::Response {
        status: 200,
        payload: json!({"author": {"id": p.actor.to_string()}, "channel_id": "111",
                        "content": p.text}),
    }
}

/// A scenario: people, live answers, role replies, and an optional sender.
struct Run<'a> {
    people: Vec<Person>,
    fetched: BTreeMap<String, Fetched>,
    hooks: Vec<Result<&'a str, &'a str>>,
    drafts: Vec<Result<&'a str, &'a str>>,
    verdicts: Vec<Result<&'a str, &'a str>>,
    send: Option<SendOutcome>,
}

const FAITHFUL: Result<&str, &str> = Ok(r#"{"asserts": false, "presupposes": true}"#);

impl<'a> Run<'a> {
    fn new(people: Vec<Person>) -> Self {
        let fetched = people.iter().map(|p| (message_id(p), live(p))).collect();
        Run {
            people,
            fetched,
            hooks: Vec::new(),
            drafts: Vec::new(),
            verdicts: vec![FAITHFUL; 12],
            send: None,
        }
    }

    /// One member starting ss31 three days ago (a timed candidate) and a drafter that
    /// answers `draft`.
    fn ss31(draft: &'a str) -> Self {
        let mut run = Run::new(vec![person("t1", 42, 3, "Adding ss31 (5mg) for 4 weeks.")]);
        run.drafts = vec![Ok(draft)];
        run
    }

    fn answer(mut self, turn: &str, fetched: Fetched) -> Self {
        let p = self.people.iter().find(|p| p.turn == turn).unwrap();
        self.fetched.insert(message_id(p), fetched);
        self
    }

    /// Runs on `log` as `cast`; returns the report, the trace and what was sent.
    fn on(
        self,
        log: &(impl EventLog + ?Sized),
        cast: &str,
    ) -> (EngagementReport, Vec<String>, Vec<(String, String)>) {
        let trace: Trace = Rc::default();
        let turns: Vec<String> = self.people.iter().map(|p| p.turn.clone()).collect();
        let mut qualifier = Role::new("hook", &self.hooks, &trace, &turns);
        let mut drafter = Role::new("draft", &self.drafts, &trace, &turns);
        let mut judge = Role::new("judge", &self.verdicts, &trace, &turns);
        let mut fetcher = Source {
            answers: self.fetched.clone(),
            turns: self
                .people
                .iter()
                .map(|p| (message_id(p), p.turn.clone()))
                .collect(),
            trace: trace.clone(),
        };
        let mut outbox = self.send.clone().map(|outcome| Outbox {
            outcome,
            sent: Vec::new(),
            trace: trace.clone(),
        });
        let input = input_of(&self.people);
        let report = engage(
            log,
            &CastId::new(cast),
            &input,
            Roles {
                qualifier: &mut qualifier,
                drafter: &mut drafter,
                judge: &mut judge,
                fetcher: &mut fetcher,
                sender: outbox.as_mut().map(|o| o as &mut dyn Sender),
            },
            NOW as u64,
            Value::Null,
            None,
        )
        .unwrap();
        let sent = outbox.map(|o| o.sent).unwrap_or_default();
        let trace = trace.borrow().clone();
        (report, trace, sent)
    }
}

fn question(q: &str) -> String {
    json!({ "question": q }).to_string()
}

fn count(report: &EngagementReport, stage: &str, reason: &str) -> usize {
    report
        .rejections
        .iter()
        .find(|g| g.stage == stage && g.reason == reason)
        .map_or(0, |g| g.count)
}

#[test]
fn item_1_a_dry_run_proposes_a_question_and_sends_nothing() {
    let log = InMemoryLog::new();
    let q = question("How is the ss31 treating your sleep?");
    let run = Run::ss31(&q);
    let (report, trace, _) = run.on(&log, "dry");
    assert_eq!(report.refused, "dry_run");
    assert_eq!(report.outcome, "timed");
    assert_eq!(report.question, "How is the ss31 treating your sleep?");
    assert!(report.quote.contains("Adding ss31"));
    assert!(report.live_verified);
    assert_eq!(report.send, "dry_run");
    assert!(!report.sent);
    assert!(!trace.contains(&"send".to_owned()));
    assert!(report.render(2).contains("NO MESSAGES WERE SENT"));
    let claim = report.claim.unwrap();
    assert!(claim.dry_run);
    assert_eq!(claim.destination, "999");
}

#[test]
fn item_6_a_deleted_source_leaves_nothing_to_send() {
    let log = InMemoryLog::new();
    let p = person("t1", 42, 3, "Adding ss31.");
    let run = Run::new(vec![p]).answer(
        "t1",
        Fetched::Response {
            status: 404,
            payload: Value::Null,
        },
    );
    let (report, trace, _) = run.on(&log, "gone");
    assert_eq!(report.refused, "no_verified_candidate");
    assert_eq!(count(&report, "live_source", "source_message_deleted"), 1);
    assert!(!report.live_verified);
    assert!(
        report
            .render(2)
            .contains("[live_source] source_message_deleted: 1")
    );
    assert!(!trace.iter().any(|t| t.starts_with("draft")));
}

#[test]
fn items_19_20_a_failed_draft_advances_and_each_draft_follows_its_own_fetch() {
    let log = InMemoryLog::new();
    let people = vec![
        person(
            "t1",
            41,
            3,
            "Adding ss31 (5mg) for 4 weeks, tracking sleep and HRV daily.",
        ),
        person("t2", 42, 3, "Trying 200mg magnesium at night."),
    ];
    let q = question("Has the magnesium changed your sleep?");
    let mut run = Run::new(people);
    run.drafts = vec![Ok(r#"{"question": ""}"#), Ok(&q)];
    let (report, trace, _) = run.on(&log, "fallback");
    assert_eq!(report.question, "Has the magnesium changed your sleep?");
    assert_eq!(report.candidate, "t2");
    assert_eq!(count(&report, "draft", "draft_rejected"), 1);
    let order: Vec<&str> = trace
        .iter()
        .map(String::as_str)
        .filter(|t| t.starts_with("fetch") || t.starts_with("draft"))
        .collect();
    assert_eq!(order, ["fetch:t1", "draft:t1", "fetch:t2", "draft:t2"]);
}

#[test]
fn item_19_at_most_three_drafter_calls_even_with_twelve_candidates() {
    let log = InMemoryLog::new();
    let people: Vec<Person> = (0..12)
        .map(|i| person(&format!("t{i:02}"), 50 + i, 3, "Adding ss31 for 4 weeks."))
        .collect();
    let mut run = Run::new(people);
    run.drafts = vec![Ok(r#"{"question": ""}"#); 12];
    let (report, trace, _) = run.on(&log, "cap");
    let drafts = trace.iter().filter(|t| t.starts_with("draft")).count();
    assert_eq!(drafts, 3);
    assert_eq!(report.refused, "every_draft_rejected");
    assert_eq!(report.outcome, "skip");
    let fetches: Vec<&String> = trace.iter().filter(|t| t.starts_with("fetch")).collect();
    let mut unique = fetches.clone();
    unique.dedup();
    assert_eq!(fetches.len(), unique.len(), "a message was fetched twice");
}

#[test]
fn item_21_the_walk_skips_a_404_and_stops_at_a_429() {
    let log = InMemoryLog::new();
    let people = vec![
        person(
            "t1",
            41,
            3,
            "Adding ss31 (5mg) for 4 weeks, tracking sleep and HRV daily.",
        ),
        person("t2", 42, 3, "Trying 200mg magnesium at night."),
    ];
    let q = question("Has the magnesium helped?");
    let mut run = Run::new(people.clone()).answer(
        "t1",
        Fetched::Response {
            status: 404,
            payload: Value::Null,
        },
    );
    run.drafts = vec![Ok(&q)];
    let (report, _, _) = run.on(&log, "skip-404");
    assert_eq!(report.candidate, "t2");

    let run = Run::new(people).answer(
        "t1",
        Fetched::Response {
            status: 429,
            payload: Value::Null,
        },
    );
    let (report, trace, _) = run.on(&log, "stop-429");
    assert_eq!(report.refused, "no_verified_candidate");
    assert_eq!(trace.iter().filter(|t| t.starts_with("fetch")).count(), 1);
    assert_eq!(count(&report, "live_source", "source_rate_limited"), 1);
}

#[test]
fn fix_the_live_text_must_contain_the_quote() {
    let log = InMemoryLog::new();
    let p = person("t1", 42, 3, "Adding ss31 (5mg) for 4 weeks.");
    let run = Run::new(vec![p]).answer(
        "t1",
        Fetched::Response {
            status: 200,
            payload: json!({"author": {"id": "42"}, "channel_id": "111",
                            "content": "Never mind, not starting anything."}),
        },
    );
    let (report, trace, _) = run.on(&log, "changed");
    assert_eq!(count(&report, "live_source", "source_content_mismatch"), 1);
    assert!(!trace.iter().any(|t| t.starts_with("draft")));
}

#[test]
fn item_14_the_hook_is_detected_once_and_carried_to_the_drafter() {
    let log = InMemoryLog::new();
    let people = vec![
        person(
            "t1",
            41,
            90,
            "Switched my magnesium to glycinate because of cramps.",
        ),
        person("t2", 42, 90, "Nothing much."),
    ];
    let hook = json!({"kind": "dose_or_compound_change", "evidence": "magnesium to glycinate"})
        .to_string();
    let q = question("Did the glycinate switch settle the cramps?");
    let mut run = Run::new(people);
    run.hooks = vec![Ok(&hook), Ok(r#"{"kind": ""}"#)];
    run.drafts = vec![Ok(&q)];
    let (report, trace, _) = run.on(&log, "hooks");
    assert_eq!(trace.iter().filter(|t| t.starts_with("hook")).count(), 2);
    assert_eq!(report.question_type, "personal");
    assert_eq!(report.hook_kind, "dose_or_compound_change");
    assert_eq!(count(&report, "continuation", "no_specific_hook"), 1);
}

#[test]
fn fix_an_unfaithful_timed_draft_is_never_selected() {
    let log = InMemoryLog::new();
    let q = question("How did the 10mg dose work out?");
    let mut run = Run::ss31(&q);
    run.verdicts = vec![Ok(r#"{"asserts": true, "reason": "invents a 10mg dose"}"#)];
    let (report, _, _) = run.on(&log, "unfaithful");
    assert_eq!(report.outcome, "skip");
    assert_eq!(report.refused, "every_draft_rejected");
    assert_eq!(count(&report, "draft", "fidelity"), 1);
    assert!(report.question.is_empty());
}

#[test]
fn fix_contradictory_rows_are_rejected_before_dedupe() {
    let log = InMemoryLog::new();
    let a = person("t1", 42, 3, "Adding ss31.");
    let mut input = input_of(&[a]);
    let mut forged = input.results[0].clone();
    if let Some(p) = forged.provenance.as_mut() {
        p.canonical_turn_id = "t9".into();
        p.actor_id = "actor:discord:666".into();
    }
    input.results.push(forged);
    let trace: Trace = Rc::default();
    let turns = vec!["t1".to_owned()];
    let report = engage(
        &log,
        &CastId::new("forged"),
        &input,
        Roles {
            qualifier: &mut Role::new("hook", &[], &trace, &turns),
            drafter: &mut Role::new("draft", &[], &trace, &turns),
            judge: &mut Role::new("judge", &[], &trace, &turns),
            fetcher: &mut Source {
                answers: BTreeMap::new(),
                turns: BTreeMap::new(),
                trace: trace.clone(),
            },
            sender: None,
        },
        NOW as u64,
        Value::Null,
        None,
    )
    .unwrap();
    assert_eq!(count(&report, "verify", "contradictory_speaker"), 2);
    assert_eq!(report.refused, "no_verified_candidate");
}

#[test]
fn items_4_5_22_a_second_run_the_same_day_posts_nothing() {
    let log = InMemoryLog::new();
    let q = question("How is the ss31 treating your sleep?");
    let staged = SendOutcome::Staged {
        message_id: "m-1".into(),
    };
    // The first draft fails; exactly one ledger row is written, and it is staged (22).
    let mut run = Run::new(vec![
        person(
            "t1",
            41,
            3,
            "Adding ss31 (5mg) for 4 weeks, tracking sleep and HRV daily.",
        ),
        person("t2", 42, 3, "Trying magnesium."),
    ]);
    run.drafts = vec![Err("composer down"), Ok(&q)];
    run.send = Some(staged.clone());
    let (report, _, sent) = run.on(&log, "first");
    assert_eq!(report.send, "staged");
    assert_eq!(report.refused, "");
    assert_eq!(
        sent,
        [(
            "999".to_owned(),
            "How is the ss31 treating your sleep?".to_owned()
        )]
    );
    let ledger = ClaimsLedger::load(&log).unwrap();
    let rows: Vec<_> = ledger.claims().collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, ClaimStatus::Staged);
    assert_eq!(
        rows[0].fingerprint,
        Some(fingerprint("How is the ss31 treating your sleep?"))
    );

    // The same candidate again: a history rejection, nothing sent (4).
    let mut run = Run::new(vec![person("t2", 42, 3, "Trying magnesium.")]);
    run.drafts = vec![Ok(&q)];
    run.send = Some(staged.clone());
    let (report, _, sent) = run.on(&log, "again");
    assert!(sent.is_empty());
    assert_eq!(count(&report, "history", "thread_already_used"), 1);

    // Another member, thread and question the same day: refused by the day claim (5).
    let other = question("Did the cold plunges change your recovery?");
    let mut run = Run::new(vec![person(
        "t3",
        43,
        4,
        "Started cold plunges 3 times a week.",
    )]);
    run.drafts = vec![Ok(&other)];
    run.send = Some(staged);
    let (report, _, sent) = run.on(&log, "other");
    assert!(sent.is_empty());
    assert!(
        report.refused.starts_with("day_already_claimed"),
        "{}",
        report.refused
    );
    assert_eq!(report.send, "refused");
    assert!(report.render(2).contains("NO MESSAGES WERE SENT"));
}

#[test]
fn items_26_27_and_fixes_a_failed_send_keeps_the_report_and_the_day() {
    let log = InMemoryLog::new();
    let q = question("How is the ss31 treating your sleep?");
    let mut run = Run::ss31(&q);
    run.send = Some(SendOutcome::Unknown {
        reason: "send_outcome_unknown: the sender exited with code 1".into(),
    });
    let (report, trace, sent) = run.on(&log, "unknown");
    assert_eq!(sent.len(), 1);
    // The claim was recorded before the sender ran.
    let kinds: Vec<String> = log
        .read(&CastId::new("unknown"), Seq::FIRST, None)
        .unwrap()
        .into_iter()
        .map(|r| r.kind)
        .collect();
    let claimed = kinds.iter().position(|k| k == "post_claimed").unwrap();
    let unknown = kinds
        .iter()
        .position(|k| k == "post_outcome_unknown")
        .unwrap();
    assert!(claimed < unknown);
    assert!(trace.contains(&"send".to_owned()));
    // The report survives the failure and says a send happened.
    assert_eq!(report.refused, "send_outcome_unknown");
    assert!(report.sent);
    assert_eq!(report.send, "unknown");
    let text = report.render(2);
    assert!(!text.contains("NO MESSAGES WERE SENT"), "{text}");
    assert!(text.contains("A MESSAGE MAY HAVE BEEN SENT"));
    assert!(report.finished);
    let ledger = ClaimsLedger::load(&log).unwrap();
    assert_eq!(ledger.pending().count(), 1);

    // A retry the same day refuses without sending again.
    let other = question("Did the cold plunges change your recovery?");
    let mut run = Run::new(vec![person(
        "t3",
        43,
        4,
        "Started cold plunges 3 times a week.",
    )]);
    run.drafts = vec![Ok(&other)];
    run.send = Some(SendOutcome::Staged {
        message_id: "m".into(),
    });
    let (report, _, sent) = run.on(&log, "retry");
    assert!(sent.is_empty());
    assert!(report.refused.starts_with("day_already_claimed"));
}

/// Two runs racing for one day: the other run claims the day after this run's ledger check
/// and before its own claim; the compare-and-set on the ledger chain refuses this run, and its
/// sender never runs.
#[test]
fn a_run_that_loses_the_day_race_is_refused_without_sending() {
    let log = RivalLog::against("late");
    let q = question("How is the ss31 treating your sleep?");
    let mut run = Run::ss31(&q);
    run.send = Some(SendOutcome::Staged {
        message_id: "m-1".into(),
    });
    let (report, _, sent) = run.on(&log, "late");
    assert!(sent.is_empty(), "the sender ran: {sent:?}");
    assert!(
        report.refused.starts_with("day_already_claimed"),
        "{}",
        report.refused
    );
    assert_eq!(report.send, "refused");
    assert_lost_to_the_rival(&log, "late");
}
