-- torchlint for Neovim 0.11+: put this file at ~/.config/nvim/lsp/torchlint.lua and call
-- `vim.lsp.enable('torchlint')` in init.lua. Rule settings, both optional (without them the
-- project's [tool.torchlint] / torchlint.toml decide):
--   vim.lsp.config('torchlint', { init_options = { select = { 'TL1' }, ignore = { 'TL104' } } })
---@type vim.lsp.Config
return {
  cmd = { 'torchlint', 'server' },
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'torchlint.toml', '.git' },
}
