#!/usr/bin/env node
// KafkaJS driven by the Python tests (tests/support/kafkajs.py).
//
// stdin: {"brokers": ["host:port", ...], "steps": [{"op": ..., ...}, ...]}
// stdout: {"results": [{"ok": ...} | {"error": {...}}, ...]}, one result per step, in order.
// Bytes (keys, values, header values) travel as base64 strings, null as null. Every step runs
// even if an earlier one failed; the exit code is 0 unless the input itself was bad.
'use strict'

process.env.KAFKAJS_DEBUG_PROTOCOL_BUFFERS = '1'
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes } = require('kafkajs')
const AlterConfigsResponses = {
  0: require('kafkajs/src/protocol/requests/alterConfigs/v0/response'),
  1: require('kafkajs/src/protocol/requests/alterConfigs/v1/response'),
}

// KafkaJS keeps only an error code from an AlterConfigs answer; the broker's error message is
// recovered from the raw answer that KafkaJS logs at debug level (KAFKAJS_DEBUG_PROTOCOL_BUFFERS).
const alterConfigsAnswers = []

const logCreator = () => ({ namespace, level, log }) => {
  const { message, payload } = log
  const answer = /^Response AlterConfigs\(key: 33, version: (\d+)\)$/.exec(message || '')
  if (answer && Buffer.isBuffer(payload)) {
    alterConfigsAnswers.push(AlterConfigsResponses[answer[1]].decode(payload)) // a promise
  }
  if (level <= logLevel.WARN) {
    process.stderr.write(`${JSON.stringify({ namespace, level, ...log, payload: undefined })}\n`)
  }
}

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

const bytes = b64 => (b64 === null ? null : Buffer.from(b64, 'base64'))
const b64 = buffer => (buffer === null ? null : buffer.toString('base64'))

function described(error) {
  // KafkaJS's retrier wraps an error it gives up on: the broker's answer is its cause.
  const cause = error.cause instanceof Error ? error.cause : null
  const failed = error.partitions || (cause && cause.partitions) || []
  return {
    name: error.name,
    type: error.type === undefined ? null : error.type,
    code: error.code === undefined ? null : error.code,
    retriable: error.retriable === undefined ? null : error.retriable,
    message: error.message,
    cause: cause ? cause.name : null,
    // KafkaJSDeleteTopicRecordsError: each failed partition and its broker error
    partitions: failed.map(p => ({
      partition: p.partition,
      offset: p.offset,
      type: p.error && p.error.type !== undefined ? p.error.type : null,
    })),
  }
}

function toMessage(m) {
  // headers: [[name, base64 value], ...]; a repeated name becomes an array, which KafkaJS
  // writes as consecutive headers of that name.
  const headers = {}
  for (const [name, value] of m.headers) {
    const v = bytes(value)
    if (!(name in headers)) headers[name] = v
    else if (Array.isArray(headers[name])) headers[name].push(v)
    else headers[name] = [headers[name], v]
  }
  return {
    partition: m.partition,
    key: bytes(m.key),
    value: bytes(m.value),
    headers,
    timestamp: String(m.timestamp_ms),
  }
}

async function describeConfigs(admin, step) {
  const resources = [{ type: ConfigResourceTypes.TOPIC, name: step.topic }]
  const until = step.until || null // {name, values, timeout_ms}: poll until name has one of values
  const deadline = Date.now() + (until ? until.timeout_ms : 0)
  const seen = []
  for (;;) {
    const answer = await admin.describeConfigs({ resources, includeSynonyms: false })
    const [resource] = answer.resources
    if (resource.errorCode !== 0) {
      return { errorCode: resource.errorCode, errorMessage: resource.errorMessage }
    }
    const entries = {}
    for (const e of resource.configEntries) {
      entries[e.configName] = {
        value: e.configValue,
        readOnly: e.readOnly,
        isDefault: e.isDefault,
        configSource: e.configSource === undefined ? null : e.configSource,
        isSensitive: e.isSensitive,
      }
    }
    if (!until) return { entries }
    const value = entries[until.name] ? entries[until.name].value : null
    if (seen[seen.length - 1] !== value) seen.push(value)
    if (until.values.includes(value) || Date.now() > deadline) return { entries, seen }
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

async function produce(kafka, step) {
  const producer = kafka.producer({
    idempotent: !!step.idempotent,
    maxInFlightRequests: step.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  try {
    const sent = []
    for (const batch of step.batches) {
      const answer = await producer.send({
        topic: step.topic,
        acks: step.acks === undefined ? -1 : step.acks,
        compression: CODECS[step.compression || 'none'],
        messages: batch.map(toMessage),
      })
      sent.push(answer)
    }
    return sent
  } finally {
    await producer.disconnect()
  }
}

// A group member that reads s.count records of s.topic from the beginning (no commits), then
// leaves the group: the records' partitions and values, and the partitions it was assigned.
async function consume(kafka, s) {
  const consumer = kafka.consumer({
    groupId: s.group,
    sessionTimeout: s.session_timeout_ms || 30000,
    heartbeatInterval: 500,
    allowAutoTopicCreation: false,
  })
  const records = []
  const assigned = new Set()
  consumer.on(consumer.events.GROUP_JOIN, e => {
    for (const [, partitions] of Object.entries(e.payload.memberAssignment)) {
      for (const p of partitions) assigned.add(p)
    }
  })
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [s.topic], fromBeginning: true })
    let done
    const finished = new Promise(resolve => (done = resolve))
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        records.push({ partition, value: b64(message.value) })
        if (records.length >= s.count) done()
      },
    })
    let timer
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`read ${records.length} of ${s.count}`)), 60000)
    })
    try {
      await Promise.race([finished, timeout])
    } finally {
      clearTimeout(timer) // a pending timer would keep node running
    }
    return { records, assigned: [...assigned].sort() }
  } finally {
    await consumer.disconnect()
  }
}

async function step(kafka, admin, s) {
  switch (s.op) {
    case 'createTopics':
      return admin.createTopics({
        topics: s.topics.map(t => ({
          topic: t.topic,
          numPartitions: t.partitions,
          replicationFactor: 1,
          configEntries: Object.entries(t.configs || {}).map(([name, value]) => ({ name, value })),
        })),
        waitForLeaders: true,
      })
    case 'createPartitions':
      return admin.createPartitions({
        validateOnly: !!s.validate_only,
        topicPartitions: s.topics.map(t => ({
          topic: t.topic,
          count: t.count,
          assignments: t.assignments === undefined ? undefined : t.assignments,
        })),
      })
    case 'describeConfigs':
      return describeConfigs(admin, s)
    case 'alterConfigs': {
      alterConfigsAnswers.length = 0
      try {
        return await admin.alterConfigs({
          validateOnly: !!s.validate_only,
          resources: [
            {
              type: ConfigResourceTypes.TOPIC,
              name: s.topic,
              configEntries: Object.entries(s.configs).map(([name, value]) => ({ name, value })),
            },
          ],
        })
      } catch (error) {
        error.brokerAnswers = await Promise.all(alterConfigsAnswers)
        throw error
      }
    }
    case 'describeCluster':
      return admin.describeCluster()
    case 'fetchTopicMetadata':
      return admin.fetchTopicMetadata({ topics: s.topics })
    case 'fetchTopicOffsets':
      return admin.fetchTopicOffsets(s.topic)
    case 'fetchTopicOffsetsByTimestamp':
      return admin.fetchTopicOffsetsByTimestamp(s.topic, s.timestamp)
    case 'deleteTopicRecords':
      return admin.deleteTopicRecords({ topic: s.topic, partitions: s.partitions })
    case 'fetchOffsets':
      return admin.fetchOffsets({ groupId: s.group, topics: [s.topic] })
    case 'setOffsets':
      return admin.setOffsets({ groupId: s.group, topic: s.topic, partitions: s.partitions })
    case 'deleteGroups':
      return admin.deleteGroups(s.groups)
    case 'produce':
      return produce(kafka, s)
    case 'consume':
      return consume(kafka, s)
    case 'listGroups':
      return admin.listGroups()
    case 'describeGroups':
      return admin.describeGroups(s.groups)
    default:
      throw new Error(`unknown op ${s.op}`)
  }
}

async function main() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  const kafka = new Kafka({
    clientId: 'tiered-kafkajs-test',
    brokers: input.brokers,
    logLevel: logLevel.DEBUG,
    logCreator,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
  })
  const admin = kafka.admin()
  await admin.connect()
  const results = []
  try {
    for (const s of input.steps) {
      try {
        results.push({ ok: (await step(kafka, admin, s)) ?? null })
      } catch (error) {
        const answers = error.brokerAnswers || []
        results.push({ error: { ...described(error), broker_answers: answers } })
      }
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify({ results }, (_, v) => (v === undefined ? null : v)))
}

main().catch(error => {
  process.stderr.write(`${error.stack || error}\n`)
  process.exit(2)
})
