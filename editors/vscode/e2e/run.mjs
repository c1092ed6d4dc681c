// The extension in a real VS Code: code-server (started by scripts/test-vscode, with the
// packaged .vsix installed) driven by headless Chromium through playwright-core, as a user
// would: open the hazard file with Quick Open, see the finding in the Problems panel, apply the
// finding's quick fix from Ctrl+. on its line, see the finding go away.
//
// Everything comes from the environment (scripts/test-vscode sets it):
//   TORCHLINT_E2E_NODE_MODULES  node_modules holding playwright-core
//   TORCHLINT_E2E_CHROMIUM      the system Chromium
//   TORCHLINT_E2E_URL           code-server's URL with ?folder=<workspace>
//   TORCHLINT_E2E_FILE          the hazard file, relative to the workspace
//   TORCHLINT_E2E_LINE          its line with the finding (1-based)
//   TORCHLINT_E2E_CODE          the rule code expected there (TL102)
//   TORCHLINT_E2E_ACTION        "fix" (the rule's quick fix, default) or "ignore" (# noqa)
//   TORCHLINT_E2E_ARTIFACTS     where the screenshots go
// Exits 0 when every step passed; otherwise names the step, why, and a screenshot of it.

import { envReader, log, openBrowser } from "../../e2e/browser.mjs";

const env = envReader("scripts/test-vscode");
const nodeModules = env("TORCHLINT_E2E_NODE_MODULES");
const chromiumPath = env("TORCHLINT_E2E_CHROMIUM", "chromium");
const url = env("TORCHLINT_E2E_URL");
const file = env("TORCHLINT_E2E_FILE", "train.py");
const line = Number(env("TORCHLINT_E2E_LINE"));
const code = env("TORCHLINT_E2E_CODE", "TL102");
const actionKind = env("TORCHLINT_E2E_ACTION", "fix");
const artifacts = env("TORCHLINT_E2E_ARTIFACTS", ".");
// How long the language server may take to start and report, and VS Code to load.
const SLOW = Number(process.env.TORCHLINT_E2E_TIMEOUT_MS ?? 90_000);

const { browser, page, screenshot, step } = await openBrowser({
  nodeModules,
  chromiumPath,
  artifacts,
});

// A problem row of the Problems panel that names the rule.
const problemRows = () => page.locator(".markers-panel .monaco-list-row", { hasText: code });

await step(`open ${url}`, async () => {
  await page.goto(url, { waitUntil: "domcontentloaded", timeout: SLOW });
  await page.locator(".monaco-workbench").waitFor({ timeout: SLOW });
  // The explorer lists the folder once the workbench has connected to the server.
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: file })
    .first().waitFor({ timeout: SLOW });
});

await step("trust the workspace if asked", async () => {
  const trust = page.getByRole("button", { name: /Yes, I trust the authors/ });
  try {
    await trust.waitFor({ timeout: 5_000 });
  } catch {
    log("     (no workspace trust prompt)");
    return;
  }
  await trust.click();
  await trust.waitFor({ state: "hidden", timeout: 10_000 });
});

await step(`open ${file} with Quick Open (Ctrl+P)`, async () => {
  await page.locator(".monaco-workbench").click({ position: { x: 700, y: 450 } }).catch(() => {});
  const input = page.locator(".quick-input-widget input");
  // The first Ctrl+P can land before the keybindings are ready: retry until the box opens.
  for (let attempt = 0; ; attempt += 1) {
    await page.keyboard.press("Control+P");
    try {
      await input.waitFor({ state: "visible", timeout: 3_000 });
      break;
    } catch (error) {
      if (attempt >= 10) throw new Error("Quick Open did not open on Ctrl+P");
    }
  }
  await input.fill(file);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: file })
    .first().waitFor({ timeout: SLOW });
  await page.keyboard.press("Enter");
  await page.locator(".tabs-container .tab.active", { hasText: file }).waitFor({ timeout: SLOW });
  await page.locator(".editor-instance .monaco-editor .view-lines").first()
    .waitFor({ timeout: SLOW });
});

await step("open the Problems panel (Ctrl+Shift+M)", async () => {
  await page.locator(".editor-instance .monaco-editor .view-lines").first().click();
  await page.keyboard.press("Control+Shift+M");
  await page.locator(".markers-panel").waitFor({ timeout: 15_000 });
});

const problemText = await step(`the Problems panel shows ${code}`, async () => {
  await problemRows().first().waitFor({ timeout: SLOW });
  const text = (await problemRows().first().innerText()).replace(/\s+/g, " ").trim();
  if (!text.includes("torchlint")) {
    throw new Error(`the ${code} problem does not name torchlint as its source: ${text}`);
  }
  // One finding, one problem. VS Code keeps pushed (textDocument/publishDiagnostics) and
  // pulled (textDocument/diagnostic) findings in separate collections: a server that answers
  // pulls and also pushes to a client that pulls shows each finding twice.
  await page.waitForTimeout(2_000);
  const shown = await problemRows().count();
  if (shown !== 1) {
    const why = `${code} is shown ${shown} times in the Problems panel for one finding` +
      " (does the server push publishDiagnostics to a client that pulls textDocument/diagnostic?)";
    throw new Error(why);
  }
  return text;
});
log(`     problem: ${problemText}`);
await step("screenshot with the finding", () => screenshot("1-problem"));

const title = await step(`Ctrl+. on line ${line} offers torchlint's code actions`, async () => {
  await page.locator(".editor-instance .monaco-editor .view-lines").first().click();
  // Go to the line through Quick Open's `:line` (Ctrl+G is the browser's in code-server).
  await page.keyboard.press("Control+P");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10_000 });
  await input.fill(`:${line}`);
  await page.keyboard.press("Enter");
  await input.waitFor({ state: "hidden", timeout: 10_000 });
  const widget = page.locator(".action-widget");
  for (let attempt = 0; ; attempt += 1) {
    await page.keyboard.press("Control+.");
    try {
      await widget.locator(".monaco-list-row", { hasText: code }).first()
        .waitFor({ timeout: 5_000 });
      break;
    } catch (error) {
      if (attempt >= 5) throw new Error(`no code action naming ${code} after Ctrl+.`);
      await page.keyboard.press("Escape");
    }
  }
  const titles = (await widget.locator(".monaco-list-row").allInnerTexts())
    .map((text) => text.replace(/\s+/g, " ").trim())
    .filter(Boolean);
  log(`     offered: ${titles.join(" | ")}`);
  const wanted = actionKind === "ignore" ? `Ignore ${code} for this line` : `${code}: `;
  const chosen = titles.find((text) => text.startsWith(wanted));
  if (!chosen) throw new Error(`no action starting "${wanted}" among: ${titles.join(" | ")}`);
  await screenshot("2-code-actions");
  return chosen;
});

await step(`apply "${title}"`, async () => {
  // With the keyboard, as a user of Ctrl+. would (the widget's overlay takes mouse clicks).
  const focused = page.locator(".action-widget .monaco-list-row.focused");
  for (let moves = 0; ; moves += 1) {
    const text = (await focused.first().innerText({ timeout: 5_000 }).catch(() => ""))
      .replace(/\s+/g, " ").trim();
    if (text.startsWith(title)) break;
    if (moves >= 10) throw new Error(`could not move the selection to "${title}" (at "${text}")`);
    await page.keyboard.press("ArrowDown");
  }
  await page.keyboard.press("Enter");
  await page.locator(".action-widget").waitFor({ state: "hidden", timeout: 10_000 });
});

await step(`${code} leaves the Problems panel`, async () => {
  await problemRows().first().waitFor({ state: "detached", timeout: SLOW });
  const editorText = (await page.locator(".editor-instance .monaco-editor .view-lines").first()
    .innerText()).replace(/\u00a0/g, " ");
  const expected = actionKind === "ignore" ? `# noqa: ${code}` : ".item()";
  if (!editorText.includes(expected)) {
    throw new Error(`the editor does not show "${expected}" after the action:\n${editorText}`);
  }
});
await step("save (Ctrl+S); the finding stays gone", async () => {
  await page.keyboard.press("Control+S");
  await page.locator(".tabs-container .tab.active.dirty").waitFor({ state: "detached", timeout: 15_000 });
  await page.waitForTimeout(2_000);
  const shown = await problemRows().count();
  if (shown !== 0) throw new Error(`${code} is back in the Problems panel after saving`);
});
await step("screenshot without the finding", () => screenshot("3-fixed"));

await browser.close();
log("passed");
