//! `check --fix`, `--unsafe-fixes` and `--diff`: the real binary on real files, as Ruff's
//! conventions have them.

mod common;

use common::Project;

const LOADS: &str = "\
import torch

state = torch.load(\"ckpt.pt\")
model = torch.load(\"m.pt\", weights_only=True)
";

const FIXED: &str = "\
import torch

state = torch.load(\"ckpt.pt\", map_location=\"cpu\")
model = torch.load(\"m.pt\", weights_only=True, map_location=\"cpu\")
";

#[test]
fn unsafe_fixes_are_shown_not_applied_without_the_option() {
    let project = Project::new();
    project.write("a.py", LOADS);
    let run = project.run(&["check", "--no-cache", "a.py"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains(
            "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option)."
        ),
        "{}",
        run.stdout
    );
    let run = project.run(&["check", "--no-cache", "--fix", "a.py"]);
    assert_eq!(run.code, 1, "nothing safe to fix: both findings remain");
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        LOADS
    );
}

#[test]
fn diff_shows_the_fix_and_changes_nothing() {
    let project = Project::new();
    project.write("a.py", LOADS);
    let run = project.run(&["check", "--no-cache", "--diff", "--unsafe-fixes", "a.py"]);
    assert_eq!(run.code, 1, "a diff exits 1\n{}", run.stderr);
    assert_eq!(
        run.stdout,
        "--- a/a.py\n+++ b/a.py\n@@ -1,4 +1,4 @@\n import torch\n \n\
         -state = torch.load(\"ckpt.pt\")\n\
         -model = torch.load(\"m.pt\", weights_only=True)\n\
         +state = torch.load(\"ckpt.pt\", map_location=\"cpu\")\n\
         +model = torch.load(\"m.pt\", weights_only=True, map_location=\"cpu\")\n"
    );
    assert!(
        run.stderr.contains("Would fix 2 findings."),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        LOADS,
        "--diff changes nothing"
    );
}

#[test]
fn fix_writes_the_file_keeps_its_bom_and_mode_and_a_second_run_changes_nothing() {
    let project = Project::new();
    project.write("a.py", format!("\u{feff}{LOADS}"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            project.path().join("a.py"),
            std::fs::Permissions::from_mode(0o750),
        )
        .unwrap();
    }
    let run = project.run(&["check", "--no-cache", "--fix", "--unsafe-fixes", "a.py"]);
    assert_eq!(run.code, 0, "all fixed\n{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("Found 2 findings (2 fixed, 0 remaining)."),
        "{}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        format!("\u{feff}{FIXED}")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(project.path().join("a.py"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
    }
    let again = project.run(&["check", "--no-cache", "--fix", "--unsafe-fixes", "a.py"]);
    assert_eq!(again.code, 0);
    assert!(
        again.stdout.contains("All checks passed!"),
        "{}",
        again.stdout
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        format!("\u{feff}{FIXED}")
    );
}

#[test]
fn stdin_is_fixed_to_stdout_with_the_findings_left_on_stderr() {
    let project = Project::new();
    let run = project.run_with_stdin(
        &["check", "--no-cache", "--fix", "--unsafe-fixes", "-"],
        LOADS,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout, FIXED,
        "the fixed text, whole, as Ruff prints it"
    );
    assert!(
        run.stderr
            .contains("Found 2 findings (2 fixed, 0 remaining)."),
        "{}",
        run.stderr
    );
    // Nothing fixable: the text comes back as it was, and its findings fail the run.
    let run = project.run_with_stdin(&["check", "--no-cache", "--fix", "-"], LOADS);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, LOADS);
    assert!(run.stderr.contains("TL108"), "{}", run.stderr);

    let run = project.run_with_stdin(
        &[
            "check",
            "--no-cache",
            "--diff",
            "--unsafe-fixes",
            "--stdin-filename",
            "a.py",
        ],
        LOADS,
    );
    assert_eq!(run.code, 1, "a diff exits 1\n{}", run.stderr);
    assert!(
        run.stdout.starts_with("--- a/a.py\n+++ b/a.py\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("Would fix 2 findings."),
        "{}",
        run.stderr
    );

    let run = project.run_with_stdin(&["check", "--add-noqa", "-"], LOADS);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("`--add-noqa` changes files: name them instead of passing stdin"),
        "{}",
        run.stderr
    );
}

/// `train.py` holding `script`, after `--fix --unsafe-fixes` fixed every finding in it.
fn fixed_with_unsafe_fixes(project: &Project, script: &str) -> String {
    project.write("train.py", script);
    let run = project.run(&["check", "--no-cache", "--fix", "--unsafe-fixes", "train.py"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    std::fs::read_to_string(project.path().join("train.py")).unwrap()
}

/// TL102's fix keeps a number, or a copy without the graph where the list is stacked later;
/// the fixed file still parses for Python itself.
#[test]
fn accumulated_losses_are_fixed_to_numbers_or_graph_free_copies() {
    let project = Project::new();
    let script = "\
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0
losses = []
outputs = []
for step in range(10):
    loss = model(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss
    losses.append(loss)
    outputs.append(loss * 2)
stacked = torch.stack(outputs)
";
    let fixed = fixed_with_unsafe_fixes(&project, script);
    assert_eq!(
        fixed,
        script
            .replace("total += loss\n", "total += loss.item()\n")
            .replace("losses.append(loss)", "losses.append(loss.item())")
            .replace(
                "outputs.append(loss * 2)",
                "outputs.append((loss * 2).detach().clone())"
            )
    );
    let parsed = std::process::Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"])
        .arg(project.path().join("train.py"))
        .status();
    if let Ok(status) = parsed {
        assert!(
            status.success(),
            "Python's own parser rejects the fixed file"
        );
    }
}

/// `--add-noqa` for a code base adopting torchlint: every finding line gets its code, merged
/// into the line's own `# noqa:` (other tools' codes kept), after any other comment; a run
/// after it passes, and a second `--add-noqa` adds nothing.
#[test]
fn add_noqa_suppresses_every_finding_and_keeps_other_tools_codes() {
    let project = Project::new();
    project.write(
        "a.py",
        "import torch\n\n\
         state = torch.load(\"ckpt.pt\")\n\
         other = torch.load(\"o.pt\")  # noqa: E501\n\
         third = torch.load(\"t.pt\")  # type: ignore\n",
    );
    let run = project.run(&["check", "--no-cache", "--add-noqa", "a.py"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("Added 3 noqa directives."),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        "import torch\n\n\
         state = torch.load(\"ckpt.pt\")  # noqa: TL108\n\
         other = torch.load(\"o.pt\")  # noqa: E501, TL108\n\
         third = torch.load(\"t.pt\")  # type: ignore  # noqa: TL108\n"
    );
    let run = project.run(&["check", "--no-cache", "a.py"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let again = project.run(&["check", "--no-cache", "--add-noqa", "a.py"]);
    assert!(
        again.stderr.contains("Added 0 noqa directives."),
        "{}",
        again.stderr
    );
}

/// TL201's fix removes the flush with its line, or leaves `pass` where it was a block's only
/// statement.
#[test]
fn a_flush_per_batch_is_removed_and_an_emptied_block_keeps_pass() {
    let project = Project::new();
    let script = "\
import torch
from torch import nn

model = nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(2, 4, device=\"cuda\")).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.cuda.empty_cache()
    if step % 2 == 0:
        torch.cuda.empty_cache()
";
    assert_eq!(
        fixed_with_unsafe_fixes(&project, script),
        script
            .replace(
                "    opt.step()\n    torch.cuda.empty_cache()\n",
                "    opt.step()\n"
            )
            .replace("        torch.cuda.empty_cache()\n", "        pass\n")
    );
}

#[test]
fn findings_the_run_would_fix_are_marked() {
    let project = Project::new();
    project.write("a.py", LOADS);
    let concise = |extra: &[&str]| {
        let mut args = vec!["check", "--no-cache", "--output-format", "concise"];
        args.extend_from_slice(extra);
        args.push("a.py");
        project.run(&args).stdout
    };
    // Unsafe fixes are not this run's to apply: no mark until `--unsafe-fixes`.
    assert!(concise(&[]).contains("a.py:3:9: TL108 `torch.load(...)`"));
    let marked = concise(&["--unsafe-fixes"]);
    assert!(
        marked.contains("a.py:3:9: TL108 [*] `torch.load(...)`"),
        "{marked}"
    );
    let full = project.run(&["check", "--no-cache", "--unsafe-fixes", "a.py"]);
    assert!(
        full.stdout
            .contains("warning[TL108]: [*] `torch.load(...)`"),
        "{}",
        full.stdout
    );
}

#[test]
fn fix_only_reports_what_it_fixed_and_show_fixes_lists_it() {
    let project = Project::new();
    project.write("a.py", LOADS);
    let run = project.run(&[
        "check",
        "--no-cache",
        "--fix-only",
        "--unsafe-fixes",
        "--show-fixes",
        "a.py",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout,
        "Fixed 2 findings:\n- a.py:\n    2 × TL108 (load-without-map-location)\n\nFixed 2 findings.\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        FIXED
    );
    // A finding left (its fix is unsafe, and not asked for): `--fix-only` still exits 0.
    project.write("b.py", "import torch\nx = [torch.load(p) for p in paths]\n");
    let run = project.run(&["check", "--no-cache", "--fix-only", "b.py"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "Fixed 0 findings.\n");

    // `--fix --show-fixes`: the list, then the findings left and the summary.
    project.write("c.py", LOADS);
    let run = project.run(&[
        "check",
        "--no-cache",
        "--fix",
        "--unsafe-fixes",
        "--show-fixes",
        "c.py",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.ends_with(
            "Fixed 2 findings:\n- c.py:\n    2 × TL108 (load-without-map-location)\n\nFound 2 findings (2 fixed, 0 remaining).\n"
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn the_config_turns_fixes_on_and_chooses_which_apply() {
    let project = Project::new();
    // `fix = true` applies what is safe; TL108's unsafe fix is made safe, TL201 is unfixable.
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nfix = true\nunfixable = [\"TL201\"]\nextend-safe-fixes = [\"TL108\"]\n",
    );
    let script = "\
import torch

state = torch.load(\"ckpt.pt\")
model = torch.nn.Linear(2, 2)
for step in range(10):
    model(torch.randn(1, 2)).sum().backward()
    torch.cuda.empty_cache()
";
    project.write("a.py", script);
    let shown = project.run(&[
        "check",
        "--no-cache",
        "--no-fix",
        "--output-format",
        "concise",
        "a.py",
    ]);
    assert!(
        shown.stdout.contains("a.py:3:9: TL108 [*] "),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("a.py:7:5: TL201 `torch"),
        "unfixable: no mark\n{}",
        shown.stdout
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        script,
        "--no-fix wins over the config"
    );
    let run = project.run(&["check", "--no-cache", "--unsafe-fixes", "a.py"]);
    assert_eq!(run.code, 1, "TL201 is left\n{}", run.stdout);
    assert!(
        run.stdout
            .contains("Found 2 findings (1 fixed, 1 remaining)."),
        "{}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        script.replace(
            "torch.load(\"ckpt.pt\")",
            "torch.load(\"ckpt.pt\", map_location=\"cpu\")"
        ),
        "the fixable rule is fixed, the unfixable one is not, even with --unsafe-fixes"
    );

    project.write("pyproject.toml", "[tool.torchlint]\nfix = \"yes\"\n");
    let run = project.run(&["check", "--no-cache", "a.py"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("pyproject.toml:2: `fix` takes `true` or `false`"),
        "{}",
        run.stderr
    );
}

/// Every rule with a fix (its documentation has a `Fix safety` section), on every one of its
/// flagged examples: `--fix --unsafe-fixes` rewrites the example (the fixed text is a
/// snapshot), the result still parses for Python itself, and linting it again for that rule
/// finds only what no fix is offered for (a display-only suggestion, or a case the fix does
/// not cover, listed in the snapshot). A rule whose fixes are display-only shows them and
/// changes nothing.
#[test]
fn every_fixable_rule_fixes_its_flagged_examples_and_they_lint_clean_after() {
    let registry = torchlint::rule_meta::RuleRegistry::load_builtin().expect("valid rule files");
    let mut fixable = 0;
    for rule in registry.iter() {
        let has_fix = rule
            .sections()
            .iter()
            .any(|section| section.title == torchlint::rule_meta::FIX_SAFETY_SECTION);
        if !has_fix {
            continue;
        }
        fixable += 1;
        let project = Project::new();
        let flagged: Vec<_> = rule
            .examples()
            .iter()
            .filter(|example| example.kind == torchlint::rule_meta::ExampleKind::Flagged)
            .collect();
        assert!(!flagged.is_empty(), "{} has no flagged example", rule.code);
        let names: Vec<String> = (0..flagged.len())
            .map(|index| format!("example_{index}.py"))
            .collect();
        for (name, example) in names.iter().zip(&flagged) {
            project.write(name, &example.code);
        }
        let code = rule.code.as_str();
        let select = ["--select", code, "--no-cache"];
        // A rule whose fixes are all display-only (TL106, TL107, TL109) offers them and changes
        // nothing.
        let before = project.run(
            &[
                &["check", "--output-format", "json", "--exit-zero"],
                &select[..],
                &["."],
            ]
            .concat(),
        );
        let offered: Vec<serde_json::Value> =
            serde_json::from_str(&before.stdout).expect("JSON findings");
        let applicable = offered.iter().any(|finding| {
            matches!(
                finding["fix"]["applicability"].as_str(),
                Some("safe" | "unsafe")
            )
        });
        let fixed = project.run(
            &[
                &["check", "--fix", "--unsafe-fixes", "--exit-zero"],
                &select[..],
                &["."],
            ]
            .concat(),
        );
        assert_eq!(fixed.code, 0, "{code}: {}\n{}", fixed.stdout, fixed.stderr);
        let after = project.run(
            &[
                &["check", "--output-format", "json", "--exit-zero"],
                &select[..],
                &["."],
            ]
            .concat(),
        );
        let remaining: Vec<serde_json::Value> =
            serde_json::from_str(&after.stdout).expect("JSON findings");
        let mut snapshot = String::new();
        let mut changed = 0;
        for (name, example) in names.iter().zip(&flagged) {
            let text = std::fs::read_to_string(project.path().join(name)).unwrap();
            changed += usize::from(text != example.code);
            snapshot.push_str(&format!(
                "## {} line {}\n",
                rule.origin.display(),
                example.file_line
            ));
            snapshot.push_str(&text);
            for finding in remaining.iter().filter(|finding| {
                finding["filename"]
                    .as_str()
                    .is_some_and(|file| file.ends_with(name.as_str()))
            }) {
                let applicability = finding["fix"]["applicability"].as_str();
                assert!(
                    matches!(applicability, None | Some("display-only")),
                    "{code} {name}: a fixable finding is left after --fix --unsafe-fixes: {finding}"
                );
                snapshot.push_str(&format!(
                    "# left, {}: line {}: {}\n",
                    applicability.map_or("no fix offered", |_| "display-only fix"),
                    finding["location"]["row"],
                    finding["message"].as_str().unwrap_or_default()
                ));
            }
            snapshot.push('\n');
            assert_parses_for_python(&project.path().join(name));
        }
        if applicable {
            assert!(
                changed > 0,
                "{code}: --fix changed none of its flagged examples"
            );
        } else {
            assert_eq!(changed, 0, "{code}: a display-only fix was applied");
            assert!(
                offered
                    .iter()
                    .any(|finding| finding["fix"]["applicability"] == "display-only"),
                "{code}: no display-only fix shown: {}",
                before.stdout
            );
        }
        insta::assert_snapshot!(format!("fixed_examples_{code}"), snapshot);
    }
    assert!(fixable >= 3, "only {fixable} rules document a fix");
}

/// Python's own parser accepts the file, where a Python is at hand.
fn assert_parses_for_python(path: &std::path::Path) {
    let python = std::env::var("TORCHLINT_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let parsed = std::process::Command::new(python)
        .args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"])
        .arg(path)
        .output();
    if let Ok(output) = parsed {
        assert!(
            output.status.success(),
            "Python's own parser rejects {}: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

const PACK_RULE: &str = r#"+++
code = "ACME002"
name = "cuda-call"
pack = "lint-rules"
severity = "info"
enabled-by-default = true
message = "`{obj}.cuda()` always picks the current CUDA device"
help = "move it to the run's device"
implementation = "declarative"

[[match]]
pattern = '''
(call
  function: (attribute object: (_) @obj attribute: (identifier) @method)
  arguments: (argument_list) @args
  (#eq? @method "cuda")) @call
'''
report = "call"
fix = { message = "Move it with `.to(device)`", applicability = "safe", replace = "call", with = "{obj}.to(device)" }

[[match]]
pattern = '''(call function: (attribute attribute: (identifier) @method) @callee (#eq? @method "synchronize")) @call'''
report = "call"
message = "`{callee}()` waits for the GPU"
fix = { message = "Remove the call", applicability = "unsafe", remove-statement = "call" }
+++
## What it does

Flags `.cuda()`.
"#;

/// A user pack's declarative fixes, ast-grep style: `replace` a capture `with` a template of
/// the captures' text, and `remove-statement`; applied by `--fix` like a built-in rule's.
#[test]
fn user_pack_fixes_rewrite_with_their_captures_and_remove_statements() {
    let project = Project::new();
    project.write("lint-rules/cuda-call.md", PACK_RULE);
    project.write(
        "torchlint.toml",
        "extend-rule-packs = [\"lint-rules\"]\nselect = [\"ACME\"]\n",
    );
    project.write(
        "train.py",
        "import torch\n\nfor x in loader:\n    y = model(x.cuda())\n    torch.cuda.synchronize()\n",
    );
    let run = project.run(&["check", "--no-cache", "--fix", "--unsafe-fixes", "train.py"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        std::fs::read_to_string(project.path().join("train.py")).unwrap(),
        "import torch\n\nfor x in loader:\n    y = model(x.to(device))\n"
    );
}

/// A template placeholder no capture fills would be written into the user's code: the rule
/// file is refused, naming the file and the placeholder, before anything is linted.
#[test]
fn a_fix_template_naming_no_capture_is_an_error_in_the_rule_file() {
    let project = Project::new();
    project.write(
        "lint-rules/cuda-call.md",
        PACK_RULE.replace(
            "with = \"{obj}.to(device)\"",
            "with = \"{object}.to(device)\"",
        ),
    );
    project.write("torchlint.toml", "extend-rule-packs = [\"lint-rules\"]\n");
    project.write("train.py", "x.cuda()\n");
    let run = project.run(&["check", "--no-cache", "train.py"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr.contains("cuda-call.md") && run.stderr.contains("the fix's `{object}`"),
        "{}",
        run.stderr
    );
    let both = PACK_RULE.replace(
        "replace = \"call\", with",
        "append-argument = \"args\", text = \"1\", replace = \"call\", with",
    );
    project.write("lint-rules/cuda-call.md", both);
    let run = project.run(&["check", "--no-cache", "train.py"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr.contains("a `fix` needs exactly one of"),
        "{}",
        run.stderr
    );
}

/// TL108's fix is safe where all the load returns goes into `load_state_dict` (straight, or
/// through a name read only there): `--fix` alone applies those, and leaves the load whose
/// checkpoint is read elsewhere (`ckpt["epoch"]`) to `--unsafe-fixes`.
#[test]
fn a_load_that_only_feeds_load_state_dict_is_fixed_safely() {
    let project = Project::new();
    let script = "\
import torch

def restore(model, opt, path):
    model.load_state_dict(torch.load(path))
    state = torch.load(path)
    model.load_state_dict(state[\"model\"])
    opt.load_state_dict(state_dict=state[\"opt\"])
    ckpt = torch.load(path)
    model.load_state_dict(ckpt[\"model\"])
    return ckpt[\"epoch\"]
";
    project.write("train.py", script);
    let run = project.run(&["check", "--no-cache", "--fix", "train.py"]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("1 hidden fix can be enabled with the `--unsafe-fixes` option"),
        "{}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("train.py")).unwrap(),
        script
            .replace(
                "torch.load(path))",
                "torch.load(path, map_location=\"cpu\"))"
            )
            .replace(
                "state = torch.load(path)",
                "state = torch.load(path, map_location=\"cpu\")"
            )
    );
}

/// A read-only file is not fixed (its owner marked it not to change: vendored or generated
/// code), though renaming a new file over it would succeed, even for root: the run says so,
/// naming it, fixes the other files, and exits 2 as for any file it could not handle.
#[cfg(unix)]
#[test]
fn a_read_only_file_is_left_as_it_is_and_the_others_are_fixed() {
    use std::os::unix::fs::PermissionsExt;
    let project = Project::new();
    let locked = project.write("vendored.py", LOADS);
    project.write("a.py", LOADS);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).unwrap();
    let run = project.run(&["check", "--no-cache", "--fix", "--unsafe-fixes", "."]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("vendored.py") && run.stderr.contains("read-only"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&locked).unwrap(), LOADS);
    assert_eq!(
        std::fs::metadata(&locked).unwrap().permissions().mode() & 0o777,
        0o444
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.py")).unwrap(),
        FIXED
    );
}

/// TL202's fix replaces a `with detect_anomaly():` block by its body, dedented, comments and
/// blank lines kept; none where the manager shares the `with` with another manager, or the
/// body holds a string spanning lines (dedenting would change its text).
#[test]
fn a_with_detect_anomaly_block_is_replaced_by_its_body_where_nothing_else_changes() {
    let project = Project::new();
    let fixed_only = "import torch\n\nif run:\n    with torch.autograd.detect_anomaly(\n        check_nan=True,\n    ):  # debugging\n        # one epoch\n        for x in loader:\n            model(x).sum().backward()\n\n            opt.step()\n";
    let kept = "with torch.autograd.detect_anomaly(), timer():\n    for x in loader:\n        model(x).sum().backward()\n        opt.step()\nwith torch.autograd.detect_anomaly():\n    for x in loader:\n        model(x).sum().backward()\n        opt.step()\n        log(\"\"\"step\n        done\"\"\")\n";
    project.write("train.py", format!("{fixed_only}{kept}"));
    let run = project.run(&[
        "check",
        "--no-cache",
        "--select",
        "TL202",
        "--fix",
        "--unsafe-fixes",
        "train.py",
    ]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        std::fs::read_to_string(project.path().join("train.py")).unwrap(),
        format!(
            "import torch\n\nif run:\n    # one epoch\n    for x in loader:\n        model(x).sum().backward()\n\n        opt.step()\n{kept}"
        )
    );
    assert_eq!(
        run.stdout.matches("warning[TL202]").count(),
        2,
        "{}",
        run.stdout
    );
}
