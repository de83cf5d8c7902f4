//! Token budget events: the one-shot warning when use crosses `budget.warnAtPercent`, and a
//! person raising the budget (`castlog budget CAST N`, pi-materia's `/materia budget`).
//!
//! Exhaustion itself is an `allowance_exhausted` of the tokens allowance, so revive continues a
//! cast stopped by its budget as it does any other exhausted allowance.

use serde::{Deserialize, Serialize};

/// Token use crossed `budget.warnAtPercent` of the budget (once per cast, again only after a
/// raise brings the use back below the threshold).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetWarning {
    /// Tokens used so far (input plus output of every reply).
    pub used: u64,
    /// The token budget in force.
    pub limit: u64,
    /// `used` as a percentage of `limit`, rounded down to a whole percent.
    pub percent: u64,
    /// The configured threshold it crossed.
    pub threshold: f64,
}

/// A person raised the cast's token budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRaised {
    /// The new budget, in tokens.
    pub tokens: u64,
    /// The budget it replaced.
    pub previous: u64,
    /// Tokens used when it was raised.
    pub used: u64,
}
