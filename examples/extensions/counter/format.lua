local M = {}

function M.count(n)
  return "Counter: " .. tostring(n)
end

return M
