//! The command line as a user drives it: exit codes, stdin, config discovery, per-file
//! ignores, suppressions, discovery rules, statistics, rule docs, user rule packs.

mod common;

use common::Project;

const LOAD: &str = "import torch\nstate = torch.load('x.pt')\n";
const CLEAN: &str = "import torch\nstate = torch.load('x.pt', map_location='cpu')\n";

fn concise(project: &Project, args: &[&str]) -> common::Run {
    let mut all = vec!["check", "--output-format", "concise"];
    all.extend_from_slice(args);
    project.run(&all)
}

#[test]
fn exit_codes_follow_ruff() {
    let project = Project::new();
    project.write("clean.py", CLEAN);
    let run = concise(&project, &[]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "All checks passed!\n"));

    project.write("train.py", LOAD);
    let run = concise(&project, &[]);
    assert_eq!(run.code, 1);
    assert_eq!(run.findings(), ["train.py:2:9: TL108"]);
    assert!(
        run.stdout.ends_with(
            "Found 1 finding in 1 file.\nNo fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).\n"
        ),
        "{}",
        run.stdout
    );

    assert_eq!(concise(&project, &["--exit-zero"]).code, 0);

    let run = concise(&project, &["--select", "TL999"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("`TL999` selects no rule"),
        "{}",
        run.stderr
    );

    let run = project.run(&["check", "--output-format", "yaml"]);
    assert_eq!(run.code, 2);
}

#[test]
fn check_is_the_default_command_and_dot_the_default_path() {
    let project = Project::new();
    project.write("pkg/train.py", LOAD);
    let run = project.run(&["--output-format", "concise"]);
    assert_eq!(run.findings(), ["pkg/train.py:2:9: TL108"]);
    let run = project.run(&["--output-format", "concise", "pkg"]);
    assert_eq!(run.findings(), ["pkg/train.py:2:9: TL108"]);
}

#[test]
fn version() {
    let run = Project::new().run(&["--version"]);
    assert_eq!(run.code, 0);
    assert_eq!(
        run.stdout.trim(),
        format!("torchlint {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn stdin_uses_the_stdin_filename_for_output_and_config() {
    let project = Project::new();
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nper-file-ignores = { \"scripts/*\" = [\"TL108\"] }\n",
    );
    let run = project.run_with_stdin(
        &[
            "check",
            "--output-format",
            "concise",
            "-",
            "--stdin-filename",
            "src/train.py",
        ],
        LOAD,
    );
    assert_eq!(run.code, 1);
    assert_eq!(run.findings(), ["src/train.py:2:9: TL108"]);

    let run = project.run_with_stdin(
        &[
            "check",
            "--output-format",
            "concise",
            "-",
            "--stdin-filename",
            "scripts/train.py",
        ],
        LOAD,
    );
    assert_eq!(run.code, 0, "{}", run.stdout);

    let run = project.run_with_stdin(&["check", "--output-format", "concise", "-"], LOAD);
    assert_eq!(run.findings(), ["-:2:9: TL108"]);
}

#[test]
fn stdin_filename_alone_reads_stdin_as_ruff_does() {
    // Without `-`: the folder (which holds another hazard) is not linted instead.
    let project = Project::new();
    project.write("other.py", LOAD);
    let args = ["check", "--output-format", "concise", "--stdin-filename"];
    let run = project.run_with_stdin(&[&args[..], &["src/train.py"]].concat(), LOAD);
    assert_eq!(run.code, 1);
    assert_eq!(run.findings(), ["src/train.py:2:9: TL108"]);

    // A path beside it is ignored, with a warning.
    let run = project.run_with_stdin(
        &[&args[..], &["src/train.py", "other.py"]].concat(),
        "x = 1\n",
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr
            .contains("warning: ignoring other.py in favour of stdin"),
        "{run:#?}"
    );
}

#[test]
fn force_exclude_applies_the_excludes_to_named_files() {
    // As pre-commit runs the hook: every staged file named, excluded ones among them.
    let project = Project::new();
    project.write("torchlint.toml", "extend-exclude = [\"generated\"]\n");
    for file in ["generated/x.py", "build/y.py", "keep.py"] {
        project.write(file, LOAD);
    }
    let named = ["generated/x.py", "build/y.py", "keep.py"];
    let args = ["check", "--output-format", "concise"];
    let run = project.run(&[&args[..], &named[..]].concat());
    assert_eq!(
        run.findings(),
        [
            "build/y.py:2:9: TL108",
            "generated/x.py:2:9: TL108",
            "keep.py:2:9: TL108"
        ]
    );
    let run = project.run(&[&args[..], &["--force-exclude"], &named[..]].concat());
    assert_eq!(run.findings(), ["keep.py:2:9: TL108"]);
    let run = project.run(&[&args[..], &["--force-exclude", "generated/x.py"]].concat());
    assert_eq!(run.code, 0, "{run:#?}");
    // The hook passes it.
    let hooks = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/.pre-commit-hooks.yaml"
    ))
    .unwrap();
    assert!(
        hooks.contains("entry: torchlint check --force-exclude"),
        "{hooks}"
    );
}

#[test]
fn clean_removes_the_caches_under_a_folder() {
    let project = Project::new();
    project.write("a/train.py", LOAD);
    project.write("b/c/train.py", LOAD);
    for folder in ["a", "b/c"] {
        let run = project.run(&[
            "check",
            "--cache-dir",
            &format!("{folder}/.torchlint_cache"),
            folder,
        ]);
        assert_eq!(run.code, 1, "{run:#?}");
    }
    // A folder with the name but not torchlint's tag is someone else's.
    project.write("d/.torchlint_cache/notes.txt", "mine");

    let run = project.run(&["clean"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let mut removed: Vec<&str> = run.stdout.lines().collect();
    removed.sort();
    assert_eq!(
        removed,
        ["removed a/.torchlint_cache", "removed b/c/.torchlint_cache"]
    );
    assert!(!project.path().join("a/.torchlint_cache").exists());
    assert!(!project.path().join("b/c/.torchlint_cache").exists());
    assert!(project.path().join("d/.torchlint_cache/notes.txt").exists());

    let run = project.run(&["clean", "a/train.py"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("a/train.py: not a folder"), "{run:#?}");
}

#[test]
fn a_missing_bare_word_suggests_the_subcommands() {
    let project = Project::new();
    let run = project.run(&["clena"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("clena: no such file or directory; if a subcommand was meant, they are: check, rule, probe, server, clean"),
        "{run:#?}"
    );
    let run = project.run(&["nofile.py"]);
    assert_eq!(run.code, 2);
    assert!(!run.stderr.contains("subcommand"), "{run:#?}");
}

#[test]
fn a_project_in_a_folder_named_like_a_glob_keeps_its_excludes_and_ignores() {
    // The project's own path is no pattern: `data[1]` is not the class `[1]`.
    let project = Project::new();
    project.write(
        "data[1]/torchlint.toml",
        "extend-exclude = [\"generated\"]\nper-file-ignores = { \"scripts/*\" = [\"TL108\"] }\n",
    );
    for file in ["generated/x.py", "scripts/y.py", "train.py"] {
        project.write(&format!("data[1]/{file}"), LOAD);
    }
    let run = project.run(&["check", "--output-format", "concise", "data[1]"]);
    assert_eq!(run.findings(), ["data[1]/train.py:2:9: TL108"], "{run:#?}");
}

#[test]
fn every_error_of_a_config_file_is_reported_at_once_in_file_order() {
    let project = Project::new();
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nselect = [\"TL1\", \"NOPE1\"]\nignore = [\"ALSO2\"]\nbogus = 1\nextend-exclude = 5\n\n[tool.torchlint.empty-cache-in-loop]\nnope = 1\n",
    );
    project.write("train.py", LOAD);
    let run = project.run(&["check", "train.py"]);
    assert_eq!(run.code, 2, "{run:#?}");
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|line| line.strip_prefix("error: pyproject.toml:"))
        .map(|line| line.split(':').next().unwrap())
        .collect();
    assert_eq!(lines, ["2", "3", "4", "5", "8"], "{}", run.stderr);
    for part in [
        "`NOPE1` selects no rule",
        "`ALSO2` selects no rule",
        "unknown key `bogus`",
        "`extend-exclude` takes a list",
        "`nope` is not an option of TL201",
    ] {
        assert!(run.stderr.contains(part), "{part}: {}", run.stderr);
    }
}

#[test]
fn a_finding_says_gpu_only_where_the_code_does() {
    // CPU-only evaluation code: its graphs hold host memory, not GPU memory.
    let project = Project::new();
    project.write("cpu.py", common::EVAL_HAZARD);
    project.write(
        "gpu.py",
        common::EVAL_HAZARD.replace("model = nn.Linear(8, 1)", "model = nn.Linear(8, 1).cuda()"),
    );
    let run = project.run(&[
        "check",
        "--output-format",
        "concise",
        "--select",
        "TL102",
        "cpu.py",
        "gpu.py",
    ]);
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.contains("TL102"))
        .collect();
    assert_eq!(lines.len(), 2, "{run:#?}");
    assert!(
        lines[0].starts_with("cpu.py")
            && lines[0].ends_with("so the memory of the model's device grows every step"),
        "{}",
        lines[0]
    );
    assert!(!lines[0].contains("GPU"), "{}", lines[0]);
    assert!(
        lines[1].starts_with("gpu.py")
            && lines[1].ends_with("so the memory of the GPU grows every step"),
        "{}",
        lines[1]
    );
}

#[test]
fn select_ignore_and_extend_select() {
    let project = Project::new();
    project.write(
        "train.py",
        "import torch\ntorch.autograd.set_detect_anomaly(True)\nstate = torch.load('x.pt')\n",
    );
    let both = ["train.py:2:1: TL202", "train.py:3:9: TL108"];
    assert_eq!(concise(&project, &[]).findings(), both);
    assert_eq!(
        concise(&project, &["--select", "TL108"]).findings(),
        ["train.py:3:9: TL108"]
    );
    assert_eq!(
        concise(&project, &["--select", "TL2"]).findings(),
        ["train.py:2:1: TL202"]
    );
    assert_eq!(
        concise(&project, &["--ignore", "TL1"]).findings(),
        ["train.py:2:1: TL202"]
    );
    // The more specific selector wins over the broader ignore.
    assert_eq!(
        concise(&project, &["--ignore", "TL", "--extend-select", "TL108"]).findings(),
        ["train.py:3:9: TL108"]
    );
    assert_eq!(
        concise(&project, &["--select", "load-without-map-location"]).findings(),
        ["train.py:3:9: TL108"]
    );
    assert_eq!(concise(&project, &["--select", "ALL"]).findings(), both);
}

#[test]
fn the_closest_config_file_wins() {
    let project = Project::new();
    project.write("pyproject.toml", "[tool.torchlint]\nignore = [\"TL108\"]\n");
    project.write("top.py", LOAD);
    project.write("sub/torchlint.toml", "select = [\"TL108\"]\n");
    project.write("sub/deeper/train.py", LOAD);
    // A pyproject.toml without a torchlint table configures nothing here.
    project.write("other/pyproject.toml", "[tool.black]\nline-length = 100\n");
    project.write("other/train.py", LOAD);
    let run = concise(&project, &[]);
    assert_eq!(run.findings(), ["sub/deeper/train.py:2:9: TL108"]);

    // `.torchlint.toml` beats `torchlint.toml` beats `pyproject.toml` in one folder.
    project.write("sub/.torchlint.toml", "ignore = [\"TL108\"]\n");
    assert_eq!(concise(&project, &[]).code, 0);
}

#[test]
fn config_flag_overrides_discovery() {
    let project = Project::new();
    project.write("pyproject.toml", "[tool.torchlint]\nignore = [\"TL108\"]\n");
    project.write("ci.toml", "select = [\"TL108\"]\n");
    project.write("train.py", LOAD);
    assert_eq!(concise(&project, &[]).code, 0);
    let run = concise(&project, &["--config", "ci.toml"]);
    assert_eq!(run.findings(), ["train.py:2:9: TL108"]);
}

/// Flags TL202 on line 2 and TL108 on line 3.
const TWO_RULES: &str =
    "import torch\ntorch.autograd.set_detect_anomaly(True)\nstate = torch.load('x.pt')\n";

#[test]
fn inline_config_pairs_apply_over_the_config_file_in_order() {
    let project = Project::new();
    project.write("train.py", TWO_RULES);
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nselect = [\"TL108\", \"TL202\"]\n",
    );
    let both = ["train.py:2:1: TL202", "train.py:3:9: TL108"];
    assert_eq!(concise(&project, &[]).findings(), both);
    // A further selection layer over the config's.
    let run = concise(&project, &["--config", "ignore = [\"TL202\"]"]);
    assert_eq!(run.findings(), ["train.py:3:9: TL108"], "{}", run.stderr);
    // The same key: the pair wins, and a later pair wins over an earlier one.
    let run = concise(&project, &["--config", "select = [\"TL108\"]"]);
    assert_eq!(run.findings(), ["train.py:3:9: TL108"], "{}", run.stderr);
    let run = concise(
        &project,
        &[
            "--config",
            "select = [\"TL108\"]",
            "--config",
            "select = [\"TL202\"]",
        ],
    );
    assert_eq!(run.findings(), ["train.py:2:1: TL202"], "{}", run.stderr);
    // The other flags apply over the pairs, as Ruff's do.
    let run = concise(
        &project,
        &[
            "--config",
            "ignore = [\"TL108\"]",
            "--extend-select",
            "TL108",
        ],
    );
    assert_eq!(run.findings(), both, "{}", run.stderr);
    // Over a config file named by path too, whichever comes first.
    project.write("ci.toml", "select = [\"TL202\"]\n");
    for args in [
        [
            "--config",
            "ci.toml",
            "--config",
            "extend-select = [\"TL108\"]",
        ],
        [
            "--config",
            "extend-select = [\"TL108\"]",
            "--config",
            "ci.toml",
        ],
    ] {
        let run = concise(&project, &args);
        assert_eq!(run.findings(), both, "{args:?}: {}", run.stderr);
    }
}

#[test]
fn an_inline_rule_option_replaces_only_that_option() {
    let project = Project::new();
    let source = "import torch\nfor step, x in enumerate(loader):\n    model(x).sum().backward()\n    \
                  if step % 5 == 0:\n        torch.cuda.empty_cache()\n    \
                  if step % 1000 == 0:\n        torch.cuda.empty_cache()\n    \
                  free_gpu()\n";
    project.write("train.py", source);
    project.write(
        "pyproject.toml",
        "[tool.torchlint.empty-cache-in-loop]\nmax-gated-interval = 1000\nextra-functions = [\"free_gpu\"]\n",
    );
    let all = [
        "train.py:5:9: TL201",
        "train.py:7:9: TL201",
        "train.py:8:5: TL201",
    ];
    assert_eq!(concise(&project, &[]).findings(), all);
    let pair = "empty-cache-in-loop.max-gated-interval = 10";
    let run = concise(&project, &["--config", pair]);
    assert_eq!(
        run.findings(),
        ["train.py:5:9: TL201", "train.py:8:5: TL201"],
        "{}",
        run.stderr
    );
    let run = project.run(&["check", "--show-settings", "--config", pair, "train.py"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for needed in [
        "    --config 'empty-cache-in-loop.max-gated-interval = 10'\n",
        "TL201 empty-cache-in-loop.max-gated-interval = 10 (--config)\n",
        "TL201 empty-cache-in-loop.extra-functions = [\"free_gpu\"]\n",
    ] {
        assert!(run.stdout.contains(needed), "{needed}: {}", run.stdout);
    }
}

#[test]
fn inline_config_errors_name_the_command_line_pair() {
    let project = Project::new();
    project.write("train.py", LOAD);
    project.write("pyproject.toml", "[tool.torchlint]\nselect = [\"TL1\"]\n");
    let cases = [
        (
            "empty-cache-in-loop.max-gated-interval = \"x\"",
            "error: --config 'empty-cache-in-loop.max-gated-interval = \"x\"': option `max-gated-interval` of TL201 takes an integer",
        ),
        (
            "max-gated-interval = 20",
            "error: --config 'max-gated-interval = 20': unknown key `max-gated-interval` in torchlint's settings (expected select,",
        ),
        (
            "max-gated-interval = 20",
            "a rule's option goes under its rule: `empty-cache-in-loop.max-gated-interval`",
        ),
        (
            "select = [\"TL9\"]",
            "error: --config 'select = [\"TL9\"]': `TL9` selects no rule",
        ),
        (
            "ignore = \"TL108\"",
            "error: --config 'ignore = \"TL108\"': `ignore` takes a list of strings",
        ),
        (
            "select TL108",
            "error: --config 'select TL108' is not a path to a file, and it cannot be parsed as a TOML `KEY = VALUE` pair",
        ),
    ];
    for (pair, expected) in cases {
        let run = concise(&project, &["--config", pair]);
        assert_eq!(run.code, 2, "{pair}: {run:#?}");
        assert!(
            run.stderr.contains(expected),
            "{pair}\nexpected: {expected}\nstderr: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("pyproject.toml"), "{}", run.stderr);
        assert_eq!(run.findings(), Vec::<String>::new());
    }
    // With the config file's own errors, each where it is.
    project.write("pyproject.toml", "[tool.torchlint]\nselect = [\"TL9\"]\n");
    let run = concise(&project, &["--config", "ignore = [\"TL8\"]"]);
    assert_eq!(run.code, 2);
    for part in [
        "error: --config 'ignore = [\"TL8\"]': `TL8` selects no rule",
        "error: pyproject.toml:2: `TL9` selects no rule",
    ] {
        assert!(run.stderr.contains(part), "{part}: {}", run.stderr);
    }
}

#[test]
fn config_takes_one_file_at_most() {
    let project = Project::new();
    project.write("train.py", LOAD);
    project.write("a.toml", "select = [\"TL108\"]\n");
    project.write("b.toml", "ignore = [\"TL108\"]\n");
    let run = concise(&project, &["--config", "a.toml", "--config", "b.toml"]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr
            .contains("error: --config names two config files, a.toml and b.toml"),
        "{}",
        run.stderr
    );
    assert_eq!(run.findings(), Vec::<String>::new());
    // One is read as before; a missing one ending in `.toml` is a missing file, not TOML.
    assert_eq!(concise(&project, &["--config", "b.toml"]).code, 0);
    let run = concise(&project, &["--config", "missing.toml"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("error: missing.toml: cannot read the config file"),
        "{}",
        run.stderr
    );
}

#[test]
fn per_file_ignores() {
    let project = Project::new();
    project.write(
        "torchlint.toml",
        "[per-file-ignores]\n\"tests/*\" = [\"TL108\"]\n\"conftest.py\" = [\"TL1\"]\n",
    );
    project.write("tests/unit/test_load.py", LOAD);
    project.write("pkg/conftest.py", LOAD);
    project.write("pkg/train.py", LOAD);
    let run = concise(&project, &[]);
    assert_eq!(run.findings(), ["pkg/train.py:2:9: TL108"]);
}

#[test]
fn suppression_comments() {
    let project = Project::new();
    project.write(
        "train.py",
        "import torch\n\
         a = torch.load('a.pt')  # noqa: TL108\n\
         b = torch.load('b.pt')  # noqa\n\
         c = torch.load('c.pt')  # torchlint: ignore[TL108]\n\
         d = torch.load('d.pt')  # torchlint: ignore\n\
         e = torch.load('e.pt')  # noqa: TL201\n\
         f = torch.load('f.pt')  # torchlint: ignore[TL201, TL202]\n\
         g = torch.load('# noqa')\n",
    );
    let run = concise(&project, &[]);
    assert_eq!(
        run.findings(),
        [
            "train.py:6:5: TL108",
            "train.py:7:5: TL108",
            "train.py:8:5: TL108"
        ]
    );

    project.write(
        "train.py",
        "# torchlint: ignore-file[TL108]\nimport torch\ntorch.autograd.set_detect_anomaly(True)\na = torch.load('a.pt')\n",
    );
    assert_eq!(concise(&project, &[]).findings(), ["train.py:3:1: TL202"]);
    project.write("train.py", format!("# torchlint: ignore-file\n{LOAD}"));
    assert_eq!(concise(&project, &[]).code, 0);
}

#[test]
fn gitignore_and_default_excludes_are_honoured_but_named_files_always_linted() {
    let project = Project::new();
    project.write(".gitignore", "generated/\n");
    project.write("generated/train.py", LOAD);
    project.write(".venv/lib/site.py", LOAD);
    project.write("build/lib/train.py", LOAD);
    project.write("node_modules/x/train.py", LOAD);
    project.write(".hidden/train.py", LOAD);
    project.write("notes.txt", LOAD);
    project.write(
        "stubs/train.pyi",
        "import torch\ndef f() -> None: ...\nx = torch.load('a')\n",
    );
    let run = concise(&project, &[]);
    assert_eq!(
        run.findings(),
        [".hidden/train.py:2:9: TL108", "stubs/train.pyi:3:5: TL108"]
    );
    let run = concise(&project, &["generated/train.py", "build/lib/train.py"]);
    assert_eq!(
        run.findings(),
        [
            "build/lib/train.py:2:9: TL108",
            "generated/train.py:2:9: TL108"
        ]
    );
}

#[test]
fn exclude_and_extend_exclude() {
    let project = Project::new();
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-exclude = [\"legacy\", \"*_old.py\"]\n",
    );
    project.write("legacy/train.py", LOAD);
    project.write("train_old.py", LOAD);
    project.write("build/train.py", LOAD);
    project.write("train.py", LOAD);
    assert_eq!(concise(&project, &[]).findings(), ["train.py:2:9: TL108"]);

    // `exclude` replaces the defaults.
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nexclude = [\"legacy\"]\n",
    );
    assert_eq!(
        concise(&project, &[]).findings(),
        [
            "build/train.py:2:9: TL108",
            "train.py:2:9: TL108",
            "train_old.py:2:9: TL108"
        ]
    );
}

#[test]
fn statistics_and_quiet() {
    let project = Project::new();
    project.write(
        "train.py",
        "import torch\ntorch.autograd.set_detect_anomaly(True)\na = torch.load('a')\nb = torch.load('b')\n",
    );
    let run = project.run(&["check", "--statistics"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout,
        "2\tTL108\tload-without-map-location\n1\tTL202\tdetect-anomaly-enabled\n"
    );
    let run = project.run(&["check", "--statistics", "--output-format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json[0]["code"], "TL108");
    assert_eq!(json[0]["count"], 2);

    // Formats with no place for a table are refused, not ignored.
    for format in ["sarif", "github", "gitlab", "junit"] {
        let run = project.run(&["check", "--statistics", "--output-format", format]);
        assert_eq!(run.code, 2, "{run:#?}");
        assert_eq!(run.stdout, "");
        assert!(
            run.stderr.contains(&format!(
                "`--statistics` prints a table, or JSON with `--output-format json`; `--output-format {format}` has no place for it"
            )),
            "{run:#?}"
        );
    }

    let run = project.run(&["check", "-q", "--output-format", "concise"]);
    assert_eq!(run.stdout.lines().count(), 3);
    assert!(!run.stdout.contains("Found"));
}

#[test]
fn show_files_lists_what_would_be_linted() {
    let project = Project::new();
    project.write("train.py", LOAD);
    project.write("pkg/model.py", "");
    project.write("pkg/types.pyi", "");
    project.write("notes.txt", "");
    project.write("ignored/skip.py", LOAD);
    project.write(".gitignore", "ignored/\n");
    project.write("build/out.py", LOAD);
    let run = project.run(&["check", "--show-files"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.stdout, "pkg/model.py\npkg/types.pyi\ntrain.py\n");
    assert_eq!(run.stderr, "");
    // Nothing was linted, so nothing was cached.
    assert!(!project.path().join(".torchlint_cache").exists());

    let run = project.run(&["check", "--show-files", "train.py", "missing.py"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "train.py\n");
    assert!(run.stderr.contains("missing.py"), "{run:#?}");
}

#[test]
fn output_file_is_written_whole() {
    let project = Project::new();
    project.write("train.py", LOAD);
    project.write("report.json", "stale");
    let run = project.run(&["check", "--output-format", "json", "-o", "report.json"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    let report = std::fs::read_to_string(project.path().join("report.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(json[0]["code"], "TL108");
}

#[test]
fn color_is_off_when_piped_and_on_when_forced() {
    let project = Project::new();
    project.write("train.py", LOAD);
    let mut command = project.command();
    command.env_remove("NO_COLOR").args(["check"]);
    let run = common::Run::from(command.output().unwrap());
    assert!(!run.stdout.contains('\x1b'));
    let run = project.run(&["check", "--color", "always"]);
    assert!(run.stdout.contains("\x1b["), "{}", run.stdout);
}

#[test]
fn rule_docs() {
    let project = Project::new();
    let run = project.run(&["rule", "TL108"]);
    assert_eq!(run.code, 0);
    assert!(
        run.stdout
            .starts_with("# load-without-map-location (TL108)\n")
    );
    for section in [
        "## What it does",
        "## Why it costs memory",
        "## Example",
        "## Use instead",
        "## How the probe confirms it",
        "## Options",
    ] {
        assert!(run.stdout.contains(section), "missing {section}");
    }
    assert!(
        !run.stdout.contains("expect:"),
        "test markers leak into docs"
    );
    assert!(!run.stdout.contains("## Test cases"));
    assert_eq!(
        project
            .run(&["rule", "empty-cache-in-loop"])
            .stdout
            .lines()
            .next(),
        Some("# empty-cache-in-loop (TL201)")
    );

    let all = project.run(&["rule", "--all"]);
    assert!(all.stdout.contains("(TL001)") && all.stdout.contains("(TL202)"));

    let json = project.run(&["rule", "TL201", "--output-format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["name"], "empty-cache-in-loop");
    assert_eq!(json["options"][0]["name"], "extra-functions");

    let unknown = project.run(&["rule", "TL999"]);
    assert_eq!(unknown.code, 2);
    assert!(unknown.stderr.contains("unknown rule `TL999`"));
    assert_eq!(project.run(&["rule"]).code, 2);
}

#[test]
fn rule_options_come_from_config() {
    let project = Project::new();
    let source = "from utils import free_gpu\nfor x in loader:\n    model(x).sum().backward()\n    free_gpu()\n";
    project.write("train.py", source);
    assert_eq!(concise(&project, &[]).code, 0);
    project.write(
        "pyproject.toml",
        "[tool.torchlint.empty-cache-in-loop]\nextra-functions = [\"utils.free_gpu\"]\n",
    );
    assert_eq!(concise(&project, &[]).findings(), ["train.py:4:5: TL201"]);
}

#[test]
fn a_flush_gated_to_every_n_steps_says_so_and_past_the_interval_is_left_alone() {
    let project = Project::new();
    let source = "import torch\nfor step, x in enumerate(loader):\n    model(x).sum().backward()\n    \
                  if step % 5 == 0:\n        torch.cuda.empty_cache()\n    \
                  if step % 1000 == 0:\n        torch.cuda.empty_cache()\n";
    project.write("train.py", source);
    let run = project.run(&[
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "train.py",
    ]);
    assert!(
        run.stdout
            .contains("train.py:5:9: TL201 `torch.cuda.empty_cache()` runs every 5 batches"),
        "{}",
        run.stdout
    );
    assert_eq!(concise(&project, &[]).findings(), ["train.py:5:9: TL201"]);
    project.write(
        "pyproject.toml",
        "[tool.torchlint.empty-cache-in-loop]\nmax-gated-interval = 1000\n",
    );
    assert_eq!(
        concise(&project, &[]).findings(),
        ["train.py:5:9: TL201", "train.py:7:9: TL201"]
    );
}

#[test]
fn a_framework_hook_keeping_device_tensors_is_said_to_run_per_batch_not_in_a_loop() {
    let project = Project::new();
    let source = "import lightning as L\nimport torch\n\nclass Lit(L.LightningModule):\n    \
                  def validation_step(self, batch, batch_idx):\n        x, y = batch\n        \
                  self.val_preds.append(self.net(x).argmax(1))\n        self.val_targets.append(y)\n";
    project.write("lit.py", source);
    let run = project.run(&[
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "lit.py",
    ]);
    let findings: Vec<&str> = run.stdout.lines().filter(|l| l.contains("TL104")).collect();
    assert_eq!(findings.len(), 2, "{}", run.stdout);
    for finding in findings {
        assert!(
            finding.contains("from every batch until something clears it")
                && !finding.contains("until the loop ends"),
            "{finding}"
        );
    }
}

#[test]
fn suppressions_that_suppress_nothing_are_reported_when_tl002_is_on() {
    let project = Project::new();
    let source = "import torch\na = torch.load(\"a.pt\")  # noqa: TL108\n\
                  b = torch.load(\"b.pt\", map_location=\"cpu\")  # noqa: TL108, E501\n\
                  c = 1  # torchlint: ignore[TL101]\nd = 2  # noqa\n";
    project.write("train.py", source);
    // Off by default.
    assert_eq!(concise(&project, &[]).findings(), Vec::<String>::new());
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-select = [\"TL002\"]\n",
    );
    let run = project.run(&[
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "train.py",
    ]);
    assert_eq!(
        run.findings(),
        ["train.py:3:45: TL002", "train.py:4:8: TL002"]
    );
    assert!(
        run.stdout
            .contains("TL002 unused suppression of `TL108`: no such finding on this line"),
        "{}",
        run.stdout
    );
    // `# noqa: TL002` on the line keeps it quiet, and is not itself unused.
    project.write(
        "train.py",
        "import torch\nc = 1  # noqa: TL101, TL002\nd = 2  # noqa: TL101\n",
    );
    let run = project.run(&[
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "train.py",
    ]);
    assert_eq!(run.findings(), ["train.py:3:8: TL002"], "{}", run.stdout);
}

#[test]
fn server_help_says_how_to_start_configure_and_watch_it() {
    let project = Project::new();
    let help = project.run(&["server", "--help"]);
    assert_eq!(help.code, 0);
    for needed in [
        "VS Code",
        "Neovim",
        "initializationOptions",
        "workspace/didChangeConfiguration",
        "`select` and `ignore`",
        "window/logMessage",
        "torchlint.trace.server",
    ] {
        assert!(help.stdout.contains(needed), "{needed}: {}", help.stdout);
    }
}

#[test]
fn show_settings_says_which_config_rules_and_options_a_file_gets() {
    let project = Project::new();
    project.write("train.py", LOAD);
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-exclude = [\"gen/\"]\n\
         per-file-ignores = { \"train.py\" = [\"TL108\"] }\n\
         [tool.torchlint.empty-cache-in-loop]\nmax-gated-interval = 100\n",
    );
    let run = project.run(&["check", "--show-settings", "train.py"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = &run.stdout;
    for needed in [
        "Settings for train.py",
        "pyproject.toml",
        "TL108 load-without-map-location (off in this file: per-file-ignores)",
        "TL101 eval-without-no-grad\n",
        ", gen/",
        "\"train.py\" = [\"TL108\"]",
        "TL201 empty-cache-in-loop.max-gated-interval = 100\n",
        "TL201 empty-cache-in-loop.extra-functions = [] (default)",
    ] {
        assert!(out.contains(needed), "{needed}: {out}");
    }
    // It lints nothing.
    assert!(!out.contains("Found"), "{out}");
}

#[test]
fn excludes_and_per_file_ignores_can_be_given_on_the_command_line() {
    let project = Project::new();
    project.write("train.py", LOAD);
    project.write("gen/data.py", LOAD);
    project.write("tests/test_io.py", LOAD);
    project.write("pyproject.toml", "[tool.torchlint]\n");
    let all = concise(&project, &[]);
    assert_eq!(all.findings().len(), 3, "{}", all.stdout);
    let run = concise(
        &project,
        &[
            "--extend-exclude",
            "gen",
            "--per-file-ignores",
            "tests/*:TL108",
        ],
    );
    assert_eq!(run.findings(), ["train.py:2:9: TL108"], "{}", run.stderr);
    // Over the config's lists, as the config's own keys would be.
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nper-file-ignores = { \"train.py\" = [\"TL108\"] }\n",
    );
    let run = concise(&project, &["--per-file-ignores", "gen/*:TL1"]);
    assert_eq!(run.findings(), ["tests/test_io.py:2:9: TL108"]);
    let bad = concise(&project, &["--per-file-ignores", "tests/*"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("PATTERN:RULE"), "{}", bad.stderr);
}

#[test]
fn watch_lints_again_when_a_file_changes() {
    use std::io::{BufRead, BufReader};
    let project = Project::new();
    project.write("train.py", CLEAN);
    let mut child = project
        .command()
        .args([
            "check",
            "--watch",
            "--no-cache",
            "--output-format",
            "concise",
            ".",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let wait_for = |wanted: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match received.recv_timeout(left) {
                Ok(line) if line.contains(wanted) => return,
                Ok(_) => {}
                Err(_) => panic!("no `{wanted}` from the watching run"),
            }
        }
    };
    wait_for("All checks passed!");
    project.write("train.py", LOAD);
    wait_for("train.py:2:9: TL108");
    project.write("train.py", CLEAN);
    wait_for("All checks passed!");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn config_errors_name_the_file_line_and_key() {
    let project = Project::new();
    project.write("train.py", LOAD);
    let cases = [
        (
            "[tool.torchlint]\nselect = [\"TL108\"]\nignroe = [\"TL2\"]\n",
            "pyproject.toml:3: unknown key `ignroe`",
        ),
        (
            "[tool.torchlint]\nselect = \"TL108\"\n",
            "pyproject.toml:2: `select` takes a list of strings",
        ),
        (
            "[tool.torchlint]\nselect = [\n  \"TL108\",\n  \"TL9\",\n]\n",
            "pyproject.toml:4: `TL9` selects no rule",
        ),
        (
            "[tool.torchlint.empty-cache-in-loop]\nextra = 1\n",
            "pyproject.toml:2: `extra` is not an option of TL201",
        ),
        (
            "[tool.torchlint.empty-cache-in-loop]\nextra-functions = \"x\"\n",
            "pyproject.toml:2: option `extra-functions` of TL201 takes a list of strings",
        ),
        (
            "[tool.torchlint.load-without-map-location]\nx = 1\n",
            "it has no options",
        ),
        (
            "[tool.torchlint]\nselect = [\"TL108\"\n",
            "pyproject.toml:2: invalid TOML",
        ),
        (
            "[tool.torchlint]\nper-file-ignores = { \"a[\" = [\"TL108\"] }\n",
            "pyproject.toml:2: invalid glob `a[`",
        ),
        (
            "[project]\nname = \"x\"\n\n[[tool.torchlint]]\nselect = [\"TL108\"]\n",
            "pyproject.toml:4: `tool.torchlint` is an array of tables (`[[...]]`); it must be a table",
        ),
        (
            "[tool]\ntorchlint = \"x\"\n",
            "pyproject.toml:2: `tool.torchlint` is a string; it must be a table",
        ),
        (
            "tool = 5\n",
            "pyproject.toml:1: `tool` is an integer; it must be a table",
        ),
    ];
    for (config, expected) in cases {
        project.write("pyproject.toml", config);
        let run = concise(&project, &[]);
        assert_eq!(run.code, 2, "{config}");
        assert!(
            run.stderr.contains(expected),
            "{config}\nexpected: {expected}\nstderr: {}",
            run.stderr
        );
        assert_eq!(run.findings(), Vec::<String>::new());
    }
}

const PACK_RULE: &str = r#"+++
code = "ACME001"
name = "no-cuda-sync"
pack = "lint-rules"
severity = "info"
enabled-by-default = true
message = "`{callee}()` in the training loop waits for the GPU every step"
implementation = "declarative"

[[match]]
pattern = '''(call function: (_) @callee) @call'''
require = [
  { resolves = "callee", to = ["torch.cuda.synchronize"] },
  { inside = "training-loop" },
]
+++
## What it does

Flags `torch.cuda.synchronize()` in a training loop.
"#;

#[test]
fn user_rule_packs_add_declarative_rules() {
    let project = Project::new();
    project.write("tools/lint-rules/no-cuda-sync.md", PACK_RULE);
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-rule-packs = [\"tools/lint-rules\"]\n",
    );
    project.write(
        "train.py",
        "import torch as t\nt.cuda.synchronize()\nfor x in loader:\n    t.cuda.synchronize()\n    model(x).sum().backward()\n",
    );
    let run = concise(&project, &[]);
    assert_eq!(run.findings(), ["train.py:4:5: ACME001"], "{}", run.stderr);
    let run = concise(&project, &["--ignore", "ACME"]);
    assert_eq!(run.code, 0);
    let docs = project.run(&["rule", "ACME001"]);
    assert!(
        docs.stdout.contains("Flags `torch.cuda.synchronize()`"),
        "{}",
        docs.stderr
    );
}

#[test]
fn each_clause_of_a_user_rule_reports_its_own_matches_once() {
    // A rule's clauses share one compiled query: each must read only its own pattern's
    // matches, or the second clause would also report the first pattern's match, which has no
    // `@args`, at the whole call.
    let project = Project::new();
    let rule = PACK_RULE.replace(
        "+++\n## What it does",
        "[[match]]\npattern = '''(call function: (_) @callee arguments: (argument_list) @args) @call'''\nreport = \"args\"\nrequire = [\n  { resolves = \"callee\", to = [\"torch.cuda.empty_cache\"] },\n  { inside = \"training-loop\" },\n]\n+++\n## What it does",
    );
    project.write("tools/lint-rules/no-cuda-sync.md", &rule);
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-rule-packs = [\"tools/lint-rules\"]\nselect = [\"ACME\"]\n",
    );
    project.write(
        "train.py",
        "import torch as t\nfor x in loader:\n    t.cuda.synchronize()\n    t.cuda.empty_cache()\n    model(x).sum().backward()\n",
    );
    let run = concise(&project, &[]);
    assert_eq!(
        run.findings(),
        ["train.py:3:5: ACME001", "train.py:4:23: ACME001"],
        "{}",
        run.stdout
    );
}

#[test]
fn user_rules_on_expression_kinds_see_nested_expressions() {
    // The walk skips call-free expressions when no rule starts inside one; a user rule on
    // `subscript` must turn that off and see `a.b[0]` deep inside `x.y + a.b[0].c * 2`.
    let project = Project::new();
    let rule = PACK_RULE
        .replace("(call function: (_) @callee) @call", "(subscript) @item")
        .replace(
            "require = [\n  { resolves = \"callee\", to = [\"torch.cuda.synchronize\"] },\n  { inside = \"training-loop\" },\n]\n",
            "",
        )
        .replace("`{callee}()` in the training loop waits for the GPU every step", "subscript");
    project.write("tools/lint-rules/no-cuda-sync.md", &rule);
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-rule-packs = [\"tools/lint-rules\"]\nselect = [\"ACME\"]\n",
    );
    project.write("train.py", "z = x.y + a.b[0].c * 2\n");
    let run = concise(&project, &[]);
    assert_eq!(run.findings(), ["train.py:1:11: ACME001"], "{}", run.stderr);
}

#[test]
fn invalid_user_rules_are_reported_with_file_and_line() {
    let project = Project::new();
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-rule-packs = [\"tools/lint-rules\"]\n",
    );
    project.write("train.py", LOAD);
    let cases = [
        (
            PACK_RULE.replace("inside = \"training-loop\"", "inside = \"trainig-loop\""),
            "no-cuda-sync.md:14: unknown context `trainig-loop`",
        ),
        (
            PACK_RULE.replace("(call function", "(cal function"),
            "no-cuda-sync.md:11: invalid tree-sitter pattern",
        ),
        (
            PACK_RULE.replace("resolves = \"callee\"", "resolves = \"calle\""),
            "no-cuda-sync.md:13: the pattern has no capture `@calle`",
        ),
        (
            PACK_RULE.replace("`{callee}()`", "`{calee}()`"),
            "the message's `{calee}`: the pattern has no capture `@calee` (it has: @callee, @call)",
        ),
        (
            // Each clause has the captures of its own pattern, not its neighbours'.
            PACK_RULE.replace(
                "+++\n## What it does",
                "[[match]]\npattern = '''(subscript) @item'''\nrequire = [{ resolves = \"callee\", to = [\"x\"] }]\n+++\n## What it does",
            ),
            "the pattern has no capture `@callee` (it has: @item)",
        ),
        (
            PACK_RULE.replace("ACME001", "TL901"),
            "codes starting with `TL` are reserved",
        ),
        (
            PACK_RULE.replace("severity = \"info\"", "severity = \"fatal\""),
            "no-cuda-sync.md:5: unknown severity `fatal`",
        ),
        (
            PACK_RULE.replace(
                "implementation = \"declarative\"",
                "implementation = \"rust\"",
            ),
            "rules in user packs are declarative",
        ),
        (
            PACK_RULE.replace(
                "name = \"no-cuda-sync\"",
                "name = \"load-without-map-location\"",
            ),
            "the file is named `no-cuda-sync.md`",
        ),
    ];
    for (rule, expected) in cases {
        project.write("tools/lint-rules/no-cuda-sync.md", &rule);
        let run = concise(&project, &[]);
        assert_eq!(run.code, 2, "{expected}");
        assert!(
            run.stderr
                .contains("pyproject.toml:2: a rule pack in `extend-rule-packs` is invalid"),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr.contains(expected),
            "expected: {expected}\nstderr: {}",
            run.stderr
        );
    }
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\nextend-rule-packs = [\"missing\"]\n",
    );
    let run = concise(&project, &[]);
    assert!(
        run.stderr.contains("cannot read the rule pack folder"),
        "{}",
        run.stderr
    );
}

#[test]
fn findings_are_found_among_many_siblings() {
    // Wide nodes (a module, a class or a function with many statements) are walked with a
    // cursor rather than by index: every child must still be seen, the last one too.
    let project = Project::new();
    let mut text = String::from("import torch\n");
    for i in 0..40 {
        text.push_str(&format!("a{i} = torch.load('x{i}.pt')\n"));
    }
    text.push_str("def f():\n");
    for i in 0..40 {
        text.push_str(&format!("    b{i} = {i}\n"));
    }
    text.push_str("    return torch.load('last.pt')\n");
    project.write("wide.py", text);
    let run = concise(&project, &["--select", "TL108"]);
    let found = run.findings();
    assert_eq!(found.len(), 41, "{}", run.stdout);
    assert_eq!(found[0], "wide.py:2:6: TL108");
    assert_eq!(found[40], "wide.py:83:12: TL108");
}
