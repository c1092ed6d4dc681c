//! Text that is valid, or nearly valid, Python but hostile to the parser: it must neither stall
//! the run, nor exhaust memory, nor be misread. Each test runs the real binary on real files.

mod common;

use std::io::Read;
use std::process::Stdio;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::{EVAL_HAZARD, Project, Run};
use serde_json::{Value, json};

/// A good file whose only finding is `ok.py:2:9: TL108`.
const OK: &str = "import torch\nstate = torch.load(\"x.pt\")\n";
const OK_FINDING: &str = "ok.py:2:9: TL108";

/// 100,000 backslash continuations (200 KB): over a minute in tree-sitter-python's scanner
/// without the parse budget.
fn backslash_continuations() -> String {
    format!("{}x = 1\n", "\\\n".repeat(100_000))
}

/// What one run of the binary printed, with its peak resident memory.
struct Measured {
    run: Run,
    max_rss_bytes: u64,
}

/// Runs `torchlint --output-format concise ARGS...` in `project` and measures its peak
/// resident memory (from `wait4`, the child's own and nothing else's).
// `wait4` reaps the child: `Child::wait` cannot, it gives no resource usage.
#[allow(clippy::zombie_processes)]
fn lint_measured(project: &Project, args: &[&str]) -> Measured {
    let mut child = project
        .command()
        .arg("--output-format")
        .arg("concise")
        .args(args)
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
    let mut status = 0;
    // SAFETY: all-zero is a valid `rusage`; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    // SAFETY: `status` and `usage` are valid to write; the child is ours and not yet reaped.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 on torchlint");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let run = Run {
        code,
        stdout: String::from_utf8_lossy(&stdout.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&stderr.join().unwrap()).into_owned(),
    };
    Measured {
        run,
        // Linux reports kilobytes.
        max_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
    }
}

/// Asserts that stderr holds exactly one `error: PATH: ` line, containing every one of `words`.
fn assert_one_error(run: &Run, path: &str, words: &[&str]) {
    let errors: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("error: "))
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "expected one error about {path}:\n{run:#?}"
    );
    assert!(
        errors[0].starts_with(&format!("error: {path}: ")),
        "{errors:?}"
    );
    for word in words {
        assert!(errors[0].contains(word), "expected {word:?} in {errors:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Parse budget (issue 15, item 4)

#[test]
fn file_past_the_parse_budget_is_skipped_once_and_the_rest_is_linted() {
    let project = Project::new();
    project.write("ok.py", OK);
    project.write("slow.py", backslash_continuations());

    let started = Instant::now();
    let measured = lint_measured(&project, &[]);
    let took = started.elapsed();

    let run = &measured.run;
    assert_one_error(run, "slow.py", &["too slow to parse", "skipped"]);
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2, "{run:#?}");
    // The budget for 200 KB is 2.8 s of CPU time; the parse alone took over a minute.
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn backslash_continued_assignments_are_linted_in_linear_time() {
    let project = Project::new();
    // 32,000 `x = 1 \` lines parse in a second as one chain of 32,000 nested assignments;
    // finding each one's value from scratch took 86 s (debug build) before.
    project.write(
        "chain.py",
        format!("{}x = 1\n", "x = 1 \\\n".repeat(32_000)),
    );

    let started = Instant::now();
    let run = lint_measured(&project, &["chain.py"]).run;
    let took = started.elapsed();

    assert_eq!(run.findings().len(), 32_000, "one syntax error a line");
    assert!(
        run.findings()
            .iter()
            .all(|finding| finding.ends_with("TL001"))
    );
    assert!(took < Duration::from_secs(40), "took {took:?}");
}

#[test]
fn a_deeply_nested_expression_before_a_retained_backward_is_linted_in_linear_time() {
    let project = Project::new();
    // What the fuzz campaign found: an unclosed call around 20,000 chained subscripts with an
    // empty one among them, whose loss a later `backward(retain_graph=True)` uses. Error
    // recovery nests every name 20,000 deep, and asking each for its parent walked down from
    // the root: 40 s in a release build before, a tenth of a second after.
    project.write(
        "deep.py",
        format!(
            " flagged\nimport torch\nimport torch.nn as nn\n\nmodel = nn.Linear(32, 1).cuda()\ncriterion = nn.MSELoss()\n\ndef train(loader, opt):\n    for x, y in loader:\n        loss = criterion({}[]{}a\nmodel(x.cuda()), y.cuda())\n        torch.autograd.backward(loss, retain_graph=True)\n        opt.step()\n",
            "[a]".repeat(20_000),
            "[a]".repeat(20)
        ),
    );

    let started = Instant::now();
    let run = lint_measured(&project, &["deep.py"]).run;
    let took = started.elapsed();

    assert!(
        run.findings()
            .iter()
            .any(|finding| finding.ends_with("TL001")),
        "{run:#?}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a_chain_of_continued_assignments_without_a_value_is_linted_in_linear_time() {
    let project = Project::new();
    // What the fuzz campaign found: `x = 1 \` lines continue one statement, which error
    // recovery parses as `loss = x = x = ... = x: int`, a chain 40,000 assignments deep that
    // ends in an annotation. Each level looked for the chain's value down to the end: 25 s in
    // a release build before, well under a second after.
    project.write(
        "chain.py",
        format!(
            "def evaluate(loader):\n    loss = 1 \\\n{}x: int\n    return loss\n",
            "x = 1 \\\n".repeat(40_000)
        ),
    );

    let started = Instant::now();
    let run = lint_measured(&project, &["chain.py"]).run;
    let took = started.elapsed();

    assert!(
        run.findings()
            .iter()
            .any(|finding| finding.ends_with("TL001")),
        "{run:#?}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_function_calling_itself_many_times_over_a_long_body_is_linted_in_linear_time() {
    let project = Project::new();
    // What the fuzz campaign found, in valid Python: 1,000 calls of the function in its own
    // body, which also holds 50,000 implicitly joined strings. Whether a helper runs a forward
    // pass was asked afresh at each call, each time walking the whole body: 60 s in a release
    // build before (at twice these sizes), well under a second after.
    project.write(
        "helper.py",
        format!(
            "import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n\n\ndef gather_inputs(loader):\n    model.eval()\n{}    names = {}\n    return names\n",
            "    gather_inputs(loader)\n".repeat(1_000),
            "\"s\" ".repeat(50_000)
        ),
    );

    let started = Instant::now();
    let run = lint_measured(&project, &["helper.py"]).run;
    let took = started.elapsed();

    assert_eq!(run.code, 0, "{run:#?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn parse_only_reports_the_file_past_the_budget_too() {
    let project = Project::new();
    project.write("slow.py", backslash_continuations());

    let run = lint_measured(&project, &["--parse-only", "slow.py"]).run;

    assert_one_error(&run, "slow.py", &["too slow to parse"]);
    assert_eq!(run.code, 2, "{run:#?}");
}

// ---------------------------------------------------------------------------------------------
// Lone `\r` line endings (issue 15, item 5)

#[test]
fn cr_only_file_has_the_findings_of_the_same_file_with_lf() {
    let project = Project::new();
    project.write("lf.py", EVAL_HAZARD);
    project.write("cr.py", EVAL_HAZARD.replace('\n', "\r"));

    let lf = lint_measured(&project, &["lf.py"]).run;
    let cr = lint_measured(&project, &["cr.py"]).run;

    let lf_findings: Vec<String> = lf
        .findings()
        .iter()
        .map(|finding| finding.replacen("lf.py", "cr.py", 1))
        .collect();
    assert_eq!(lf_findings, ["cr.py:10:22: TL101", "cr.py:11:5: TL102"]);
    assert_eq!(cr.findings(), lf_findings, "{cr:#?}");
    assert!(!cr.stdout.contains("TL001"), "{cr:#?}");
    assert_eq!(cr.stderr, "");
    assert_eq!(cr.code, 1);
}

#[test]
fn mixed_line_endings_keep_their_lines() {
    let project = Project::new();
    // LF, CRLF and lone CR in one file: each is one line break, as CPython reads them (the
    // one blank line, third, ends in a lone CR: after a CR it would make a CRLF).
    let text = EVAL_HAZARD
        .lines()
        .enumerate()
        .map(|(index, line)| format!("{line}{}", ["\n", "\r\n", "\r"][index % 3]))
        .collect::<String>();
    project.write("mixed.py", text);

    let run = lint_measured(&project, &["mixed.py"]).run;

    assert_eq!(
        run.findings(),
        ["mixed.py:10:22: TL101", "mixed.py:11:5: TL102"],
        "{run:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Dense token streams (issue 15, item 16)

/// Peak memory a skipped file may cost: the binary's own footprint plus a few copies of the
/// text, nowhere near the 350 bytes per byte tree-sitter would build a tree of.
fn assert_skipped_within_memory(name: &str, text: &str) {
    let project = Project::new();
    project.write("ok.py", OK);
    project.write(name, text);

    let measured = lint_measured(&project, &[]);

    let run = &measured.run;
    assert_one_error(run, name, &["tokens in", "denser than torchlint lints"]);
    assert_eq!(run.findings(), [OK_FINDING]);
    assert_eq!(run.code, 2);
    let limit = 40 * text.len() as u64;
    assert!(
        measured.max_rss_bytes < limit,
        "{name}: {} MB of RSS for {} MB of text",
        measured.max_rss_bytes >> 20,
        text.len() >> 20
    );
}

#[test]
fn dense_list_is_skipped_within_forty_times_its_size() {
    // 4 MB; it took 1.4 GB before.
    assert_skipped_within_memory("list.py", &format!("x = [{}a]\n", "a,".repeat(2_000_000)));
}

#[test]
fn dense_sum_is_skipped_within_forty_times_its_size() {
    assert_skipped_within_memory("sum.py", &format!("x = {}a\n", "a+".repeat(2_000_000)));
}

#[test]
fn dense_but_small_file_is_linted() {
    let project = Project::new();
    let table = format!(
        "import torch\nTABLE = [{}0]\nstate = torch.load(\"x.pt\")\n",
        "0,1,".repeat(50_000)
    );
    project.write("table.py", table);

    let run = lint_measured(&project, &[]).run;

    assert_eq!(run.findings(), ["table.py:3:9: TL108"], "{run:#?}");
    assert_eq!(run.stderr, "");
}

// ---------------------------------------------------------------------------------------------
// The editor's server

/// `torchlint server` on stdio, with its messages read on a thread.
struct Server {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    messages: Receiver<Value>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// A server in a fresh folder (a git repository: its files are linted as one project).
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let common::lsp::ServerProcess {
            child,
            stdin,
            messages,
        } = common::lsp::spawn(dir.path(), &[]);
        let mut server = Server {
            child,
            stdin,
            messages,
            _dir: dir,
        };
        server.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "capabilities": {} } }));
        server.wait_for(|message| message["id"] == 1);
        server.send(json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }));
        server
    }

    fn send(&mut self, message: Value) {
        common::lsp::write_message(&mut self.stdin, &message.to_string());
    }

    /// The messages up to and including the first that matches (with a timeout).
    fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("timed out waiting for the server: {seen:#?}"));
            let message = self.messages.recv_timeout(left).expect("a server message");
            let done = wanted(&message);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// A `file://` URI for `name` in the server's folder.
    fn uri(&self, name: &str) -> String {
        url::Url::from_file_path(self._dir.path().join(name))
            .unwrap()
            .to_string()
    }

    fn diagnostics_of(&mut self, uri: &str) -> (Vec<Value>, Value) {
        let seen = self.wait_for(|message| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
        });
        let published = seen.last().unwrap()["params"]["diagnostics"].clone();
        (seen, published)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn server_gives_a_buffer_outside_a_project_past_the_budget_no_diagnostics_and_a_log_line() {
    let mut server = Server::start();
    server_skips_slow_buffer_then_goes_on(&mut server, "file:///tmp/torchlint-hostile/slow.py");
}

#[test]
fn server_gives_a_buffer_of_a_project_past_the_budget_no_diagnostics_and_a_log_line() {
    let mut server = Server::start();
    let uri = server.uri("slow.py");
    server_skips_slow_buffer_then_goes_on(&mut server, &uri);
}

fn server_skips_slow_buffer_then_goes_on(server: &mut Server, uri: &str) {
    server.send(
        json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": { "uri": uri, "languageId": "python", "version": 1,
            "text": backslash_continuations() } } }),
    );

    let (seen, published) = server.diagnostics_of(uri);

    assert_eq!(published, json!([]));
    assert!(
        seen.iter().any(|message| {
            message["method"] == "window/logMessage"
                && message["params"]["message"].as_str().is_some_and(|text| {
                    text.contains("slow.py") && text.contains("too slow to parse")
                })
        }),
        "{seen:#?}"
    );

    // The next version of the buffer is linted as usual.
    server.send(
        json!({ "jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": { "uri": uri, "version": 2 },
        "contentChanges": [{ "text": EVAL_HAZARD }] } }),
    );
    let (_, published) = server.diagnostics_of(uri);
    let codes: Vec<&str> = published
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|diagnostic| diagnostic["code"].as_str())
        .collect();
    assert_eq!(codes, ["TL101", "TL102"], "{published:#?}");
}
