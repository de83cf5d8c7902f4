//! Placement policies as data.
//!
//! A policy is a JSON document (`policy/document.rs` reads and writes it, naming the field of
//! any error). It says:
//! - `fold`: which layers and roles fold into the leading system message;
//! - `mandates`: the source types that leave the inline flow for the trailing slot, with their
//!   precedence (`rank`, lower is stronger) and the `## ` header of the block each leads;
//! - `consolidation`: `strongest` (one block with the strongest mandate; the others render
//!   inline as user context) or `joined` (every mandate trails, joined by a blank line);
//! - `appended`: the source type always appended to the trailing block (the completion signal,
//!   not a competing mandate) and the block's header when no mandate leads it;
//! - `reRoles`: source types whose layer or role the policy changes, for every entry;
//! - `producerRoles`: the layer and role another system's producers gave a source type, applied
//!   only to castlog's own entries (castlog's producers give every entry its natural layer and
//!   role; `legacy` restates the audited producers' choices with these), never to entries given
//!   as data, which carry their producer's layer and role already;
//! - `reminder`: the source type that, folded, is re-emitted as a user reminder, and its prefix.
//!
//! `legacy` and `recommended` ship as such documents (`core/policies/*.json`, embedded in the
//! binary); their pinned renderings are the ones the compiled-in policies of earlier builds gave.

mod document;

use std::sync::LazyLock;

use super::Role;

pub use document::PolicyError;

/// A mandate source type and its precedence (lower is stronger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mandate {
    /// Source type of the entries this mandate ranks (`retryFeedback`, ...).
    pub source_type: String,
    /// Precedence; equal ranks keep entry order.
    pub rank: u8,
    /// The `## ` header of the consolidated block when this mandate leads it (may be empty
    /// when the policy joins its mandates).
    pub header: String,
}

/// A layer and role set for one source type (a re-roling or a producer's choice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// Source type of the entries this applies to.
    pub source_type: String,
    /// Its layer under this policy, or the entry's own.
    pub layer: Option<u8>,
    /// Its role under this policy, or the entry's own.
    pub role: Option<Role>,
}

/// What goes into the leading system message: an entry whose layer or role is listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fold {
    /// Layers that fold (`[0]` for both built-in policies).
    pub layers: Vec<u8>,
    /// Roles that fold (`[System]` for both built-in policies).
    pub roles: Vec<Role>,
}

/// How the trailing slot treats several mandates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consolidation {
    /// One block: the strongest mandate trails, the others render inline as user context.
    Strongest,
    /// Every mandate trails, joined by a blank line, without headers.
    Joined,
}

impl Consolidation {
    /// The document's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Consolidation::Strongest => "strongest",
            Consolidation::Joined => "joined",
        }
    }
}

/// The source type always appended to the trailing block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The source type (`remainingDelta`).
    pub source_type: String,
    /// The block's header when no mandate leads it (`## Remaining work`).
    pub header: String,
}

/// A folded source type re-emitted as a user reminder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reminder {
    /// The source type (`steeringNote`).
    pub source_type: String,
    /// The text put before the entry's own.
    pub prefix: String,
}

/// A placement policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `recommended`, `legacy` or a file's own name.
    pub name: String,
    /// A sentence or two for people.
    pub description: String,
    /// Which layers and roles fold into the leading system message.
    pub fold: Fold,
    /// Mandate source types with precedence.
    pub mandates: Vec<Mandate>,
    /// How several mandates share the trailing slot.
    pub consolidation: Consolidation,
    /// The completion signal, always appended to the trailing block.
    pub appended: Option<Appended>,
    /// Re-rolings applied to every entry.
    pub re_roles: Vec<Override>,
    /// Re-rolings applied only to castlog's own entries (see the module doc).
    pub producer_roles: Vec<Override>,
    /// Which folded source type is repeated as a user reminder; `None` for no reminder.
    pub reminder: Option<Reminder>,
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

/// The names of the built-in policies, the default first.
pub const BUILT_IN: [&str; 2] = ["recommended", "legacy"];

/// The built-in policies' documents, as shipped (`castlog placement --show-policy NAME`).
const DOCUMENTS: [(&str, &str); 2] = [
    (
        "recommended",
        include_str!("../../policies/recommended.json"),
    ),
    ("legacy", include_str!("../../policies/legacy.json")),
];

/// The default policy, read from its shipped document once.
pub static RECOMMENDED: LazyLock<Policy> = LazyLock::new(|| shipped(0));

/// The audited behaviour, read from its shipped document once.
pub static LEGACY: LazyLock<Policy> = LazyLock::new(|| shipped(1));

/// The shipped document `i`, read; the documents are pinned by this module's tests.
fn shipped(i: usize) -> Policy {
    Policy::parse(DOCUMENTS[i].1).expect("a shipped policy document reads (pinned by tests)")
}

fn built_in() -> [&'static Policy; 2] {
    [&RECOMMENDED, &LEGACY]
}

impl Policy {
    /// The built-in policy named `name`.
    pub fn named(name: &str) -> Option<&'static Policy> {
        built_in().into_iter().find(|p| p.name == name)
    }

    /// The default policy (`recommended`).
    pub fn recommended() -> &'static Policy {
        &RECOMMENDED
    }

    /// The shipped document of the built-in policy `name`, byte for byte.
    pub fn document_of(name: &str) -> Option<&'static str> {
        DOCUMENTS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// Whether `name` is a built-in policy's.
    pub fn is_built_in(name: &str) -> bool {
        BUILT_IN.contains(&name)
    }

    /// The mandate entry of `source_type`, if it is one under this policy.
    pub fn mandate(&self, source_type: &str) -> Option<&Mandate> {
        self.mandates.iter().find(|m| m.source_type == source_type)
    }

    /// Whether the trailing slot carries one consolidated block.
    pub fn consolidates(&self) -> bool {
        self.consolidation == Consolidation::Strongest
    }

    /// Whether `source_type` is the appended completion signal.
    pub fn appends(&self, source_type: &str) -> bool {
        self.appended
            .as_ref()
            .is_some_and(|a| a.source_type == source_type)
    }

    /// Whether an entry of `layer` and `role` folds.
    pub fn folds(&self, layer: u8, role: Role) -> bool {
        self.fold.layers.contains(&layer) || self.fold.roles.contains(&role)
    }

    /// The rule name of the fold (`fold:l0-or-system` for both built-in policies).
    pub fn fold_rule(&self) -> String {
        let layers: Vec<String> = self.fold.layers.iter().map(|l| format!("l{l}")).collect();
        let roles: Vec<&str> = self.fold.roles.iter().map(|r| r.as_str()).collect();
        let parts: Vec<String> = [layers.join("-"), roles.join("-")]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        if parts.is_empty() {
            return "fold:none".into();
        }
        format!("fold:{}", parts.join("-or-"))
    }

    /// The layer and role of an entry of `source_type` with its own `layer` and `role`
    /// under this policy; `castlog` says whether castlog's own producers made it (then the
    /// producer re-rolings apply first).
    pub fn effective(&self, source_type: &str, layer: u8, role: Role, castlog: bool) -> (u8, Role) {
        let mut out = (layer, role);
        let apply = |out: &mut (u8, Role), list: &[Override]| {
            if let Some(o) = list.iter().find(|o| o.source_type == source_type) {
                *out = (o.layer.unwrap_or(out.0), o.role.unwrap_or(out.1));
            }
        };
        if castlog {
            apply(&mut out, &self.producer_roles);
        }
        apply(&mut out, &self.re_roles);
        out
    }

    /// The reminder prefix for a folded entry of `source_type`, if it gets one.
    pub fn reminder_for(&self, source_type: &str) -> Option<&str> {
        self.reminder
            .as_ref()
            .filter(|r| r.source_type == source_type)
            .map(|r| r.prefix.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_documents_read_back_to_themselves() {
        for (name, text) in DOCUMENTS {
            let policy = Policy::parse(text).unwrap();
            assert_eq!(policy.name, name);
            assert_eq!(
                Policy::parse(&policy.to_json().to_string()).unwrap(),
                policy
            );
        }
        assert_eq!(built_in().len(), BUILT_IN.len());
        assert_eq!(Policy::recommended().name, "recommended");
    }

    #[test]
    fn both_built_in_policies_fold_l0_or_system() {
        for name in BUILT_IN {
            let p = Policy::named(name).unwrap();
            assert_eq!(p.fold_rule(), "fold:l0-or-system");
            assert!(p.folds(0, Role::User) && p.folds(2, Role::System));
            assert!(!p.folds(1, Role::User));
        }
    }

    /// The compiled-in policies of earlier builds, restated: the documents must keep them.
    #[test]
    fn the_documents_keep_the_compiled_in_policies() {
        let legacy = Policy::named("legacy").unwrap();
        assert_eq!(legacy.consolidation, Consolidation::Joined);
        assert_eq!(legacy.appended, None);
        assert_eq!(
            legacy
                .mandates
                .iter()
                .map(|m| (m.source_type.as_str(), m.rank, m.header.as_str()))
                .collect::<Vec<_>>(),
            [("retryFeedback", 0, "")]
        );
        for (source, layer) in [
            ("recoveryTicket", 1),
            ("remainingDelta", 1),
            ("groundingFeedback", 1),
            ("rejectionFeedback", 2),
            ("reworkFeedback", 2),
        ] {
            assert_eq!(
                legacy.effective(source, 2, Role::User, true),
                (layer, Role::System)
            );
            assert_eq!(
                legacy.effective(source, 2, Role::User, false),
                (2, Role::User)
            );
        }
        let recommended = Policy::recommended();
        assert_eq!(recommended.consolidation, Consolidation::Strongest);
        assert_eq!(
            recommended.appended,
            Some(Appended {
                source_type: "remainingDelta".into(),
                header: "## Remaining work".into()
            })
        );
        assert_eq!(
            recommended
                .mandates
                .iter()
                .map(|m| (m.source_type.as_str(), m.rank, m.header.as_str()))
                .collect::<Vec<_>>(),
            [
                ("recoveryTicket", 0, "## Recovery"),
                ("retryFeedback", 1, "## Repair required"),
                ("groundingFeedback", 2, "## Grounding required"),
                ("reworkFeedback", 2, "## Rework required"),
                ("rejectionFeedback", 3, "## Rejected"),
            ]
        );
        // castlog's producers give the escalations L2/user: the re-rolings change nothing there.
        for source in ESCALATIONS {
            assert_eq!(
                recommended.effective(source, 2, Role::User, true),
                (2, Role::User)
            );
        }
        for name in BUILT_IN {
            assert_eq!(
                Policy::named(name).unwrap().reminder_for("steeringNote"),
                Some("Reminder from the operator:\n")
            );
        }
    }
}
