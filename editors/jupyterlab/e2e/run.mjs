// The JupyterLab set-up of editors/README.md in a real JupyterLab: jupyter lab (started by
// scripts/test-jupyterlab, with jupyterlab-lsp and the README's LanguageServerManager entry)
// driven by headless Chromium through playwright-core, as a user would: open the notebook, see
// the finding underlined in its code cell, hover it, and find it in jupyterlab-lsp's
// diagnostics panel, once.
//
// The browser also records the LSP traffic between jupyterlab-lsp and torchlint (the JSON-RPC
// messages of the /lsp/ws/torchlint websocket): the client's initialize capabilities tell
// whether it pulls diagnostics (textDocument.diagnostic) or takes them pushed
// (textDocument/publishDiagnostics), and a failure says which of the two went missing.
//
// Everything comes from the environment (scripts/test-jupyterlab sets it):
//   TORCHLINT_E2E_NODE_MODULES  node_modules holding playwright-core
//   TORCHLINT_E2E_CHROMIUM      the system Chromium
//   TORCHLINT_E2E_URL           the notebook's URL, http://127.0.0.1:PORT/lab/tree/<notebook>
//   TORCHLINT_E2E_HAZARD        the text of the hazard line in the notebook's code cell
//   TORCHLINT_E2E_CODE          the rule code expected there (TL102)
//   TORCHLINT_E2E_MESSAGE       the start of its message
//   TORCHLINT_E2E_ARTIFACTS     where the screenshots and the LSP traffic go
// Exits 0 when every step passed; otherwise names the step, why, and a screenshot of it.

import fs from "node:fs";
import path from "node:path";

import { envReader, log, openBrowser } from "../../e2e/browser.mjs";

const env = envReader("scripts/test-jupyterlab");
const nodeModules = env("TORCHLINT_E2E_NODE_MODULES");
const chromiumPath = env("TORCHLINT_E2E_CHROMIUM", "chromium");
const url = env("TORCHLINT_E2E_URL");
const hazard = env("TORCHLINT_E2E_HAZARD", "running += loss");
const code = env("TORCHLINT_E2E_CODE", "TL102");
const message = env("TORCHLINT_E2E_MESSAGE", "`running` accumulates `loss` with its autograd graph");
const artifacts = env("TORCHLINT_E2E_ARTIFACTS", ".");
// How long the language server may take to start and report, and JupyterLab to load.
const SLOW = Number(process.env.TORCHLINT_E2E_TIMEOUT_MS ?? 90_000);

const { browser, page, screenshot, step, onFailure } = await openBrowser({
  nodeModules,
  chromiumPath,
  artifacts,
});

// --- the LSP traffic, as the browser sees it ---------------------------------------------------
// jupyterlab-lsp talks to each language server through a websocket of jupyter-lsp's server
// extension (/lsp/ws/<server>) that carries the JSON-RPC messages unchanged.
const traffic = []; // {at, dir: "client"|"server", message}
const started = Date.now();
page.on("websocket", (socket) => {
  if (!/\/lsp\/ws\/torchlint(\?|$)/.test(socket.url())) return;
  const record = (dir) => (frame) => {
    let message;
    try {
      message = JSON.parse(typeof frame.payload === "string" ? frame.payload : frame.payload.toString());
    } catch {
      message = { unparsed: String(frame.payload) };
    }
    traffic.push({ at: (Date.now() - started) / 1000, dir, message });
  };
  socket.on("framesent", record("client"));
  socket.on("framereceived", record("server"));
});
const fromClient = (method) => traffic.filter((t) => t.dir === "client" && t.message.method === method);
const fromServer = (method) => traffic.filter((t) => t.dir === "server" && t.message.method === method);
function saveTraffic() {
  const target = path.join(artifacts, "lsp-traffic.jsonl");
  fs.writeFileSync(target, traffic.map((t) => JSON.stringify(t)).join("\n") + "\n");
  return target;
}
onFailure.push(() => console.error(`e2e: the LSP traffic is in ${saveTraffic()}`));
// What the client declared about diagnostics in its initialize request.
function diagnosticsCapabilities() {
  const initialize = fromClient("initialize")[0];
  const textDocument = initialize?.message.params?.capabilities?.textDocument ?? {};
  return {
    pull: textDocument.diagnostic !== undefined,
    push: textDocument.publishDiagnostics !== undefined,
    textDocument,
  };
}
// Why no finding arrived, from the traffic: the server's push or the client's pull missing.
function diagnoseTraffic() {
  if (fromClient("initialize").length === 0) {
    return "jupyterlab-lsp never sent torchlint an initialize request (no /lsp/ws/torchlint traffic)";
  }
  const caps = diagnosticsCapabilities();
  const pulls = fromClient("textDocument/diagnostic").length;
  const pushes = fromServer("textDocument/publishDiagnostics").length;
  const refreshes = fromServer("workspace/diagnostic/refresh").length;
  const opened = fromClient("textDocument/didOpen").map((t) => t.message.params?.textDocument?.uri);
  const lines = [
    `client capabilities: textDocument.diagnostic ${caps.pull ? "declared (pull)" : "absent"},` +
      ` textDocument.publishDiagnostics ${caps.push ? "declared (push)" : "absent"}`,
    `didOpen: ${opened.join(", ") || "none"}; server pushes (publishDiagnostics): ${pushes};` +
      ` client pulls (textDocument/diagnostic): ${pulls}; server refresh requests: ${refreshes}`,
  ];
  if (caps.pull && pulls === 0) {
    lines.push("jupyterlab-lsp declares the pull capability but never pulls textDocument/diagnostic");
  }
  if (!caps.pull && pushes === 0) {
    lines.push("the client takes pushed diagnostics, but torchlint never sent publishDiagnostics");
  }
  return lines.join("\n");
}



// The notebook's code cell holding the hazard, and its editor's line with it.
const hazardCell = () => page.locator(".jp-Notebook .jp-CodeCell", {
  has: page.locator(".cm-content", { hasText: hazard }),
});
const hazardLine = () => hazardCell().locator(".cm-line", { hasText: hazard });
// Every diagnostic underline in the notebook (CodeMirror's lint marks, which jupyterlab-lsp uses).
const underlines = () => page.locator(".jp-Notebook .cm-lintRange");

await step(`open ${url}`, async () => {
  await page.goto(url, { waitUntil: "domcontentloaded", timeout: SLOW });
  await page.locator(".jp-Notebook").first().waitFor({ timeout: SLOW });
  await hazardLine().first().waitFor({ timeout: SLOW });
  const cells = await page.locator(".jp-Notebook .jp-CodeCell").count();
  if (cells < 2) throw new Error(`the notebook shows ${cells} code cell(s), expected 2`);
});

await step("the kernel is idle (no kernel dialog in the way)", async () => {
  // A "Select Kernel" dialog would mean the notebook's kernelspec is not found.
  const dialog = page.locator(".jp-Dialog");
  if (await dialog.count()) {
    const text = (await dialog.first().innerText()).replace(/\s+/g, " ");
    throw new Error(`a dialog is open: ${text}`);
  }
  await page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle'], " +
    ".jp-KernelStatus-success, .jp-Toolbar-kernelStatus[title*='Idle' i]")
    .first().waitFor({ timeout: SLOW }).catch(() => log("     (kernel status not read; going on)"));
});

const capabilities = await step("jupyterlab-lsp starts torchlint (initialize over /lsp/ws/torchlint)", async () => {
  const deadline = Date.now() + SLOW;
  while (Date.now() < deadline) {
    const request = fromClient("initialize")[0];
    if (request) {
      const response = traffic.find((t) => t.dir === "server" && t.message.id === request.message.id &&
        ("result" in t.message || "error" in t.message));
      if (response?.message.error) {
        throw new Error(`torchlint answered initialize with an error: ${JSON.stringify(response.message.error)}`);
      }
      if (response) {
        const target = path.join(artifacts, "initialize-capabilities.json");
        fs.writeFileSync(target, JSON.stringify(request.message.params.capabilities, null, 2) + "\n");
        return diagnosticsCapabilities();
      }
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no initialize exchange with torchlint within ${SLOW / 1000}s\n${diagnoseTraffic()}`);
});
log(`     client declares: textDocument.diagnostic (pull) ${capabilities.pull ? "yes" : "no"},` +
  ` textDocument.publishDiagnostics (push) ${capabilities.push ? "yes" : "no"}` +
  ` (saved to ${path.join(artifacts, "initialize-capabilities.json")})`);

await step(`the hazard line of the code cell is underlined`, async () => {
  const mark = hazardLine().locator(".cm-lintRange");
  try {
    await mark.first().waitFor({ timeout: SLOW });
  } catch {
    throw new Error(`no underline on "${hazard}" within ${SLOW / 1000}s\n${diagnoseTraffic()}`);
  }
  // Let late or duplicate findings arrive before counting.
  await page.waitForTimeout(3_000);
  const marked = (await mark.allInnerTexts()).join("");
  if (!hazard.includes(marked.trim()) && !marked.includes(hazard)) {
    throw new Error(`the underline covers "${marked}", not "${hazard}"`);
  }
});
await step("screenshot with the finding", () => screenshot("1-underline"));

const hoverText = await step("hovering the underline shows torchlint's finding, once", async () => {
  // CodeMirror's lint tooltip: the message and the source (jupyterlab-lsp leaves the code out).
  const tooltip = page.locator(".cm-tooltip-lint");
  for (let attempt = 0; ; attempt += 1) {
    const mark = hazardLine().locator(".cm-lintRange").first();
    const box = await mark.boundingBox();
    if (!box) throw new Error("the underline has no box on screen");
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2 + 1);
    try {
      await tooltip.filter({ hasText: message }).first().waitFor({ timeout: 5_000 });
      break;
    } catch {
      if (attempt >= 5) {
        const shown = (await tooltip.allInnerTexts()).join(" | ").replace(/\s+/g, " ");
        throw new Error(`no tooltip with "${message}" on hover (tooltips: ${shown || "none"})`);
      }
      await page.mouse.move(5, 5);
      await page.waitForTimeout(500);
    }
  }
  const diagnostics = tooltip.locator(".cm-diagnostic");
  const count = await diagnostics.count();
  const text = (await diagnostics.allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim());
  if (count !== 1) {
    throw new Error(`the hover lists ${count} diagnostics for one finding` +
      " (does the server push publishDiagnostics to a client that pulls, or the client show both?):\n" +
      text.join("\n"));
  }
  if (!/torchlint\s*$/.test(text[0])) throw new Error(`the hover does not name torchlint as its source: ${text[0]}`);
  await screenshot("2-hover");
  return text[0];
});
log(`     hover: ${hoverText}`);

const lspHover = await step(`Ctrl+hover shows torchlint's hover (textDocument/hover) naming ${code}`, async () => {
  // jupyterlab-lsp asks the server for hover documentation while Ctrl is held.
  await page.mouse.move(5, 5);
  const mark = hazardLine().locator(".cm-lintRange").first();
  const box = await mark.boundingBox();
  const hover = page.locator(".lsp-hover", { hasText: code });
  for (let attempt = 0; ; attempt += 1) {
    await page.keyboard.down("Control");
    await page.mouse.move(box.x + box.width / 2 - 2, box.y + box.height / 2);
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    try {
      await hover.first().waitFor({ timeout: 5_000 });
      break;
    } catch {
      await page.keyboard.up("Control");
      if (attempt >= 3) {
        const hovers = fromClient("textDocument/hover").length;
        throw new Error(`no hover naming ${code} with Ctrl held (${hovers} textDocument/hover requests sent)`);
      }
      await page.mouse.move(5, 5);
      await page.waitForTimeout(500);
    }
  }
  const text = (await hover.first().innerText()).replace(/\s+/g, " ").trim();
  await screenshot("3-lsp-hover");
  await page.keyboard.up("Control");
  return text;
});
log(`     lsp hover: ${lspHover.slice(0, 120)}...`);

await step("open jupyterlab-lsp's diagnostics panel (command palette: Show diagnostics panel)", async () => {
  await page.mouse.move(5, 5);
  // The panel lists the diagnostics of the active notebook: focus the hazard cell's editor.
  await hazardLine().first().click();
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+Shift+C");
  const input = page.locator("#command-palette input, .lm-CommandPalette-input").first();
  await input.waitFor({ state: "visible", timeout: 10_000 });
  await input.fill("diagnostics panel");
  const item = page.locator(".lm-CommandPalette-item", { hasText: /Show diagnostics panel/i }).first();
  await item.waitFor({ timeout: 10_000 });
  await item.click();
  await page.locator(".lsp-diagnostics-listing").first().waitFor({ timeout: 15_000 });
});

const panelRow = await step(`the diagnostics panel lists ${code} once, from torchlint, on the hazard cell and line`, async () => {
  const rows = page.locator(".lsp-diagnostics-listing tbody tr", { hasText: code });
  await rows.first().waitFor({ timeout: SLOW });
  await page.waitForTimeout(2_000);
  const count = await rows.count();
  if (count !== 1) {
    const all = (await rows.allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim());
    throw new Error(`${code} is listed ${count} times for one finding:\n${all.join("\n")}`);
  }
  const text = (await rows.first().innerText()).replace(/\s+/g, " ").trim();
  if (!/torchlint/i.test(text)) throw new Error(`the ${code} row does not name torchlint as its source: ${text}`);
  // The finding mapped back from the virtual document onto the cell: its Cell column is the
  // hazard cell's number among all the notebook's cells (1-based), its Line:Ch the hazard's line
  // there (0-based, as CodeMirror counts: jupyterlab-lsp 5.3 prints the position unchanged).
  const cellNumber = await hazardCell().first().evaluate((cell) =>
    [...cell.parentElement.children].filter((c) => c.classList.contains("jp-Cell")).indexOf(cell) + 1);
  const lineNumber = await hazardLine().first().evaluate((line) =>
    [...line.parentElement.children].filter((l) => l.classList.contains("cm-line")).indexOf(line) + 1);
  const cells = (await rows.first().locator("td").allInnerTexts()).map((t) => t.trim());
  if (!cells.includes(String(cellNumber)) || !cells.some((t) => t.startsWith(`${lineNumber - 1}:`))) {
    throw new Error(`the ${code} row is not on cell ${cellNumber}, line ${lineNumber}` +
      ` (Line:Ch ${lineNumber - 1}:…): ${cells.join(" | ")}`);
  }
  const total = await underlines().count();
  if (total !== 1) {
    throw new Error(`the notebook shows ${total} underlines, expected the one finding's`);
  }
  await screenshot("4-diagnostics-panel");
  return text;
});
log(`     panel: ${panelRow}`);

await step("the LSP traffic: one way of delivering diagnostics, one finding", async () => {
  const caps = diagnosticsCapabilities();
  const pulls = fromClient("textDocument/diagnostic");
  const pushes = fromServer("textDocument/publishDiagnostics");
  log(`     traffic: ${pushes.length} publishDiagnostics pushed, ${pulls.length} textDocument/diagnostic pulls,` +
    ` ${fromServer("workspace/diagnostic/refresh").length} refresh requests`);
  if (caps.pull && pulls.length === 0) {
    throw new Error("jupyterlab-lsp declares textDocument.diagnostic (pull) but never pulled");
  }
  if (caps.pull && pushes.length > 0) {
    throw new Error(`torchlint pushed publishDiagnostics ${pushes.length} times to a client that pulls`);
  }
  if (!caps.pull) {
    const last = pushes.at(-1)?.message.params;
    const found = (last?.diagnostics ?? []).filter((d) => d.code === code);
    if (found.length !== 1) {
      throw new Error(`torchlint's last publishDiagnostics (${last?.uri}) holds ${found.length} ${code} findings`);
    }
    log(`     pushed for ${last.uri}: ${found[0].code} at line ${found[0].range.start.line + 1} of the virtual document`);
  }
});

log(`the LSP traffic is in ${saveTraffic()}`);
await browser.close();
log("passed");
