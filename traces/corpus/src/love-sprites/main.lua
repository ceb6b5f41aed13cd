-- main.lua - a small LOVE 11 program for the retrace corpus: a SpriteBatch of
-- 2000 sprites rebuilt every frame, a mesh drawn instanced with per-instance
-- attributes, a canvas, a pixel shader and text; quits after 40 frames.
local frames, batch, img, mesh, inst, canvas, shader = 0
function love.load()
  local data = love.image.newImageData(16, 16)
  data:mapPixel(function(x, y) return x / 15, y / 15, 1 - x / 15, 1 end)
  img = love.graphics.newImage(data)
  batch = love.graphics.newSpriteBatch(img, 2000, "stream")
  mesh = love.graphics.newMesh({{-8, -8, 0, 0}, {8, -8, 1, 0}, {8, 8, 1, 1}, {-8, 8, 0, 1}}, "fan", "static")
  local offs = {}
  for i = 1, 300 do offs[i] = {(i % 20) * 24 + 12, math.floor(i / 20) * 24 + 12} end
  inst = love.graphics.newMesh({{"InstOffset", "float", 2}}, offs, nil, "dynamic")
  mesh:attachAttribute("InstOffset", inst, "perinstance")
  canvas = love.graphics.newCanvas(256, 256)
  shader = love.graphics.newShader([[
    attribute vec2 InstOffset;
    vec4 position(mat4 transform_projection, vec4 vertex_position) {
      vertex_position.xy += InstOffset;
      return transform_projection * vertex_position;
    }
  ]])
end
function love.update(dt)
  frames = frames + 1
  if frames > 40 then love.event.quit() end
end
function love.draw()
  local t = frames * 0.05
  love.graphics.setCanvas(canvas)
  love.graphics.clear(0.1, 0.1, 0.2, 1)
  love.graphics.setShader(shader)
  love.graphics.drawInstanced(mesh, 300, 0, 0, 0, 0.5 + 0.1 * math.sin(t))
  love.graphics.setShader()
  love.graphics.setCanvas()
  love.graphics.clear(0.2, 0.2, 0.2, 1)
  batch:clear()
  for i = 0, 1999 do
    local a = i * 0.01 + t
    batch:add(400 + math.cos(a) * (i % 300), 300 + math.sin(a * 1.1) * (i % 250), a, 1, 1, 8, 8)
  end
  love.graphics.draw(batch)
  love.graphics.draw(canvas, 520, 20)
  love.graphics.print("retrace corpus: LOVE frame " .. frames, 10, 10)
end
