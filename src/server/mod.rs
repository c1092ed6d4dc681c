//! `torchlint server`: diagnostics, quick fixes and rule docs in the editor, over the Language
//! Server Protocol (3.17, stdio). The protocol stays at the edge, as in rust-analyzer: this
//! module turns messages into calls of the same engine `check` uses (`linter::lint_parsed`) and
//! its results back into messages (`convert`).
//!
//! One thread handles everything in arrival order, so a newer version's diagnostics can never
//! be overwritten by an older one's; changes that arrive together are applied before one lint.

mod convert;
mod document;
mod projects;
mod reclaim;
mod transport;

use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;

use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::Notification as _;
use lsp_types::request::Request as _;
use lsp_types::{
    CodeActionParams, DidChangeConfigurationParams, DidChangeTextDocumentParams,
    DidCloseTextDocumentParams, DidOpenTextDocumentParams, DidSaveTextDocumentParams, HoverParams,
    InitializeParams, PositionEncodingKind, PublishDiagnosticsParams, Uri,
};
use serde::Deserialize;

use crate::checker::InternalError;
use crate::diagnostic::Diagnostic;
use crate::discovery::LintTarget;
use crate::linter::{self, SourceKind};
use crate::parse;
use crate::project::run::{self, Checked, Outcome};
use crate::settings::resolver::Resolver;
use crate::settings::{CliOverrides, Settings};
use crate::source::SourceFile;
use document::{Document, Encoding};
use projects::{OpenFile, Projects};
use reclaim::Reclaimer;
use transport::Incoming;

/// Client settings: `initializationOptions`, or `settings.torchlint` in
/// `workspace/didChangeConfiguration`.
#[derive(Debug, Default, Clone, Deserialize)]
struct ClientSettings {
    select: Option<Vec<String>>,
    #[serde(default)]
    ignore: Vec<String>,
    /// `source.fixAll.torchlint` applies unsafe fixes too.
    #[serde(default, rename = "unsafeFixes")]
    unsafe_fixes: bool,
}

/// How long the input has to be quiet before the edited documents are summarised: longer than
/// the server takes to answer a keystroke, shorter than the pause between a person's.
const SUMMARISE_AFTER: std::time::Duration = std::time::Duration::from_millis(30);

/// A project's open documents as its lint takes them (their text and tree), and their keys,
/// in the same order.
fn open_files(
    documents: &HashMap<String, Open>,
    members: Vec<(String, LintTarget)>,
) -> (Vec<String>, Vec<OpenFile<'_>>) {
    members
        .into_iter()
        .map(|(key, target)| {
            let document = &documents[&key].document;
            let open = OpenFile {
                target,
                text: document.text.as_bytes(),
                tree: document.tree.as_ref(),
            };
            (key, open)
        })
        .unzip()
}

struct Server {
    encoding: Encoding,
    documents: HashMap<String, Open>,
    client: ClientSettings,
    resolver: Arc<Resolver>,
    shutdown_requested: bool,
    /// Whether the client lets us register file watchers (for config reloads).
    can_watch_files: bool,
    /// The client pulls diagnostics (LSP 3.17): it is sent none, as it would show pushed and
    /// pulled ones side by side, each finding twice (VS Code does).
    pulls: bool,
    /// The client takes `workspace/diagnostic/refresh`: what it pulls changed without an edit
    /// of its own (a file of its project was edited).
    refreshes: bool,
    /// The id of the last request sent to the client.
    sent_requests: u64,
    reclaimer: Reclaimer,
    projects: Projects,
    /// The projects whose edited files are not summarised yet (see [`Server::summarise`]).
    unsummarised: Vec<PathBuf>,
    /// Each document's last settings that resolved: a config file saved broken leaves its
    /// documents linted as before, not bare, until it is fixed.
    last_settings: HashMap<String, Arc<Settings>>,
    /// The config errors shown since the settings were last read: one message per error, not
    /// one per open document.
    shown_errors: HashSet<String>,
}

/// A document with what its last lint found (for code actions and hover).
struct Open {
    uri: Uri,
    document: Document,
    diagnostics: Vec<Diagnostic>,
    /// What the client was last sent for it (a lint of another file of its project publishes
    /// it again only when that changes).
    published: Option<Vec<lsp_types::Diagnostic>>,
    /// Whether the document's tree is the parse of its text (not only edited along with it).
    parsed: bool,
}

pub fn run() -> u8 {
    crate::checker::install_panic_hook();
    let incoming = transport::read_stdin();
    let Some(mut server) = handshake(&incoming) else {
        return 1;
    };
    server.main_loop(&incoming)
}

/// Waits for `initialize` and answers it; everything before it is refused, as the spec asks.
/// None when the client leaves first.
fn handshake(incoming: &crossbeam_channel::Receiver<Incoming>) -> Option<Server> {
    loop {
        let request = match incoming.recv().ok()? {
            Incoming::Malformed(error) => {
                let _ = transport::write_parse_error(&error);
                continue;
            }
            Incoming::Message(Message::Request(request)) => request,
            Incoming::Message(Message::Notification(notification)) => {
                if notification.method == lsp_types::notification::Exit::METHOD {
                    return None;
                }
                continue;
            }
            Incoming::Message(Message::Response(_)) => continue,
        };
        let response = if request.method != lsp_types::request::Initialize::METHOD {
            Response::new_err(
                request.id,
                ErrorCode::ServerNotInitialized as i32,
                "the server is not initialized yet".to_owned(),
            )
        } else {
            // LSP 3.17 names it `workspace.diagnostics`; lsp-types reads `diagnostic`, which
            // no client sends.
            let refreshes =
                request.params["capabilities"]["workspace"]["diagnostics"]["refreshSupport"]
                    .as_bool()
                    .unwrap_or(false);
            match serde_json::from_value::<InitializeParams>(request.params) {
                Ok(params) => {
                    let (server, result) = Server::initialize(&params, refreshes);
                    let _ =
                        transport::write(&Message::Response(Response::new_ok(request.id, result)));
                    return Some(server);
                }
                Err(error) => invalid_params(request.id, &error),
            }
        };
        let _ = transport::write(&Message::Response(response));
    }
}

impl Server {
    fn initialize(params: &InitializeParams, refreshes: bool) -> (Server, serde_json::Value) {
        let utf8 = params
            .capabilities
            .general
            .as_ref()
            .and_then(|general| general.position_encodings.as_ref())
            .is_some_and(|encodings| encodings.contains(&PositionEncodingKind::UTF8));
        let client: ClientSettings = params
            .initialization_options
            .clone()
            .and_then(|options| serde_json::from_value(options).ok())
            .unwrap_or_default();
        let resolver = Arc::new(resolver_for(&client));
        let can_watch_files = params
            .capabilities
            .workspace
            .as_ref()
            .and_then(|workspace| workspace.did_change_watched_files.as_ref())
            .and_then(|watched| watched.dynamic_registration)
            .unwrap_or(false);
        let pulls = params
            .capabilities
            .text_document
            .as_ref()
            .is_some_and(|text| text.diagnostic.is_some());
        let server = Server {
            encoding: if utf8 {
                Encoding::Utf8
            } else {
                Encoding::Utf16
            },
            documents: HashMap::new(),
            client,
            resolver,
            shutdown_requested: false,
            can_watch_files,
            pulls,
            refreshes,
            sent_requests: 0,
            reclaimer: Reclaimer::start(),
            projects: Projects::default(),
            unsummarised: Vec::new(),
            last_settings: HashMap::new(),
            shown_errors: HashSet::new(),
        };
        let result = serde_json::json!({
            "capabilities": {
                "positionEncoding": if utf8 { "utf-8" } else { "utf-16" },
                "textDocumentSync": { "openClose": true, "change": 2, "save": { "includeText": false } },
                "codeActionProvider": { "codeActionKinds": ["quickfix", convert::FIX_ALL] },
                "hoverProvider": true,
                // Pulled (LSP 3.17) by a client that says it pulls, else pushed; a document's
                // findings may change with another file of its project.
                "diagnosticProvider": {
                    "identifier": "torchlint",
                    "interFileDependencies": true,
                    "workspaceDiagnostics": true,
                },
            },
            "serverInfo": { "name": "torchlint", "version": env!("CARGO_PKG_VERSION") },
        });
        (server, result)
    }

    /// Runs until `exit` or the end of input; returns the process's exit code (0 only after
    /// a `shutdown`, as the spec says).
    fn main_loop(&mut self, incoming: &crossbeam_channel::Receiver<Incoming>) -> u8 {
        self.register_config_watchers();
        loop {
            // With edits not yet summarised, what other files read of them waits for a pause
            // in the typing: a keystroke's findings are published without that work.
            let first = if self.unsummarised.is_empty() {
                incoming.recv().ok()
            } else {
                match incoming.recv_timeout(SUMMARISE_AFTER) {
                    Ok(message) => Some(message),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        self.summarise();
                        continue;
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => None,
                }
            };
            let Some(first) = first else {
                break;
            };
            // Take what else has arrived, so that a burst of keystrokes costs one lint.
            let mut batch = vec![first];
            batch.extend(incoming.try_iter());
            // Requests cancelled before we got to them are answered as cancelled, unrun.
            let cancelled: Vec<RequestId> = batch.iter().filter_map(cancelled_id).collect();
            let mut dirty: Vec<String> = Vec::new();
            for message in batch {
                match message {
                    Incoming::Malformed(error) => {
                        let _ = transport::write_parse_error(&error);
                    }
                    Incoming::Message(Message::Request(request))
                        if cancelled.contains(&request.id) =>
                    {
                        let _ = transport::write(&Message::Response(Response::new_err(
                            request.id,
                            ErrorCode::RequestCanceled as i32,
                            "cancelled".to_owned(),
                        )));
                    }
                    Incoming::Message(Message::Request(request)) => {
                        self.on_request(request, &mut dirty)
                    }
                    Incoming::Message(Message::Notification(notification)) => {
                        if notification.method == lsp_types::notification::Exit::METHOD {
                            return if self.shutdown_requested { 0 } else { 1 };
                        }
                        self.on_notification(notification, &mut dirty);
                    }
                    Incoming::Message(Message::Response(_)) => {}
                }
            }
            self.lint_dirty(dirty);
        }
        // The client went away without `exit`.
        1
    }

    fn on_request(&mut self, request: Request, dirty: &mut Vec<String>) {
        // Requests read the latest text: lint what changed before answering.
        self.lint_dirty(std::mem::take(dirty));
        let id = request.id.clone();
        let response = match request.method.as_str() {
            // After `shutdown` every request is refused, `shutdown` itself included, as the
            // spec asks; checked first so that no method's arm can forget it.
            _ if self.shutdown_requested => Response::new_err(
                id,
                ErrorCode::InvalidRequest as i32,
                "the server is shutting down".to_owned(),
            ),
            // `initialize` is answered once, in the handshake.
            lsp_types::request::Initialize::METHOD => Response::new_err(
                id,
                ErrorCode::InvalidRequest as i32,
                "the server is already initialized".to_owned(),
            ),
            lsp_types::request::Shutdown::METHOD => {
                self.shutdown_requested = true;
                Response::new_ok(id, ())
            }
            lsp_types::request::CodeActionRequest::METHOD => {
                match serde_json::from_value::<CodeActionParams>(request.params) {
                    Ok(params) => Response::new_ok(id, self.code_actions(&params)),
                    Err(error) => invalid_params(id, &error),
                }
            }
            lsp_types::request::DocumentDiagnosticRequest::METHOD => {
                match serde_json::from_value::<lsp_types::DocumentDiagnosticParams>(request.params)
                {
                    Ok(params) => Response::new_ok(id, self.document_diagnostics(&params)),
                    Err(error) => invalid_params(id, &error),
                }
            }
            lsp_types::request::WorkspaceDiagnosticRequest::METHOD => {
                match serde_json::from_value::<lsp_types::WorkspaceDiagnosticParams>(request.params)
                {
                    Ok(params) => Response::new_ok(id, self.workspace_diagnostics(&params)),
                    Err(error) => invalid_params(id, &error),
                }
            }
            lsp_types::request::HoverRequest::METHOD => {
                match serde_json::from_value::<HoverParams>(request.params) {
                    Ok(params) => Response::new_ok(id, self.hover(&params)),
                    Err(error) => invalid_params(id, &error),
                }
            }
            method => Response::new_err(
                id,
                ErrorCode::MethodNotFound as i32,
                format!("unknown method `{method}`"),
            ),
        };
        let _ = transport::write(&Message::Response(response));
    }

    fn on_notification(&mut self, notification: Notification, dirty: &mut Vec<String>) {
        use lsp_types::notification as n;
        let params = notification.params;
        match notification.method.as_str() {
            n::DidOpenTextDocument::METHOD => {
                if let Ok(params) = serde_json::from_value::<DidOpenTextDocumentParams>(params) {
                    let document = params.text_document;
                    let key = document.uri.as_str().to_owned();
                    self.documents.insert(
                        key.clone(),
                        Open {
                            uri: document.uri,
                            document: Document::new(document.text, document.version),
                            diagnostics: Vec::new(),
                            published: None,
                            parsed: false,
                        },
                    );
                    mark(dirty, key);
                }
            }
            n::DidChangeTextDocument::METHOD => {
                if let Ok(params) = serde_json::from_value::<DidChangeTextDocumentParams>(params) {
                    let key = params.text_document.uri.as_str().to_owned();
                    // Changes to a document that is not open are ignored: there is no text to
                    // apply them to.
                    if let Some(open) = self.documents.get_mut(&key) {
                        for change in &params.content_changes {
                            open.document.apply(change, self.encoding);
                        }
                        open.document.version = params.text_document.version;
                        open.parsed = false;
                        mark(dirty, key);
                    }
                }
            }
            n::DidSaveTextDocument::METHOD => {
                if let Ok(params) = serde_json::from_value::<DidSaveTextDocumentParams>(params) {
                    let key = params.text_document.uri.as_str().to_owned();
                    if self.documents.contains_key(&key) {
                        mark(dirty, key);
                    }
                }
            }
            n::DidCloseTextDocument::METHOD => {
                if let Ok(params) = serde_json::from_value::<DidCloseTextDocumentParams>(params) {
                    let key = params.text_document.uri.as_str().to_owned();
                    dirty.retain(|k| k != &key);
                    if let Some(open) = self.documents.remove(&key) {
                        if !self.pulls {
                            self.publish(&open.uri, Vec::new(), None);
                        }
                        if let Some(path) = file_path(&open.uri) {
                            self.projects.changed(&path);
                        }
                        // The file on disk stands in for the buffer again: what the other
                        // files of its project were linted with may have changed.
                        for key in self.documents.keys() {
                            mark(dirty, key.clone());
                        }
                    }
                }
            }
            n::DidChangeConfiguration::METHOD => {
                if let Ok(params) = serde_json::from_value::<DidChangeConfigurationParams>(params) {
                    let settings = params
                        .settings
                        .get("torchlint")
                        .cloned()
                        .unwrap_or(params.settings);
                    if let Ok(client) = serde_json::from_value::<ClientSettings>(settings) {
                        self.client = client;
                    }
                    self.reload(dirty);
                }
            }
            n::DidChangeWatchedFiles::METHOD => {
                let changes =
                    serde_json::from_value::<lsp_types::DidChangeWatchedFilesParams>(params)
                        .map(|params| params.changes)
                        .unwrap_or_default();
                let config_changed = changes.is_empty()
                    || changes.iter().any(|change| {
                        let uri = change.uri.as_str();
                        crate::settings::config_file::CONFIG_FILE_NAMES
                            .iter()
                            .any(|name| uri.ends_with(&format!("/{name}")))
                    });
                if config_changed {
                    // Settings are read again for every open document.
                    self.reload(dirty);
                } else {
                    // A file of a project changed on disk: its open documents may owe
                    // findings to it. Created or deleted files change what the project holds.
                    if changes
                        .iter()
                        .any(|change| change.typ != lsp_types::FileChangeType::CHANGED)
                    {
                        self.projects.rediscover();
                    }
                    for path in changes.iter().filter_map(|change| file_path(&change.uri)) {
                        self.projects.changed(&path);
                    }
                    for key in self.documents.keys() {
                        mark(dirty, key.clone());
                    }
                }
            }
            _ => {}
        }
    }

    fn reload(&mut self, dirty: &mut Vec<String>) {
        self.resolver = Arc::new(resolver_for(&self.client));
        self.shown_errors.clear();
        self.projects.clear();
        for key in self.documents.keys() {
            mark(dirty, key.clone());
        }
    }

    /// Asks the client to tell us when config files change (when it can register watchers).
    fn register_config_watchers(&self) {
        if !self.can_watch_files {
            return;
        }
        let registration = serde_json::json!({
            "registrations": [{
                "id": "torchlint-config",
                "method": "workspace/didChangeWatchedFiles",
                // Config files, and the Python files whose facts the open documents use.
                "registerOptions": { "watchers": [
                    { "globPattern": "**/pyproject.toml" },
                    { "globPattern": "**/torchlint.toml" },
                    { "globPattern": "**/.torchlint.toml" },
                    { "globPattern": "**/*.py" },
                    { "globPattern": "**/*.pyi" },
                ]},
            }],
        });
        let request = Request::new(
            RequestId::from("torchlint/register-watchers".to_owned()),
            lsp_types::request::RegisterCapability::METHOD.to_owned(),
            registration,
        );
        let _ = transport::write(&Message::Request(request));
    }

    /// Lints the documents that changed: each with the rest of its project (and the other
    /// open documents of that project again, whose findings may rest on it), or by itself
    /// when it belongs to no project.
    fn lint_dirty(&mut self, dirty: Vec<String>) {
        let mut roots: Vec<PathBuf> = Vec::new();
        for key in &dirty {
            match self.project_of(key) {
                Some((root, _)) => {
                    if !roots.contains(&root) {
                        roots.push(root);
                    }
                }
                None => self.lint_alone(key),
            }
        }
        for root in roots {
            self.lint_project(&root, &dirty);
        }
    }

    /// The project root of an open document and its target there; `None` for a document to
    /// lint by itself: not a file, a notebook, in no project, or a text that would not read
    /// back as itself from disk (a BOM, a declared legacy encoding: findings point into the
    /// buffer's text).
    fn project_of(&self, key: &str) -> Option<(PathBuf, LintTarget)> {
        let open = self.documents.get(key)?;
        let path = file_path(&open.uri)?;
        let kind = SourceKind::from_path(&path).filter(|kind| *kind == SourceKind::Python)?;
        let settings = self.resolver.for_file(&path).ok()?;
        let text = &open.document.text;
        if !crate::source::reads_as_itself(text) {
            return None;
        }
        let target = LintTarget {
            path,
            kind,
            settings,
        };
        Some((run::project_root(&target)?, target))
    }

    /// The open documents of the project at `root`, with their targets.
    fn members(&self, root: &std::path::Path) -> Vec<(String, LintTarget)> {
        self.documents
            .keys()
            .filter_map(|key| match self.project_of(key) {
                Some((found, target)) if found == root => Some((key.clone(), target)),
                _ => None,
            })
            .collect()
    }

    fn lint_project(&mut self, root: &std::path::Path, dirty: &[String]) {
        let members = self.members(root);
        // Each changed text is parsed here, incrementally from its last tree (the project's
        // lint takes the tree); a text the parser cannot take is linted from its bytes.
        for (key, _) in &members {
            let Some(open) = self.documents.get_mut(key) else {
                continue;
            };
            if open.parsed {
                continue;
            }
            // A text too dense or slow to parse gets no tree: the project's lint reports it.
            let tree = if parse::check_parsable(&open.document.text).is_ok() {
                parse::parse(&open.document.text, open.document.tree.as_ref()).ok()
            } else {
                None
            };
            self.reclaimer
                .free(std::mem::replace(&mut open.document.tree, tree));
            open.parsed = true;
        }
        for (key, target) in &members {
            self.last_settings
                .insert(key.clone(), Arc::clone(&target.settings));
        }
        let (keys, open) = open_files(&self.documents, members);
        let resolver = Arc::clone(&self.resolver);
        let projects = &mut self.projects;
        // A panic outside the rules (they contain their own) costs these documents'
        // diagnostics, never the session.
        let linted = catch_unwind(AssertUnwindSafe(|| projects.lint(root, &open, &resolver)));
        let Ok(checked) = linted else {
            self.projects.clear();
            for key in &keys {
                self.deliver(key, Vec::new(), true);
            }
            return;
        };
        self.deliver_checked(&keys, checked, dirty);
        if !self.unsummarised.iter().any(|known| known == root) {
            self.unsummarised.push(root.to_owned());
        }
    }

    /// What other files read of the documents edited since the last pause (their summaries):
    /// most keystrokes leave it as it was. Where it changed, the files that read it are
    /// checked again and the open documents whose findings moved are published again.
    fn summarise(&mut self) {
        for root in std::mem::take(&mut self.unsummarised) {
            let members = self.members(&root);
            let (keys, open) = open_files(&self.documents, members);
            let projects = &mut self.projects;
            match catch_unwind(AssertUnwindSafe(|| projects.summarise(&root, &open))) {
                Ok(Some(checked)) => self.deliver_checked(&keys, checked, &[]),
                Ok(None) => {}
                // What was published stands; the next change starts the project afresh.
                Err(_) => self.projects.clear(),
            }
        }
    }

    /// Publishes what the project's open documents came to (`dirty`: those whose new version
    /// waits for a publication, even an unchanged one).
    fn deliver_checked(&mut self, keys: &[String], checked: Vec<Checked>, dirty: &[String]) {
        for (key, checked) in keys.iter().zip(checked) {
            if let Some(warning) = checked.warning {
                log(&format!("torchlint: {warning}"));
            }
            let diagnostics = match checked.outcome {
                Outcome::Linted {
                    file,
                    internal_errors,
                } => {
                    self.log_failures(key, &internal_errors);
                    file.diagnostics
                }
                Outcome::Clean | Outcome::Parsed => Vec::new(),
                Outcome::Failed(error) => {
                    // The error names the file: the log holds every file's lines.
                    log(&format!("torchlint: {error}"));
                    Vec::new()
                }
            };
            self.deliver(key, diagnostics, dirty.contains(key));
        }
    }

    /// Lints a document by itself, re-parsing incrementally from its last tree.
    fn lint_alone(&mut self, key: &str) {
        let resolver = Arc::clone(&self.resolver);
        let Some(path) = self.documents.get(key).map(|open| file_path(&open.uri)) else {
            return;
        };
        let settings = match &path {
            Some(path) => resolver.for_file(path),
            None => resolver.for_folder(std::path::Path::new(".")),
        };
        let settings = match settings {
            Ok(settings) => {
                self.last_settings
                    .insert(key.to_owned(), Arc::clone(&settings));
                Some(settings)
            }
            Err(error) => {
                // Once per error, then the document's last good settings (or the defaults,
                // for a document opened while the config was broken).
                let message = format!(
                    "torchlint: {error}; linting with the last settings that worked until it is fixed"
                );
                if self.shown_errors.insert(message.clone()) {
                    let _ = transport::write(&Message::Notification(Notification::new(
                        lsp_types::notification::ShowMessage::METHOD.to_owned(),
                        serde_json::json!({ "type": 1, "message": message }),
                    )));
                }
                self.last_settings.get(key).cloned().or_else(|| {
                    Settings::defaults(std::path::Path::new("."), &overrides_of(&self.client))
                        .ok()
                        .map(Arc::new)
                })
            }
        };
        let Some(open) = self.documents.get_mut(key) else {
            return;
        };
        let diagnostics = match settings {
            Some(settings) => {
                let name = path
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(open.uri.as_str()));
                // A panic outside the rules (they contain their own) costs this document's
                // diagnostics, never the session.
                let reclaimer = &self.reclaimer;
                let linted = catch_unwind(AssertUnwindSafe(|| {
                    lint(&mut open.document, name, &settings, reclaimer)
                }));
                match linted {
                    Ok((found, failed)) => {
                        self.log_failures(key, &failed);
                        found
                    }
                    Err(_) => Vec::new(),
                }
            }
            None => Vec::new(),
        };
        self.deliver(key, diagnostics, true);
    }

    fn log_failures(&self, key: &str, failures: &[InternalError]) {
        for failure in failures {
            log(&format!(
                "torchlint: rule {} failed on {} and was skipped there: {}",
                failure.rule.code, key, failure.message
            ));
        }
    }

    /// Keeps a document's findings (for code actions and hover) and publishes them, when they
    /// changed or `always` (its text changed: the client wants the new version's).
    fn deliver(&mut self, key: &str, diagnostics: Vec<Diagnostic>, always: bool) {
        let encoding = self.encoding;
        let Some(open) = self.documents.get_mut(key) else {
            return;
        };
        let mut diagnostics = diagnostics;
        if open.uri.path().as_str().ends_with(".ipynb") {
            // A notebook's fixes edit its cells' joined text, not the JSON the editor holds:
            // shown, never offered as edits of the document.
            for fix in diagnostics.iter_mut().filter_map(|d| d.fix.as_mut()) {
                fix.applicability = crate::diagnostic::Applicability::DisplayOnly;
            }
        }
        let converted: Vec<lsp_types::Diagnostic> = diagnostics
            .iter()
            .map(|diagnostic| convert::diagnostic(diagnostic, &open.document, &open.uri, encoding))
            .collect();
        open.diagnostics = diagnostics;
        if !always && open.published.as_ref() == Some(&converted) {
            return;
        }
        open.published = Some(converted.clone());
        let (uri, version) = (open.uri.clone(), open.document.version);
        if !self.pulls {
            self.publish(&uri, converted, Some(version));
        } else if !always && self.refreshes {
            // The client pulls after its own edits; this change came from another file.
            self.refresh_diagnostics();
        }
    }

    /// Asks the client to pull its diagnostics again.
    fn refresh_diagnostics(&mut self) {
        self.sent_requests += 1;
        let request = lsp_server::Request::new(
            RequestId::from(format!("torchlint-{}", self.sent_requests)),
            lsp_types::request::WorkspaceDiagnosticRefresh::METHOD.to_owned(),
            serde_json::Value::Null,
        );
        let _ = transport::write(&Message::Request(request));
    }

    fn publish(&self, uri: &Uri, diagnostics: Vec<lsp_types::Diagnostic>, version: Option<i32>) {
        let params = PublishDiagnosticsParams {
            uri: uri.clone(),
            diagnostics,
            version,
        };
        let _ = transport::write(&Message::Notification(Notification::new(
            lsp_types::notification::PublishDiagnostics::METHOD.to_owned(),
            params,
        )));
    }

    fn code_actions(&self, params: &CodeActionParams) -> Vec<lsp_types::CodeActionOrCommand> {
        let Some(open) = self.documents.get(params.text_document.uri.as_str()) else {
            return Vec::new();
        };
        convert::code_actions(
            &open.diagnostics,
            &open.document,
            &open.uri,
            params.range,
            self.encoding,
            params.context.only.as_deref(),
            self.client.unsafe_fixes,
        )
    }

    /// `textDocument/diagnostic`: an open document's findings as last linted (what was
    /// pushed), `unchanged` when the client already has them; a document not open has none.
    fn document_diagnostics(
        &self,
        params: &lsp_types::DocumentDiagnosticParams,
    ) -> serde_json::Value {
        let Some(open) = self.documents.get(params.text_document.uri.as_str()) else {
            return serde_json::json!({ "kind": "full", "items": [] });
        };
        let (result_id, items) = Self::report_of(open);
        if params.previous_result_id.as_deref() == Some(result_id.as_str()) {
            return serde_json::json!({ "kind": "unchanged", "resultId": result_id });
        }
        serde_json::json!({ "kind": "full", "resultId": result_id, "items": items })
    }

    /// `workspace/diagnostic`: the open documents' reports, and the findings of the other files
    /// of their projects as the projects' last lint left them.
    fn workspace_diagnostics(
        &self,
        params: &lsp_types::WorkspaceDiagnosticParams,
    ) -> serde_json::Value {
        let mut items = Vec::new();
        let mut open_paths = Vec::new();
        for open in self.documents.values() {
            open_paths.extend(file_path(&open.uri));
            let (result_id, found) = Self::report_of(open);
            let known = params
                .previous_result_ids
                .iter()
                .any(|previous| previous.uri == open.uri && previous.value == result_id);
            items.push(if known {
                serde_json::json!({ "kind": "unchanged", "uri": open.uri, "version": open.document.version, "resultId": result_id })
            } else {
                serde_json::json!({ "kind": "full", "uri": open.uri, "version": open.document.version, "resultId": result_id, "items": found })
            });
        }
        for (path, file) in self.projects.findings_elsewhere(&open_paths) {
            let Ok(url) = url::Url::from_file_path(&path) else {
                continue;
            };
            let Ok(uri) = url.as_str().parse::<Uri>() else {
                continue;
            };
            let document = Document::new(file.source.text().to_owned(), 0);
            let found: Vec<lsp_types::Diagnostic> = file
                .diagnostics
                .iter()
                .map(|diagnostic| convert::diagnostic(diagnostic, &document, &uri, self.encoding))
                .collect();
            items.push(
                serde_json::json!({ "kind": "full", "uri": uri, "version": null, "items": found }),
            );
        }
        serde_json::json!({ "items": items })
    }

    /// An open document's findings in the protocol's terms (as last published), and an id
    /// that changes with them.
    fn report_of(open: &Open) -> (String, Vec<lsp_types::Diagnostic>) {
        let items = open.published.clone().unwrap_or_default();
        let text = serde_json::to_string(&items).unwrap_or_default();
        let id = format!(
            "{}-{:016x}",
            open.document.version,
            xxhash_rust::xxh3::xxh3_64(text.as_bytes())
        );
        (id, items)
    }

    fn hover(&self, params: &HoverParams) -> Option<lsp_types::Hover> {
        let position = &params.text_document_position_params;
        let open = self.documents.get(position.text_document.uri.as_str())?;
        convert::hover(
            &open.diagnostics,
            &open.document,
            position.position,
            self.encoding,
        )
    }
}

/// What one lint of a document found: its findings, and the rules that failed on it (they are
/// skipped for this document only).
type Linted = (Vec<Diagnostic>, Vec<InternalError>);

/// Lints a document's text, re-parsing incrementally from its last tree. The previous tree
/// and the text copy are freed by `reclaimer`, off the way to the diagnostics. A text too
/// dense or too slow to parse gets no diagnostics, and a line in the client's log.
fn lint(
    document: &mut Document,
    name: PathBuf,
    settings: &Settings,
    reclaimer: &Reclaimer,
) -> Linted {
    let source = SourceFile::new(name, document.text.clone());
    if parse::check_parsable(source.text()).is_err() {
        reclaimer.free(document.tree.take());
        let linted = linter::lint_source(&source, settings);
        reclaimer.free(source);
        return match linted {
            Ok((_, outcome)) => (outcome.diagnostics, outcome.internal_errors),
            // The unparsable path never parses, so it is never skipped.
            Err(_) => (Vec::new(), Vec::new()),
        };
    }
    let tree = match parse::parse(source.text(), document.tree.as_ref()) {
        Ok(tree) => tree,
        Err(skipped) => {
            log(&format!(
                "torchlint: {}: {skipped}",
                source.name().display()
            ));
            reclaimer.free(document.tree.take());
            reclaimer.free(source);
            return (Vec::new(), Vec::new());
        }
    };
    let outcome = linter::lint_parsed(&source, &tree, settings);
    reclaimer.free(document.tree.replace(tree));
    reclaimer.free(source);
    (outcome.diagnostics, outcome.internal_errors)
}

/// A line in the client's log (`window/logMessage`).
fn log(message: &str) {
    let _ = transport::write(&Message::Notification(Notification::new(
        lsp_types::notification::LogMessage::METHOD.to_owned(),
        serde_json::json!({ "type": 2, "message": message }),
    )));
}

fn overrides_of(client: &ClientSettings) -> CliOverrides {
    CliOverrides {
        select: client.select.clone(),
        ignore: client.ignore.clone(),
        ..CliOverrides::default()
    }
}

fn resolver_for(client: &ClientSettings) -> Resolver {
    // Only a `--config` file can make this fail, and the server has none.
    Resolver::new(overrides_of(client), None).expect("a resolver without a config file")
}

fn file_path(uri: &Uri) -> Option<PathBuf> {
    url::Url::parse(uri.as_str()).ok()?.to_file_path().ok()
}

/// The request a `$/cancelRequest` names.
fn cancelled_id(message: &Incoming) -> Option<RequestId> {
    let Incoming::Message(Message::Notification(notification)) = message else {
        return None;
    };
    if notification.method != lsp_types::notification::Cancel::METHOD {
        return None;
    }
    let params: lsp_types::CancelParams =
        serde_json::from_value(notification.params.clone()).ok()?;
    Some(match params.id {
        lsp_types::NumberOrString::Number(id) => RequestId::from(id),
        lsp_types::NumberOrString::String(id) => RequestId::from(id),
    })
}

fn mark(dirty: &mut Vec<String>, key: String) {
    if !dirty.contains(&key) {
        dirty.push(key);
    }
}

fn invalid_params(id: RequestId, error: &serde_json::Error) -> Response {
    Response::new_err(
        id,
        ErrorCode::InvalidParams as i32,
        format!("invalid params: {error}"),
    )
}
