//! End to end with a real LSP client: headless Neovim opens a Python file, attaches
//! `torchlint server` to it and reports the diagnostics it received; then it asks for the code
//! actions at the TL102 finding, applies the rule's fix, and reports what is left.
//!
//! Skipped when `nvim` is not on PATH, unless `TORCHLINT_REQUIRE_NEOVIM=1` (as in CI).

mod common;

use std::fs::{self, File};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The client. It must run on Neovim 0.7 (Debian bookworm's), which has neither
/// `vim.lsp.start` nor `vim.fs`, and on current versions, where `start_client` is deprecated.
/// It runs on VimEnter, once the file named on the command line is loaded, and always ends
/// nvim itself: an error is logged and ends it with a failing exit code.
const INIT_LUA: &str = r#"
local log = assert(io.open(vim.env.TORCHLINT_NVIM_LOG, 'w'))
local function note(text)
  log:write(text, '\n')
  log:flush()
end

local exited = false

local function run()
  note('nvim ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor))
  local bufnr = vim.api.nvim_get_current_buf()
  local config = {
    name = 'torchlint',
    cmd = { vim.env.TORCHLINT_BIN, 'server' },
    root_dir = vim.fn.getcwd(),
    -- Both rules of the fixture are TL1xx: the options must be read, and select them.
    init_options = { select = { 'TL1' } },
    on_exit = function(code, signal)
      exited = true
      note('server exited: code ' .. tostring(code) .. ', signal ' .. tostring(signal))
    end,
  }
  local client_id
  if vim.lsp.start then -- 0.8+
    client_id = vim.lsp.start(config, { bufnr = bufnr })
  else
    client_id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(bufnr, client_id)
  end
  note('client ' .. tostring(client_id) .. ' attached to ' .. vim.api.nvim_buf_get_name(bufnr))

  -- A server that died will not publish: stop waiting then.
  local arrived = vim.wait(10000, function()
    return #vim.diagnostic.get(bufnr) > 0 or exited
  end, 50)
  note(#vim.diagnostic.get(bufnr) > 0 and 'diagnostics arrived'
    or (arrived and 'no diagnostics: the server exited' or 'no diagnostics after 10 s'))

  local function diagnostics()
    local found = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      table.insert(found, {
        code = d.code, lnum = d.lnum, col = d.col, source = d.source, message = d.message,
      })
    end
    return found
  end
  local report = { before = diagnostics(), after = {}, applied = '' }

  -- The rule's own fix of the TL102 finding, as a user picks it from the code actions.
  local target
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.code == 'TL102' then target = d end
  end
  if target then
    local params = {
      textDocument = { uri = vim.uri_from_bufnr(bufnr) },
      range = {
        start = { line = target.lnum, character = target.col },
        ['end'] = { line = target.end_lnum, character = target.end_col },
      },
      context = { diagnostics = {} },
    }
    local responses = vim.lsp.buf_request_sync(bufnr, 'textDocument/codeAction', params, 10000)
    for _, response in pairs(responses or {}) do
      for _, action in ipairs(response.result or {}) do
        if action.edit and not action.title:find('Ignore') and report.applied == '' then
          report.applied = action.title
          vim.lsp.util.apply_workspace_edit(action.edit, 'utf-16')
        end
      end
    end
    note('applied: ' .. report.applied)
    -- The edit changes the buffer, the client sends it, the server publishes again.
    vim.wait(10000, function()
      for _, d in ipairs(vim.diagnostic.get(bufnr)) do
        if d.code == 'TL102' then return false end
      end
      return true
    end, 50)
  end
  report.after = diagnostics()
  report.text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
  local out = assert(io.open(vim.env.TORCHLINT_NVIM_OUT, 'w'))
  out:write(vim.json.encode(report))
  out:close()
end

vim.api.nvim_create_autocmd('VimEnter', {
  once = true,
  callback = function()
    local ok, err = xpcall(run, debug.traceback)
    if not ok then
      note('error: ' .. tostring(err))
      vim.cmd('cquit 3')
    end
    vim.cmd('qall!')
  end,
})
"#;

#[derive(Debug, Deserialize)]
struct Diagnostic {
    code: Option<String>,
    lnum: u32,
    col: u32,
    source: Option<String>,
    message: String,
}

/// True when `nvim --version` runs.
fn neovim_available() -> bool {
    Command::new("nvim")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[test]
fn neovim_shows_the_servers_diagnostics_and_applies_a_fix() {
    if !neovim_available() {
        if std::env::var("TORCHLINT_REQUIRE_NEOVIM").as_deref() == Ok("1") {
            panic!("TORCHLINT_REQUIRE_NEOVIM=1 but `nvim` is not on PATH");
        }
        common::report_skip(
            "neovim_shows_the_servers_diagnostics_and_applies_a_fix",
            "`nvim` is not on PATH",
        );
        return;
    }

    let project = common::Project::new();
    let dir = project.path();
    let init = project.write("init.lua", INIT_LUA);
    project.write("train.py", common::EVAL_HAZARD);
    let out = dir.join("diagnostics.json");
    let log = dir.join("init.log");
    let stderr_path = dir.join("nvim.stderr");

    let mut nvim = Command::new("nvim");
    nvim.args(["--headless", "--clean", "-u"])
        .arg(&init)
        .arg("train.py")
        .current_dir(dir)
        .env("TORCHLINT_BIN", env!("CARGO_BIN_EXE_torchlint"))
        .env("TORCHLINT_NVIM_OUT", &out)
        .env("TORCHLINT_NVIM_LOG", &log)
        .env_remove("TORCHLINT_INJECT_PANIC")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&stderr_path).expect("create nvim.stderr"));
    // Neovim's own files (LSP log, shada, swap) go to the temporary folder, not the user's.
    for var in [
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
    ] {
        nvim.env(var, dir);
    }
    let mut child = nvim.spawn().expect("start nvim");

    // A hung client or server must fail the test, not hang it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for nvim") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };

    let read = |path: &std::path::Path| fs::read_to_string(path).unwrap_or_default();
    // Neovim's LSP log (with the server's stderr) is under XDG_STATE_HOME, or XDG_CACHE_HOME
    // before 0.8: both are `dir`.
    let context = format!(
        "nvim exit: {}\n--- init.log ---\n{}\n--- nvim stderr ---\n{}\n--- lsp.log ---\n{}",
        status.map_or("killed after 30 s".to_string(), |s| s.to_string()),
        read(&log),
        read(&stderr_path),
        read(&dir.join("nvim/lsp.log")),
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "nvim did not finish cleanly\n{context}"
    );
    let report: Report = serde_json::from_str(&read(&out))
        .unwrap_or_else(|error| panic!("no diagnostics file ({error})\n{context}"));
    let diagnostics = report.before;

    // The CLI's 10:22 and 11:5, as Neovim's 0-based lines and columns.
    let mut found: Vec<(&str, u32, u32)> = diagnostics
        .iter()
        .map(|d| (d.code.as_deref().unwrap_or("?"), d.lnum, d.col))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [("TL101", 9, 21), ("TL102", 10, 4)],
        "{diagnostics:#?}\n{context}"
    );
    for diagnostic in &diagnostics {
        assert_eq!(
            diagnostic.source.as_deref(),
            Some("torchlint"),
            "{diagnostic:?}"
        );
        assert!(!diagnostic.message.is_empty(), "{diagnostic:?}");
    }

    // The fix applied from the editor: the line keeps a number, and only TL101 is left.
    assert!(
        report.applied.contains("loss.item()") && report.applied.contains("(unsafe)"),
        "{:?}\n{context}",
        report.applied
    );
    assert!(
        report
            .text
            .lines()
            .any(|line| line == "    total += loss.item()"),
        "{}\n{context}",
        report.text
    );
    let after: Vec<&str> = report
        .after
        .iter()
        .map(|d| d.code.as_deref().unwrap_or("?"))
        .collect();
    assert_eq!(after, ["TL101"], "{:#?}\n{context}", report.after);
}

/// What the client saw: the diagnostics first, the fix it applied, and after.
#[derive(Debug, Deserialize)]
struct Report {
    before: Vec<Diagnostic>,
    applied: String,
    after: Vec<Diagnostic>,
    text: String,
}
