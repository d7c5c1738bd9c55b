// KafkaJS side of tests/integration/test_kafkajs.py.
//
// Reads one JSON job from stdin: {brokers, topic, partitions, codec, idempotent, records: [{key, value,
// headers: [[name, value]], timestamp}], timestamps: [ms]} (key/value/header values base64, key may be null).
// Creates the topic with the admin client, produces the records in one send() (KafkaJS' own default
// partitioner, Java-compatible murmur2), then asks the admin client for the topic's offsets and for the
// offsets of each timestamp. Prints one JSON object on stdout; logs go to stderr.
//
// KafkaJS has no consumer without a consumer group (groups are not implemented by odradek yet), so the
// Python side reads the records back with another client.
'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, Partitioners, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('@2l/kafkajs-lz4')
const { ZstdCodec } = require('zstd-codec')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
// zstd through an Emscripten build of libzstd (no native module to compile)
const zstd = new Promise((resolve) => ZstdCodec.run((z) => resolve(new z.Simple())))
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress (encoder) { return Buffer.from((await zstd).compress(encoder.buffer)) },
  async decompress (buffer) { return Buffer.from((await zstd).decompress(buffer)) }
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD
}

const toStderr = () => ({ namespace, level, label, log }) =>
  process.stderr.write(`${label} [${namespace}] ${log.message} ${JSON.stringify(log)}\n`)

async function readStdin () {
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

async function main () {
  const job = await readStdin()
  const b64 = (s) => (s === null ? null : Buffer.from(s, 'base64'))
  const kafka = new Kafka({
    clientId: 'odradek-kafkajs-matrix',
    brokers: job.brokers,
    logLevel: logLevel.WARN,
    logCreator: toStderr,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 5, initialRetryTime: 100 }
  })
  const out = {}
  const admin = kafka.admin()
  await admin.connect()
  try {
    out.created = await admin.createTopics({
      topics: [{ topic: job.topic, numPartitions: job.partitions, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 15000
    })
    const producer = kafka.producer({
      createPartitioner: Partitioners.DefaultPartitioner,
      idempotent: !!job.idempotent,
      maxInFlightRequests: job.idempotent ? 1 : undefined
    })
    await producer.connect()
    try {
      const messages = job.records.map((r) => {
        const headers = {}
        for (const [k, v] of r.headers) headers[k] = b64(v)
        return { key: b64(r.key), value: b64(r.value), headers, timestamp: String(r.timestamp) }
      })
      out.sent = await producer.send({
        topic: job.topic, acks: -1, timeout: 15000, compression: CODECS[job.codec], messages
      })
    } finally {
      await producer.disconnect()
    }
    out.offsets = await admin.fetchTopicOffsets(job.topic)
    out.byTimestamp = {}
    for (const ts of job.timestamps) {
      out.byTimestamp[ts] = await admin.fetchTopicOffsetsByTimestamp(job.topic, ts)
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

const watchdog = setTimeout(() => { process.stderr.write('matrix.js: timed out\n'); process.exit(3) }, 60000)
main().then(() => { clearTimeout(watchdog) }, (err) => {
  process.stderr.write(`matrix.js failed: ${err && err.stack ? err.stack : err}\n`)
  process.exit(2)
})
