//! The README stays true: its rule table matches `rules/`, and CI runs its test command.

use std::path::Path;

use torchlint::rule_meta::RuleRegistry;

fn read(relative: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)).unwrap()
}

#[test]
fn rule_table_matches_the_rule_files() {
    let registry = RuleRegistry::load_builtin().unwrap();
    let mut table = String::from(
        "| code | name | pack | severity | default | what it flags |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for rule in registry.iter() {
        table.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} |\n",
            rule.code,
            rule.name,
            rule.pack,
            rule.severity.as_str(),
            if rule.enabled_by_default { "yes" } else { "no" },
            rule.summary().replace('|', "\\|"),
        ));
    }
    let readme = read("README.md");
    let start = readme.find("<!-- rules:start -->\n").expect("start marker") + 21;
    let end = readme.find("<!-- rules:end -->").expect("end marker");
    assert!(
        readme[start..end] == table,
        "README.md's rule table is out of date; replace it with:\n\n{table}"
    );
}

#[test]
fn ci_runs_the_readme_commands() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    for command in ["cargo test", "cargo run --release -- examples/train.py"] {
        assert!(
            readme.contains(&format!("{command}  ")) || readme.contains(&format!("{command}\n")),
            "README lost `{command}`"
        );
        assert!(ci.contains(command), ".ci/run does not run `{command}`");
    }
}

#[test]
fn the_readme_says_what_the_tests_skip_and_what_ci_requires() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    let required: Vec<&str> = ci
        .lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|line| line.split('=').next())
        .filter(|name| name.starts_with("TORCHLINT_REQUIRE_"))
        .collect();
    assert!(required.len() >= 3, "{required:?}");
    for name in required.iter().copied().chain([
        "TORCHLINT_TEST_PYTHON",
        "scripts/setup-test-python",
        "skipped",
    ]) {
        assert!(readme.contains(name), "README does not mention `{name}`");
    }
}
