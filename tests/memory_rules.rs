//! The full diagnostic of every memory rule on its documented example, as a user sees it at a
//! terminal: the real binary on a real file, one insta snapshot per rule.

mod common;

use common::Project;
use torchlint::rule_meta::ExampleKind;
use torchlint::rule_meta::RuleRegistry;

#[test]
fn every_memory_rule_on_its_example() {
    let registry = RuleRegistry::load_builtin().expect("built-in rule files are valid");
    let mut snapshotted = 0;
    for rule in registry.iter().filter(|rule| rule.pack == "memory") {
        // The first flagged example is the one under `## Example`.
        let example = rule
            .examples()
            .iter()
            .find(|example| example.kind == ExampleKind::Flagged)
            .unwrap_or_else(|| panic!("{} has a flagged example", rule.code));
        let project = Project::new();
        let file = format!("{}.py", rule.name.replace('-', "_"));
        let code = example
            .code
            .lines()
            .map(|line| line.split("  # expect:").next().unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n");
        project.write(&file, code + "\n");
        let run = project.run(&["check", "--output-format", "full", "--select", &rule.code]);
        assert_eq!(run.code, 1, "{}: {}", rule.code, run.stderr);
        insta::assert_snapshot!(rule.name.clone(), run.stdout);
        snapshotted += 1;
    }
    assert_eq!(snapshotted, 13, "TL101–TL113");
}
