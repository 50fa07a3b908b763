-- Adds custom messages to the conversation: `note TEXT` appends a displayed note and a hidden
-- one carrying context for the model. Both enter provider context; only the displayed one
-- appears in message pages. Messages appended by a command are committed when it finishes.
zi.register_command{
  name = "note",
  description = "Add a visible note and hidden context to the conversation",
  argument_hint = "TEXT",
  execute = function(args, ctx)
    zi.send_message{ custom_type = "example.visible", content = args, display = true }
    zi.send_message{
      custom_type = "example.hidden",
      content = "Context for the model: the user noted " .. args,
      display = false,
      details = { source = "messages.lua" },
    }
    return "Noted"
  end,
}
