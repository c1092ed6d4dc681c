//! Every Python example in `rules/` is a test: a `flagged` example must produce exactly the
//! findings its `# expect: CODE` markers declare (for its own rule), a `not-flagged` one none.

use std::path::Path;

use torchlint::linter;
use torchlint::rule_meta::ExampleKind;
use torchlint::rule_meta::RuleRegistry;
use torchlint::settings::{CliOverrides, Settings};
use torchlint::source::SourceFile;

/// A built-in rule file's documentation is read only when asked for (`torchlint rule`, SARIF):
/// whether it reads at all is checked here, as a user's rule file is when it loads.
#[test]
fn every_built_in_rule_file_documents_itself() {
    let registry = RuleRegistry::load_builtin().expect("built-in rule files are valid");
    let mut failures = Vec::new();
    for rule in registry.iter() {
        if let Err((offset, message)) = rule.parse_documentation() {
            failures.push(format!("{} (byte {offset}): {message}", rule.code));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(registry.iter().count() >= 11);
}

/// A finding's message says what this code holds and how it grows; the figures measured on a
/// reference model (peak MiB, step time) belong in the rule's documentation, where they say
/// what they were measured on, not in a message about the user's code.
#[test]
fn no_rule_message_quotes_a_reference_measurement() {
    let figure = regex::Regex::new(
        r"measured|\d+(\.\d+)?\s*(KiB|MiB|GiB|KB|MB|GB)\b|\d+(\.\d+)?%|\bx\d+(\.\d+)?\b",
    )
    .unwrap();
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let mut failures = Vec::new();
    for pack in std::fs::read_dir(&rules).unwrap() {
        for file in std::fs::read_dir(pack.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let front = text.split("+++").nth(1).unwrap_or_default();
            for line in front
                .lines()
                .filter(|line| line.trim_start().starts_with("message"))
            {
                if figure.is_match(line) {
                    failures.push(format!("{}: {line}", path.display()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_rule_example_produces_exactly_its_declared_findings() {
    let registry = RuleRegistry::load_builtin().expect("built-in rule files are valid");
    let mut failures = Vec::new();
    let mut checked = 0;
    for rule in registry.iter() {
        let settings = Settings::defaults(
            Path::new("."),
            &CliOverrides {
                select: Some(vec![rule.code.clone()]),
                ..CliOverrides::default()
            },
        )
        .expect("selecting a known rule works");
        for example in rule.examples() {
            checked += 1;
            let source = SourceFile::new("example.py", example.code.clone());
            let (_, outcome) = linter::lint_source(&source, &settings).expect("examples parse");
            let mut found: Vec<usize> = outcome
                .diagnostics
                .iter()
                .map(|d| source.location(d.range.start).row)
                .collect();
            found.sort_unstable();
            let expected = match example.kind {
                ExampleKind::Flagged => example.expected_lines.clone(),
                ExampleKind::NotFlagged => Vec::new(),
            };
            if found != expected || !outcome.internal_errors.is_empty() {
                let messages: Vec<String> = outcome
                    .diagnostics
                    .iter()
                    .map(|d| {
                        format!(
                            "    line {}: {}",
                            source.location(d.range.start).row,
                            d.message
                        )
                    })
                    .collect();
                failures.push(format!(
                    "{}:{} ({} {}): expected findings on lines {expected:?}, got {found:?}\n{}",
                    rule.origin.display(),
                    example.file_line,
                    rule.code,
                    rule.name,
                    messages.join("\n")
                ));
            }
        }
    }
    assert!(checked > 0, "no examples found");
    assert!(
        failures.is_empty(),
        "{} failing examples:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_builtin_rule_documents_every_section_and_has_examples_both_ways() {
    let registry = RuleRegistry::load_builtin().expect("built-in rule files are valid");
    for rule in registry.iter() {
        let titles: Vec<&str> = rule.sections().iter().map(|s| s.title.as_str()).collect();
        // A rule with a fix says whether it is safe; one without has no such section.
        let fix_safety = torchlint::rule_meta::FIX_SAFETY_SECTION;
        assert_eq!(
            titles.contains(&fix_safety),
            [
                "TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL107", "TL108", "TL109",
                "TL201", "TL202"
            ]
            .contains(&rule.code.as_str()),
            "{}: `## {fix_safety}` belongs to the rules with a fix",
            rule.code
        );
        let required: Vec<&str> = titles.into_iter().filter(|t| *t != fix_safety).collect();
        assert_eq!(
            required,
            torchlint::rule_meta::DOC_SECTIONS,
            "{}",
            rule.code
        );
        // TL003 reports paths that could not be read: no Python text shows it.
        if rule.code == "TL003" {
            assert!(rule.examples().is_empty(), "TL003's examples could not run");
            continue;
        }
        for kind in [ExampleKind::Flagged, ExampleKind::NotFlagged] {
            assert!(
                rule.examples().iter().any(|e| e.kind == kind),
                "{} has no {kind:?} example",
                rule.code
            );
        }
        for option in &rule.options {
            let options = rule
                .sections()
                .iter()
                .find(|s| s.title == "Options")
                .unwrap();
            assert!(
                options.body.contains(&format!("`{}`", option.name)),
                "{}: the Options section does not document `{}`",
                rule.code,
                option.name
            );
        }
    }
}

#[test]
fn every_builtin_declarative_rule_compiles() {
    // Built-in patterns compile when a clause first runs, not when the binary starts: a bad
    // one must fail here, not in a user's run.
    let registry = RuleRegistry::load_builtin().expect("built-in rule files are valid");
    let mut compiled = 0;
    for rule in registry.iter() {
        if let torchlint::rule_meta::Implementation::Declarative(spec) = &rule.implementation {
            assert_eq!(
                spec.clauses().len(),
                spec.root_kinds().len(),
                "{}",
                rule.code
            );
            compiled += 1;
        }
    }
    assert!(compiled > 0, "no declarative built-in rule");
}
