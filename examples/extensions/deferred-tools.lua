-- Deferred tools (runtime-reference §19.8): `repository_rule` is registered dormant, so the model
-- does not see it until `tool_search` finds it. Activation adds to the current active set (which
-- also holds the built-in tools) and applies from the next provider request. A reload restores
-- the defaults.
local rules = {
  "Run `cargo fmt` before every commit.",
  "Every fix gets a regression test.",
}

zi.register_tool{
  name = "tool_search",
  description = "Find more tools by keyword and make the matching ones available.",
  parameters = {
    type = "object",
    properties = { query = { type = "string", description = "What the tool should do" } },
    required = { "query" },
  },
  execute = function(params)
    if not params.query:lower():find("rule", 1, true) then
      return "No tools match " .. params.query
    end
    local active = zi.get_active_tools()
    for _, name in ipairs(active) do
      if name == "repository_rule" then return "repository_rule is already available" end
    end
    active[#active + 1] = "repository_rule"
    zi.set_active_tools(active)
    return "Activated repository_rule: look up this repository's rules by number."
  end,
}

zi.register_tool{
  name = "repository_rule",
  description = "Return one of this repository's rules by its number.",
  active = false,
  parameters = {
    type = "object",
    properties = { number = { type = "integer", minimum = 1 } },
    required = { "number" },
  },
  execute = function(params)
    return rules[params.number] or error("There is no rule " .. params.number, 0)
  end,
}
