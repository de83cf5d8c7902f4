//! Selection: accepting one draft, and summarizing a run that selected nothing.
//!
//! castlog's fix: a draft is accepted only with a faithful verdict, whatever the question type
//! (the reference vetoed only `personal` drafts, so an unfaithful `timed` draft was selected),
//! and only when it is usable (the reference checked the text, not the draft's reason).

use super::draft::Draft;
use super::{Candidate, QuestionType, Rejection};

/// Accepts a draft or says why not, as the `draft` stage's `(reason, detail)`.
pub fn accept(
    candidate: &Candidate,
    draft: &Draft,
    faithful: bool,
    verdict_reason: &str,
) -> Result<QuestionType, (&'static str, String)> {
    if !draft.usable() {
        return Err(("draft_rejected", draft.reason.clone()));
    }
    let Some(kind) = candidate.question_type else {
        return Err(("draft_rejected", "unlabelled_candidate".into()));
    };
    if !faithful {
        let reason = if verdict_reason.is_empty() {
            "no draft survived the gate".to_owned()
        } else {
            verdict_reason.to_owned()
        };
        return Err(("fidelity", reason));
    }
    Ok(kind)
}

/// The dominant rejection of a run that selected nothing: `(stage, sentence)`. The most
/// frequent stage wins (ties: the one seen first), then the most frequent reason in it.
pub fn skip_summary(rejections: &[Rejection]) -> (String, String) {
    let mut stages: Vec<(&str, usize)> = Vec::new();
    for r in rejections {
        match stages.iter_mut().find(|(s, _)| *s == r.stage) {
            Some((_, n)) => *n += 1,
            None => stages.push((&r.stage, 1)),
        }
    }
    let Some(stage) = stages
        .iter()
        .fold(None::<(&str, usize)>, |best, &(s, n)| match best {
            Some((_, bn)) if bn >= n => best,
            _ => Some((s, n)),
        })
        .map(|(s, _)| s.to_owned())
    else {
        return (
            String::new(),
            "nothing survived: there were no candidates".into(),
        );
    };
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for r in rejections.iter().filter(|r| r.stage == stage) {
        match reasons.iter_mut().find(|(s, _)| *s == r.reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((&r.reason, 1)),
        }
    }
    let reason = reasons
        .iter()
        .fold(None::<(&str, usize)>, |best, &(s, n)| match best {
            Some((_, bn)) if bn >= n => best,
            _ => Some((s, n)),
        })
        .map_or("", |(s, _)| s);
    let sentence = format!("nothing survived; dominant rejection at '{stage}': {reason}");
    (stage, sentence)
}
