//! Placement policies as data.
//!
//! Producers give every entry its natural layer and role (the `recommended` view). A policy
//! says which source types are *mandates* (they leave the inline flow for the trailing slot),
//! their precedence, whether the trailing slot is one consolidated block, and which source types
//! it re-roles (the `legacy` view moves four escalation entries into the system fold, exactly as
//! the audited renderer did).

/// A mandate source type and its precedence (lower is stronger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mandate {
    /// The source type.
    pub source_type: &'static str,
    /// Precedence; equal ranks keep entry order.
    pub rank: u8,
    /// The `## ` header of the consolidated block when this mandate leads it.
    pub header: &'static str,
}

/// A re-roling of one source type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Override {
    /// The source type.
    pub source_type: &'static str,
    /// Its layer under this policy.
    pub layer: u8,
    /// Its role under this policy.
    pub role: super::Role,
}

/// A placement policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `recommended` or `legacy`.
    pub name: &'static str,
    /// Mandate source types with precedence.
    pub mandates: &'static [Mandate],
    /// The source type that is always appended to the trailing block (the completion signal),
    /// not a competing mandate.
    pub appended: Option<&'static str>,
    /// One consolidated block with the single strongest mandate (lower mandates render inline),
    /// or every mandate joined (`legacy`).
    pub consolidate: bool,
    /// Re-roled source types.
    pub overrides: &'static [Override],
}

/// The escalation entries: mandates in spirit, whatever a policy does with them.
pub const ESCALATIONS: [&str; 6] = [
    "recoveryTicket",
    "retryFeedback",
    "reworkFeedback",
    "groundingFeedback",
    "rejectionFeedback",
    "remainingDelta",
];

/// The default: every escalation is a trailing mandate, one block, nothing per-turn in the fold.
pub const RECOMMENDED: Policy = Policy {
    name: "recommended",
    mandates: &[
        Mandate {
            source_type: "recoveryTicket",
            rank: 0,
            header: "## Recovery",
        },
        Mandate {
            source_type: "retryFeedback",
            rank: 1,
            header: "## Repair required",
        },
        Mandate {
            source_type: "groundingFeedback",
            rank: 2,
            header: "## Grounding required",
        },
        Mandate {
            source_type: "reworkFeedback",
            rank: 2,
            header: "## Rework required",
        },
        Mandate {
            source_type: "rejectionFeedback",
            rank: 3,
            header: "## Rejected",
        },
    ],
    appended: Some("remainingDelta"),
    consolidate: true,
    overrides: &[],
};

/// The audited behaviour: only retryFeedback trails; the other escalations fold into the system
/// message with the layer/role the audit's table lists; all trailing matches are joined.
pub const LEGACY: Policy = Policy {
    name: "legacy",
    mandates: &[Mandate {
        source_type: "retryFeedback",
        rank: 0,
        header: "",
    }],
    appended: None,
    consolidate: false,
    overrides: &[
        Override {
            source_type: "recoveryTicket",
            layer: 1,
            role: super::Role::System,
        },
        Override {
            source_type: "remainingDelta",
            layer: 1,
            role: super::Role::System,
        },
        Override {
            source_type: "groundingFeedback",
            layer: 1,
            role: super::Role::System,
        },
        Override {
            source_type: "rejectionFeedback",
            layer: 2,
            role: super::Role::System,
        },
        Override {
            source_type: "reworkFeedback",
            layer: 2,
            role: super::Role::System,
        },
    ],
};

impl Policy {
    /// The policy named `name`.
    pub fn named(name: &str) -> Option<&'static Policy> {
        match name {
            "recommended" => Some(&RECOMMENDED),
            "legacy" => Some(&LEGACY),
            _ => None,
        }
    }

    /// The mandate entry of `source_type`, if it is one under this policy.
    pub fn mandate(&self, source_type: &str) -> Option<&Mandate> {
        self.mandates.iter().find(|m| m.source_type == source_type)
    }
}
