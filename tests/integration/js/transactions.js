// KafkaJS side of the transaction tests (tests/txn_clients.py run_kafkajs).
//
// Reads one JSON job from stdin: {brokers, topic, transactionalId, partitions, expect, readTimeoutMs, sendChunk
// (records a send call), transactions: [{outcome: "commit"|"abort", records: [[partition, value]]}]}. Runs the transactions with a
// transactional producer, then reads the topic with a read_committed consumer (KafkaJS' default isolation) in a
// consumer group until it has `expect` records (and 1 s more) or readTimeoutMs pass.
// Prints {read: {partition: [value]}} on stdout.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const toStderr = () => ({ namespace, label, log }) =>
  process.stderr.write(`${label} [${namespace}] ${log.message} ${JSON.stringify(log)}\n`)

async function readStdin () {
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  return JSON.parse(Buffer.concat(chunks).toString())
}

async function main () {
  const job = await readStdin()
  const kafka = new Kafka({ clientId: 'kafkajs-txn', brokers: job.brokers, logLevel: logLevel.WARN,
    logCreator: toStderr, retry: { retries: 10 } })
  const producer = kafka.producer({ transactionalId: job.transactionalId, maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  for (const t of job.transactions) {
    const txn = await producer.transaction()
    const messages = t.records.map(([p, v]) => ({ value: v, partition: p }))
    const chunk = job.sendChunk || messages.length || 1
    for (let i = 0; i < messages.length; i += chunk) {
      await txn.send({ topic: job.topic, messages: messages.slice(i, i + chunk) })
    }
    if (t.outcome === 'commit') await txn.commit()
    else await txn.abort()
  }
  await producer.disconnect()

  const read = {}
  for (let p = 0; p < job.partitions; p++) read[p] = []
  let count = 0
  const consumer = kafka.consumer({ groupId: `kafkajs-txn-${job.topic}`, maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic: job.topic, fromBeginning: true })
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, job.readTimeoutMs || 20000)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        read[partition].push(message.value.toString())
        count += 1
        if (count >= job.expect) { clearTimeout(timer); setTimeout(resolve, 1000) }
      }
    })
  })
  await consumer.disconnect()
  process.stdout.write(JSON.stringify({ read }))
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1) })
