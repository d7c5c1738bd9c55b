// KafkaJS side of tests/integration/test_sasl.py.
//
// Reads one JSON job from stdin: {brokers, topic, mechanism: "plain"|"scram-sha-256"|"scram-sha-512", username,
// password, values: [string]}. Produces the values to partition 0 over SASL_PLAINTEXT, then reads them back with a
// consumer in a group until it has them all or 20 s pass. Prints {read: [value]} on stdout, or {error: name,
// message} when authentication fails.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function readStdin () {
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  return JSON.parse(Buffer.concat(chunks).toString())
}

async function main () {
  const job = await readStdin()
  const kafka = new Kafka({ clientId: 'kafkajs-sasl', brokers: job.brokers, logLevel: logLevel.NOTHING,
    sasl: { mechanism: job.mechanism, username: job.username, password: job.password },
    retry: { retries: job.retries === undefined ? 5 : job.retries } })
  const producer = kafka.producer()
  try {
    await producer.connect()
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: e.name, message: e.message }))
    return
  }
  await producer.send({ topic: job.topic, messages: job.values.map((v) => ({ value: v, partition: 0 })) })
  await producer.disconnect()
  const read = []
  const consumer = kafka.consumer({ groupId: `kafkajs-sasl-${job.topic}`, maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic: job.topic, fromBeginning: true })
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 20000)
    consumer.run({
      eachMessage: async ({ message }) => {
        read.push(message.value.toString())
        if (read.length >= job.values.length) { clearTimeout(timer); resolve() }
      }
    })
  })
  await consumer.disconnect()
  process.stdout.write(JSON.stringify({ read }))
}

main().catch((e) => { process.stderr.write(String(e.stack || e)); process.exit(1) })
