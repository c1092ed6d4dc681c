//! Bad input never crashes the run: each bad path gets one clear message naming it, the other
//! files are still linted, and the exit code is 2 only for real errors.
//!
//! Every test puts a good file with a known hazard (`ok.py`, TL108 on line 2) next to the bad
//! input and checks that its finding is still reported.

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Project, Run};

/// A good file whose only finding is `ok.py:2:9: TL108`.
const OK: &str = "import torch\nstate = torch.load(\"x.pt\")\n";
const OK_FINDING: &str = "ok.py:2:9: TL108";

/// A project holding `ok.py`.
fn project_with_ok_file() -> Project {
    let project = Project::new();
    project.write("ok.py", OK);
    project
}

/// Runs `torchlint --output-format concise ARGS...`; a run that hangs fails the test.
fn lint(project: &Project, args: &[&str]) -> Run {
    let mut command = project.command();
    command.arg("--output-format").arg("concise").args(args);
    run_with_timeout(command, Duration::from_secs(600))
}

fn run_with_timeout(mut command: Command, limit: Duration) -> Run {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn torchlint");
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).expect("read the output");
            bytes
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().unwrap()));
    let stderr = read_all(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for torchlint") {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().expect("kill torchlint");
            panic!("torchlint did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run::from(std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    })
}

/// The `error: ...` lines of stderr.
fn errors(run: &Run) -> Vec<&str> {
    run.stderr
        .lines()
        .filter(|line| line.starts_with("error: "))
        .collect()
}

/// Asserts that stderr holds exactly one error line, that it starts with `error: PATH: ` and
/// contains every one of `words`.
fn assert_one_error(run: &Run, path: &str, words: &[&str]) {
    let errors = errors(run);
    assert_eq!(
        errors.len(),
        1,
        "expected one error about {path}:\n{run:#?}"
    );
    assert_error(run, path, words);
}

/// Asserts that one of the error lines is about `path` and contains every one of `words`.
fn assert_error(run: &Run, path: &str, words: &[&str]) {
    let prefix = format!("error: {path}: ");
    let about_path: Vec<&str> = errors(run)
        .into_iter()
        .filter(|line| line.starts_with(&prefix))
        .collect();
    assert_eq!(
        about_path.len(),
        1,
        "expected one error naming {path}:\n{run:#?}"
    );
    for word in words {
        assert!(
            about_path[0].contains(word),
            "expected {word:?} in {about_path:?}"
        );
    }
}

fn assert_ok_file_linted(run: &Run) {
    assert!(
        run.findings().iter().any(|finding| finding == OK_FINDING),
        "the good file was not linted:\n{run:#?}"
    );
}

fn assert_no_crash(run: &Run) {
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("overflowed its stack"),
        "torchlint crashed:\n{}",
        run.stderr
    );
    assert!(
        run.code >= 0,
        "torchlint was killed by a signal:\n{}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Syntax errors

#[test]
fn syntax_error_is_reported_at_its_line_and_the_rest_of_the_file_is_still_linted() {
    let project = project_with_ok_file();
    project.write(
        "bad.py",
        "import torch\n\ndef broken(:\n    pass\n\nstate = torch.load(\"x.pt\")\n",
    );

    let run = lint(&project, &[]);

    let findings = run.findings();
    assert_eq!(
        findings,
        ["bad.py:3:12: TL001", "bad.py:6:9: TL108", OK_FINDING],
        "{run:#?}"
    );
    assert!(run.stdout.contains("TL001 syntax error"), "{}", run.stdout);
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 1);
}

// ---------------------------------------------------------------------------------------------
// Encodings, binary and empty files

#[test]
fn non_utf8_file_without_coding_declaration_is_one_error_naming_it() {
    let project = project_with_ok_file();
    project.write("latin.py", b"import torch\nname = '\xe9t\xe9'\n");

    let run = lint(&project, &[]);

    assert_one_error(&run, "latin.py", &["not valid UTF-8", "line 2", "coding"]);
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
}

#[test]
fn latin1_file_with_coding_declaration_is_linted_normally() {
    let project = project_with_ok_file();
    project.write(
        "declared.py",
        b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9t\xe9'\nstate = torch.load(name)\n",
    );

    let run = lint(&project, &[]);

    assert_eq!(run.findings(), ["declared.py:4:9: TL108", OK_FINDING]);
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 1);
}

#[test]
fn unknown_codec_over_utf8_bytes_is_linted_as_utf8_with_a_warning() {
    let project = project_with_ok_file();
    project.write(
        "fstrings.py",
        "# -*- coding: future_fstrings -*-\nimport torch\nname = f'{1}é'\nstate = torch.load(name)\n",
    );

    let run = lint(&project, &[]);

    assert_eq!(run.findings(), ["fstrings.py:4:9: TL108", OK_FINDING]);
    assert!(
        run.stderr.contains(
            "warning: fstrings.py: declares the unknown encoding `future_fstrings`; linted as UTF-8"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(run.code, 1);
}

#[test]
fn binary_file_named_py_is_one_error_naming_it() {
    let project = project_with_ok_file();
    project.write(
        "x.py",
        b"\x7fELF\x02\x01\x01\x00\x00\x00\x00torch.load\x00\xff\xfe",
    );

    let run = lint(&project, &[]);

    assert_one_error(&run, "x.py", &["binary"]);
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
}

#[test]
fn empty_file_passes() {
    let project = Project::new();
    project.write("empty.py", "");

    let run = lint(&project, &["empty.py"]);

    assert_eq!(run.stdout, "All checks passed!\n");
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 0);
}

#[test]
fn huge_file_of_50_megabytes_is_linted() {
    let project = project_with_ok_file();
    let line = "value = compute(alpha, beta) + 1  # filler\n";
    let mut text = String::from("import torch\n");
    let filler_lines = 50_000_000 / line.len();
    text.push_str(&line.repeat(filler_lines));
    text.push_str("state = torch.load(\"big.pt\")\n");
    project.write("huge.py", &text);
    let hazard_line = filler_lines + 2;

    let started = Instant::now();
    let run = lint(&project, &[]);
    eprintln!(
        "linting a {} MB file took {:.1?}",
        text.len() / 1_000_000,
        started.elapsed()
    );

    assert_no_crash(&run);
    assert_eq!(
        run.findings(),
        [
            format!("huge.py:{hazard_line}:9: TL108"),
            OK_FINDING.to_owned()
        ]
    );
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 1);
}

// ---------------------------------------------------------------------------------------------
// Symbolic links

#[test]
fn directory_symlink_to_its_parent_is_not_followed() {
    let project = project_with_ok_file();
    project.write("dir/inner.py", OK);
    symlink("..", project.path().join("dir/loop")).unwrap();

    let run = lint(&project, &[]);

    // Folder links are not entered: no error, no hang, each file linted once.
    assert_eq!(run.findings(), ["dir/inner.py:2:9: TL108", OK_FINDING]);
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 1);
}

#[test]
fn file_symlink_loop_is_one_error_per_link() {
    let project = project_with_ok_file();
    symlink("b.py", project.path().join("a.py")).unwrap();
    symlink("a.py", project.path().join("b.py")).unwrap();

    let run = lint(&project, &["a.py", "b.py", "ok.py"]);

    assert_eq!(errors(&run).len(), 2, "{run:#?}");
    assert_error(
        &run,
        "a.py",
        &["symbolic link loop", "fix or remove the link"],
    );
    assert_error(
        &run,
        "b.py",
        &["symbolic link loop", "fix or remove the link"],
    );
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
}

#[test]
fn file_symlink_loop_found_by_walking_a_folder_is_one_error_per_link() {
    let project = project_with_ok_file();
    symlink("b.py", project.path().join("a.py")).unwrap();
    symlink("a.py", project.path().join("b.py")).unwrap();

    let run = lint(&project, &[]);

    assert_eq!(errors(&run).len(), 2, "{run:#?}");
    for link in ["a.py", "b.py"] {
        assert!(
            errors(&run)
                .iter()
                .any(|e| e.contains(link) && e.contains("symbolic link loop")),
            "no error names {link}:\n{run:#?}"
        );
    }
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
}

#[test]
fn broken_symlink_is_one_error_naming_it() {
    let project = project_with_ok_file();
    symlink("missing.py", project.path().join("x.py")).unwrap();

    let run = lint(&project, &["x.py", "ok.py"]);

    assert_one_error(&run, "x.py", &["broken symbolic link"]);
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
}

// ---------------------------------------------------------------------------------------------
// Permissions

/// Whether this process runs as root (the owner of a file it creates).
fn running_as_root(project: &Project) -> bool {
    let probe = project.write(".uid-probe", "");
    let uid = fs::metadata(&probe).unwrap().uid();
    fs::remove_file(probe).unwrap();
    uid == 0
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs the binary as an ordinary user: as `nobody` when the tests run as root (root ignores
/// permissions), after making the project folder readable by others.
/// The binary runs from a copy that `nobody` may execute: the checkout can sit in a folder only
/// its owner may enter (`mktemp -d` makes such folders).
fn run_as_ordinary_user(project: &Project, args: &[&str]) -> Run {
    if !running_as_root(project) {
        let mut command = project.command();
        command.args(args);
        return run_with_timeout(command, Duration::from_secs(120));
    }
    chmod(project.path(), 0o755);
    let bin = tempfile::tempdir().unwrap();
    chmod(bin.path(), 0o755);
    let copy = bin.path().join("torchlint");
    fs::copy(env!("CARGO_BIN_EXE_torchlint"), &copy).unwrap();
    chmod(&copy, 0o755);
    // The same command as `project.command()`, from the copy.
    let template = project.command();
    let mut command = Command::new(&copy);
    command.current_dir(project.path());
    for (key, value) in template.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    command.args(args).uid(65534).gid(65534);
    run_with_timeout(command, Duration::from_secs(120))
}

#[test]
fn unreadable_file_and_unreadable_folder_are_one_error_each() {
    let project = project_with_ok_file();
    chmod(&project.path().join("ok.py"), 0o644);
    let secret = project.write("secret.py", OK);
    let locked = project.path().join("locked");
    project.write("locked/inner.py", OK);
    chmod(&secret, 0o000);
    chmod(&locked, 0o000);

    let walked = run_as_ordinary_user(&project, &["--output-format", "concise"]);
    let named = run_as_ordinary_user(
        &project,
        &["--output-format", "concise", "secret.py", "locked", "ok.py"],
    );
    chmod(&locked, 0o755);

    for run in [walked, named] {
        assert_eq!(errors(&run).len(), 2, "{run:#?}");
        assert_error(
            &run,
            "secret.py",
            &["permission denied", "check its permissions"],
        );
        assert_error(
            &run,
            "locked",
            &["permission denied", "check its permissions"],
        );
        assert_eq!(run.findings(), [OK_FINDING]);
        assert_eq!(run.code, 2);
    }
}

// ---------------------------------------------------------------------------------------------
// Deep nesting

#[test]
fn deeply_nested_expressions_do_not_overflow_the_stack() {
    let project = project_with_ok_file();
    let depth = 100_000;
    project.write(
        "parens.py",
        format!("x = {}1{}\n", "(".repeat(depth), ")".repeat(depth)),
    );
    project.write(
        "lists.py",
        format!("x = {}{}\n", "[".repeat(depth), "]".repeat(depth)),
    );
    project.write("attributes.py", format!("x = a{}\n", ".b".repeat(50_000)));
    project.write(
        "calls.py",
        format!(
            "import torch\nx = {}torch.load(\"x\"){}\n",
            "f(".repeat(10_000),
            ")".repeat(10_000)
        ),
    );

    let run = lint(&project, &[]);

    assert_no_crash(&run);
    assert_eq!(run.findings(), ["calls.py:2:20005: TL108", OK_FINDING]);
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 1);
}

#[test]
fn hazard_deep_inside_nested_lists_is_linted_in_linear_time() {
    let project = project_with_ok_file();
    let depth = 100_000;
    project.write(
        "buried.py",
        format!(
            "import torch\nx = {}torch.load(\"x.pt\"){}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        ),
    );
    let mut command = project.command();
    command.args(["--output-format", "concise"]);

    // Parsing and walking this 200 kB file takes about a second; a minute means a stall.
    let run = run_with_timeout(command, Duration::from_secs(60));

    assert_no_crash(&run);
    assert_eq!(
        run.findings(),
        [
            format!("buried.py:2:{}: TL108", depth + 5),
            OK_FINDING.to_owned()
        ]
    );
    assert_eq!(run.code, 1);
}

#[test]
fn deeply_parenthesized_callee_does_not_overflow_the_stack() {
    let project = project_with_ok_file();
    let depth = 100_000;
    project.write(
        "callee.py",
        format!(
            "import torch\nstate = {}torch.load{}(\"x.pt\")\n",
            "(".repeat(depth),
            ")".repeat(depth)
        ),
    );

    let run = lint(&project, &[]);

    assert_no_crash(&run);
    assert_eq!(run.findings(), ["callee.py:2:9: TL108", OK_FINDING]);
    assert_eq!(run.code, 1);
}

#[test]
fn deeply_indented_blocks_do_not_abort_the_run() {
    let project = project_with_ok_file();
    let depth = 600;
    let mut text = String::new();
    for level in 0..depth {
        text.push_str(&format!("{}if x:\n", "    ".repeat(level)));
    }
    text.push_str(&format!("{}f(\"x\")\n", "    ".repeat(depth)));
    project.write("indented.py", text);

    let run = lint(&project, &[]);

    assert_no_crash(&run);
    assert_ok_file_linted(&run);
    assert!(run.code == 1 || run.code == 2, "{run:#?}");
}

// ---------------------------------------------------------------------------------------------
// A panicking rule

#[test]
fn panic_in_a_rule_is_an_internal_error_naming_the_rule_and_each_file() {
    let project = Project::new();
    project.write(
        "a.py",
        "import torch\nstate = torch.load(\"x.pt\")\ntorch.autograd.set_detect_anomaly(True)\n",
    );
    project.write("b.py", OK);

    let mut command = project.command();
    command
        .env("TORCHLINT_INJECT_PANIC", "TL108")
        .args(["--output-format", "concise"]);
    let run = run_with_timeout(command, Duration::from_secs(120));

    assert_eq!(run.findings(), ["a.py:3:1: TL202"]);
    assert_eq!(errors(&run).len(), 2, "{run:#?}");
    for file in ["a.py", "b.py"] {
        let error = errors(&run)
            .into_iter()
            .find(|line| line.contains(&format!("while linting {file}:")))
            .unwrap_or_else(|| panic!("no internal error names {file}:\n{run:#?}"));
        assert!(error.contains("internal error in TL108 (load-without-map-location)"));
        assert!(error.contains("--ignore TL108"));
    }
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(run.code, 2);
}

// ---------------------------------------------------------------------------------------------
// Paths and config

#[test]
fn missing_path_on_the_command_line_is_one_error_naming_it() {
    let project = project_with_ok_file();

    let run = lint(&project, &["nope.py", "ok.py"]);

    assert_one_error(&run, "nope.py", &["no such file or directory"]);
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
}

#[test]
fn broken_config_in_a_subfolder_stops_only_the_files_it_governs() {
    let project = project_with_ok_file();
    project.write(
        "sub/torchlint.toml",
        "# settings for this folder\nselect = [\"TL108\"]\nignore = [,]\n",
    );
    project.write("sub/governed.py", OK);
    project.write("sub/deeper/governed.py", OK);

    let run = lint(&project, &[]);

    assert_one_error(&run, "sub/torchlint.toml:3", &["invalid TOML"]);
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
}

// ---------------------------------------------------------------------------------------------
// --output-file

fn json_report(project: &Project, args: &[&str]) -> Run {
    let mut command = project.command();
    command.arg("--output-format").arg("json").args(args);
    run_with_timeout(command, Duration::from_secs(120))
}

/// The TL108 finding of `ok.py`, read back from a JSON report.
fn assert_complete_json_report(path: &Path) {
    let text = fs::read_to_string(path).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("not complete JSON ({error}):\n{text}"));
    let findings = report.as_array().expect("a JSON array");
    assert_eq!(findings.len(), 1, "{text}");
    assert_eq!(findings[0]["code"], "TL108");
    assert_eq!(findings[0]["location"]["row"], 2);
}

/// What a run left in the folder besides its result cache (which it is meant to leave).
fn folder_entries(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".torchlint_cache")
        .collect();
    names.sort();
    names
}

#[test]
fn output_file_replaces_an_existing_report_with_complete_json() {
    let project = project_with_ok_file();
    let report = project.write("out.json", "PREVIOUS REPORT\n");

    let run = json_report(&project, &["-o", "out.json", "ok.py"]);

    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 1);
    assert_complete_json_report(&report);
    assert_eq!(folder_entries(project.path()), ["ok.py", "out.json"]);
}

#[test]
fn output_file_in_a_missing_folder_fails_cleanly() {
    let project = project_with_ok_file();

    let run = json_report(&project, &["-o", "missing/out.json", "ok.py"]);

    assert_eq!(errors(&run).len(), 1, "{run:#?}");
    assert!(
        run.stderr.contains("cannot write the findings"),
        "{}",
        run.stderr
    );
    assert!(!project.path().join("missing").exists());
    assert_eq!(run.code, 2);
}

#[test]
fn output_file_write_error_names_the_output_file() {
    let project = project_with_ok_file();

    let run = json_report(&project, &["-o", "missing/out.json", "ok.py"]);

    assert_one_error(&run, "missing/out.json", &["cannot write the findings"]);
    assert!(!run.stderr.contains(".tmp"), "{}", run.stderr);
    assert_eq!(run.code, 2);
}

#[test]
fn failed_write_leaves_the_existing_report_untouched() {
    let project = project_with_ok_file();
    chmod(&project.path().join("ok.py"), 0o644);
    let report = project.write("reports/out.json", "[]\n");
    chmod(&report, 0o666);
    chmod(&project.path().join("reports"), 0o555);

    let run = run_as_ordinary_user(
        &project,
        &["--output-format", "json", "-o", "reports/out.json", "ok.py"],
    );
    chmod(&project.path().join("reports"), 0o755);

    assert!(run.stderr.contains("cannot write the findings"), "{run:#?}");
    assert_eq!(run.code, 2);
    assert_eq!(fs::read_to_string(&report).unwrap(), "[]\n");
    assert_eq!(
        folder_entries(&project.path().join("reports")),
        ["out.json"]
    );
}

#[test]
fn failed_write_still_reports_the_bad_files() {
    let project = project_with_ok_file();
    project.write("x.py", b"\x00\x01binary");

    let run = json_report(&project, &["-o", "missing/out.json", "ok.py", "x.py"]);

    assert!(run.stderr.contains("cannot write the findings"), "{run:#?}");
    assert_error(&run, "x.py", &["binary"]);
    assert_eq!(run.code, 2);
}

#[test]
fn output_file_keeps_the_existing_reports_permissions() {
    let project = project_with_ok_file();
    let report = project.write("out.json", "[]\n");
    chmod(&report, 0o644);

    let run = json_report(&project, &["-o", "out.json", "ok.py"]);

    assert_eq!(run.code, 1);
    assert_complete_json_report(&report);
    let mode = fs::metadata(&report).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the report's mode changed to {mode:o}");
}

#[test]
fn output_file_that_is_a_symlink_updates_its_target() {
    let project = project_with_ok_file();
    let target = project.write("reports/latest.json", "[]\n");
    let link = project.path().join("out.json");
    symlink("reports/latest.json", &link).unwrap();

    let run = json_report(&project, &["-o", "out.json", "ok.py"]);

    assert_eq!(run.code, 1);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    assert_complete_json_report(&target);
}

// ---------------------------------------------------------------------------------------------
// Special files where torchlint reads its own inputs or writes its reports: a FIFO blocks `open`
// until a writer comes, `/dev/zero` never ends, and renaming a report over a device replaces it.

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::symlink_metadata(path).unwrap().file_type().is_fifo()
}

fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_char_device()
}

/// A character device node like `/dev/full` or `/dev/null` inside the project (root only, as
/// CI containers run): None where this test may not make one.
fn device_node(project: &Project, name: &str, minor: u32) -> Option<std::path::PathBuf> {
    let path = project.path().join(name);
    let made = Command::new("mknod")
        .arg(&path)
        .args(["c", "1", &minor.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    made.then_some(path)
}

/// A run that must end quickly: a hang here is the defect.
fn lint_promptly(project: &Project, args: &[&str]) -> Run {
    let mut command = project.command();
    command.arg("--output-format").arg("concise").args(args);
    run_with_timeout(command, Duration::from_secs(60))
}

#[test]
fn output_file_that_is_a_fifo_is_written_in_place() {
    let project = project_with_ok_file();
    let fifo = project.path().join("report.pipe");
    mkfifo(&fifo);
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || fs::read_to_string(fifo).unwrap()
    });
    // The reader opens the FIFO first: a writer that finds no reader is the next test.
    std::thread::sleep(Duration::from_millis(200));

    let run = lint_promptly(&project, &["-o", "report.pipe", "ok.py"]);

    assert_eq!(run.code, 1, "{run:#?}");
    assert!(reader.join().unwrap().contains(OK_FINDING));
    assert!(is_fifo(&fifo), "the FIFO was replaced");
}

#[test]
fn output_file_that_is_a_fifo_nobody_reads_is_an_error_not_a_hang() {
    let project = project_with_ok_file();
    let fifo = project.path().join("report.pipe");
    mkfifo(&fifo);

    let run = lint_promptly(&project, &["-o", "report.pipe", "ok.py"]);

    assert_one_error(
        &run,
        "report.pipe",
        &["cannot write the findings", "no program reads"],
    );
    assert_eq!(run.code, 2);
    assert!(is_fifo(&fifo), "the FIFO was replaced");
}

#[test]
fn output_file_and_baseline_on_a_device_write_to_it_and_keep_the_device() {
    let project = project_with_ok_file();
    let (Some(full), Some(null)) = (
        device_node(&project, "full", 7),
        device_node(&project, "null", 3),
    ) else {
        common::report_skip(
            "output_file_and_baseline_on_a_device_write_to_it_and_keep_the_device",
            "mknod needs root",
        );
        return;
    };

    let run = lint_promptly(&project, &["-o", "full", "ok.py"]);
    assert_one_error(
        &run,
        "full",
        &["cannot write the findings", "No space left"],
    );
    assert_eq!(run.code, 2);

    let run = lint_promptly(&project, &["-o", "null", "ok.py"]);
    assert_eq!((run.code, run.stderr.as_str()), (1, ""), "{run:#?}");

    let run = lint_promptly(
        &project,
        &["--write-baseline", "--baseline", "null", "ok.py"],
    );
    assert_eq!(run.code, 0, "{run:#?}");

    assert!(
        is_char_device(&full) && is_char_device(&null),
        "a device was replaced"
    );
    assert_eq!(folder_entries(project.path()), ["full", "null", "ok.py"]);
}

#[test]
fn output_file_that_is_a_folder_is_an_error() {
    let project = project_with_ok_file();
    fs::create_dir(project.path().join("reports")).unwrap();

    let run = lint_promptly(&project, &["-o", "reports", "ok.py"]);

    assert_one_error(&run, "reports", &["cannot write the findings", "a folder"]);
    assert_eq!(run.code, 2);
}

#[test]
fn fifo_in_a_rule_pack_folder_is_an_error_not_a_hang() {
    let project = project_with_ok_file();
    project.write("torchlint.toml", "extend-rule-packs = [\"lint-rules\"]\n");
    fs::create_dir(project.path().join("lint-rules")).unwrap();
    mkfifo(&project.path().join("lint-rules/stuck.md"));

    let run = lint_promptly(&project, &["ok.py"]);

    assert!(
        run.stderr.contains("stuck.md") && run.stderr.contains("FIFO"),
        "{run:#?}"
    );
    assert_eq!(run.code, 2);
}

#[test]
fn config_that_is_dev_zero_is_an_error_not_a_flood() {
    let project = project_with_ok_file();
    symlink("/dev/zero", project.path().join("zero.toml")).unwrap();
    symlink("/dev/zero", project.path().join("pyproject.toml")).unwrap();

    let run = lint_promptly(&project, &["--config", "zero.toml", "ok.py"]);
    assert!(
        run.stderr.contains("zero.toml") && run.stderr.contains("character device"),
        "{run:#?}"
    );
    assert_eq!(run.code, 2);

    let run = lint_promptly(&project, &["ok.py"]);
    assert_one_error(
        &run,
        "pyproject.toml",
        &["character device, not a regular file"],
    );
    assert_eq!(run.code, 2);
}

#[test]
fn baseline_that_is_a_fifo_or_dev_zero_is_an_error_not_a_hang() {
    let project = project_with_ok_file();
    mkfifo(&project.path().join("baseline.json"));
    symlink("/dev/zero", project.path().join("zero.json")).unwrap();

    for baseline in ["baseline.json", "zero.json"] {
        let run = lint_promptly(&project, &["--baseline", baseline, "ok.py"]);
        assert_one_error(
            &run,
            baseline,
            &["cannot read the baseline", "not a regular file"],
        );
        assert_eq!(run.code, 2);
    }
}

#[test]
fn cache_file_that_is_a_fifo_or_dev_zero_is_ignored() {
    for special in ["fifo", "zero"] {
        let project = project_with_ok_file();
        let folder = project
            .path()
            .join(".torchlint_cache")
            .join(env!("CARGO_PKG_VERSION"));
        fs::create_dir_all(&folder).unwrap();
        let results = folder.join("results.postcard");
        match special {
            "fifo" => mkfifo(&results),
            _ => symlink("/dev/zero", &results).unwrap(),
        }

        let run = lint_promptly(&project, &["ok.py"]);

        assert_eq!(run.findings(), [OK_FINDING], "{special}: {run:#?}");
        assert_eq!(run.code, 1, "{special}: {run:#?}");
    }
}

#[test]
fn stdin_of_endless_zeros_stops_at_the_first_nul() {
    let project = project_with_ok_file();
    let mut command = project.command();
    command
        .args([
            "--output-format",
            "concise",
            "-",
            "--stdin-filename",
            "zero.py",
        ])
        .stdin(fs::File::open("/dev/zero").unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let run = Run::from(command.output().unwrap());

    assert!(started.elapsed() < Duration::from_secs(30));
    assert_one_error(&run, "zero.py", &["NUL byte"]);
    assert_eq!(run.code, 2);
}

#[test]
fn special_files_named_on_the_command_line_are_reported_each() {
    let project = project_with_ok_file();
    mkfifo(&project.path().join("pipe.py"));
    let _listener =
        std::os::unix::net::UnixListener::bind(project.path().join("socket.py")).unwrap();
    symlink("/dev/zero", project.path().join("zero.py")).unwrap();

    let run = lint_promptly(&project, &["pipe.py", "socket.py", "zero.py", "ok.py"]);

    assert_eq!(errors(&run).len(), 3, "{run:#?}");
    assert_error(&run, "pipe.py", &["FIFO", "not a regular file"]);
    assert_error(&run, "socket.py", &["socket", "not a regular file"]);
    assert_error(&run, "zero.py", &["character device", "not a regular file"]);
    assert_ok_file_linted(&run);
    assert_eq!(run.code, 2);
}

#[test]
fn a_long_chain_of_symlinks_is_not_called_a_loop() {
    let project = project_with_ok_file();
    for i in 0..60 {
        symlink(
            format!("l{}.py", i + 1),
            project.path().join(format!("l{i}.py")),
        )
        .unwrap();
    }
    project.write("l60.py", OK);

    let run = lint_promptly(&project, &["l0.py", "ok.py"]);

    assert_one_error(&run, "l0.py", &["too many levels of symbolic links"]);
    assert!(!run.stderr.contains("loop"), "{}", run.stderr);
    assert_ok_file_linted(&run);
}

#[test]
fn a_file_named_twice_is_linted_once() {
    let project = project_with_ok_file();
    let absolute = project.path().join("ok.py");

    let run = lint_promptly(&project, &["ok.py", absolute.to_str().unwrap(), "./ok.py"]);

    assert_eq!(run.findings().len(), 1, "{run:#?}");
    assert_eq!(run.code, 1);
}

#[test]
fn a_report_that_cannot_reach_stdout_is_an_error_that_says_stdout() {
    let project = project_with_ok_file();

    let mut command = project.command();
    command.args(["--output-format", "concise", "ok.py"]);
    // SAFETY: close(2) is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    let run = run_with_stdout_closed(command);
    assert!(
        run.stderr.contains("cannot write the report to stdout"),
        "closed stdout: {run:#?}"
    );
    assert_eq!(run.code, 2);

    let mut command = project.command();
    command
        .args(["--output-format", "concise", "ok.py"])
        .stdout(
            fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .stderr(Stdio::piped());
    let run = Run::from(command.output().unwrap());
    assert!(
        run.stderr.contains("cannot write the report to stdout")
            && run.stderr.contains("No space left"),
        "/dev/full: {run:#?}"
    );
    assert_eq!(run.code, 2);
}

/// Runs a command whose stdout the test has closed: only stderr is read.
fn run_with_stdout_closed(mut command: Command) -> Run {
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run torchlint");
    Run::from(output)
}

#[test]
fn notebook_with_a_lone_surrogate_and_a_duplicate_key_is_linted_as_jupyter_reads_it() {
    let project = project_with_ok_file();
    // Python's `json` (and so Jupyter) keeps `"\ud800"` and takes a duplicate key's last value.
    let notebook = r##"{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "metadata": {},
      "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# \ud800 notes"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
         "source": ["import torch\n", "label = \"\ud800\"\n", "state = torch.load(\"x.pt\")\n"]}
      ]}"##;
    project.write("nb.ipynb", notebook);

    let run = lint_promptly(&project, &["nb.ipynb", "ok.py"]);

    assert_eq!(errors(&run), Vec::<&str>::new(), "{run:#?}");
    assert!(
        run.findings()
            .contains(&"nb.ipynb:cell 2:line 3:9: TL108".to_owned()),
        "{run:#?}"
    );
    assert_ok_file_linted(&run);
}
