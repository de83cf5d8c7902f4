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
    /// Set when it is the cost that crossed it (`percent` is then the cost's share of the cost
    /// budget); absent for the token warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostUse>,
}

/// What a cost warning measured (`budget.maxCostUsd` with a price table): in millionths of a
/// US dollar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostUse {
    /// Cost of every priced reply so far.
    pub used_micros: u64,
    /// The cost budget in force.
    pub limit_micros: u64,
}

/// What one reply cost, priced by the loadout's price table when the reply was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyCost {
    /// The price table's entry used (the materia's `model`, or `*`).
    pub model: String,
    /// The cost, in millionths of a US dollar.
    pub micros: u64,
}

/// Millionths of a dollar as dollars, with two to six decimals (`$0.40`, `$0.1329`, `$2.00`).
pub fn dollars(micros: u64) -> String {
    let fraction = format!("{:06}", micros % 1_000_000);
    let kept = fraction.trim_end_matches('0');
    let kept = if kept.len() < 2 { &fraction[..2] } else { kept };
    format!("${}.{kept}", micros / 1_000_000)
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

#[cfg(test)]
mod tests {
    use super::dollars;

    #[test]
    fn dollars_show_two_to_six_decimals() {
        assert_eq!(dollars(400_000), "$0.40");
        assert_eq!(dollars(132_000), "$0.132");
        assert_eq!(dollars(27_900), "$0.0279");
        assert_eq!(dollars(2_000_001), "$2.000001");
        assert_eq!(dollars(0), "$0.00");
        assert_eq!(dollars(12_340_000), "$12.34");
    }
}
