// What the editors' end-to-end drivers (editors/*/e2e/run.mjs) share: their settings read from
// the environment, headless Chromium through playwright-core, screenshots checked as PNGs, and
// numbered steps that stop the run at the first failure with a screenshot of it.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

export const log = (message) => console.log(`e2e: ${message}`);

// An environment variable the driver's script sets; exits 2 naming `script` when it is missing.
export function envReader(script) {
  return (name, fallback) => {
    const value = process.env[name] ?? fallback;
    if (value === undefined) {
      console.error(`e2e: ${name} is not set (run ${script})`);
      process.exit(2);
    }
    return value;
  };
}

// Starts the system Chromium (`chromiumPath`) with playwright-core from `nodeModules`; a page of
// 1400 × 900 whose console errors are kept for a failure's report.
export async function openBrowser({ nodeModules, chromiumPath, artifacts }) {
  const require = createRequire(path.join(nodeModules, "noop.js"));
  const { chromium } = require("playwright-core");
  fs.mkdirSync(artifacts, { recursive: true });
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const consoleErrors = [];
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });

  async function screenshot(name) {
    const target = path.join(artifacts, `${name}.png`);
    await page.screenshot({ path: target });
    const bytes = fs.readFileSync(target);
    const png = bytes.length > 8 && bytes.subarray(0, 8).equals(
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    );
    if (!png) throw new Error(`${target} is not a PNG (${bytes.length} bytes)`);
    log(`screenshot ${target} (${bytes.length} bytes)`);
    return target;
  }

  // Hooks run when a step fails, before the browser closes (say where the logs are).
  const onFailure = [];
  let stepNumber = 0;
  async function step(name, body) {
    stepNumber += 1;
    const started = Date.now();
    try {
      const result = await body();
      log(`ok   ${stepNumber}. ${name} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
      return result;
    } catch (error) {
      console.error(`e2e: FAILED at step ${stepNumber}: ${name}`);
      console.error(`e2e:   ${String(error?.message ?? error).split("\n").join("\ne2e:   ")}`);
      try {
        await screenshot(`failure-${stepNumber}`);
      } catch (shotError) {
        console.error(`e2e: (no failure screenshot: ${shotError.message})`);
      }
      for (const hook of onFailure) hook();
      if (consoleErrors.length > 0) {
        console.error(`e2e: the page's last console errors:`);
        for (const text of consoleErrors.slice(-10)) console.error(`e2e:   ${text}`);
      }
      await browser.close();
      process.exit(1);
    }
  }

  return { browser, page, screenshot, step, onFailure };
}
