// KafkaJS side of tests/integration/test_transactions.py.
//
// Reads one JSON job from stdin: {brokers, topic, transactionalId, transactions: [{outcome: "commit"|"abort",
// values: [string]}]}; the i-th value of each transaction goes to partition i % 2. Runs the transactions with a
// transactional producer, then reads the topic with a read_committed consumer (KafkaJS' default isolation) in a
// consumer group until it has `expect` records or 20 s pass. Prints {read: {partition: [value]}} on stdout.
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
    await txn.send({ topic: job.topic, messages: t.values.map((v, i) => ({ value: v, partition: i % 2 })) })
    if (t.outcome === 'commit') await txn.commit()
    else await txn.abort()
  }
  await producer.disconnect()

  const read = { 0: [], 1: [] }
  let count = 0
  const consumer = kafka.consumer({ groupId: `kafkajs-txn-${job.topic}`, maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic: job.topic, fromBeginning: true })
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 20000)
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
