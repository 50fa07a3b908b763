-- A tool that returns structured JSON: the model sees it as JSON text, RPC clients also get it
-- as the tool result's `details`.
zi.register_tool{
  name = "word_stats",
  description = "Count the words, lines and characters of a text.",
  parameters = {
    type = "object",
    properties = {
      text = { type = "string", description = "The text to measure" },
    },
    required = { "text" },
  },
  execute = function(params, ctx)
    local words = 0
    for _ in params.text:gmatch("%S+") do words = words + 1 end
    local lines = 1
    for _ in params.text:gmatch("\n") do lines = lines + 1 end
    return { words = words, lines = lines, characters = #params.text }
  end,
}
