// dsh-memory in a Cordis context, loaded from the shipped cordis.patch.yml, against a live memd,
// a closed port and a server that never answers. Run by tests/integration/examples.rs with
//   DSH_TEST_MODULES  node_modules holding @cordisjs/core and yaml (scripts/setup-test-clients.sh)
//   MEMD_URL, MEMD_TOKEN_FILE   a live memd and a dsh-desktop token (scene main)
//   MEMD_SEED_TOKEN             the same kind of token, to look at what memd stored

import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

import plugin from './index.js'

const here = dirname(fileURLToPath(import.meta.url))
const modules = process.env.DSH_TEST_MODULES
assert.ok(modules, 'DSH_TEST_MODULES is not set: run through cargo nextest run --test integration examples::')
const require = createRequire(join(modules, 'entry.cjs'))
const { Context } = require('@cordisjs/core')
const YAML = require('yaml')

// The layer's insert for dsh-memory, with ${{ env.NAME }} filled from `env`.
function layerConfig(env) {
  const layer = YAML.parse(readFileSync(join(here, '..', 'cordis.patch.yml'), 'utf8'))
  const entries = layer.flatMap((op) => op.insert ?? [])
  const entry = entries.find((e) => e.name === plugin.name)
  assert.ok(entry, 'cordis.patch.yml inserts dsh-memory')
  const fill = (v) =>
    typeof v === 'string'
      ? v.replace(/\$\{\{\s*env\.([A-Z0-9_]+)\s*\}\}/g, (_, name) => {
          assert.ok(name in env, `the layer needs env.${name}`)
          return env[name]
        })
      : Array.isArray(v)
        ? v.map(fill)
        : v && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x)]))
          : v
  return fill(entry.config)
}

function host(config) {
  const ctx = new Context()
  ctx.plugin(plugin, config)
  return ctx
}

// Against the live daemon (a debug build on a busy test machine) recall gets more time than
// the layer's 1000 ms; the tests against a silent server keep it short.
const live = (env) => ({ ...layerConfig(env), recallTimeout: 15000 })

let seq = 0
function step(text, extra = {}) {
  seq += 1
  return {
    session: { id: `s-${process.pid}-${seq}`, preset: 'default' },
    messages: [
      { role: 'user', content: '我们的发布流程是什么样的？' },
      { role: 'assistant', content: '先跑测试，再打标签。' },
      { id: `m-${process.pid}-${seq}`, role: 'user', content: [{ type: 'text', text }] },
    ],
    system: [],
    ...extra,
  }
}

async function memd(route, body) {
  const r = await fetch(`${process.env.MEMD_URL}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${process.env.MEMD_SEED_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30000),
  })
  const text = await r.text()
  assert.equal(r.status, 200, `${route}: ${text}`)
  return JSON.parse(text)
}

async function shortTermTexts() {
  return (await memd('/v1/recent', { stage: 'short', limit: 50 })).items.map((i) => i.text)
}

async function eventually(check, ms = 10000) {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return
    assert.ok(Date.now() < end, 'timed out waiting')
    await new Promise((r) => setTimeout(r, 50))
  }
}

test('pre-step injects recall and reports the user message', async () => {
  await memd('/v1/write', { text: '发布流程：先在 staging 跑冒烟测试，周五下午不发布' })
  const ctx = host(live(process.env))
  const s = step('这周五下午可以发布吗？')
  await ctx.parallel('agent/pre-step', s)
  assert.equal(s.system.length, 1, 'one memory block injected')
  assert.match(s.system[0], /【长期记忆】/)
  assert.match(s.system[0], /周五下午不发布/)
  await eventually(async () => (await shortTermTexts()).includes('这周五下午可以发布吗？'))
  const [item] = (await memd('/v1/recent', { stage: 'short', limit: 50 })).items.filter(
    (i) => i.text === '这周五下午可以发布吗？',
  )
  assert.equal(item.speaker, '主人')
  assert.equal(item.scene, 'main')
})

test('assistant turns, bridged sessions and the pet preset are not reported', async () => {
  const ctx = host(live(process.env))
  const assistantLast = step('不会被报告的助手回复一')
  assistantLast.messages.push({ role: 'assistant', content: '好的' })
  await ctx.parallel('agent/pre-step', assistantLast)
  const bridged = step('不会被报告的桥接消息二', { session: { id: 'b', bridge: true } })
  await ctx.parallel('agent/pre-step', bridged)
  const pet = step('不会被报告的桌宠消息三', { session: { id: 'p', preset: 'pet-chat' } })
  await ctx.parallel('agent/pre-step', pet)
  // A marker reported after them arrives; the three before it never do.
  await ctx.parallel('agent/pre-step', step('标记消息四'))
  await eventually(async () => (await shortTermTexts()).includes('标记消息四'))
  const texts = await shortTermTexts()
  for (const t of ['不会被报告的助手回复一', '不会被报告的桥接消息二', '不会被报告的桌宠消息三']) {
    assert.ok(!texts.includes(t), t)
  }
  assert.deepEqual([assistantLast.system, bridged.system, pet.system], [[], [], []])
})

async function closedPort() {
  const server = createServer()
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address()
  await new Promise((r) => server.close(r))
  return port
}

test('memd down: the step goes on at once without memory', async () => {
  const env = { ...process.env, MEMD_URL: `http://127.0.0.1:${await closedPort()}` }
  const ctx = host({ ...layerConfig(env), recallTimeout: 10000 })
  const s = step('memd 不在的时候')
  const started = performance.now()
  await ctx.parallel('agent/pre-step', s)
  // Well within the timeout: a refused connection fails at once.
  assert.ok(performance.now() - started < 5000, `took ${performance.now() - started} ms`)
  assert.deepEqual(s.system, [])
})

test('memd silent: the step waits no longer than recallTimeout', async () => {
  const held = []
  const server = createServer((socket) => held.push(socket)) // accepts, never answers
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  try {
    const env = { ...process.env, MEMD_URL: `http://127.0.0.1:${server.address().port}` }
    const config = { ...layerConfig(env), recallTimeout: 300, ingestTimeout: 600 }
    const ctx = host(config)
    const s = step('memd 不说话的时候')
    const started = performance.now()
    await ctx.parallel('agent/pre-step', s)
    const took = performance.now() - started
    assert.ok(took >= 250 && took < 5000, `took ${took} ms`)
    assert.deepEqual(s.system, [])
    await new Promise((r) => setTimeout(r, 700)) // the ingest gives up on its own
  } finally {
    held.forEach((s) => s.destroy())
    await new Promise((r) => server.close(r))
  }
})
