//! The token budget's warning and raise (`budget.warnAtPercent`, `castlog budget`).
//!
//! After every reply, before the budget stop is checked, a cast that follows conformance rule 2
//! (`CONFORMANCE`) and has not been warned appends one `budget_warning` once its token use
//! reaches `warnAtPercent` of the budget in force (the reference's one-shot `budgetWarned`). A
//! reply that takes the use to the budget itself gives the stop (`allowance_exhausted`) and no
//! warning; a budget of 0 tokens is exhausted from the start. A cast recorded before
//! the rule never warns, so it re-decides as recorded.
//!
//! A raise (`Input::RaiseBudget`) must name more tokens than the budget in force; it is recorded
//! as `budget_raised`, which sets the tokens allowance's effective limit, and clears the warning
//! when the use is below the threshold of the new budget. It changes nothing else: a cast that
//! stopped on its budget stays failed until revive, which then continues without growing the
//! budget again while the use is below it.
//!
//! The cost budget (`budget.maxCostUsd`, kept only when the loadout has a price table) follows
//! the same rules in millionths of a dollar: each reply's cost is priced when it is recorded
//! (`AgentReplied::cost`, by the materia's `model` or the `*` entry), one `budget_warning` with
//! `cost` is given at `warnAtPercent` of it, and reaching it exhausts `Allowance::Cost`, which
//! revive grows by its configured size.

use super::decide::{Decider, Rejection};
use super::{CastState, Status};
use crate::event::{
    Allowance, AllowanceExhausted, BudgetRaised, BudgetWarning, CostUse, ReplyCost, Usage, dollars,
};
use crate::id::SocketId;

/// Whether `used` tokens are at least `percent` of `limit` (never for a zero limit).
pub(crate) fn at_threshold(used: u64, limit: u64, percent: f64) -> bool {
    limit > 0 && (used as f64) * 100.0 >= percent * (limit as f64)
}

impl CastState {
    /// The token budget in force: the configured `budget.maxTokens`, or what revive or a raise
    /// made of it.
    pub fn token_budget(&self) -> u64 {
        self.limit(&Allowance::Tokens, self.loadout.budget.max_tokens)
    }

    /// The cost budget in force, in millionths of a dollar: `budget.maxCostUsd` (kept only with
    /// a price table), or what revive made of it; `None` when the cast has none.
    pub fn cost_budget(&self) -> Option<u64> {
        let usd = self.loadout.budget.max_cost_usd?;
        let configured = (usd * 1_000_000.0).round();
        let configured = if configured.is_finite() && configured > 0.0 {
            configured as u64
        } else {
            0
        };
        Some(self.limit(&Allowance::Cost, configured))
    }
}

impl Decider<'_, '_> {
    /// Appends the one-shot `budget_warning` when the use first reaches the threshold.
    pub(super) fn warn_budget(&mut self) {
        let state = &self.state;
        if state.conformance < 2 || state.budget_warned {
            return;
        }
        let limit = state.token_budget();
        let used = state.usage.total();
        let threshold = state.loadout.budget.warn_at_percent;
        // A reply that reaches the budget itself stops the cast instead: the stop says more.
        if used >= limit || !at_threshold(used, limit, threshold) {
            return;
        }
        let percent = u64::try_from(u128::from(used) * 100 / u128::from(limit)).unwrap_or(u64::MAX);
        self.emit(BudgetWarning {
            used,
            limit,
            percent,
            threshold,
            cost: None,
        });
    }

    /// What a reply with `usage` at `socket` costs, when the loadout prices it.
    pub(super) fn reply_cost(&self, socket: &SocketId, usage: Option<&Usage>) -> Option<ReplyCost> {
        let usage = usage?;
        let (model, price) = self.state.loadout.price_at(socket)?;
        Some(ReplyCost {
            model: model.to_owned(),
            micros: price.micros(usage),
        })
    }

    /// Appends the one-shot cost `budget_warning` when the cost first reaches the threshold of
    /// the cost budget (below the budget itself, which gives the stop instead).
    pub(super) fn warn_cost(&mut self) {
        let state = &self.state;
        let Some(limit) = state.cost_budget() else {
            return;
        };
        let used = state.cost_micros;
        let threshold = state.loadout.budget.warn_at_percent;
        if state.cost_warned || used >= limit || !at_threshold(used, limit, threshold) {
            return;
        }
        let percent = u64::try_from(u128::from(used) * 100 / u128::from(limit)).unwrap_or(u64::MAX);
        self.emit(BudgetWarning {
            used: state.usage.total(),
            limit: state.token_budget(),
            percent,
            threshold,
            cost: Some(CostUse {
                used_micros: used,
                limit_micros: limit,
            }),
        });
    }

    /// Stops the cast when the cost reached the cost budget, as the token budget does.
    pub(super) fn over_cost(&mut self) -> bool {
        let Some(limit) = self.state.cost_budget() else {
            return false;
        };
        let used = self.state.cost_micros;
        if used < limit {
            return false;
        }
        let socket = self.state.current.as_ref().map(|c| c.socket.clone());
        self.emit(AllowanceExhausted {
            allowance: Allowance::Cost,
            count: used,
            limit,
        });
        self.fail(
            format!(
                "cost budget reached: {} used of {}; revive to extend the budget",
                dollars(used),
                dollars(limit)
            ),
            socket,
            Some(Allowance::Cost),
        );
        true
    }

    /// A person raises the token budget to `tokens`.
    pub(super) fn raise_budget(&mut self, tokens: u64) -> Result<(), Rejection> {
        let state = &self.state;
        let refuse = |reason: String| Rejection::NotNow {
            cast: state.cast.clone(),
            input: "a budget raise",
            reason,
        };
        if state.status == Status::Completed {
            return Err(refuse("it is completed".into()));
        }
        let previous = state.token_budget();
        if tokens <= previous {
            return Err(refuse(format!(
                "the budget is already {previous} tokens ({} used); give more than that",
                state.usage.total()
            )));
        }
        let used = state.usage.total();
        self.emit(BudgetRaised {
            tokens,
            previous,
            used,
        });
        Ok(())
    }
}
