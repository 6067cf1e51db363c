// kafkajs driver for the interop suite: the job (JSON, argv[2]) and the JSON-lines events it
// prints are those of tests/interop/drivers/common.py.
'use strict'
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs')

// kafkajs itself decodes only gzip; applications register codecs for the others, as here:
// kafkajs-snappy (Snappy, with Kafka's xerial framing), and decoders from lz4js (LZ4 frames)
// and fzstd (Zstandard frames). Consumers only decompress; the producer sends uncompressed.
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
const lz4 = require('lz4js')
const fzstd = require('fzstd')
const decodeOnly = (name, decode) => () => ({
  async compress () { throw new Error(`${name} compression is not set up in this driver`) },
  async decompress (buffer) { return Buffer.from(decode(new Uint8Array(buffer))) },
})
CompressionCodecs[CompressionTypes.LZ4] = decodeOnly('LZ4', (data) => lz4.decompress(data))
CompressionCodecs[CompressionTypes.ZSTD] = decodeOnly('ZSTD', (data) => fzstd.decompress(data))

const job = JSON.parse(process.argv[2])
const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n')
const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (text) => (text === null ? null : Buffer.from(text, 'base64'))
const key = (topic, partition) => `${topic}/${partition}`

const kafka = new Kafka({
  clientId: 'lazyconv-interop',
  brokers: [job.bootstrap],
  logLevel: logLevel.ERROR,
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 3, initialRetryTime: 100 },
})

function withDeadline (promise, what) {
  let timer
  const limit = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${job.timeout} s`)),
      job.timeout * 1000)
  })
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer))
}

async function consume () {
  const last = job.last
  const seen = {}
  const done = (t, p) => last[key(t, p)] < 0 || (seen[key(t, p)] ?? -1) >= last[key(t, p)]
  const group = job.group || `assign-only-${process.pid}-${Date.now()}`
  const consumer = kafka.consumer({
    groupId: group,
    readUncommitted: job.isolation === 'read_uncommitted',
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    rebalanceTimeout: 15000,
    maxWaitTimeInMs: 100,
    maxBytesPerPartition: 8 << 20,
    maxBytes: 64 << 20,
  })
  let owned = []
  let finished
  const allDone = new Promise((resolve) => { finished = resolve })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    owned = []
    for (const [topic, partitions] of Object.entries(e.payload.memberAssignment)) {
      for (const p of partitions) owned.push([topic, p])
    }
    owned.sort()
    emit('assigned', { partitions: owned })
  })
  consumer.on(consumer.events.CRASH, (e) => {
    emit('error', { message: `consumer crashed: ${e.payload.error.name}: ${e.payload.error.message}` })
    exit(1)
  })
  await withDeadline(consumer.connect(), 'connect')
  try {
    if (job.mode === 'assign') {
      // kafkajs has no assign(): a consumer of its own group subscribes to the topics (a
      // single member gets every partition) and seeks each partition to offset 0.
      const topics = [...new Set(job.partitions.map(([t]) => t))]
      for (const topic of topics) await consumer.subscribe({ topic, fromBeginning: true })
    } else {
      for (const topic of job.topics) await consumer.subscribe({ topic, fromBeginning: true })
    }
    const wanted = job.mode === 'assign' ? job.partitions : null
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch, heartbeat, isRunning, isStale }) => {
        if (job.expect_partitions !== undefined && owned.length !== job.expect_partitions) return
        for (const m of batch.messages) {
          if (!isRunning() || isStale()) break
          const o = Number(m.offset)
          const k = key(batch.topic, batch.partition)
          if (o > last[k] || o <= (seen[k] ?? -1)) continue
          seen[k] = o
          emit('record', {
            // magic v0 messages have no timestamp (kafkajs leaves it undefined)
            t: batch.topic, p: batch.partition, o, ts: m.timestamp === undefined ? -1 : Number(m.timestamp),
            k: b64(m.key), v: b64(m.value),
            h: Object.entries(m.headers || {}).map(([hk, hv]) => [hk, b64(hv)]),
          })
        }
        if (done(batch.topic, batch.partition)) {
          consumer.pause([{ topic: batch.topic, partitions: [batch.partition] }])
        }
        const mine = wanted || owned
        if (mine.length && mine.every(([t, p]) => done(t, p))) finished()
        await heartbeat()
      },
    })
    if (job.mode === 'assign') {
      // kafkajs seeks only partitions it has been assigned: wait for the join.
      while (owned.length === 0) await new Promise((resolve) => setTimeout(resolve, 20))
      for (const [t, p] of job.partitions) consumer.seek({ topic: t, partition: p, offset: '0' })
    }
    await withDeadline(allDone, 'consume')
    if (job.commit) {
      const offsets = owned.map(([t, p]) => ({ topic: t, partition: p, offset: String(last[key(t, p)] + 1) }))
      await consumer.commitOffsets(offsets)
      emit('committed', { offsets: offsets.map((o) => [o.topic, o.partition, Number(o.offset)]).sort() })
    }
    emit('done', {})
    if (job.hold) {
      await withDeadline(new Promise((resolve) => {
        process.stdin.on('end', resolve)
        process.stdin.resume()
      }), 'hold')
    }
  } finally {
    await consumer.disconnect()
  }
}

async function produce () {
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await withDeadline(producer.connect(), 'connect')
  try {
    const result = await withDeadline(producer.send({
      topic: job.topic,
      acks: -1,
      messages: job.records.map((r) => ({
        partition: r.partition,
        key: unb64(r.key),
        value: unb64(r.value),
        headers: Object.fromEntries(r.headers.map(([hk, hv]) => [hk, unb64(hv)])),
      })),
    }), 'produce')
    for (const r of result) emit('produced', { t: r.topicName, p: r.partition, o: Number(r.baseOffset) })
    emit('done', {})
  } finally {
    await producer.disconnect()
  }
}

async function produceTxn () {
  const producer = kafka.producer({
    transactionalId: job.transactional_id, idempotent: true, maxInFlightRequests: 1,
  })
  await withDeadline(producer.connect(), 'connect')
  try {
    for (const t of job.transactions) {
      const txn = await producer.transaction()
      await withDeadline(txn.send({
        topic: job.topic,
        acks: -1,
        messages: t.records.map((r) => ({ partition: r.partition, key: unb64(r.key), value: unb64(r.value) })),
      }), 'produce')
      await withDeadline(t.outcome === 'commit' ? txn.commit() : txn.abort(), t.outcome)
    }
    emit('done', {})
  } finally {
    await producer.disconnect()
  }
}

// Writes to a pipe are asynchronous: exit only once everything printed has been flushed.
const exit = (code) => process.stdout.write('', () => process.exit(code))

;const actions = { produce, consume, produce_txn: produceTxn }
actions[job.action]()
  .then(() => exit(0))
  .catch((err) => {
    emit('error', { message: `${err.name}: ${err.message}` })
    exit(1)
  })
