//! `placement`: the placement engine on entries given as data, with no database.

use std::borrow::Cow;
use std::path::Path;

use castlog_core::id::Digest;
use castlog_core::prompt::given::{Given, Prompt};
use castlog_core::prompt::{self, Policy, Rendered};
use castlog_events::chain::blob_hash;
use castlog_projections::audit::given::{self as audit, Finding};
use serde_json::{Value, json};

use crate::args::PlacementArgs;
use crate::error::CliError;
use crate::output;

/// The policy `arg` names: a built-in policy's name, else a policy file (read and checked).
pub fn policy_arg(arg: &str) -> Result<Cow<'static, Policy>, CliError> {
    if let Some(policy) = Policy::named(arg) {
        return Ok(Cow::Borrowed(policy));
    }
    let path = Path::new(arg);
    if !path.exists() {
        return Err(CliError::user(format!(
            "unknown placement policy {arg:?}: use {} or a policy file (see `castlog placement --show-policy recommended`)",
            prompt::policy::BUILT_IN.join(", ")
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::user(format!("cannot read policy {}: {e}", path.display())))?;
    let policy = Policy::parse(&text)
        .map_err(|e| CliError::user(format!("policy {}: {e}", path.display())))?;
    Ok(Cow::Owned(policy))
}

/// The policy a cast started with `--policy arg` records: its name, and its document when it
/// is not a built-in policy. A file that restates a built-in policy exactly is recorded by
/// name; one that takes a built-in name for other rules is refused.
pub fn recorded_policy(arg: &str) -> Result<(String, Option<Value>), CliError> {
    match policy_arg(arg)? {
        Cow::Borrowed(policy) => Ok((policy.name.clone(), None)),
        Cow::Owned(policy) => match Policy::named(&policy.name) {
            Some(built_in) if *built_in == policy => Ok((policy.name, None)),
            Some(_) => Err(CliError::user(format!(
                "policy {arg}: name: {:?} is a built-in policy's name and the file changes its rules; give the file its own name",
                policy.name
            ))),
            None => {
                fenced_headers(arg, &policy)?;
                Ok((policy.name.clone(), Some(policy.to_json())))
            }
        },
    }
}

/// A cast's prompts carry model and person text, fenced against the runtime's own headers
/// only (`prompt::fence::HEADERS`): a policy file that drives a cast must use those, or a
/// reply could open a block that reads as its mandate.
fn fenced_headers(arg: &str, policy: &Policy) -> Result<(), CliError> {
    let headers = policy
        .mandates
        .iter()
        .enumerate()
        .map(|(i, m)| (format!("mandates[{i}].header"), m.header.as_str()))
        .chain(
            policy
                .appended
                .iter()
                .map(|a| ("appended.header".to_owned(), a.header.as_str())),
        );
    for (field, header) in headers {
        if header.is_empty() {
            continue;
        }
        let known = header
            .strip_prefix("## ")
            .is_some_and(|words| prompt::fence::HEADERS.contains(&words));
        if !known {
            let names: Vec<String> = prompt::fence::HEADERS
                .iter()
                .map(|h| format!("## {h}"))
                .collect();
            return Err(CliError::user(format!(
                "policy {arg}: {field}: {header:?} is not a header castlog fences in untrusted text, so a reply could pose as it; a cast's policy uses one of: {}",
                names.join(", ")
            )));
        }
    }
    Ok(())
}

fn digest(bytes: &[u8]) -> Digest {
    blob_hash(bytes)
}

/// One prompt rendered under one policy, with what the output needs.
struct Shown {
    rendered: Rendered,
    hash: Digest,
    system_hash: Option<Digest>,
}

fn show(prompt: &Prompt, policy: &Policy) -> Shown {
    let rendered = prompt::render_given(&prompt.entries, policy, digest);
    let hash = digest(&prompt::messages_json(&rendered.messages));
    let system_hash = (!rendered.system.is_empty()).then(|| digest(rendered.system.as_bytes()));
    Shown {
        rendered,
        hash,
        system_hash,
    }
}

/// `castlog placement ENTRIES.json [--policy NAME|FILE | --compare A B] [--lint]`,
/// `castlog placement --show-policy NAME|FILE`.
pub fn run(args: &PlacementArgs) -> Result<(), CliError> {
    if let Some(name) = &args.show_policy {
        return show_policy(name, args.json);
    }
    let Some(path) = &args.entries else {
        return Err(CliError::user(
            "give an entries file (or --show-policy NAME)",
        ));
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::user(format!("cannot read entries {}: {e}", path.display())))?;
    let given =
        Given::parse(&text).map_err(|e| CliError::user(format!("{}: {e}", path.display())))?;
    if let Some(names) = &args.compare {
        let a = policy_arg(&names[0])?;
        let b = policy_arg(names.get(1).unwrap_or(&names[0]))?;
        return compare(&given, [&a, &b], args.json);
    }
    let policy = policy_arg(&args.policy)?;
    match &given {
        Given::Prompt(p) => one(p, &policy, args.lint, args.json),
        Given::Turns(turns) => sequence(turns, &policy, args.lint, args.json),
    }
}

fn show_policy(name: &str, json_out: bool) -> Result<(), CliError> {
    if let Some(text) = Policy::document_of(name) {
        if json_out {
            let value: Value = serde_json::from_str(text)
                .map_err(|e| CliError::internal(format!("the shipped policy {name}: {e}")))?;
            return output::json(&value);
        }
        crate::say!("{}", text.trim_end());
        return Ok(());
    }
    let policy = policy_arg(name)?;
    if json_out {
        return output::json(&policy.to_json());
    }
    let text = serde_json::to_string_pretty(&policy.to_json())
        .map_err(|e| CliError::internal(e.to_string()))?;
    crate::say!("{text}");
    Ok(())
}

fn one(p: &Prompt, policy: &Policy, lint: bool, json_out: bool) -> Result<(), CliError> {
    let shown = show(p, policy);
    let findings = lint.then(|| audit::lint(p, &shown.rendered));
    if json_out {
        let mut doc = json!({
            "policy": policy.name,
            "messages": shown.rendered.messages,
            "placements": shown.rendered.placements,
            "hash": shown.hash,
            "system_hash": shown.system_hash,
        });
        if let Some(findings) = &findings {
            doc["findings"] = json!(findings);
        }
        return output::json(&doc);
    }
    crate::say!("policy {}, prompt {}", policy.name, shown.hash.short());
    for m in &shown.rendered.messages {
        crate::say!("\n── {} ──\n{}", m.role.as_str(), m.content);
    }
    crate::say!("");
    placements_table(p, policy, &shown.rendered);
    if let Some(findings) = &findings {
        say_findings(findings);
        crate::say!("{} findings", findings.len());
    }
    Ok(())
}

fn placements_table(p: &Prompt, policy: &Policy, rendered: &Rendered) {
    for (e, pl) in p.entries.iter().zip(&rendered.placements) {
        crate::say!(
            "  {:<22} L{}/{:<9} -> {:<11} #{:<2} {:<24} {}",
            pl.entry,
            pl.layer,
            pl.role,
            castlog_core::syntax::json_name(&pl.destination),
            pl.position,
            pl.rule,
            audit::why(policy, e, pl)
        );
    }
}

fn say_findings(findings: &[Finding]) {
    for f in findings {
        crate::say!("{} {}: {}", f.rule, f.entry, f.message);
    }
}

/// Whether a turn kept the previous turn's cached prefix.
struct Prefix {
    status: &'static str,
    changed: Vec<String>,
}

fn prefix(previous: Option<&Shown>, current: &Shown) -> Prefix {
    match previous {
        None => Prefix {
            status: "first",
            changed: Vec::new(),
        },
        Some(prev) => {
            let changed = audit::prefix_changes(&prev.rendered, &current.rendered);
            Prefix {
                status: if changed.is_empty() { "kept" } else { "broken" },
                changed,
            }
        }
    }
}

/// The findings of a turn: the prompt's own, and a measured change of the cached prefix
/// (across turns the change is measured, so the guess by source type is left out).
fn turn_findings(p: &Prompt, shown: &Shown, prefix: &Prefix, turn: usize) -> Vec<Finding> {
    let mut findings = audit::lint(p, &shown.rendered);
    findings.retain(|f| f.rule != "mutable-in-cached-prefix");
    if prefix.status == "broken" {
        findings.push(Finding {
            rule: "mutable-in-cached-prefix",
            entry: prefix.changed.join(", "),
            message: format!(
                "the system prefix changed between turn {} and turn {turn}: {} changed, invalidating the cached prefix",
                turn - 1,
                prefix.changed.join(", ")
            ),
        });
    }
    findings
}

fn sequence(turns: &[Prompt], policy: &Policy, lint: bool, json_out: bool) -> Result<(), CliError> {
    let shown: Vec<Shown> = turns.iter().map(|t| show(t, policy)).collect();
    let mut docs = Vec::new();
    let mut breaks = 0;
    for (i, s) in shown.iter().enumerate() {
        let turn = i + 1;
        let pre = prefix(i.checked_sub(1).map(|j| &shown[j]), s);
        breaks += usize::from(pre.status == "broken");
        let findings = lint.then(|| turn_findings(&turns[i], s, &pre, turn));
        if json_out {
            let mut doc = json!({
                "turn": turn,
                "messages": s.rendered.messages,
                "placements": s.rendered.placements,
                "hash": s.hash,
                "system_hash": s.system_hash,
                "prefix": pre.status,
                "changed": pre.changed,
            });
            if let Some(findings) = &findings {
                doc["findings"] = json!(findings);
            }
            docs.push(doc);
            continue;
        }
        crate::say!(
            "turn {turn}: prompt {}, system prefix {}{}",
            s.hash.short(),
            pre.status,
            if pre.changed.is_empty() {
                String::new()
            } else {
                format!(" by {}", pre.changed.join(", "))
            }
        );
        placements_table(&turns[i], policy, &s.rendered);
        if let Some(findings) = &findings {
            say_findings(findings);
        }
    }
    if json_out {
        return output::json(&json!({
            "policy": policy.name,
            "turns": docs,
            "breaks": breaks,
        }));
    }
    crate::say!(
        "policy {}: the cached system prefix broke {breaks} times in {} turns",
        policy.name,
        turns.len()
    );
    Ok(())
}

/// The rows of the inventory table: per entry, where it lands under each policy and why.
fn rows(p: &Prompt, policies: [&Policy; 2], shown: [&Shown; 2]) -> Vec<Value> {
    p.entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut under = serde_json::Map::new();
            for (policy, s) in policies.iter().zip(shown) {
                let pl = &s.rendered.placements[i];
                under.insert(
                    policy.name.clone(),
                    json!({
                        "layer": pl.layer,
                        "role": pl.role,
                        "destination": pl.destination,
                        "position": pl.position,
                        "rule": pl.rule,
                        "reminder": audit::reminded(policy, pl),
                        "why": audit::why(policy, e, pl),
                    }),
                );
            }
            json!({
                "entry": e.id,
                "source_type": e.source_type,
                "layer": e.layer,
                "role": e.role.as_str(),
                "locked": e.locked,
                "policies": under,
            })
        })
        .collect()
}

fn by_policy<T: serde::Serialize>(policies: [&Policy; 2], values: [T; 2]) -> Value {
    let mut map = serde_json::Map::new();
    for (policy, v) in policies.iter().zip(values) {
        map.insert(policy.name.clone(), json!(v));
    }
    Value::Object(map)
}

fn compare(given: &Given, policies: [&Policy; 2], json_out: bool) -> Result<(), CliError> {
    if policies[0].name == policies[1].name {
        return Err(CliError::user(format!(
            "--compare needs two policies with different names, not {} twice",
            policies[0].name
        )));
    }
    let prompts = given.prompts();
    let shown: Vec<[Shown; 2]> = prompts
        .iter()
        .map(|p| [show(p, policies[0]), show(p, policies[1])])
        .collect();
    let names = [policies[0].name.as_str(), policies[1].name.as_str()];
    if let Given::Prompt(p) = given {
        let s = &shown[0];
        let rows = rows(p, policies, [&s[0], &s[1]]);
        let findings = [
            audit::lint(p, &s[0].rendered),
            audit::lint(p, &s[1].rendered),
        ];
        if json_out {
            return output::json(&json!({
                "policies": names,
                "entries": rows,
                "findings": by_policy(policies, findings),
            }));
        }
        say_rows(&rows, names);
        for (name, findings) in names.iter().zip(&findings) {
            crate::say!("\n{name}: {} findings", findings.len());
            say_findings(findings);
        }
        return Ok(());
    }
    let mut docs = Vec::new();
    let mut breaks = [0usize; 2];
    for (i, (p, s)) in prompts.iter().zip(&shown).enumerate() {
        let turn = i + 1;
        let pre: [Prefix; 2] =
            [0, 1].map(|k| prefix(i.checked_sub(1).map(|j| &shown[j][k]), &s[k]));
        for k in 0..2 {
            breaks[k] += usize::from(pre[k].status == "broken");
        }
        let findings = [0, 1].map(|k| turn_findings(p, &s[k], &pre[k], turn));
        let rows = rows(p, policies, [&s[0], &s[1]]);
        if json_out {
            let prefixes =
                [0, 1].map(|k| json!({"prefix": pre[k].status, "changed": pre[k].changed}));
            docs.push(json!({
                "turn": turn,
                "entries": rows,
                "prefix": by_policy(policies, prefixes),
                "findings": by_policy(policies, findings),
            }));
            continue;
        }
        crate::say!("turn {turn}");
        say_rows(&rows, names);
        for k in 0..2 {
            crate::say!(
                "  {}: system prefix {}{}",
                names[k],
                pre[k].status,
                if pre[k].changed.is_empty() {
                    String::new()
                } else {
                    format!(" by {}", pre[k].changed.join(", "))
                }
            );
            for f in &findings[k] {
                crate::say!("  {} {} {}: {}", names[k], f.rule, f.entry, f.message);
            }
        }
    }
    if json_out {
        return output::json(&json!({
            "policies": names,
            "turns": docs,
            "breaks": by_policy(policies, breaks),
        }));
    }
    for k in 0..2 {
        crate::say!(
            "{}: the cached system prefix broke {} times in {} turns",
            names[k],
            breaks[k],
            prompts.len()
        );
    }
    Ok(())
}

fn say_rows(rows: &[Value], names: [&str; 2]) {
    let cell = |under: &Value| -> String {
        let destination = under["destination"].as_str().unwrap_or("");
        let reminder = if under["reminder"].as_bool().unwrap_or(false) {
            " + reminder"
        } else {
            ""
        };
        format!(
            "L{}/{} {destination}{reminder}",
            under["layer"],
            under["role"].as_str().unwrap_or("")
        )
    };
    for row in rows {
        crate::say!(
            "{} ({}, L{}/{}{})",
            row["entry"].as_str().unwrap_or(""),
            row["source_type"].as_str().unwrap_or(""),
            row["layer"],
            row["role"].as_str().unwrap_or(""),
            if row["locked"].as_bool().unwrap_or(false) {
                ", locked"
            } else {
                ""
            }
        );
        for name in names {
            let under = &row["policies"][name];
            crate::say!(
                "    {name:<12} {:<28} {}",
                cell(under),
                under["why"].as_str().unwrap_or("")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_in_name_is_recorded_by_name_and_an_unknown_one_is_refused() {
        assert_eq!(recorded_policy("legacy").unwrap(), ("legacy".into(), None));
        let err = policy_arg("no-such-policy-file.json").unwrap_err();
        assert!(
            err.message.contains("unknown placement policy"),
            "{}",
            err.message
        );
    }
}
