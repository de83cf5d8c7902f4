//! Running a judge over fidelity fixtures: each fixture is one prompt to the judge, read with
//! the engagement runner's own rules, so the card scores exactly what an engage run would do.

use castlog_replay::agent::{Agent, AskError, ask};

use crate::pipeline::draft::{judge_prompt, read_verdict};
use crate::pipeline::scorecard::{Fixture, FixtureScore, Scorecard};

/// Asks `judge` about every fixture, in order, and scores its verdicts.
pub fn score(judge: &mut dyn Agent, fixtures: &[Fixture]) -> Scorecard {
    let results = fixtures
        .iter()
        .map(|fixture| {
            let reply = ask(judge, judge_prompt(&fixture.quote, &fixture.draft));
            let verdict = read_verdict(reply.as_deref().map_err(AskError::message));
            FixtureScore::of(fixture, verdict)
        })
        .collect();
    Scorecard { results }
}
