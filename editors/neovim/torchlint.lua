-- torchlint for Neovim 0.9+ without plugins: copy into your init.lua (or plugin/torchlint.lua).
-- Starts `torchlint server` for Python buffers; one server per project root is shared by its
-- buffers, since vim.lsp.start reuses a client with the same name and root_dir.
-- On Neovim 0.11+ the lsp/torchlint.lua config (see editors/README.md) is the shorter way.

local markers = { 'pyproject.toml', 'torchlint.toml', '.git' }

local function project_root(bufnr, file)
  if vim.fs.root then -- 0.10+
    return vim.fs.root(bufnr, markers)
  end
  local found = vim.fs.find(markers, { upward = true, path = vim.fs.dirname(file) })[1]
  return found and vim.fs.dirname(found)
end

vim.api.nvim_create_autocmd('FileType', {
  group = vim.api.nvim_create_augroup('torchlint', { clear = true }),
  pattern = 'python',
  callback = function(args)
    -- Only real files: the server finds the project's configuration from the document's path.
    local file = vim.api.nvim_buf_get_name(args.buf)
    if vim.bo[args.buf].buftype ~= '' or file == '' then
      return
    end
    vim.lsp.start({
      name = 'torchlint',
      cmd = { 'torchlint', 'server' }, -- or an absolute path to the binary
      -- A file outside any project still gets a server, rooted at its folder.
      root_dir = project_root(args.buf, file) or vim.fs.dirname(file),
      -- Optional; without it the project's [tool.torchlint] / torchlint.toml decide. (Leave it
      -- out rather than empty: an empty Lua table is sent as a JSON array, not an object.)
      -- init_options = { select = { 'TL1' }, ignore = { 'TL104' } },
    }, { bufnr = args.buf })
  end,
})
