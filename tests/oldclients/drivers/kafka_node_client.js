// kafka-node 5 driver: the job (JSON, argv[2]) and the JSON-lines events it prints are those
// of tests/interop/drivers/common.py ("consume" with mode "assign" or "subscribe", and
// "produce").
//
// client: {"client_id": str, "api_support": "negotiated" (default: ApiVersions v0, then the
// highest versions both sides have: Fetch v2, Produce v2, Metadata v1, ListOffsets v0) or
// "base" (what kafka-node falls back to when a pre-0.10 broker does not answer ApiVersions:
// Fetch v1, Produce v1, Metadata v0; here ApiVersions is not sent at all),
// "compression": null, "gzip" or "snappy" for produce}.
// job.start (consume): "zero" (default: fetch from offset 0) or "earliest" (ListOffsets
// with time -2 first, through kafka-node's Offset API).
// Security (client settings): "ssl": {"ca_file", "cert_file", "key_file" (PEM paths, each
// optional), "check_hostname" (default true)} makes every connection TLS; "sasl":
// {"mechanism": "plain", "username", "password"} authenticates (SaslHandshake at the version
// the broker's ApiVersions allows, then SaslAuthenticate or raw tokens).
//
// mode "subscribe" is kafka-node's ConsumerGroup (the group APIs of a 0.9 broker: GroupCoordinator
// v0, JoinGroup/SyncGroup/Heartbeat/LeaveGroup v0, OffsetFetch v1, OffsetCommit v2, and
// ListOffsets v0 for fromOffset 'earliest'), with the protocols 'roundrobin' and 'range' so that
// it can share a group with other clients. Unlike kafka-node's Consumer (Fetch v0 always), it
// fetches with the negotiated Fetch version (v2; v1 with "base"). It cannot pause one
// partition: records past a partition's "last" are dropped, and the whole member is paused once
// every partition is done (or while the assignment is not "expect_partitions" large). "commit"
// sets each owned partition's position to last + 1 and commits them; "hold" keeps the member
// in the group (heartbeating, reporting later assignments) until stdin closes.
//
// kafka-node has only the gzip and snappy codecs (snappy through the optional native
// `snappy` module): an LZ4 wrapper is handed to the application as one message holding the
// compressed bytes. Its produce callback reports the base offset of each partition's message
// set; a record's offset is that plus its index in the set (as the broker assigns them).
'use strict'
const kafka = require('kafka-node')
const TimeoutError = require('kafka-node/lib/errors/TimeoutError')

const job = JSON.parse(process.argv[2])
const settings = job.client || {}
const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n')
const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (text) => (text === null ? null : Buffer.from(text, 'base64'))
const key = (topic, partition) => `${topic}/${partition}`
const ATTRIBUTES = { gzip: 1, snappy: 2 }

function fail (message) {
  emit('error', { message })
  process.exit(1)
}

const started = Date.now()
let deadline = setTimeout(() => fail(`timed out after ${job.timeout} s`), job.timeout * 1000)

const CLIENT_OPTIONS = {
  kafkaHost: job.bootstrap,
  connectTimeout: 5000,
  requestTimeout: 15000,
  connectRetryOptions: { retries: 2, factor: 1, minTimeout: 500, maxTimeout: 1000 },
}
if (settings.ssl) {
  const fs = require('fs')
  const tlsOptions = { rejectUnauthorized: true }
  if (settings.ssl.ca_file) tlsOptions.ca = [fs.readFileSync(settings.ssl.ca_file)]
  if (settings.ssl.cert_file) tlsOptions.cert = fs.readFileSync(settings.ssl.cert_file)
  if (settings.ssl.key_file) tlsOptions.key = fs.readFileSync(settings.ssl.key_file)
  if (settings.ssl.check_hostname === false) tlsOptions.checkServerIdentity = () => undefined
  CLIENT_OPTIONS.sslOptions = tlsOptions
  CLIENT_OPTIONS.ssl = true
}
if (settings.sasl) CLIENT_OPTIONS.sasl = { ...settings.sasl }
const clientId = settings.client_id || 'kafka-node-client'
if ((settings.api_support || 'negotiated') === 'base') {
  // As against a 0.9 broker, whose silence makes kafka-node use its built-in base versions.
  kafka.KafkaClient.prototype.getApiVersions = (broker, callback) => {
    setImmediate(() => callback(new TimeoutError('ApiVersions not sent (base support)')))
  }
}
// The ConsumerGroup makes its own client: this one is for assign and produce.
const client = job.mode === 'subscribe' ? null : new kafka.KafkaClient({ ...CLIENT_OPTIONS, clientId })
if (client) client.on('error', (err) => fail(`client error: ${err.stack || err}`))

function finish () {
  clearTimeout(deadline)
  client.close(() => process.exit(0))
  setTimeout(() => process.exit(0), 2000).unref()
}

function startOffsets (partitions, callback) {
  if ((job.start || 'zero') !== 'earliest') {
    callback(partitions.map(([topic, partition]) => ({ topic, partition, offset: 0 })))
    return
  }
  const offset = new kafka.Offset(client)
  const ask = () => offset.fetch(
    partitions.map(([topic, partition]) => ({ topic, partition, time: -2, maxNum: 1 })),
    (err, result) => {
      if (err) fail(`ListOffsets: ${err.stack || err}`)
      callback(partitions.map(([topic, partition]) =>
        ({ topic, partition, offset: result[topic][partition][0] })))
    })
  if (offset.ready) ask()
  else offset.once('ready', ask)
}

function consume () {
  if ((job.isolation || 'read_uncommitted') !== 'read_uncommitted') {
    fail('read_committed needs Fetch v4 (Kafka 0.11), which kafka-node lacks')
  }
  if (job.mode !== 'assign') fail(`kafka-node driver: unknown mode ${job.mode}`)
  const last = job.last
  const seen = {}
  const done = (t, p) => last[key(t, p)] < 0 || (seen[key(t, p)] ?? -1) >= last[key(t, p)]
  const allDone = () => job.partitions.every(([t, p]) => done(t, p))
  emit('assigned', { partitions: [...job.partitions].sort() })
  if (allDone()) {
    emit('done', {})
    finish()
    return
  }
  startOffsets(job.partitions, (payloads) => {
    const consumer = new kafka.Consumer(client, payloads, {
      autoCommit: false,
      fromOffset: true,
      encoding: 'buffer',
      keyEncoding: 'buffer',
      fetchMaxWaitMs: 100,
      fetchMaxBytes: 8 << 20,
    })
    let finished = false
    consumer.on('error', (err) => fail(`consumer error: ${err.stack || err}`))
    consumer.on('offsetOutOfRange', (err) => fail(`offset out of range: ${JSON.stringify(err)}`))
    consumer.on('message', (m) => {
      if (finished) return
      const k = key(m.topic, m.partition)
      if (m.offset <= last[k] && m.offset > (seen[k] ?? -1)) {
        seen[k] = m.offset
        emit('record', {
          t: m.topic,
          p: m.partition,
          o: m.offset,
          ts: m.timestamp instanceof Date ? m.timestamp.getTime() : -1,
          k: b64(m.key),
          v: b64(m.value),
          h: [],
        })
      }
      if (done(m.topic, m.partition)) consumer.pauseTopics([{ topic: m.topic, partition: m.partition }])
      if (allDone()) {
        finished = true
        emit('done', {})
        consumer.close(false, () => finish())
      }
    })
  })
}

function subscribe () {
  if ((job.isolation || 'read_uncommitted') !== 'read_uncommitted') {
    fail('read_committed needs Fetch v4 (Kafka 0.11), which kafka-node lacks')
  }
  const last = job.last
  const expect = job.expect_partitions ?? null
  const seen = {}
  const lastOf = (t, p) => {
    if (!(key(t, p) in last)) fail(`no "last" for ${key(t, p)}`)
    return last[key(t, p)]
  }
  const done = (t, p) => lastOf(t, p) < 0 || (seen[key(t, p)] ?? -1) >= lastOf(t, p)
  const group = new kafka.ConsumerGroup({
    ...CLIENT_OPTIONS,
    id: clientId,
    groupId: job.group,
    protocol: ['roundrobin', 'range'],
    fromOffset: 'earliest',
    outOfRangeOffset: 'earliest',
    autoCommit: false,
    commitOffsetsOnFirstJoin: false,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    encoding: 'buffer',
    keyEncoding: 'buffer',
    fetchMaxWaitMs: 100,
    fetchMaxBytes: 8 << 20,
  }, job.topics)
  let owned = [] // [[topic, partition]], sorted, of the current generation
  let reported = '[]'
  let finished = false
  const sizeOk = () => expect === null || owned.length === expect
  const allDone = () => owned.length > 0 && owned.every(([t, p]) => done(t, p))

  const leave = () => group.close(false, () => process.exit(0))
  function finishConsume () {
    finished = true
    group.pause()
    const after = () => {
      emit('done', {})
      if (!job.hold) {
        clearTimeout(deadline)
        leave()
        setTimeout(() => process.exit(0), 5000).unref()
        return
      }
      clearTimeout(deadline) // stay until stdin closes or the job's time is up
      deadline = setTimeout(leave, Math.max(0, started + job.timeout * 1000 - Date.now()))
      process.stdin.on('data', () => {})
      process.stdin.on('end', leave)
      process.stdin.resume()
    }
    if (!job.commit) {
      after()
      return
    }
    const offsets = owned.map(([t, p]) => [t, p, lastOf(t, p) + 1])
    for (const [t, p, o] of offsets) group.setOffset(t, p, o)
    group.commit(true, (err) => {
      if (err) fail(`commit: ${err.stack || err}`)
      emit('committed', { offsets })
      after()
    })
  }

  group.on('error', (err) => fail(`consumer group error: ${err.stack || err}`))
  group.on('offsetOutOfRange', (err) => fail(`offset out of range: ${JSON.stringify(err)}`))
  group.on('rebalancing', () => { owned = [] })
  group.on('rebalanced', () => {
    owned = group.topicPayloads.map((p) => [p.topic, p.partition])
      .sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1))
    if (owned.length && JSON.stringify(owned) !== reported) {
      reported = JSON.stringify(owned)
      emit('assigned', { partitions: owned })
    }
    if (finished) {
      group.pause() // a later rebalance: records are not read here (nor reported)
    } else if (!sizeOk()) {
      group.pause()
    } else if (allDone()) {
      finishConsume()
    } else {
      group.resume()
    }
  })
  group.on('message', (m) => {
    if (finished || !sizeOk()) return
    const k = key(m.topic, m.partition)
    if (m.offset <= lastOf(m.topic, m.partition) && m.offset > (seen[k] ?? -1)) {
      seen[k] = m.offset
      emit('record', {
        t: m.topic,
        p: m.partition,
        o: m.offset,
        ts: m.timestamp instanceof Date ? m.timestamp.getTime() : -1,
        k: b64(m.key),
        v: b64(m.value),
        h: [],
      })
    }
    if (allDone()) finishConsume()
  })
}

function produce () {
  if (job.records.some((r) => r.headers && r.headers.length)) {
    fail('kafka-node writes magic v0/v1 messages, which have no headers')
  }
  const codec = settings.compression || null
  if (codec !== null && !(codec in ATTRIBUTES)) fail(`kafka-node has no ${codec} codec`)
  const byPartition = new Map()
  for (const r of job.records) {
    if (!byPartition.has(r.partition)) byPartition.set(r.partition, [])
    byPartition.get(r.partition).push(r)
  }
  const producer = new kafka.Producer(client, { requireAcks: -1, ackTimeoutMs: 15000 })
  producer.on('error', (err) => fail(`producer error: ${err.stack || err}`))
  const send = () => {
    const payloads = [...byPartition].map(([partition, records]) => ({
      topic: job.topic,
      partition,
      attributes: codec === null ? 0 : ATTRIBUTES[codec],
      messages: records.map((r) => new kafka.KeyedMessage(unb64(r.key), unb64(r.value))),
    }))
    producer.send(payloads, (err, result) => {
      if (err) fail(`produce: ${err.stack || err}`)
      for (const [partition, records] of byPartition) {
        const base = result[job.topic][partition]
        records.forEach((r, i) => emit('produced', { t: job.topic, p: partition, o: base + i }))
      }
      emit('done', {})
      finish()
    })
  }
  // The producer emits 'ready' in its constructor when the client is ready already.
  if (producer.ready) send()
  else producer.once('ready', send)
}

function main () {
  try {
    if (job.action === 'consume' && job.mode === 'subscribe') subscribe()
    else if (job.action === 'consume') consume()
    else if (job.action === 'produce') produce()
    else fail(`kafka-node driver: action ${job.action} is not supported`)
  } catch (err) {
    fail(`${err.stack || err}`)
  }
}

if (client) client.once('ready', main)
else main()
