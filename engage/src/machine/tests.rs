//! The engage machine given the events so far, when a step comes, then the events it decides
//! (or its refusal); every decided run is also re-decided from its own events.

use castlog_core::event::{PostClaimed, PostResolved, PostStaged, Resolution};
use castlog_core::id::{ClaimId, Digest};
use serde_json::{Value, json};

use super::*;
use crate::event::{EngagementCandidateSeen, EngagementFinished};

fn started(post: bool) -> Step {
    Step::Start(EngagementStarted {
        conversation: "conv".into(),
        settings: json!({}),
        results: 2,
        post,
        specs: Value::Null,
    })
}

fn seen(id: &str, text: &str) -> Step {
    Step::See {
        candidate: CandidateId::new(id),
        source: json!({"turn_id": id, "source_message_id": "1", "actor_id": "actor:discord:1",
            "channel_id": "111", "text": text, "sent_ms": 0}),
    }
}

fn qualified(id: &str, kind: &str) -> Step {
    Step::Qualify(EngagementCandidateQualified {
        candidate: CandidateId::new(id),
        question_type: kind.into(),
        hook_kind: String::new(),
        hook_evidence: String::new(),
        stance: "anticipatory".into(),
    })
}

fn rejected(id: &str, stage: &str, reason: &str) -> Step {
    Step::Reject(EngagementCandidateRejected {
        candidate: CandidateId::new(id),
        stage: stage.into(),
        reason: reason.into(),
        detail: String::new(),
    })
}

fn judged(faithful: bool) -> Step {
    Step::Judge(EngagementFidelityJudged {
        candidate: CandidateId::new("t1"),
        attempt: 1,
        faithful,
        reason: String::new(),
    })
}

fn attempted(outcome: &str) -> Step {
    Step::Attempt(EngagementDraftAttempted {
        candidate: CandidateId::new("t1"),
        attempt: 1,
        draft: Some("How is it going?".into()),
        outcome: outcome.into(),
    })
}

fn selected() -> Step {
    Step::Select(EngagementDraftSelected {
        candidate: CandidateId::new("t1"),
        attempt: 1,
        draft: "How is it going?".into(),
    })
}

fn claimed(dry_run: bool) -> Step {
    Step::Post(Event::from(PostClaimed {
        claim: ClaimId::new("clm-1"),
        destination: "999".into(),
        day: "2026-06-10".into(),
        attempt: 1,
        body: Digest::ZERO,
        step: "engage:poster".into(),
        dry_run,
        tagged_actor: None,
        source_message_ids: Vec::new(),
        fingerprint: None,
    }))
}

/// Decides `steps` in order from a new state, folding each decision in; then re-decides the
/// recorded events from their first events alone (what `verify` does) and checks they agree.
fn given(steps: &[Step]) -> (EngageState, Vec<EngageRecord>) {
    let mut state = EngageState::new();
    let mut log = Vec::new();
    for step in steps {
        let events = state
            .decide(step)
            .unwrap_or_else(|e| panic!("{step:?}: {e}"));
        for event in &events {
            state.evolve(event);
        }
        log.extend(events);
    }
    let mut again = EngageState::new();
    let mut at = 0;
    while at < log.len() {
        let step = input_of(&log[at]).expect("a decision's first event");
        let events = again.decide(&step).unwrap();
        assert_eq!(events, log[at..at + events.len()], "re-decided at {at}");
        for event in &events {
            again.evolve(event);
        }
        at += events.len();
    }
    assert_eq!(again, state);
    (state, log)
}

fn finished(state: &EngageState) -> EngagementFinished {
    match state
        .decide(&Step::Finish { error: None })
        .unwrap()
        .as_slice()
    {
        [EngageRecord::Engage(EngageEvent::Finished(e))] => e.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_run_that_selects_nothing_ends_as_a_skip_named_by_its_most_frequent_rejection() {
    let (state, _) = given(&[
        started(false),
        rejected("t3", "collect", "not_authored_by_actor"),
        rejected("t4", "collect", "channel_not_sourceable"),
        seen("t1", "Adding ss31 for 4 weeks."),
        rejected("t1", "verify", "no_attested_source"),
    ]);
    let end = finished(&state);
    assert_eq!(
        (
            end.outcome.as_str(),
            end.refused.as_str(),
            end.skip_stage.as_str()
        ),
        ("skip", "no_verified_candidate", "collect")
    );
    assert!(!end.skip_reason.is_empty());
}

#[test]
fn the_ranking_is_scored_by_the_machine_best_first() {
    let (_, log) = given(&[
        started(false),
        seen("t1", "short"),
        seen(
            "t2",
            "Adding 5mg of ss31 for 4 weeks, will report back on sleep.",
        ),
        qualified("t1", "timed"),
        qualified("t2", "personal"),
        Step::Rank {
            pool: vec![CandidateId::new("t1"), CandidateId::new("t2")],
        },
    ]);
    let Some(EngageRecord::Engage(EngageEvent::Ranked(ranked))) = log.last() else {
        panic!("{log:?}")
    };
    let order: Vec<&str> = ranked.order.iter().map(|r| r.candidate.as_str()).collect();
    assert_eq!(order, ["t2", "t1"]);
}

#[test]
fn a_candidate_not_qualified_is_never_ranked() {
    let (state, _) = given(&[started(false), seen("t1", "text")]);
    let refused = state.decide(&Step::Rank {
        pool: vec![CandidateId::new("t1")],
    });
    assert!(
        matches!(refused, Err(Refusal::OutOfOrder { .. })),
        "{refused:?}"
    );
}

#[test]
fn a_draft_is_accepted_only_after_a_faithful_verdict_and_selected_only_once_accepted() {
    let base = [started(false), seen("t1", "text"), qualified("t1", "timed")];
    let (state, _) = given(&base);
    assert!(state.decide(&selected()).is_err());
    let (state, _) = given(&[base.to_vec(), vec![judged(false)]].concat());
    let refused = state.decide(&attempted("accepted")).unwrap_err();
    assert!(
        refused.to_string().contains("not judged faithful"),
        "{refused}"
    );
    let (state, _) = given(&[base.to_vec(), vec![judged(true), attempted("accepted")]].concat());
    assert_eq!(state.decide(&selected()).unwrap().len(), 1);
}

#[test]
fn a_dry_run_claims_without_sending_and_ends_as_dry_run() {
    let run = [
        started(false),
        seen("t1", "text"),
        qualified("t1", "timed"),
        judged(true),
        attempted("accepted"),
    ];
    let (state, _) = given(&run);
    assert!(
        state.decide(&claimed(true)).is_err(),
        "claimed before a selection"
    );
    let (state, _) = given(&[run.to_vec(), vec![selected()]].concat());
    assert!(
        state.decide(&claimed(false)).is_err(),
        "a dry run's claim may send"
    );
    let (state, _) = given(&[run.to_vec(), vec![selected(), claimed(true)]].concat());
    let staged = Step::Post(Event::from(PostStaged {
        claim: ClaimId::new("clm-1"),
        message_id: "m-1".into(),
    }));
    assert!(state.decide(&staged).is_err(), "a dry run sent");
    let end = finished(&state);
    assert_eq!(
        (end.outcome.as_str(), end.refused.as_str()),
        ("timed", "dry_run")
    );
}

#[test]
fn a_posting_run_ends_staged_and_its_claim_can_be_resolved_after_the_end() {
    let staged = Step::Post(Event::from(PostStaged {
        claim: ClaimId::new("clm-1"),
        message_id: "m-1".into(),
    }));
    let (state, _) = given(&[
        started(true),
        seen("t1", "text"),
        qualified("t1", "personal"),
        judged(true),
        attempted("accepted"),
        selected(),
        claimed(false),
        staged,
        Step::Finish { error: None },
    ]);
    assert!(state.finished);
    assert!(state.decide(&Step::Finish { error: None }).is_err());
    let resolve = |claim: &str| {
        Step::Post(Event::from(PostResolved {
            claim: ClaimId::new(claim),
            resolution: Resolution::Approved,
        }))
    };
    assert_eq!(state.decide(&resolve("clm-1")).unwrap().len(), 1);
    assert!(state.decide(&resolve("clm-other")).is_err());
}

#[test]
fn a_failed_schedule_check_ends_the_run_in_the_same_decision() {
    let (state, log) = given(&[
        started(false),
        Step::Schedule(EngagementScheduleChecked {
            key: "engagement:2026-06-10".into(),
            slot: "2026-06-10 11:32 EDT".into(),
            slot_ms: 0,
            already_posted: false,
            ok: false,
            reason: "before_slot".into(),
            detail: "the slot is later".into(),
        }),
    ]);
    assert!(state.finished);
    let Some(EngageRecord::Engage(EngageEvent::Finished(end))) = log.last() else {
        panic!("{log:?}")
    };
    assert_eq!(
        (end.refused.as_str(), end.skip_stage.as_str()),
        ("before_slot", "schedule")
    );
}

#[test]
fn an_error_ends_the_run_with_its_sentence() {
    let (state, _) = given(&[started(false)]);
    let end = match state
        .decide(&Step::Finish {
            error: Some("the disk is full".into()),
        })
        .unwrap()
        .as_slice()
    {
        [EngageRecord::Engage(EngageEvent::Finished(e))] => e.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (end.refused.as_str(), end.error.as_str()),
        ("error", "the disk is full")
    );
    let state = EngageState::new();
    assert!(
        state.decide(&seen("t1", "text")).is_err(),
        "before the start"
    );
    let event = EngagementCandidateSeen {
        candidate: CandidateId::new("t1"),
        source: Value::Null,
    };
    assert!(input_of(&event.into()).is_some());
}
