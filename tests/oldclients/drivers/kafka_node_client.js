// kafka-node 5 driver: the job (JSON, argv[2]) and the JSON-lines events it prints are those
// of tests/interop/drivers/common.py ("consume" with mode "assign", and "produce").
//
// client: {"client_id": str, "api_support": "negotiated" (default: ApiVersions v0, then the
// highest versions both sides have: Fetch v2, Produce v2, Metadata v1, ListOffsets v0) or
// "base" (what kafka-node falls back to when a pre-0.10 broker does not answer ApiVersions:
// Fetch v1, Produce v1, Metadata v0; here ApiVersions is not sent at all),
// "compression": null, "gzip" or "snappy" for produce}.
// job.start (consume): "zero" (default: fetch from offset 0) or "earliest" (ListOffsets
// with time -2 first, through kafka-node's Offset API).
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

const deadline = setTimeout(() => fail(`timed out after ${job.timeout} s`), job.timeout * 1000)

const client = new kafka.KafkaClient({
  kafkaHost: job.bootstrap,
  clientId: settings.client_id || 'kafka-node-client',
  connectTimeout: 5000,
  requestTimeout: 15000,
  connectRetryOptions: { retries: 2, factor: 1, minTimeout: 500, maxTimeout: 1000 },
})
if ((settings.api_support || 'negotiated') === 'base') {
  // As against a 0.9 broker, whose silence makes kafka-node use its built-in base versions.
  client.getApiVersions = (broker, callback) => {
    setImmediate(() => callback(new TimeoutError('ApiVersions not sent (base support)')))
  }
}
client.on('error', (err) => fail(`client error: ${err.stack || err}`))

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
  if (job.mode !== 'assign') fail('kafka-node driver: only mode "assign" is supported')
  if ((job.isolation || 'read_uncommitted') !== 'read_uncommitted') {
    fail('read_committed needs Fetch v4 (Kafka 0.11), which kafka-node lacks')
  }
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

client.once('ready', () => {
  try {
    if (job.action === 'consume') consume()
    else if (job.action === 'produce') produce()
    else fail(`kafka-node driver: action ${job.action} is not supported`)
  } catch (err) {
    fail(`${err.stack || err}`)
  }
})
