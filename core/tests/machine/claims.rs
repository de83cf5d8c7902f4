//! Post sockets and the claim state machine: claim before send, outcomes routing like
//! satisfied / not_satisfied, the day rule, at most once per step (also across a recast), and a
//! person's resolution. The time of every decision is `harness::env()`:
//! 2023-11-14T22:13:20Z, which is 2023-11-14 in New York and in UTC.

use castlog_core::claims::ClaimStatus;
use castlog_core::event::{CastForked, Event, Resolution, Response};
use castlog_core::id::{CastId, ClaimId, Digest};
use castlog_core::input::{HeldDay, Input, SendOutcome};
use castlog_core::loadout::load_config;
use castlog_core::machine::decide::Rejection;
use castlog_core::machine::{CastState, Phase, Status};
use serde_json::{Value, json};

use crate::harness::{Cast, config, given, kinds};

/// Build (text, assigns `announcement`) → Announce (post) → Eval (json; not_satisfied goes back
/// to Announce once).
fn post_loadout(body: &str, zone: Option<&str>) -> Value {
    let mut cfg = config(json!({
        "entry": "Socket-1",
        "sockets": {
            "Socket-1": { "materia": "Build", "parse": "text", "assign": { "announcement": "$" },
                          "edges": [{ "when": "always", "to": "Socket-2" }] },
            "Socket-2": { "materia": "Announce", "assign": { "posted_as": "$.message_id" },
                          "edges": [{ "when": "satisfied", "to": "Socket-3" },
                                    { "when": "not_satisfied", "to": "end" }] },
            "Socket-3": { "materia": "Eval", "parse": "json",
                          "edges": [{ "when": "satisfied", "to": "end" },
                                    { "when": "not_satisfied", "to": "Socket-2",
                                      "maxTraversals": 1 }] }
        }
    }));
    let mut announce = json!({ "type": "post", "label": "Announce", "destination": "staging",
                               "body": body });
    if let Some(zone) = zone {
        announce["zone"] = json!(zone);
    }
    cfg["materia"]["Announce"] = announce;
    cfg
}

/// A cast waiting at the post socket.
fn at_post(body: &str) -> Cast {
    let mut cast = given(&post_loadout(body, None));
    cast.reply("Release 1.2 is out.");
    assert_eq!(cast.phase(), Some(Phase::AwaitingPost));
    assert_eq!(cast.status(), Status::Running);
    cast
}

fn start(dry_run: bool) -> Input {
    Input::StartPost {
        dry_run,
        held: Vec::new(),
        sent_before: None,
    }
}

fn claimed_id(events: &[Event]) -> ClaimId {
    events
        .iter()
        .find_map(|e| match e {
            Event::PostClaimed(c) => Some(c.claim.clone()),
            _ => None,
        })
        .expect("a post_claimed event")
}

#[test]
fn a_dry_run_claims_with_dry_run_and_routes_like_satisfied() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let events = cast.when(start(true));
    assert_eq!(
        kinds(&events)[..3],
        ["post_claimed", "socket_completed", "data_assigned"]
    );
    let claimed = of!(events, PostClaimed);
    assert!(claimed[0].dry_run);
    assert_eq!(claimed[0].day, "2023-11-14");
    assert_eq!(claimed[0].destination, "staging");
    assert_eq!(of!(events, SocketCompleted)[0].satisfied, Some(true));
    assert_eq!(cast.socket(), "Socket-3");
    assert_eq!(
        cast.state.claims.values().next().map(|c| c.status),
        Some(ClaimStatus::DryRun)
    );
}

#[test]
fn a_real_post_is_claimed_first_and_waits_for_the_sender() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let events = cast.when(start(false));
    // The claim is the whole decision: nothing routes until the sender has answered.
    assert_eq!(kinds(&events), ["post_claimed"]);
    assert_eq!(cast.phase(), Some(Phase::AwaitingPostOutcome));
    assert_eq!(cast.status(), Status::AwaitingAgent);
    let claim = claimed_id(&events);
    let events = cast.when(Input::PostOutcome {
        claim: claim.clone(),
        outcome: SendOutcome::Staged {
            message_id: "m-1".into(),
        },
    });
    assert_eq!(kinds(&events)[..2], ["post_staged", "socket_completed"]);
    assert_eq!(cast.data()["posted_as"], "m-1");
    assert_eq!(cast.socket(), "Socket-3");
    assert_eq!(cast.state.claims[&claim].status, ClaimStatus::Staged);
}

#[test]
fn a_refusal_routes_like_not_satisfied() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&cast.when(start(false)));
    let events = cast.when(Input::PostOutcome {
        claim,
        outcome: SendOutcome::Refused {
            reason: "webhook_refused: 403".into(),
        },
    });
    assert_eq!(of!(events, SocketCompleted)[0].satisfied, Some(false));
    assert_eq!(cast.status(), Status::Completed);
    assert!(
        cast.data()["context"]
            .as_str()
            .unwrap()
            .contains("webhook_refused")
    );
}

#[test]
fn an_unknown_outcome_keeps_the_claim_pending_and_resume_sends_nothing() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&cast.when(start(false)));
    let events = cast.when(Input::PostOutcome {
        claim: claim.clone(),
        outcome: SendOutcome::Unknown {
            reason: "send_outcome_unknown: exit 1".into(),
        },
    });
    assert_eq!(kinds(&events), ["post_outcome_unknown"]);
    assert_eq!(cast.status(), Status::AwaitingAgent);
    assert_eq!(cast.state.claims[&claim].status, ClaimStatus::Pending);
    // Resume records itself and nothing else: no new claim, no send.
    assert_eq!(kinds(&cast.when(Input::Resume)), ["cast_resumed"]);
    assert_eq!(cast.phase(), Some(Phase::AwaitingPostOutcome));
    // A second start is refused: the post socket is not waiting for one.
    assert!(matches!(
        cast.rejects(start(false)),
        Rejection::NotNow { .. }
    ));
    // A person says it went out after all: the socket completes like satisfied.
    let events = cast.when(Input::ResolveClaim {
        claim,
        message_id: Some("m-9".into()),
    });
    assert_eq!(kinds(&events)[..2], ["post_resolved", "socket_completed"]);
    assert_eq!(cast.data()["posted_as"], "m-9");
    assert_eq!(cast.socket(), "Socket-3");
}

#[test]
fn abandoning_a_pending_claim_routes_like_not_satisfied() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&cast.when(start(false)));
    let events = cast.when(Input::ResolveClaim {
        claim: claim.clone(),
        message_id: None,
    });
    assert_eq!(of!(events, SocketCompleted)[0].satisfied, Some(false));
    assert_eq!(cast.state.claims[&claim].status, ClaimStatus::Abandoned);
    assert_eq!(cast.status(), Status::Completed);
}

#[test]
fn illegal_resolutions_name_the_current_state_and_record_nothing() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&cast.when(start(false)));
    cast.when(Input::PostOutcome {
        claim: claim.clone(),
        outcome: SendOutcome::Staged {
            message_id: "m-1".into(),
        },
    });
    let rejection = cast.rejects(Input::ResolveClaim {
        claim: claim.clone(),
        message_id: None,
    });
    assert!(matches!(rejection, Rejection::Claim(_)));
    assert!(rejection.to_string().contains("is staged"), "{rejection}");
    // staged → approved → posted is legal, posted → declined is not.
    cast.when(Input::ResolveClaimAs {
        claim: claim.clone(),
        resolution: Resolution::Approved,
    });
    cast.when(Input::ResolveClaimAs {
        claim: claim.clone(),
        resolution: Resolution::Posted,
    });
    let rejection = cast.rejects(Input::ResolveClaimAs {
        claim,
        resolution: Resolution::Declined,
    });
    assert!(rejection.to_string().contains("is posted"), "{rejection}");
    let unknown = cast.rejects(Input::ResolveClaim {
        claim: ClaimId::new("clm-nope"),
        message_id: None,
    });
    assert!(unknown.to_string().contains("not a claim of this cast"));
}

#[test]
fn a_response_is_recorded_on_a_sent_claim_without_moving_its_status() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&cast.when(start(false)));
    let ignored = Input::RecordResponse {
        claim: claim.clone(),
        response: Response::Ignored,
    };
    // Pending: the post may not have gone out, so nobody can have ignored it.
    let rejection = cast.rejects(ignored.clone());
    assert!(
        rejection.to_string().contains("is pending") && rejection.to_string().contains("went out"),
        "{rejection}"
    );
    cast.when(Input::PostOutcome {
        claim: claim.clone(),
        outcome: SendOutcome::Staged {
            message_id: "m-1".into(),
        },
    });
    assert_eq!(kinds(&cast.when(ignored)), ["post_response_recorded"]);
    let recorded = &cast.state.claims[&claim];
    assert_eq!(recorded.status, ClaimStatus::Staged);
    assert_eq!(recorded.response, Some(Response::Ignored));
    // A correction replaces it; the state machine still runs on.
    cast.when(Input::RecordResponse {
        claim: claim.clone(),
        response: Response::Answered,
    });
    cast.when(Input::ResolveClaimAs {
        claim: claim.clone(),
        resolution: Resolution::Approved,
    });
    assert_eq!(cast.state.claims[&claim].response, Some(Response::Answered));
    assert_eq!(cast.state.claims[&claim].status, ClaimStatus::Approved);
}

#[test]
fn a_day_held_by_another_claim_is_refused_before_claiming() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let events = cast.when(Input::StartPost {
        dry_run: false,
        held: vec![
            HeldDay {
                claim: ClaimId::new("clm-yesterday"),
                day: "2023-11-13".into(),
            },
            HeldDay {
                claim: ClaimId::new("clm-other"),
                day: "2023-11-14".into(),
            },
        ],
        sent_before: None,
    });
    assert!(of!(events, PostClaimed).is_empty(), "nothing is claimed");
    let refused = of!(events, PostRefused);
    assert_eq!(refused[0].held_by, Some(ClaimId::new("clm-other")));
    assert!(refused[0].reason.starts_with("day_already_claimed"));
    assert_eq!(of!(events, SocketCompleted)[0].satisfied, Some(false));
    assert_eq!(cast.status(), Status::Completed);
}

/// A step a cast earlier in the lineage sent (after the fork point, so not inherited) is not
/// sent again, whatever the day: refused by name, naming that claim, with no day recorded
/// (which is how a re-decide tells this refusal from a held day).
#[test]
fn a_step_an_earlier_run_sent_is_refused_before_claiming() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let events = cast.when(Input::StartPost {
        dry_run: false,
        held: Vec::new(),
        sent_before: Some(ClaimId::new("clm-parent")),
    });
    assert!(of!(events, PostClaimed).is_empty(), "nothing is claimed");
    let refused = of!(events, PostRefused);
    assert_eq!(refused[0].held_by, Some(ClaimId::new("clm-parent")));
    assert_eq!(refused[0].day, None);
    assert!(
        refused[0].reason.starts_with("sent_by_an_earlier_run")
            && refused[0].reason.contains("clm-parent"),
        "{}",
        refused[0].reason
    );
    assert_eq!(of!(events, SocketCompleted)[0].satisfied, Some(false));
}

#[test]
fn an_empty_body_is_refused_by_name() {
    let mut cast = at_post("state.nothing_here");
    let events = cast.when(start(false));
    assert!(of!(events, PostClaimed).is_empty());
    assert!(of!(events, PostRefused)[0].reason.starts_with("empty_body"));
}

#[test]
fn the_body_is_a_path_or_a_template() {
    let mut cast = at_post("state.announcement");
    let events = cast.when(start(true));
    assert_eq!(kinds(&events)[0], "post_claimed");
    let mut cast = at_post("{{state.announcement}} ({{request}})");
    let events = cast.when(start(true));
    assert_eq!(kinds(&events)[0], "post_claimed");
}

#[test]
fn a_step_that_posted_never_claims_again_when_visited_again() {
    let mut cast = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&cast.when(start(false)));
    cast.when(Input::PostOutcome {
        claim,
        outcome: SendOutcome::Staged {
            message_id: "m-1".into(),
        },
    });
    // Eval is not satisfied: back to Announce, whose step already posted.
    let events = cast.json(&json!({ "satisfied": false, "context": "again" }));
    assert!(of!(events, PostClaimed).is_empty());
    let completed = of!(events, SocketCompleted);
    let again = completed.last().unwrap();
    assert_eq!(again.socket.as_str(), "Socket-2");
    assert_eq!(again.satisfied, Some(true));
    assert_eq!(again.parsed.as_ref().unwrap()["message_id"], "m-1");
    assert_eq!(cast.socket(), "Socket-3");
}

/// The forked state of `parent` (as `fold` builds it for a recast).
fn fork(parent: &CastState) -> CastState {
    CastState::forked(
        parent,
        &CastForked {
            cast: CastId::new("child"),
            parent: parent.cast.clone(),
            parent_seq: parent.head,
            parent_hash: Digest::ZERO,
            loadout_hash: None,
            loadout: None,
            workdir: None,
            tools: None,
        },
    )
    .unwrap()
}

#[test]
fn a_recast_inherits_a_staged_claim_and_never_posts_it_again() {
    let mut parent = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&parent.when(start(false)));
    parent.when(Input::PostOutcome {
        claim: claim.clone(),
        outcome: SendOutcome::Staged {
            message_id: "m-1".into(),
        },
    });
    parent.settle();
    let mut child = Cast {
        state: fork(&parent.state),
        log: Vec::new(),
        first: Vec::new(),
    };
    assert_eq!(child.state.claims[&claim].cast.as_str(), "cast-1");
    let events = child.json(&json!({ "satisfied": false, "context": "post it again" }));
    assert!(of!(events, PostClaimed).is_empty(), "{:?}", kinds(&events));
    let completed = of!(events, SocketCompleted);
    let parsed = completed.last().unwrap().parsed.clone().unwrap();
    assert_eq!(parsed["inherited"], true);
    assert_eq!(parsed["claim"], claim.as_str());
    // The child cannot resolve the parent's claim: it lives in the parent's log.
    assert!(
        child
            .rejects(Input::ResolveClaimAs {
                claim,
                resolution: Resolution::Approved,
            })
            .to_string()
            .contains("not a claim of this cast")
    );
}

/// A parent whose post claim is pending, and a recast of it at that point.
fn pending_parent_and_child() -> (Cast, ClaimId, Cast) {
    let mut parent = at_post("Announcement: {{state.announcement}}");
    let claim = claimed_id(&parent.when(start(false)));
    let child = Cast {
        state: fork(&parent.state),
        log: Vec::new(),
        first: Vec::new(),
    };
    (parent, claim, child)
}

#[test]
fn a_recast_of_a_pending_claim_waits_then_adopts_its_resolution() {
    let (mut parent, claim, mut child) = pending_parent_and_child();
    assert_eq!(child.phase(), Some(Phase::AwaitingPostOutcome));
    assert_eq!(kinds(&child.when(Input::Resume)), ["cast_resumed"]);
    assert!(matches!(
        child.rejects(start(false)),
        Rejection::NotNow { .. }
    ));
    assert_eq!(child.state.claims[&claim].status, ClaimStatus::Pending);
    // The parent's own claim cannot adopt anything: a person resolves it there.
    let own = parent.rejects(Input::InheritedClaimResolved {
        claim: claim.clone(),
        status: ClaimStatus::Staged,
        message_id: Some("m-2".into()),
    });
    assert!(own.to_string().contains("this cast's own"), "{own}");
    // Resolved in the parent's log: the child adopts it and its post socket goes on.
    let events = child.when(Input::InheritedClaimResolved {
        claim: claim.clone(),
        status: ClaimStatus::Staged,
        message_id: Some("m-2".into()),
    });
    assert_eq!(
        kinds(&events)[..2],
        ["post_resolution_inherited", "socket_completed"]
    );
    let adopted = of!(events, PostResolutionInherited);
    assert_eq!(adopted[0].owner.as_str(), "cast-1");
    let parsed = of!(events, SocketCompleted)[0].parsed.clone().unwrap();
    assert_eq!(
        (parsed["inherited"].clone(), parsed["message_id"].clone()),
        (json!(true), json!("m-2"))
    );
    assert_eq!(child.data()["posted_as"], "m-2");
    assert_eq!(child.socket(), "Socket-3");
    // Only once: it is no longer pending here.
    let again = child.rejects(Input::InheritedClaimResolved {
        claim,
        status: ClaimStatus::Abandoned,
        message_id: None,
    });
    assert!(again.to_string().contains("is staged here"), "{again}");
}

#[test]
fn an_inherited_claim_abandoned_in_its_owner_routes_like_not_satisfied() {
    let (_, claim, mut child) = pending_parent_and_child();
    let events = child.when(Input::InheritedClaimResolved {
        claim: claim.clone(),
        status: ClaimStatus::Abandoned,
        message_id: None,
    });
    assert_eq!(of!(events, SocketCompleted)[0].satisfied, Some(false));
    let context = child.data()["context"].as_str().unwrap().to_owned();
    assert!(context.contains("abandoned in cast cast-1"), "{context}");
    assert_eq!(child.state.claims[&claim].status, ClaimStatus::Abandoned);
    assert_eq!(child.status(), Status::Completed);
}

#[test]
fn the_claim_day_follows_the_configured_zone() {
    // 22:13Z on the 14th is already the 15th at +02:00.
    let mut cast = given(&post_loadout("{{state.announcement}}", Some("+02:00")));
    cast.reply("Release 1.2 is out.");
    let events = cast.when(start(true));
    assert_eq!(of!(events, PostClaimed)[0].day, "2023-11-15");
}

#[test]
fn claim_ids_and_attempts_are_deterministic() {
    let run = || {
        let mut cast = at_post("{{state.announcement}}");
        let first = claimed_id(&cast.when(start(true)));
        // Not satisfied at Eval: back to Announce; a dry run does not hold the step.
        let events = cast.json(&json!({ "satisfied": false, "context": "again" }));
        assert_eq!(
            cast.phase(),
            Some(Phase::AwaitingPost),
            "{:?}",
            kinds(&events)
        );
        let second = claimed_id(&cast.when(start(true)));
        (first, second, cast.state.claims[&second_key(&cast)].attempt)
    };
    fn second_key(cast: &Cast) -> ClaimId {
        cast.state
            .claims
            .values()
            .max_by_key(|c| c.attempt)
            .unwrap()
            .claim
            .clone()
    }
    let (a1, a2, attempt) = run();
    let (b1, b2, _) = run();
    assert_eq!((a1.clone(), a2.clone()), (b1, b2));
    assert_ne!(a1, a2);
    assert_eq!(attempt, 2);
}

#[test]
fn post_materia_are_checked_at_load() {
    let load = |announce: Value| {
        let mut cfg = post_loadout("x", None);
        cfg["materia"]["Announce"] = announce;
        load_config(&cfg.to_string()).map(|_| ()).unwrap_err()
    };
    let err = load(json!({ "type": "post", "destination": "d", "body": "b",
                            "zone": "Europe/Paris" }));
    assert_eq!(err.path, "materia.Announce.zone");
    assert!(err.reason.contains("unknown time zone"));
    let err = load(json!({ "type": "post", "destination": "d", "body": "b", "post": true }));
    assert!(err.reason.contains("only by `--post`"), "{err}");
    let err = load(json!({ "type": "post", "body": "b" }));
    assert_eq!(err.path, "materia.Announce.destination");
    let err = load(json!({ "type": "post", "destination": "d", "body": "b", "prompt": "p" }));
    assert_eq!(err.path, "materia.Announce.prompt");
}
