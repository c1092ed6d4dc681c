//! `torchlint rule CODE` / `torchlint rule --all`: the rule documentation, as Markdown or JSON.

use std::io::Write;
use std::sync::Arc;

use clap::ValueEnum;
use serde::Serialize;

use super::print_error;
use crate::rule_meta::{RuleMeta, RuleRegistry};
use crate::settings::CliOverrides;
use crate::settings::resolver::Resolver;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuleFormat {
    Text,
    Json,
}

#[derive(Serialize)]
struct RuleJson<'a> {
    code: &'a str,
    name: &'a str,
    pack: &'a str,
    severity: &'a str,
    enabled_by_default: bool,
    summary: &'a str,
    message: &'a str,
    help: Option<&'a str>,
    explanation: String,
    options: Vec<OptionJson<'a>>,
    url: Option<String>,
}

#[derive(Serialize)]
struct OptionJson<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    default: &'a toml::Value,
    doc: &'a str,
}

pub fn run(code: Option<&str>, all: bool, format: RuleFormat) -> u8 {
    // The rules the current folder's config knows, user packs included.
    let registry = match Resolver::new(CliOverrides::default(), None)
        .and_then(|resolver| resolver.for_folder(std::path::Path::new(".")))
    {
        Ok(settings) => Arc::clone(&settings.registry),
        Err(error) => {
            print_error(&error.to_string());
            RuleRegistry::builtin()
        }
    };
    let rules: Vec<&Arc<RuleMeta>> = if all {
        registry.iter().collect()
    } else {
        let code = code.unwrap_or_default();
        match registry.find(code) {
            Some(rule) => vec![rule],
            None => {
                print_error(&format!(
                    "unknown rule `{code}`; `torchlint rule --all` lists every rule"
                ));
                return 2;
            }
        }
    };
    let mut out = std::io::stdout().lock();
    let written = match format {
        RuleFormat::Text => {
            let texts: Vec<String> = rules.iter().map(|rule| rule.markdown()).collect();
            writeln!(out, "{}", texts.join("\n---\n\n"))
        }
        RuleFormat::Json => {
            let json: Vec<RuleJson<'_>> = rules.iter().map(|rule| to_json(rule)).collect();
            let result = if all {
                serde_json::to_writer_pretty(&mut out, &json)
            } else {
                serde_json::to_writer_pretty(&mut out, &json[0])
            };
            result
                .map_err(std::io::Error::other)
                .and_then(|()| writeln!(out))
        }
    };
    match written {
        Ok(()) => 0,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(error) => {
            print_error(&format!("cannot write to stdout: {error}"));
            2
        }
    }
}

fn to_json(rule: &RuleMeta) -> RuleJson<'_> {
    RuleJson {
        code: &rule.code,
        name: &rule.name,
        pack: &rule.pack,
        severity: rule.severity.as_str(),
        enabled_by_default: rule.enabled_by_default,
        summary: rule.summary(),
        message: &rule.message,
        help: rule.help.as_deref(),
        explanation: rule.markdown(),
        options: rule
            .options
            .iter()
            .map(|option| OptionJson {
                name: &option.name,
                kind: option.kind.as_str(),
                default: &option.default,
                doc: &option.doc,
            })
            .collect(),
        url: rule.url(),
    }
}
