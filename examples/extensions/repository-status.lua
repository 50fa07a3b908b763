-- Structured tool output (runtime-reference §19.8 `custom-tool`): `output_schema` is compiled
-- once when the tool registers; every result is checked against it. A valid result reaches the
-- model as JSON text and RPC clients as the result's `details`; a violation is an error result
-- naming what is wrong.
zi.register_tool{
  name = "repository_status",
  description = "Report whether the git work tree (or one path in it) has uncommitted changes.",
  parameters = {
    type = "object",
    properties = { path = { type = "string", description = "Limit the status to this path" } },
  },
  output_schema = {
    type = "object",
    properties = { status = { type = "string" }, clean = { type = "boolean" } },
    required = { "status", "clean" },
    additionalProperties = false,
  },
  execute = function(params, ctx)
    local argv = { "git", "status", "--short" }
    if params.path then
      argv[#argv + 1] = "--"
      argv[#argv + 1] = params.path
    end
    local result = ctx.exec(argv)           -- killed on interruption and at the deadline
    if result.code ~= 0 then
      error("git status failed: " .. result.stderr, 0)
    end
    return { status = result.stdout, clean = result.stdout == "" }
  end,
}
