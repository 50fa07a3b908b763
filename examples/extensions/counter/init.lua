-- A durable counter: `counter increment`, `counter show`, `counter reset`.
-- The count lives in custom journal entries of type `example.counter`, so it survives
-- `zi --continue`. `require` finds modules next to this file.
local format = require("format")

local TYPE = "example.counter"

local function current()
  local entries = zi.get_entries(TYPE)
  local last = entries[#entries]
  return last and last.data and last.data.count or 0
end

zi.register_command{
  name = "counter",
  description = "Manage counter",
  argument_hint = "[show|increment|reset]",
  execute = function(args, ctx)
    local action = args:match("^%s*(%S*)")
    if action == "" or action == "show" then
      return format.count(current())
    elseif action == "increment" then
      local count = current() + 1
      zi.append_entry(TYPE, { count = count })
      return format.count(count)
    elseif action == "reset" then
      zi.append_entry(TYPE, { count = 0 })
      return format.count(0)
    end
    error("Unknown counter action: " .. action, 0)
  end,
}
