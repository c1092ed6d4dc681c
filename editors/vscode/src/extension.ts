// The VS Code client of `torchlint server`: it starts the server over stdio for Python files
// and forwards the `torchlint.select` / `torchlint.ignore` / `torchlint.unsafeFixes` settings.
// Diagnostics, quick fixes, fix-all (`source.fixAll.torchlint`, which package.json declares so
// that `editor.codeActionsOnSave` offers it) and hovers all come from the server; nothing here
// knows about rules.

import * as path from "path";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.commands.registerCommand("torchlint.restartServer", restart),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      // A new executable needs a new process; rule settings are sent to the running one.
      if (event.affectsConfiguration("torchlint.path")) {
        await restart();
      } else if (
        client?.isRunning() &&
        ["torchlint.select", "torchlint.ignore", "torchlint.unsafeFixes"].some((key) =>
          event.affectsConfiguration(key),
        )
      ) {
        await client.sendNotification(DidChangeConfigurationNotification.type, {
          settings: { torchlint: clientSettings() },
        });
      }
    }),
  );
  await start();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
  client = undefined;
}

async function start(): Promise<void> {
  const serverOptions: ServerOptions = { command: executable(), args: ["server"] };
  const clientOptions: LanguageClientOptions = {
    // Only files on disk: the server finds the project's pyproject.toml / torchlint.toml
    // from the document's path.
    documentSelector: [{ scheme: "file", language: "python" }],
    initializationOptions: clientSettings(),
  };
  // The id "torchlint" makes the client read `torchlint.trace.server` by itself.
  client = new LanguageClient("torchlint", "torchlint", serverOptions, clientOptions);
  await client.start();
}

async function restart(): Promise<void> {
  await deactivate();
  await start();
}

/** `torchlint.path`, or `torchlint` on PATH. A relative path with a folder in it
 *  (`target/debug/torchlint`) is taken from the first workspace folder. */
function executable(): string {
  const configured = vscode.workspace.getConfiguration("torchlint").get<string>("path", "").trim();
  if (!configured) {
    return "torchlint";
  }
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (folder && !path.isAbsolute(configured) && configured.includes("/")) {
    return path.join(folder, configured);
  }
  return configured;
}

/** `{ select, ignore, unsafeFixes }` as the server reads them. Empty lists are left out, so
 *  that the project's own configuration decides rather than "select nothing". */
function clientSettings(): { select?: string[]; ignore?: string[]; unsafeFixes: boolean } {
  const config = vscode.workspace.getConfiguration("torchlint");
  const settings: { select?: string[]; ignore?: string[]; unsafeFixes: boolean } = {
    unsafeFixes: config.get<boolean>("unsafeFixes", false),
  };
  for (const key of ["select", "ignore"] as const) {
    const codes = config.get<string[]>(key, []);
    if (codes.length > 0) {
      settings[key] = codes;
    }
  }
  return settings;
}
