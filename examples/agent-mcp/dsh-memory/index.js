// dsh-memory: memd for a DSH (DeepSeek Harness) session, as a Cordis plugin.
//
// At `agent/pre-step`, when the newest message is the user's:
// - it reports that message to memd's /v1/ingest fire-and-forget (the step never waits for it);
// - it asks /v1/recall with the last turns and `format: "block"`, bounded by `recallTimeout`
//   milliseconds, and injects the block for this step. When memd is down or slow nothing is
//   injected and the step goes on.
//
// The step payload this plugin reads (adapt `userTurn`, `turns` and `injectBlock` below if your DSH
// version differs):
//   step.session   { id, preset?, bridge? }   bridge: true for sessions a chat bridge drives
//   step.messages  [{ id?, role, content }]   content: a string or [{ type: "text", text }]
//   step.system    string[]                   extra system-prompt parts for this step
//
// No dependencies: Node 18+ (global fetch, AbortSignal.timeout).

import { readFileSync } from 'node:fs'

export const name = 'dsh-memory'
// DSH's logger when it has one, else the console.
export const inject = { optional: ['logger'] }

const defaults = {
  url: 'http://127.0.0.1:8787',
  token: undefined, // or tokenFile: the first line of that file
  tokenFile: undefined,
  recall: true,
  recallTimeout: 1000,
  ingestTimeout: 5000,
  turns: 6,
  ownerName: 'owner',
  // Sessions whose messages are not the owner's own words (a chat bridge, the pet).
  skipPresets: ['pet-chat'],
}

function textOf(content) {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) {
    return content
      .filter((part) => part && part.type === 'text' && typeof part.text === 'string')
      .map((part) => part.text)
      .join('\n')
  }
  return ''
}

// The newest message, when it is the user's: { id, text }.
function userTurn(step) {
  const messages = step.messages || []
  const last = messages[messages.length - 1]
  if (!last || last.role !== 'user') return null
  const text = textOf(last.content).trim()
  if (!text) return null
  const id = last.id ?? `${step.session?.id ?? 'session'}#${messages.length - 1}`
  return { id: String(id), text }
}

// The last turns, newest last, as memd's recall takes them.
function turns(step, n) {
  return (step.messages || [])
    .filter((m) => m.role === 'user' || m.role === 'assistant')
    .slice(-n)
    .map((m) => ({ role: m.role, text: textOf(m.content) }))
    .filter((m) => m.text.trim())
}

function injectBlock(step, block) {
  if (typeof step.inject === 'function') step.inject(block)
  else (step.system ||= []).push(block)
}

export function resolveToken(config) {
  if (config.token) return config.token
  if (config.tokenFile) return readFileSync(config.tokenFile, 'utf8').split('\n')[0].trim()
  return process.env.MEMD_TOKEN
}

export function apply(ctx, options = {}) {
  const config = { ...defaults, ...options }
  const base = config.url.replace(/\/+$/, '')
  const token = resolveToken(config)
  const logger = ctx.logger?.('dsh-memory') ?? console
  if (!token) {
    logger.warn('dsh-memory: no token (config token, tokenFile or MEMD_TOKEN); memory is off')
    return
  }

  const post = (route, body, timeout) =>
    fetch(`${base}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeout),
    }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => ({})) }))

  ctx.on('agent/pre-step', async (step) => {
    const session = step.session || {}
    if (session.bridge || config.skipPresets.includes(session.preset)) return
    const turn = userTurn(step)
    if (!turn) return

    // Fire and forget: the step does not wait for this.
    post(
      '/v1/ingest',
      {
        message_id: turn.id,
        text: turn.text,
        sender: { id: 'owner', name: config.ownerName },
        sent_at: new Date().toISOString(),
        ...(session.id ? { session: String(session.id).slice(0, 200) } : {}),
      },
      config.ingestTimeout,
    )
      .then((r) => {
        if (r.status !== 200) logger.warn(`dsh-memory: ingest answered ${r.status} ${r.body?.error?.code ?? ''}`)
      })
      .catch((e) => logger.warn(`dsh-memory: ingest failed (${e.name})`))

    if (!config.recall) return
    try {
      const r = await post(
        '/v1/recall',
        { messages: turns(step, config.turns), format: 'block' },
        config.recallTimeout,
      )
      if (r.status === 200 && r.body.block) injectBlock(step, r.body.block)
      else if (r.status !== 200) logger.warn(`dsh-memory: recall answered ${r.status}`)
    } catch (e) {
      logger.warn(`dsh-memory: recall failed (${e.name}); this step goes on without memory`)
    }
  })
}

export default { name, inject, apply }
