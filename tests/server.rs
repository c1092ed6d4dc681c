//! `torchlint server` end to end: the real binary, spoken to in JSON-RPC over its stdio.

mod common;

use std::io::Write;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::{EVAL_HAZARD, EVAL_HELPER};
use serde_json::{Value, json};

struct Client {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    /// Every message read from the server so far.
    seen: Vec<Value>,
    next_id: i64,
    _dir: tempfile::TempDir,
    uri: String,
}

impl Client {
    fn start(initialization_options: Value) -> Client {
        Client::start_with(initialization_options, &[])
    }

    fn start_with(initialization_options: Value, env: &[(&str, &str)]) -> Client {
        Client::start_capable(initialization_options, env, json!({}))
    }

    /// A client that declares `capabilities` (VS Code's pull diagnostics, say).
    fn start_capable(
        initialization_options: Value,
        env: &[(&str, &str)],
        capabilities: Value,
    ) -> Client {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.py");
        std::fs::write(&path, EVAL_HAZARD).unwrap();
        let uri = url::Url::from_file_path(&path).unwrap().to_string();
        let common::lsp::ServerProcess {
            child,
            stdin,
            messages,
        } = common::lsp::spawn(dir.path(), env);
        let mut client = Client {
            child,
            stdin,
            messages,
            seen: Vec::new(),
            next_id: 0,
            _dir: dir,
            uri,
        };
        let response = client.request(
            "initialize",
            json!({ "capabilities": capabilities, "initializationOptions": initialization_options }),
        );
        assert_eq!(
            response["result"]["capabilities"]["hoverProvider"], true,
            "{response}"
        );
        client.notify("initialized", json!({}));
        client
    }

    /// Bytes as they are, framed or not.
    fn send_bytes(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// A request framed with the given `Content-Length` header value (right or not); its id.
    fn send_with_length(&mut self, length: &str, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let body =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params })
                .to_string();
        self.send_bytes(format!("Content-Length: {length}\r\n\r\n{body}").as_bytes());
        self.next_id
    }

    /// The next parse error (id null); its message.
    fn parse_error(&mut self) -> String {
        let error = self.wait_for(|m| m["id"].is_null() && m.get("error").is_some());
        assert_eq!(error["error"]["code"], -32700, "{error}");
        error["error"]["message"].as_str().unwrap().to_owned()
    }

    /// A request the server can always answer (hover on a document it does not know): whether
    /// the session still reads what follows.
    fn answered(&mut self) -> bool {
        let response = self.request(
            "textDocument/hover",
            json!({ "textDocument": { "uri": "file:///nowhere.py" }, "position": { "line": 0, "character": 0 } }),
        );
        response["result"].is_null() && response.get("error").is_none()
    }

    fn send_raw(&mut self, body: &str) {
        common::lsp::write_message(&mut self.stdin, body);
    }

    fn notify(&mut self, method: &str, params: Value) {
        let body = json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string();
        self.send_raw(&body);
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let body =
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
        self.send_raw(&body);
        self.wait_for(|message| message["id"] == id && message.get("method").is_none())
    }

    /// The next message that matches, skipping others (with a timeout).
    fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .expect("timed out waiting for the server");
            let message = self
                .messages
                .recv_timeout(left)
                .expect("a message from the server");
            self.seen.push(message.clone());
            if wanted(&message) {
                return message;
            }
        }
    }

    /// The next diagnostics published for the document: (code, line, character) each.
    fn diagnostics(&mut self) -> (Value, Vec<(String, u64, u64)>) {
        let message = self.wait_for(|m| m["method"] == "textDocument/publishDiagnostics");
        let found = message["params"]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["code"].as_str().unwrap().to_owned(),
                    d["range"]["start"]["line"].as_u64().unwrap(),
                    d["range"]["start"]["character"].as_u64().unwrap(),
                )
            })
            .collect();
        (message, found)
    }

    fn open(&mut self, text: &str) {
        let uri = self.uri.clone();
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "python", "version": 1, "text": text } }),
        );
    }

    fn change(&mut self, version: i64, range: Value, text: &str) {
        let uri = self.uri.clone();
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": { "uri": uri, "version": version },
                "contentChanges": [{ "range": range, "text": text }],
            }),
        );
    }

    /// Replaces the whole text of the open document `uri` (an edit without a range).
    fn replace_text(&mut self, uri: &str, version: i64, text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": { "uri": uri, "version": version },
                "contentChanges": [{ "text": text }],
            }),
        );
    }

    /// Opens another file of the client's folder (written there too); its URI.
    fn open_file(&mut self, name: &str, text: &str) -> String {
        let path = self._dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let uri = url::Url::from_file_path(&path).unwrap().to_string();
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "python", "version": 1, "text": text } }),
        );
        uri
    }

    /// The codes of the next diagnostics published for `uri`.
    fn codes_of(&mut self, uri: &str) -> Vec<String> {
        let message = self.wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
        });
        message["params"]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap().to_owned())
            .collect()
    }

    fn shutdown(mut self) -> i32 {
        let response = self.request("shutdown", Value::Null);
        assert!(response.get("error").is_none(), "{response}");
        self.notify("exit", Value::Null);
        let status = self.child.wait().unwrap();
        status.code().unwrap_or(-1)
    }
}

fn range(start: (u64, u64), end: (u64, u64)) -> Value {
    json!({ "start": { "line": start.0, "character": start.1 }, "end": { "line": end.0, "character": end.1 } })
}

#[test]
fn open_edit_fix_and_reintroduce() {
    let mut client = Client::start(Value::Null);
    client.open(EVAL_HAZARD);
    let (message, found) = client.diagnostics();
    assert_eq!(
        found,
        [("TL101".to_owned(), 9, 21), ("TL102".to_owned(), 10, 4)],
        "{message}"
    );
    let first = &message["params"]["diagnostics"][1];
    assert_eq!(first["source"], "torchlint");
    assert_eq!(
        first["severity"], 1,
        "no backward in the loop: the graver severity"
    );
    assert!(
        first["codeDescription"]["href"]
            .as_str()
            .unwrap()
            .ends_with("tensor-accumulated.md")
    );
    assert!(
        first["relatedInformation"][0]["message"]
            .as_str()
            .unwrap()
            .contains("loop"),
        "{first}"
    );
    assert_eq!(message["params"]["version"], 1);

    // `total += loss` -> `total += loss.item()`: TL102 is gone (TL101 stays).
    client.change(2, range((10, 17), (10, 17)), ".item()");
    let (message, found) = client.diagnostics();
    assert_eq!(found, [("TL101".to_owned(), 9, 21)], "{message}");
    assert_eq!(message["params"]["version"], 2);

    // Wrap the evaluation in no_grad by editing the loop header's line: TL101 is gone too.
    client.change(3, range((7, 0), (7, 0)), "torch.set_grad_enabled(False)\n");
    let (_, found) = client.diagnostics();
    assert_eq!(found, [], "set_grad_enabled(False) before the loop");

    // Take it out again, and store the loss without `.item()` (two edits in one change, each
    // against the text the previous one left): both findings come back.
    let uri = client.uri.clone();
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": { "uri": uri, "version": 4 },
            "contentChanges": [
                { "range": range((7, 0), (8, 0)), "text": "" },
                { "range": range((10, 17), (10, 24)), "text": "" },
            ],
        }),
    );
    let (message, found) = client.diagnostics();
    assert_eq!(
        found,
        [("TL101".to_owned(), 9, 21), ("TL102".to_owned(), 10, 4)],
        "{message}"
    );
    assert_eq!(message["params"]["version"], 4);
    assert_eq!(client.shutdown(), 0);
}

#[test]
fn code_action_inserts_a_suppression_that_silences_the_finding() {
    let mut client = Client::start(Value::Null);
    let text = EVAL_HAZARD.replace("    total += loss\n", "    total += loss  # running sum\n");
    client.open(&text);
    let (_, found) = client.diagnostics();
    assert!(found.contains(&("TL102".to_owned(), 10, 4)));
    let uri = client.uri.clone();
    let response = client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": uri },
            "range": range((10, 4), (10, 4)),
            "context": { "diagnostics": [] },
        }),
    );
    let actions = response["result"].as_array().unwrap();
    let ignore = actions
        .iter()
        .find(|a| a["title"] == "Ignore TL102 for this line")
        .unwrap_or_else(|| panic!("{response}"));
    let edits = &ignore["edit"]["changes"][uri.as_str()];
    let edit = &edits[0];
    assert_eq!(edit["newText"], "  # noqa: TL102", "{edit}");
    assert_eq!(edit["range"]["start"]["line"], 10);
    assert_eq!(
        edit["range"]["start"]["character"], 32,
        "after the existing comment"
    );
    // Apply it as the editor would.
    client.change(2, edit["range"].clone(), edit["newText"].as_str().unwrap());
    let (_, found) = client.diagnostics();
    assert!(!found.iter().any(|(code, ..)| code == "TL102"), "{found:?}");

    // On a line that already has `# noqa: TL102`, a second code joins the list.
    let response = client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": uri },
            "range": range((9, 21), (9, 21)),
            "context": { "diagnostics": [] },
        }),
    );
    let titles: Vec<&str> = response["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["title"].as_str())
        .collect();
    assert!(titles.contains(&"Ignore TL101 for this line"), "{titles:?}");
}

#[test]
fn hover_shows_the_finding_its_fix_and_a_link_to_the_rule_page() {
    let mut client = Client::start(Value::Null);
    client.open(EVAL_HAZARD);
    client.diagnostics();
    let uri = client.uri.clone();
    let response = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 10, "character": 6 } }),
    );
    let value = response["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(
        value.contains("**TL102 `tensor-accumulated`**"),
        "{response}"
    );
    // What this finding found, the fix, and where the rest is; not the whole rule page.
    assert!(
        value.contains("accumulates `loss` with its autograd graph"),
        "{value}"
    );
    assert!(value.contains("**Fix:** accumulate a number"), "{value}");
    assert!(value.contains("`torchlint rule TL102`"), "{value}");
    assert!(
        value.contains("rules/memory/tensor-accumulated.md)"),
        "{value}"
    );
    assert!(!value.contains("## Why it costs memory"), "{value}");
    assert!(value.len() < 1500, "{} characters: {value}", value.len());
    let response = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 0, "character": 1 } }),
    );
    assert!(response["result"].is_null(), "no finding there: {response}");
}

#[test]
fn client_settings_select_rules() {
    let mut client = Client::start(json!({ "ignore": ["TL101"] }));
    client.open(EVAL_HAZARD);
    let (_, found) = client.diagnostics();
    assert_eq!(found, [("TL102".to_owned(), 10, 4)]);
    client.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "torchlint": { "select": ["TL101"] } } }),
    );
    let (_, found) = client.diagnostics();
    assert_eq!(found, [("TL101".to_owned(), 9, 21)]);
}

#[test]
fn config_file_changes_are_picked_up() {
    let mut client = Client::start(Value::Null);
    client.open(EVAL_HAZARD);
    let (_, found) = client.diagnostics();
    assert_eq!(found.len(), 2);
    std::fs::write(
        client._dir.path().join("pyproject.toml"),
        "[tool.torchlint]\nignore = [\"TL102\"]\n",
    )
    .unwrap();
    let uri = url::Url::from_file_path(client._dir.path().join("pyproject.toml"))
        .unwrap()
        .to_string();
    client.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": uri, "type": 1 }] }),
    );
    let (_, found) = client.diagnostics();
    assert_eq!(found, [("TL101".to_owned(), 9, 21)]);
}

#[test]
fn a_config_saved_broken_is_shown_once_and_the_last_good_settings_stay() {
    let mut client = Client::start(Value::Null);
    let config = client._dir.path().join("pyproject.toml");
    std::fs::write(&config, "[tool.torchlint]\nignore = [\"TL102\"]\n").unwrap();
    client.open(EVAL_HAZARD);
    let first = client.uri.clone();
    assert_eq!(client.codes_of(&first), ["TL101"]);
    let second = client.open_file("eval2.py", EVAL_HAZARD);
    assert_eq!(client.codes_of(&second), ["TL101"]);

    std::fs::write(&config, "[tool.torchlint]\nignore = [\"TL102\"\n").unwrap();
    let config_uri = url::Url::from_file_path(&config).unwrap().to_string();
    client.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": config_uri, "type": 2 }] }),
    );
    // Both documents keep their findings under the last settings; one message says why.
    let (mut shown, mut published) = (Vec::new(), std::collections::HashMap::new());
    while published.len() < 2 {
        let message = client.wait_for(|m| {
            m["method"] == "window/showMessage" || m["method"] == "textDocument/publishDiagnostics"
        });
        if message["method"] == "window/showMessage" {
            shown.push(message["params"]["message"].as_str().unwrap().to_owned());
        } else {
            let codes: Vec<String> = message["params"]["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["code"].as_str().unwrap().to_owned())
                .collect();
            published.insert(message["params"]["uri"].as_str().unwrap().to_owned(), codes);
        }
    }
    assert_eq!(published[&first], ["TL101"], "{published:?}");
    assert_eq!(published[&second], ["TL101"], "{published:?}");
    // Edits go on being linted, still without a message each.
    client.replace_text(&first, 2, EVAL_HAZARD);
    loop {
        let message = client.wait_for(|m| {
            m["method"] == "window/showMessage" || m["method"] == "textDocument/publishDiagnostics"
        });
        if message["method"] == "window/showMessage" {
            shown.push(message["params"]["message"].as_str().unwrap().to_owned());
        } else if message["params"]["uri"] == first.as_str() {
            assert_eq!(
                message["params"]["diagnostics"][0]["code"], "TL101",
                "{message}"
            );
            break;
        }
    }
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert!(shown[0].contains("pyproject.toml"), "{}", shown[0]);
}

#[test]
fn diagnostics_can_be_pulled_per_document_and_for_the_workspace() {
    let mut client = Client::start(Value::Null);
    let dir = client._dir.path().to_owned();
    std::fs::write(dir.join("pyproject.toml"), "[tool.torchlint]\n").unwrap();
    // A file of the project that is not open, with findings of its own.
    std::fs::write(dir.join("other.py"), EVAL_HAZARD).unwrap();
    client.open(EVAL_HAZARD);
    let uri = client.uri.clone();
    assert_eq!(client.codes_of(&uri), ["TL101", "TL102"]);

    let pulled = client.request(
        "textDocument/diagnostic",
        json!({ "textDocument": { "uri": uri } }),
    );
    let report = &pulled["result"];
    assert_eq!(report["kind"], "full", "{pulled}");
    let codes: Vec<&str> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["TL101", "TL102"]);
    let result_id = report["resultId"].as_str().unwrap().to_owned();
    let again = client.request(
        "textDocument/diagnostic",
        json!({ "textDocument": { "uri": uri }, "previousResultId": result_id }),
    );
    assert_eq!(again["result"]["kind"], "unchanged", "{again}");

    let workspace = client.request("workspace/diagnostic", json!({ "previousResultIds": [] }));
    let items = workspace["result"]["items"].as_array().unwrap();
    let mut uris: Vec<&str> = items.iter().map(|i| i["uri"].as_str().unwrap()).collect();
    uris.sort_unstable();
    let other = url::Url::from_file_path(dir.join("other.py"))
        .unwrap()
        .to_string();
    let mut expected = [other.as_str(), uri.as_str()];
    expected.sort_unstable();
    assert_eq!(uris, expected, "{workspace}");
    for item in items {
        assert_eq!(item["kind"], "full");
        assert_eq!(item["items"].as_array().unwrap().len(), 2, "{item}");
    }

    // Besides the line, a finding's rule can be silenced for the whole file.
    let actions = client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": uri },
            "range": range((9, 21), (9, 21)),
            "context": { "diagnostics": [] },
        }),
    );
    let file_action = actions["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == "Ignore TL101 for this file")
        .unwrap_or_else(|| panic!("{actions}"))
        .clone();
    let edit = &file_action["edit"]["changes"][&uri][0];
    assert_eq!(
        edit["newText"], "# torchlint: ignore-file[TL101]\n",
        "{edit}"
    );
    assert_eq!(edit["range"]["start"], json!({ "line": 0, "character": 0 }));
}

#[test]
fn close_clears_and_bad_input_is_answered_not_fatal() {
    let mut client = Client::start(Value::Null);
    // Malformed JSON: a parse error, and the session goes on.
    client.send_raw("{not json");
    let error = client.wait_for(|m| m.get("error").is_some());
    assert_eq!(error["error"]["code"], -32700, "{error}");
    // Unknown method: MethodNotFound.
    let response = client.request("torchlint/unknown", json!({}));
    assert_eq!(response["error"]["code"], -32601, "{response}");
    // Bad params: InvalidParams.
    let response = client.request("textDocument/hover", json!({ "nonsense": true }));
    assert_eq!(response["error"]["code"], -32602, "{response}");
    // Edits to a document that is not open, and out of range edits: ignored or clamped.
    client.change(7, range((0, 0), (0, 0)), "x");
    client.open(EVAL_HAZARD);
    client.diagnostics();
    client.change(2, range((400, 3), (900, 0)), "\n# the end\n");
    let (_, found) = client.diagnostics();
    assert_eq!(found.len(), 2);
    // Hover on an unknown document: null.
    let response = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": "file:///nowhere.py" }, "position": { "line": 0, "character": 0 } }),
    );
    assert!(response["result"].is_null(), "{response}");
    // Close: diagnostics cleared.
    let uri = client.uri.clone();
    client.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": uri } }),
    );
    let (_, found) = client.diagnostics();
    assert!(found.is_empty());
    assert_eq!(client.shutdown(), 0);
}

#[test]
fn a_client_that_disconnects_ends_the_server() {
    let mut client = Client::start(Value::Null);
    client.open(EVAL_HAZARD);
    client.diagnostics();
    let Client {
        mut child, stdin, ..
    } = client;
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(
                status.code(),
                Some(1),
                "no shutdown before the end of input"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_rule_that_panics_costs_only_its_own_findings() {
    let mut client = Client::start_with(Value::Null, &[("TORCHLINT_INJECT_PANIC", "TL101")]);
    client.open(EVAL_HAZARD);
    let log = client.wait_for(|m| m["method"] == "window/logMessage");
    let text = log["params"]["message"].as_str().unwrap();
    assert!(text.contains("rule TL101 failed"), "{log}");
    let (_, found) = client.diagnostics();
    assert_eq!(
        found,
        [("TL102".to_owned(), 10, 4)],
        "the other rules still report"
    );
    assert_eq!(client.shutdown(), 0);
}

const NO_GRAD_CALLER: &str = "import torch\nfrom .metrics import evaluate\n\ndef fit(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n";

#[test]
fn a_document_is_linted_with_the_rest_of_its_project() {
    let mut client = Client::start(Value::Null);
    let dir = client._dir.path().to_owned();
    std::fs::write(dir.join("pyproject.toml"), "[tool.torchlint]\n").unwrap();
    std::fs::create_dir_all(dir.join("pkg")).unwrap();
    std::fs::write(dir.join("pkg/train.py"), NO_GRAD_CALLER).unwrap();
    // Its only caller disables grad: `torchlint check` reports nothing here, nor does the editor.
    let metrics = client.open_file("pkg/metrics.py", EVAL_HELPER);
    assert_eq!(client.codes_of(&metrics), Vec::<String>::new());

    // The caller's unsaved buffer stands in for its file: drop the `no_grad` there and the
    // helper's finding is published without the helper being touched.
    let train = client.open_file("pkg/train.py", NO_GRAD_CALLER);
    assert_eq!(client.codes_of(&train), Vec::<String>::new());
    client.replace_text(
        &train,
        2,
        "from .metrics import evaluate\n\ndef fit(model, loader):\n    return evaluate(model, loader)\n",
    );
    assert_eq!(client.codes_of(&metrics), ["TL101"]);

    // Closed unsaved: the file on disk (with `no_grad`) counts again.
    client.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": train } }),
    );
    assert_eq!(client.codes_of(&metrics), Vec::<String>::new());

    // A file created on disk that calls the helper with grad: the client's watcher says so.
    let report = dir.join("pkg/report.py");
    std::fs::write(
        &report,
        "from pkg.metrics import evaluate\n\ndef report(model, loader):\n    print(evaluate(model, loader))\n",
    )
    .unwrap();
    let uri = url::Url::from_file_path(&report).unwrap().to_string();
    client.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": uri, "type": 1 }] }),
    );
    assert_eq!(client.codes_of(&metrics), ["TL101"]);
    assert_eq!(client.shutdown(), 0);
}

/// A factory that builds no model, and one that does.
const NOT_A_MODEL: &str = "def build_model(name):\n    return {\"name\": name}\n";
const MODEL_FACTORY: &str = "import torchvision\n\ndef build_model(name):\n    return torchvision.models.resnet18(num_classes=10)\n";

/// A project whose `pkg/factory.py` (on disk, not open) builds no model, with the evaluation
/// that runs what it builds open; the evaluation's URI.
fn open_factory_project(client: &mut Client) -> String {
    let dir = client._dir.path().to_owned();
    std::fs::write(dir.join("pyproject.toml"), "[tool.torchlint]\n").unwrap();
    std::fs::create_dir_all(dir.join("pkg")).unwrap();
    std::fs::write(dir.join("pkg/factory.py"), NOT_A_MODEL).unwrap();
    client.open_file(
        "pkg/eval.py",
        "from pkg.factory import build_model\n\ndef evaluate(loader):\n    net = build_model(\"r18\")\n    hits = 0\n    for x, y in loader:\n        hits += (net(x.cuda()).argmax(1) == y.cuda()).sum().item()\n    return hits\n",
    )
}

#[test]
fn a_change_to_what_another_file_returns_relints_the_files_that_asked() {
    let mut client = Client::start(Value::Null);
    // `net` is whatever the factory returns: not a model yet.
    let eval = open_factory_project(&mut client);
    assert_eq!(client.codes_of(&eval), Vec::<String>::new());

    // The factory's buffer now builds a model: the evaluation, untouched, runs it with grad.
    let factory = client.open_file("pkg/factory.py", NOT_A_MODEL);
    assert_eq!(client.codes_of(&factory), Vec::<String>::new());
    client.replace_text(&factory, 2, MODEL_FACTORY);
    assert_eq!(client.codes_of(&eval), ["TL101"]);
    assert_eq!(client.shutdown(), 0);
}

/// The codes in a `textDocument/diagnostic` answer.
fn pulled_codes(client: &mut Client, uri: &str) -> Vec<String> {
    let pulled = client.request(
        "textDocument/diagnostic",
        json!({ "textDocument": { "uri": uri } }),
    );
    pulled["result"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{pulled}"))
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_client_that_pulls_diagnostics_is_not_also_sent_them() {
    // VS Code pulls and shows pushed diagnostics beside the pulled ones: every finding twice.
    let capabilities = json!({
        "textDocument": { "diagnostic": { "dynamicRegistration": true } },
        "workspace": { "diagnostics": { "refreshSupport": true } },
    });
    let mut client = Client::start_capable(Value::Null, &[], capabilities);
    let eval = open_factory_project(&mut client);
    assert_eq!(pulled_codes(&mut client, &eval), Vec::<String>::new());
    let factory = client.open_file("pkg/factory.py", NOT_A_MODEL);
    client.replace_text(&factory, 2, MODEL_FACTORY);
    // The evaluation's findings changed with another file: the client is asked to pull again,
    // and what it pulls has them.
    let refresh = client.wait_for(|m| m["method"] == "workspace/diagnostic/refresh");
    assert!(refresh["id"].is_string(), "{refresh}");
    assert_eq!(pulled_codes(&mut client, &eval), ["TL101"]);
    // Nothing was pushed, closing included (every message before the last answer was read).
    client.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": eval } }),
    );
    assert_eq!(pulled_codes(&mut client, &factory), Vec::<String>::new());
    let pushed: Vec<&Value> = client
        .seen
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics")
        .collect();
    assert!(pushed.is_empty(), "{pushed:#?}");
    assert_eq!(client.shutdown(), 0);
}

const NOWHERE: &str = r#"{ "textDocument": { "uri": "file:///nowhere.py" }, "position": { "line": 0, "character": 0 } }"#;

#[test]
fn a_content_length_over_the_limit_is_refused_without_waiting_or_allocating() {
    let mut client = Client::start(Value::Null);
    // Used to panic (capacity overflow), abort (allocation failure) and wait for 100 GB.
    for length in [
        "18446744073709551615",
        "4611686018427387904",
        "100000000000",
    ] {
        client.send_bytes(format!("Content-Length: {length}\r\n\r\n").as_bytes());
        let message = client.parse_error();
        assert!(message.contains("64 MiB"), "{message}");
        assert!(client.answered(), "after Content-Length: {length}");
    }
    // A length too large for any integer: a bad header, and the session goes on.
    client.send_bytes(b"Content-Length: 99999999999999999999999\r\n\r\n");
    client.parse_error();
    assert!(client.answered());
    assert_eq!(client.shutdown(), 0);
}

#[test]
fn a_malformed_header_line_costs_that_line_only() {
    let mut client = Client::start(Value::Null);
    // Invalid UTF-8 used to end the session, stdin still open.
    client.send_bytes(b"X-Junk: \xff\xfe\r\n");
    let message = client.parse_error();
    assert!(message.contains("header"), "{message}");
    assert!(client.answered());
    client.send_bytes(b"no colon here\r\n");
    client.parse_error();
    assert!(client.answered());
    assert_eq!(client.shutdown(), 0);
}

#[test]
fn a_wrong_content_length_costs_only_its_message() {
    let mut client = Client::start(Value::Null);
    let params: Value = serde_json::from_str(NOWHERE).unwrap();
    let body_len = |client: &Client| {
        json!({ "jsonrpc": "2.0", "id": client.next_id + 1, "method": "textDocument/hover", "params": params })
            .to_string()
            .len()
    };
    // A few bytes short: the rest of the body used to be read as headers, and nothing after
    // it was answered.
    let short = body_len(&client) - 3;
    client.send_with_length(&short.to_string(), "textDocument/hover", params.clone());
    client.parse_error();
    assert!(client.answered(), "after a short length");
    // A few bytes long: the body takes the start of the next frame, which is found again.
    let long = body_len(&client) + 3;
    client.send_with_length(&long.to_string(), "textDocument/hover", params.clone());
    let length = body_len(&client).to_string();
    let id = client.send_with_length(&length, "textDocument/hover", params.clone());
    client.parse_error();
    let response = client.wait_for(|m| m["id"] == id);
    assert!(
        response["result"].is_null(),
        "after a long length: {response}"
    );
    // Unparsable: the body that follows is skipped.
    client.send_with_length("12x", "textDocument/hover", params.clone());
    client.parse_error();
    assert!(client.answered(), "after an unparsable length");
    assert_eq!(client.shutdown(), 0);
}

#[test]
fn requests_after_shutdown_are_invalid() {
    let mut client = Client::start(Value::Null);
    client.open(EVAL_HAZARD);
    client.diagnostics();
    let response = client.request("shutdown", Value::Null);
    assert!(response.get("error").is_none(), "{response}");
    // Hover and code actions used to be answered as if nothing had happened.
    let uri = client.uri.clone();
    let response = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 10, "character": 6 } }),
    );
    assert_eq!(response["error"]["code"], -32600, "{response}");
    let response = client.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": uri }, "range": range((10, 0), (10, 9)), "context": { "diagnostics": [] } }),
    );
    assert_eq!(response["error"]["code"], -32600, "{response}");
    let response = client.request("shutdown", Value::Null);
    assert_eq!(response["error"]["code"], -32600, "{response}");
    client.notify("exit", Value::Null);
    assert_eq!(client.child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_second_initialize_is_invalid() {
    let mut client = Client::start(Value::Null);
    // It used to be an unknown method (-32601).
    let response = client.request("initialize", json!({ "capabilities": {} }));
    assert_eq!(response["error"]["code"], -32600, "{response}");
    assert!(client.answered());
    assert_eq!(client.shutdown(), 0);
}

#[test]
fn fix_all_applies_the_safe_fixes_and_the_unsafe_ones_when_the_client_allows() {
    let text = "import torch\n\nstate = torch.load(\"ckpt.pt\")\n";
    let fix_all = |options: Value| {
        let mut client = Client::start(options);
        client.open(text);
        let (_, found) = client.diagnostics();
        assert!(found.iter().any(|(code, ..)| code == "TL108"), "{found:?}");
        let uri = client.uri.clone();
        let quick = client.request(
            "textDocument/codeAction",
            json!({
                "textDocument": { "uri": uri },
                "range": range((2, 8), (2, 8)),
                "context": { "diagnostics": [] },
            }),
        );
        let source = client.request(
            "textDocument/codeAction",
            json!({
                "textDocument": { "uri": uri },
                "range": range((0, 0), (0, 0)),
                "context": { "diagnostics": [], "only": ["source.fixAll"] },
            }),
        );
        assert_eq!(client.shutdown(), 0);
        (quick["result"].clone(), source["result"].clone(), uri)
    };
    let (quick, source, _) = fix_all(Value::Null);
    // TL108's fix is unsafe: labelled so, never preferred, and left out of fix-all.
    let fix = quick
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == "TL108: Add `map_location=\"cpu\"` (unsafe)")
        .unwrap_or_else(|| panic!("{quick}"));
    assert!(fix.get("isPreferred").is_none(), "{fix}");
    assert_eq!(
        source,
        json!([]),
        "only unsafe fixes: nothing to fix on save"
    );

    let (_, source, uri) = fix_all(json!({ "unsafeFixes": true }));
    let action = &source[0];
    assert_eq!(action["kind"], "source.fixAll.torchlint", "{source}");
    let edit = &action["edit"]["changes"][uri.as_str()][0];
    assert_eq!(
        edit["newText"],
        "import torch\n\nstate = torch.load(\"ckpt.pt\", map_location=\"cpu\")\n"
    );
    assert_eq!(edit["range"]["start"], json!({ "line": 0, "character": 0 }));
}
